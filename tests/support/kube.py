"""A real Kubernetes control plane for the tests: etcd and kube-apiserver on loopback.

The CRD's schema, its CEL rules, its printer columns and the chart's manifests are only checked
for real by an API server, so the tests run one (as controller-runtime's envtest does): etcd with
its data in a temporary folder and kube-apiserver, both on free loopback ports, with no kubelet,
scheduler or controller-manager. Objects are stored and validated; no pod ever starts.

The apiserver serves TLS with a certificate from a throwaway CA and accepts one generated bearer
token for a member of ``system:masters``; RBAC is the authorizer, so the chart's roles can be
checked with ``kubectl auth can-i --as``. All keys are made with the ``openssl`` command line.

The binaries come from ``$KUBE_APISERVER``/``$ETCD``/``$KUBECTL``/``$HELM`` when set, else from
the cache folder ``hack/kube-tools.sh`` builds into, else from ``PATH``. A missing one fails the
test with the command that installs it: the repository's rule is that nothing is ever skipped.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Container, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.support.cli import COMMAND, cli_env
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
KUBE_TOOLS = "bash hack/kube-tools.sh"
START_TIMEOUT_S = 120.0

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""
"""What the API server records in ``audit.log``: every request a service account makes (who, verb,
resource, answer), so a test can hold the chart's RBAC to exactly what the operator uses."""


_REQUEST_TOTAL = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def bin_dir() -> Path:
    """The folder hack/kube-tools.sh builds into (same rule as the script)."""
    explicit = os.environ.get("AGENTRUN_BIN_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agentrun" / "bin"


def find_binary(name: str, env_var: str, install_hint: str) -> str:
    """The path of a tool, or a test failure that says how to get it."""
    explicit = os.environ.get(env_var)
    if explicit:
        if os.access(explicit, os.X_OK) and Path(explicit).is_file():
            return explicit
        pytest.fail(f"{env_var}={explicit} is not an executable file", pytrace=False)
    cached = bin_dir() / name
    if os.access(cached, os.X_OK):
        return str(cached)
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(
        f"{name} not found (looked at ${env_var}, {bin_dir()} and PATH); {install_hint} "
        f"or point {env_var} at one",
        pytrace=False,
    )


def kube_apiserver_binary() -> str:
    return find_binary("kube-apiserver", "KUBE_APISERVER", f"run `{KUBE_TOOLS}` to build it")


def etcd_binary() -> str:
    return find_binary(
        "etcd", "ETCD", "install Debian's etcd-server (`bash hack/install-deps.sh` does)"
    )


def kubectl_binary() -> str:
    return find_binary("kubectl", "KUBECTL", f"install kubectl or run `{KUBE_TOOLS}`")


def helm_binary() -> str:
    return find_binary("helm", "HELM", f"run `{KUBE_TOOLS}` to build it")


def hadolint_binary() -> str:
    return find_binary("hadolint", "HADOLINT", f"run `{KUBE_TOOLS}` to install it")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1 signed by it, and a service-account key."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl not found; install Debian's openssl", pytrace=False)
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=agentrun-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
        "-out", "server.csr", "-subj", "/CN=kube-apiserver",
        cwd=folder,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "server.crt", "-extfile", "server.ext",
        cwd=folder,
    )  # fmt: skip
    _openssl("genrsa", "-out", "service-account.key", "2048", cwd=folder)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


@dataclass
class ControlPlane:
    """A running etcd and kube-apiserver, and a kubeconfig for an administrator."""

    workdir: Path
    server: str
    token: str
    kubeconfig: Path
    start_seconds: float
    etcd: subprocess.Popen[bytes]
    apiserver: subprocess.Popen[bytes]

    def stop(self) -> None:
        _stop(self.apiserver)
        _stop(self.etcd)

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        """Environment for kubectl and helm: this cluster, and helm's state kept in workdir."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(kubeconfig or self.kubeconfig)
        for kind in ("CACHE", "CONFIG", "DATA"):
            env[f"HELM_{kind}_HOME"] = str(self.workdir / "helm" / kind.lower())
        return env

    def requests(self, codes: Container[str] | None = None) -> Counter[str]:
        """Every request the API server has served, from its ``apiserver_request_total``
        metric, by verb and resource[/subresource] (``PATCH agentruns/status``): what the
        operator benchmark and ``tests/kube/test_operator_requests.py`` count per run. With
        ``codes``, only the requests answered with one of those HTTP codes (``"422"``)."""
        context = ssl.create_default_context(cafile=str(self.workdir / "certs" / "ca.crt"))
        request = urllib.request.Request(f"{self.server}/metrics")
        request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            text = response.read().decode()
        totals: Counter[str] = Counter()
        for line in text.splitlines():
            matched = _REQUEST_TOTAL.match(line)
            if matched is None:
                continue
            labels = dict(_LABEL.findall(matched["labels"]))
            if codes is not None and labels.get("code") not in codes:
                continue
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            totals[f"{labels.get('verb', '?')} {resource}"] += int(float(matched["value"]))
        return totals

    def audited(self, username: str) -> list[dict[str, Any]]:
        """Every request ``username`` made, as the API server's audit log recorded it."""
        log = self.workdir / "audit.log"
        lines = log.read_text().splitlines() if log.exists() else []
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if e.get("user", {}).get("username") == username]

    def kubeconfig_with_token(self, name: str, token: str, namespace: str) -> Path:
        """A kubeconfig that authenticates with ``token`` (a service account's, say) instead of
        the administrator's."""
        path = self.workdir / f"kubeconfig-{name}"
        path.write_text(_kubeconfig(self, namespace, token=token))
        return path

    def kubeconfig_as(self, user: str, namespace: str) -> Path:
        """A kubeconfig whose every request the administrator makes as ``user`` (impersonation,
        as ``kubectl --as`` does): for a program that shells out to kubectl as a person would."""
        path = self.workdir / f"kubeconfig-{user}-{namespace}"
        path.write_text(_kubeconfig(self, namespace, impersonate=user))
        return path


def _wait_ready(
    name: str,
    url: str,
    process: subprocess.Popen[bytes],
    log: Path,
    deadline: float,
    context: ssl.SSLContext | None = None,
    token: str | None = None,
) -> None:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    while True:
        if process.poll() is not None:
            pytest.fail(
                f"{name} exited with {process.returncode} before {url} was ready:\n{_tail(log)}",
                pytrace=False,
            )
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{url} not ready in {START_TIMEOUT_S:.0f}s:\n{_tail(log)}", pytrace=False)
        time.sleep(0.25)


def start_control_plane(workdir: Path, apiserver_flags: Sequence[str] = ()) -> ControlPlane:
    """Start etcd and kube-apiserver in ``workdir``, kube-apiserver with ``apiserver_flags``
    besides its own (``--disable-admission-plugins=...``: a cluster configured otherwise); the
    caller must ``stop()`` them."""
    apiserver_bin, etcd_bin = kube_apiserver_binary(), etcd_binary()
    started = time.monotonic()
    deadline = started + START_TIMEOUT_S
    certs = workdir / "certs"
    certs.mkdir(parents=True)
    make_certificates(certs)
    token = secrets.token_urlsafe(32)
    (certs / "tokens.csv").write_text(f'{token},agentrun-test-admin,admin,"system:masters"\n')
    (workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)

    client_port, peer_port, secure_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{client_port}"
    etcd_log = workdir / "etcd.log"
    with etcd_log.open("wb") as out:
        etcd = subprocess.Popen(
            [
                etcd_bin,
                "--name=test",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=test=http://127.0.0.1:{peer_port}",
                "--logger=zap",
                "--log-level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    apiserver: subprocess.Popen[bytes] | None = None
    try:
        _wait_ready("etcd", f"{etcd_url}/health", etcd, etcd_log, deadline)
        apiserver_log = workdir / "kube-apiserver.log"
        with apiserver_log.open("wb") as out:
            apiserver = subprocess.Popen(
                [
                    apiserver_bin,
                    f"--etcd-servers={etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={secure_port}",
                    f"--cert-dir={certs}",
                    f"--tls-cert-file={certs / 'server.crt'}",
                    f"--tls-private-key-file={certs / 'server.key'}",
                    f"--client-ca-file={certs / 'ca.crt'}",
                    f"--token-auth-file={certs / 'tokens.csv'}",
                    "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    f"--service-account-key-file={certs / 'service-account.key'}",
                    f"--service-account-signing-key-file={certs / 'service-account.key'}",
                    "--service-cluster-ip-range=10.96.0.0/24",
                    "--allow-privileged=true",
                    "--enable-priority-and-fairness=false",
                    f"--audit-policy-file={workdir / 'audit-policy.yaml'}",
                    f"--audit-log-path={workdir / 'audit.log'}",
                    *apiserver_flags,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = f"https://127.0.0.1:{secure_port}"
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        _wait_ready(
            "kube-apiserver", f"{server}/readyz", apiserver, apiserver_log, deadline, context, token
        )
    except BaseException:
        if apiserver is not None:
            _stop(apiserver)
        _stop(etcd)
        raise

    plane = ControlPlane(
        workdir=workdir,
        server=server,
        token=token,
        kubeconfig=workdir / "kubeconfig",
        start_seconds=time.monotonic() - started,
        etcd=etcd,
        apiserver=apiserver,
    )
    plane.kubeconfig.write_text(_kubeconfig(plane, "default"))
    return plane


def _kubeconfig(
    plane: ControlPlane, namespace: str, impersonate: str | None = None, token: str | None = None
) -> str:
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: test\n"
        "  cluster:\n"
        f"    server: {plane.server}\n"
        f"    certificate-authority: {plane.workdir / 'certs' / 'ca.crt'}\n"
        "users:\n"
        "- name: admin\n"
        "  user:\n"
        f"    token: {token or plane.token}\n"
        + (f"    as: {impersonate}\n" if impersonate else "")
        + "contexts:\n"
        "- name: test\n"
        f"  context: {{cluster: test, user: admin, namespace: {namespace}}}\n"
        "current-context: test\n"
    )


class Cluster(Protocol):
    """What kubectl and helm need of a cluster: the envtest control plane or hack/cluster.sh's."""

    @property
    def kubeconfig(self) -> Path: ...

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]: ...

    def kubeconfig_as(self, user: str, namespace: str) -> Path: ...


@dataclass(frozen=True)
class Kube:
    """One test module's view of the cluster: its own namespace, kubectl and helm bound to it;
    with ``user``, kubectl acts as that person (``--as``) instead of as the administrator."""

    control_plane: Cluster
    namespace: str
    kubectl_bin: str
    user: str | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    def as_user(self, user: str) -> Kube:
        return replace(self, user=user)

    def grant(self, user: str, *cluster_roles: str) -> Kube:
        """Bind ``cluster_roles`` to ``user`` in this namespace; this view, acting as them."""
        admin = replace(self, user=None)
        for role in cluster_roles:
            name = re.sub(r"[^a-z0-9-]+", "-", f"{role}-{user}".lower())[:63].strip("-")
            binding = admin.kubectl(
                "create", "rolebinding", name, f"--clusterrole={role}", f"--user={user}",
                "--dry-run=client", "-o", "json",
            ).stdout  # fmt: skip
            admin.kubectl("apply", "-f", "-", stdin=binding)
        return self.as_user(user)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl in this namespace; with ``check`` a non-zero exit fails the test with stderr."""
        person = ["--as", self.user] if self.user else []
        return self._run(
            [self.kubectl_bin, "--namespace", self.namespace, *person, *args], stdin, check
        )

    def agentrun(self, *args: str) -> subprocess.CompletedProcess[str]:
        """This checkout's ``agentrun`` CLI, whose kubectl acts as this view's person."""
        user_config = (
            self.control_plane.kubeconfig_as(self.user, self.namespace) if self.user else None
        )
        return subprocess.run(
            [*COMMAND, *args], capture_output=True, text=True, timeout=60, check=False,
            env=cli_env(self.control_plane.env(user_config)), cwd=REPO,
        )  # fmt: skip

    def helm(
        self, helm_bin: str, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self._run([helm_bin, "--namespace", self.namespace, *args], stdin, check)

    def _run(
        self, argv: list[str], stdin: str | None, check: bool
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            env=self.control_plane.env(),
            cwd=REPO,
            timeout=120,
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"{' '.join(argv)} exited {result.returncode}:\n{result.stderr}{result.stdout}",
                pytrace=False,
            )
        return result
