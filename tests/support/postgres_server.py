"""Throwaway PostgreSQL servers for the tests, from the Debian package's binaries.

Each server is a fresh ``initdb`` in its own temporary folder, started by ``pg_ctl`` on a free
loopback port with its socket in that folder, trust authentication and no fsync: nothing here
has to survive a power cut, and a start then takes about a second. Commits stay synchronous, so
what a call was told is committed survives the server being killed (the fault tests kill it).
PostgreSQL refuses to run as root, so when the tests run as root the folder is handed to the
``postgres`` system user the Debian package creates and every server command runs through
``runuser``.

The binaries are found through ``$PG_BINDIR``, then ``pg_config --bindir``, then the newest
``/usr/lib/postgresql/*/bin``. A missing one fails the test with the command that installs it:
nothing in this repository is ever skipped.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port

INSTALL_HINT = (
    "install Debian's postgresql package (`make deps` or `bash hack/install-deps.sh` does), "
    "or set $PG_BINDIR to a folder holding initdb, pg_ctl and psql"
)
SERVER_USER = "postgres"
START_TIMEOUT_S = 60


def _has_server(folder: Path) -> bool:
    return all(os.access(folder / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "psql"))


def bin_dir() -> Path:
    """The folder of initdb/pg_ctl/psql, or a test failure saying how to install them."""
    explicit = os.environ.get("PG_BINDIR")
    if explicit:
        if _has_server(Path(explicit)):
            return Path(explicit)
        pytest.fail(
            f"PG_BINDIR={explicit} lacks initdb, pg_ctl or psql; {INSTALL_HINT}", pytrace=False
        )
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        answer = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        candidates.append(Path(answer.stdout.strip()))
    installed = Path("/usr/lib/postgresql").glob("*/bin")
    candidates.extend(
        sorted(
            installed,
            key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
            reverse=True,
        )
    )
    for folder in candidates:
        if _has_server(folder):
            return folder
    pytest.fail(
        f"no PostgreSQL server binaries found (initdb, pg_ctl); {INSTALL_HINT}", pytrace=False
    )


@dataclass
class PostgresServer:
    """A running server; ``url(database)`` reaches it as the superuser ``postgres``."""

    bindir: Path
    folder: Path
    port: int
    as_user: tuple[str, ...]
    durable: bool = False
    """fsync and full-page writes on, as deployed (for benchmarks); tests run without them."""

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str, timeout: float = START_TIMEOUT_S) -> str:
        done = subprocess.run(
            [*self.as_user, *command], capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}\n{tail}"
            )
        return done.stdout

    def start(self) -> None:
        """Start the server on its port (again, after ``stop``) and wait until it answers."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
            + ("" if self.durable else "-c fsync=off -c full_page_writes=off ")
            + "-c max_connections=200"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "start",
            "-D",
            str(self.data),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-l",
            str(self.folder / "server.log"),
            "-o",
            options,
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` for a clean stop, ``immediate`` for a crash."""
        self._run(str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", mode, "-w")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` (any number of statements) with psql, stopping at the first error."""
        return self._run(
            str(self.bindir / "psql"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            "-c",
            sql,
        )

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _server_user() -> tuple[tuple[str, ...], int | None, int | None]:
    """The prefix that runs a command as a non-root user, and that user's uid and gid."""
    if os.geteuid() != 0:
        return (), None, None
    try:
        account = pwd.getpwnam(SERVER_USER)
    except KeyError:
        pytest.fail(
            f"running as root and there is no {SERVER_USER!r} user to run PostgreSQL "
            f"as; {INSTALL_HINT}",
            pytrace=False,
        )
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.fail("running as root and `runuser` (util-linux) is missing", pytrace=False)
    return (runuser, "-u", SERVER_USER, "--"), account.pw_uid, account.pw_gid


@contextlib.contextmanager
def postgres_server(*, durable: bool = False) -> Iterator[PostgresServer]:
    """A fresh server for the length of the block, stopped and removed afterwards; ``durable``
    keeps fsync on (see ``PostgresServer.durable``)."""
    bindir = bin_dir()
    as_user, uid, gid = _server_user()
    folder = Path(tempfile.mkdtemp(prefix="agentrun-pg-"))
    if uid is not None and gid is not None:
        os.chown(folder, uid, gid)
    server = PostgresServer(bindir, folder, free_port(), as_user, durable)
    try:
        server._run(
            str(bindir / "initdb"),
            "-D",
            str(server.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        server.start()
        yield server
    finally:
        if server.running():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                server.stop("fast")
        shutil.rmtree(folder, ignore_errors=True)
