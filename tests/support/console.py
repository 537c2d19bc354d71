"""The run console in the tests: its process, the people who sign in to it, a real browser.

The console runs as its own process (``python -m agentrun.console``), as the chart runs it, with
a kubeconfig of a ServiceAccount that holds only what the chart grants the console: list and
watch AgentRuns. People are ServiceAccounts too, so they sign in with real tokens the API
server issues (``kubectl create token``) and the console acts with them, as it would with a
person's OIDC token.

The browser is Debian's headless Chromium driven by Playwright (``executable_path``; Playwright's
own browser download is never used). Screenshots go to ``SCREENSHOTS`` (``AGENTRUN_SCREENSHOTS``,
default ``build/screenshots``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from tests.support.kube import REPO, Kube
from tests.support.ports import free_port

SCREENSHOTS = Path(os.environ.get("AGENTRUN_SCREENSHOTS", REPO / "build" / "screenshots"))
CHROMIUM = ("chromium-headless-shell", "chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CONSOLE_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "agentrun-console-test"},
    "rules": [
        {"apiGroups": ["agentrun.dev"], "resources": ["agentruns"], "verbs": ["list", "watch"]}
    ],
}


def chromium_binary() -> str:
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(
        "no Chromium on the PATH: `make deps` installs Debian's chromium-headless-shell"
    )


def token_of(kube: Kube, account: str) -> str:
    """A ServiceAccount ``account`` in the namespace (made if missing) and a token for it."""
    admin = Kube(kube.control_plane, kube.namespace, kube.kubectl_bin)
    admin.kubectl("create", "serviceaccount", account, check=False)
    return admin.kubectl("create", "token", account, "--duration=2h").stdout.strip()


def user_of(kube: Kube, account: str) -> str:
    return f"system:serviceaccount:{kube.namespace}:{account}"


def bind(kube: Kube, account: str, *cluster_roles: str, namespace: str | None = None) -> None:
    """Bind ``cluster_roles`` to the ServiceAccount in ``namespace`` (default: its own)."""
    admin = Kube(kube.control_plane, namespace or kube.namespace, kube.kubectl_bin)
    for role in cluster_roles:
        admin.kubectl(
            "create", "rolebinding", f"{account}-{role}", f"--clusterrole={role}",
            f"--serviceaccount={kube.namespace}:{account}",
        )  # fmt: skip


@dataclass
class ConsoleProcess:
    """One console process; ``restart`` stops it and starts another on the same port and key."""

    kube: Kube
    store_url: str
    workdir: Path
    extra: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _kubeconfig(self) -> Path:
        admin = Kube(self.kube.control_plane, self.kube.namespace, self.kube.kubectl_bin)
        admin.kubectl("apply", "-f", "-", stdin=json.dumps(CONSOLE_ROLE))
        admin.kubectl("create", "serviceaccount", "console", check=False)
        admin.kubectl(
            "create", "clusterrolebinding", f"console-{self.kube.namespace}",
            "--clusterrole=agentrun-console-test",
            f"--serviceaccount={self.kube.namespace}:console", check=False,
        )  # fmt: skip
        token = token_of(self.kube, "console")
        return self.kube.control_plane.kubeconfig_with_token(  # type: ignore[attr-defined,no-any-return]
            f"console-{self.kube.namespace}", token, self.kube.namespace
        )

    def start(self) -> None:
        key = self.workdir / "session.key"
        if not key.exists():
            key.write_text("k" * 16 + os.urandom(16).hex())
        config = self.workdir / "kubeconfig"
        if not config.exists():
            shutil.copy(self._kubeconfig(), config)
        env = {
            **os.environ,
            "KUBECONFIG": str(config),
            "AGENTRUN_CONSOLE_SESSION_KEY_FILE": str(key),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        log = self.workdir / f"console-{self.starts}.log"
        self.starts += 1
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "agentrun.console", "--port", str(self.port),
                    "--store", self.store_url, *self.extra,
                ],
                cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the console exited:\n{self.log()}"
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"the console did not come up in 60 s:\n{self.log()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        logs = sorted(self.workdir.glob("console-*.log"))
        return "\n".join(p.read_text(errors="replace")[-4000:] for p in logs)


@contextmanager
def console_process(
    kube: Kube, store_url: str, workdir: Path, *extra: str
) -> Iterator[ConsoleProcess]:
    console = ConsoleProcess(kube, store_url, workdir, extra)
    try:  # a console that never came up is stopped too
        console.start()
        yield console
    finally:
        console.stop()


def signed_in(browser: Browser, url: str, token: str) -> Page:
    """A new browser context signed in to the console at ``url`` with ``token``, on /runs."""
    page = browser.new_context(base_url=url).new_page()
    page.goto("/runs")
    # By path: a browser writes http://host:80 as http://host.
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2Fruns$"))
    page.fill("input[name=token]", token)
    page.click("#sign-in button")
    expect(page).to_have_url(re.compile(r"^http://[^/]+/runs$"))
    return page


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"console-{name}.png"), full_page=True)
