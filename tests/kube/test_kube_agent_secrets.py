"""Declaring an Agent is no way to read a Secret one may not read.

The operator may read every Secret of the namespaces it serves and sends what an Agent references
to the URLs the Agent names. Two things stop an Agent's author from using that to read a Secret
they may not:

* the chart's ValidatingAdmissionPolicy ``agentrun-agent-secrets`` (installed by the session
  fixture as ``helm template`` renders it): creating or updating an Agent takes ``get`` on every
  Secret it references. People are impersonated with ``--as``: mallory may write Agents and read
  no Secret, alice may write Agents and read Secret ``keys``;
* where that policy is not enforced (here: an Agent the administrator wrote), the operator itself:
  it uses a Secret only for the Agents its annotation ``agentrun.dev/agents`` lists. Two real
  replicas probe the Agent; its model endpoint is a loopback listener that records the
  ``Authorization`` of every request, and must never see the value of a Secret that does not
  opt in.

Whatever makes a Secret unusable (none, no such key, not annotated, not UTF-8), the Agent's status
says the same words, which name none of the Secret's keys.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests.support.agent_manifests import AGENT_SECRETS_CHECKED, agent_secret
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.ports import LOOPBACK

from agentrun.operator._agent_resource import AGENT_PLURAL
from agentrun.operator._resource import GROUP

KEY = "sk-agent-secrets-" + secrets.token_hex(12)
"""The value in Secret ``keys``: it must reach no endpoint unless the Secret opts in."""
Manifest = dict[str, Any]


def _ref(name: str, key: str = "openai") -> Manifest:
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key}}}


def _agent(name: str, url: str, **spec: Any) -> Manifest:
    model = {
        "provider": "openai",
        "name": "gpt-4o-mini",
        "baseURL": url,
        "price": {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0},
    }
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"model": model, "instructions": "Say done.", **spec},
    }


def _keyed(name: str, url: str, secret: str = "keys", key: str = "openai") -> Manifest:
    agent = _agent(name, url)
    agent["spec"]["model"]["apiKey"] = _ref(secret, key)
    return agent


def _refused(kube: Kube, verb: str, manifest: Manifest) -> str:
    """The API server's refusal of ``kubectl <verb> -f`` the manifest, or "" when it took it."""
    result = kube.kubectl(verb, "-f", "-", stdin=json.dumps(manifest), check=False)
    return result.stderr if result.returncode else ""


def _patched(kube: Kube, name: str, patch: Manifest) -> str:
    """The API server's refusal of a merge patch of Agent ``name``, or "" when it took it."""
    result = kube.kubectl(
        "patch", "agent", name, "--type=merge", "-p", json.dumps(patch), check=False
    )
    return result.stderr if result.returncode else ""


# -- the admission policy -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def authors(kube: Kube) -> Kube:
    """A ClusterRole that writes Agents, and nothing else, bound in this namespace."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"agent-author-{kube.namespace}"},
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": [AGENT_PLURAL],
                "verbs": ["get", "list", "create", "update", "patch", "delete"],
            }
        ],
    }
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(role))
    kube.kubectl("apply", "-f", "-", stdin=agent_secret("keys", {"openai": KEY}))
    reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "read-keys"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                   "resourceNames": ["keys"]}],
    }  # fmt: skip
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(reader))
    kube.kubectl("create", "rolebinding", "read-keys", "--role=read-keys", "--user=alice")
    return kube


@pytest.fixture(scope="module")
def mallory(authors: Kube) -> Kube:
    """May write Agents; may read no Secret."""
    return authors.grant("mallory", f"agent-author-{authors.namespace}")


@pytest.fixture(scope="module")
def alice(authors: Kube) -> Kube:
    """May write Agents and read Secret ``keys``."""
    return authors.grant("alice", f"agent-author-{authors.namespace}")


def _everywhere(url: str) -> dict[str, Manifest]:
    """An Agent referencing Secret ``keys`` from each field a reference may be written in."""
    placed = {
        "spec.model.apiKey": _keyed("leak", url),
        "spec.tools.mcp[m].headers.Authorization": _agent(
            "leak", url,
            tools={"mcp": [{"name": "m", "url": url, "headers": {
                "X-Plain": "plain", "Authorization": {**_ref("keys"), "prefix": "Bearer "}}}]},
        ),
        "spec.tools.mcp[m].tools.search.arguments.token": _agent(
            "leak", url,
            tools={"mcp": [{"name": "m", "url": url, "tools": {
                "search": {"arguments": {"plain": "x", "token": _ref("keys")}}}}]},
        ),
        "spec.tools.http[fetch].headers.Authorization": _agent(
            "leak", url,
            tools={"http": [{"name": "fetch", "url": url,
                             "headers": {"Authorization": _ref("keys")}}]},
        ),
        "spec.tools.http[fetch].arguments.token": _agent(
            "leak", url,
            tools={"http": [{"name": "fetch", "url": url, "arguments": {"token": _ref("keys")}}]},
        ),
        # A settler's probe sends its headers to the URL the Agent names, as a tool does.
        "spec.tools.http[fetch].settle.probe.http.headers.Authorization": _agent(
            "leak", url,
            tools={"http": [{"name": "fetch", "url": url, "settle": {"probe": {
                "http": {"url": url, "headers": {"Authorization": _ref("keys")}},
                "ran": {"status": [200]}}}}]},
        ),
        "spec.tools.mcp[m].tools.search.settle.probe.http.headers.Authorization": _agent(
            "leak", url,
            tools={"mcp": [{"name": "m", "url": url, "tools": {"search": {"settle": {"probe": {
                "http": {"url": url, "headers": {"Authorization": _ref("keys")}},
                "ran": {"status": [200]}}}}}}]},
        ),
    }  # fmt: skip
    return placed


@pytest.mark.parametrize("field", list(_everywhere("http://x")))
def test_an_author_who_may_not_read_a_secret_may_not_reference_it(
    mallory: Kube, alice: Kube, field: str
) -> None:
    manifest = _everywhere(f"http://{LOOPBACK}:9/v1")[field]
    refused = _refused(mallory, "create", manifest)
    assert "ValidatingAdmissionPolicy 'agentrun-agent-secrets'" in refused
    assert (
        f"{field}: mallory needs get on Secret {mallory.namespace}/keys; ask for it or "
        "reference a Secret you may read"
    ) in refused
    assert _refused(alice, "create", manifest) == ""
    alice.kubectl("delete", "agent", "leak")


def test_an_update_by_somebody_who_may_not_read_a_referenced_secret_is_refused(
    mallory: Kube, alice: Kube
) -> None:
    """The Agent already references ``keys`` (alice wrote it): mallory may not point it at her
    listener, nor add a reference to an Agent of her own, nor touch it in any other way."""
    alice.kubectl("create", "-f", "-", stdin=json.dumps(_keyed("shared", "http://a.example/v1")))
    elsewhere = {"spec": {"model": {"baseURL": f"http://{LOOPBACK}:9/v1"}}}
    assert "mallory needs get on Secret" in _patched(mallory, "shared", elsewhere)
    assert "mallory needs get on Secret" in _patched(mallory, "shared", {"metadata": {
        "labels": {"team": "mallory"}}})  # fmt: skip
    mcp = {"name": "m", "url": f"http://{LOOPBACK}:9/mcp", "headers": {"X-Plain": "plain"}}
    own = _agent("own", f"http://{LOOPBACK}:9/v1", tools={"mcp": [mcp]})
    assert _refused(mallory, "create", own) == ""  # no Secret referenced: nothing to check
    header = {"spec": {"tools": {"mcp": [{**mcp, "headers": {"Authorization": _ref("keys")}}]}}}
    refused = _patched(mallory, "own", header)
    assert "spec.tools.mcp[m].headers.Authorization: mallory needs get on Secret" in refused
    assert _patched(alice, "shared", elsewhere) == ""
    assert _patched(alice, "own", header) == ""


def test_an_agent_may_reference_a_bounded_number_of_distinct_secrets(authors: Kube) -> None:
    """One authorizer check a Secret, within the API server's CEL budget: as many references
    as the CRD admits, but no more than the policy's number of distinct Secrets."""
    url = f"http://{LOOPBACK}:9/v1"

    def referencing(distinct: int) -> Manifest:
        headers = {f"H{index}": _ref(f"s{index}") for index in range(distinct)}
        headers |= {f"Again{index}": _ref("s0", f"k{index}") for index in range(32)}
        return _agent("many", url, tools={"http": [{"name": "h", "url": url,
                                                    "headers": headers}]})  # fmt: skip

    assert _refused(authors, "create", referencing(AGENT_SECRETS_CHECKED)) == ""
    refused = _refused(authors, "create", referencing(AGENT_SECRETS_CHECKED + 1))
    assert f"may reference at most {AGENT_SECRETS_CHECKED} distinct Secrets" in refused


# -- the operator, where the policy is not enforced ---------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """A model endpoint and MCP server of the Agent's author: answers anything, and keeps the
    credentials it was sent."""

    seen: list[str]

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": []})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer({"jsonrpc": "2.0", "id": 0, "error": {"code": -1, "message": "no"}})

    def _answer(self, body: Manifest) -> None:
        self.seen.append(
            f"{self.command} {self.path} {self.headers.get('Authorization', '')}"
            f" {self.headers.get('X-Token', '')}"
        )
        encoded = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        self.end_headers()
        self.wfile.write(encoded)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[str, list[str]]]:
    """The listener's URL and every request it got (method, path and credentials)."""
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer((LOOPBACK, 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="listener", daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _ready(kube: Kube, name: str) -> Manifest:
    """Agent ``name``'s Ready condition, once a probe has seen its current generation."""
    found = json.loads(kube.kubectl("get", "agent", name, "-o", "json").stdout)
    status = found.get("status") or {}
    if status.get("observedGeneration") != found["metadata"]["generation"]:
        return {}
    return next((c for c in status.get("conditions") or () if c["type"] == "Ready"), {})


def _probed(kube: Kube, operators: Operators, name: str) -> Manifest:
    wait_for(f"{name} to be probed", lambda: _ready(kube, name), 60, operators.logs)
    return _ready(kube, name)


def _touch(kube: Kube, name: str, instructions: str) -> None:
    """A new generation of Agent ``name``, which the replicas probe at their next tick."""
    kube.kubectl("patch", "agent", name, "--type=merge",
                 "-p", json.dumps({"spec": {"instructions": instructions}}))  # fmt: skip


def test_the_operator_sends_no_value_from_a_secret_that_does_not_name_the_agent(
    kube: Kube, operators: Operators, listener: tuple[str, list[str]]
) -> None:
    url, seen = listener
    kube.kubectl("apply", "-f", "-", stdin=agent_secret("unlisted", {"openai": KEY},
                                                        agents="somebody-else"))  # fmt: skip
    agent = _keyed("probed", f"{url}/v1", secret="unlisted")
    mcp = {"name": "m", "url": f"{url}/mcp", "headers": {"X-Token": _ref("unlisted")}}
    agent["spec"]["tools"] = {"mcp": [mcp]}
    kube.kubectl("create", "-f", "-", stdin=json.dumps(agent))  # the administrator may read it
    ready = _probed(kube, operators, "probed")
    assert (ready["status"], ready["reason"]) == ("False", "SecretUnavailable")
    assert ready["message"].startswith("Secret reference unlisted/openai is not usable")
    assert not any(KEY in each for each in seen)

    kube.kubectl("annotate", "secret", "unlisted", "--overwrite", "agentrun.dev/agents=x, probed")
    _touch(kube, "probed", "Say done again.")
    wait_for(
        "the probe to send the key",
        lambda: f"GET /v1/models Bearer {KEY} " in seen,
        60,
        operators.logs,
    )
    wait_for(
        "the MCP server to get its header",
        lambda: any(each.startswith("POST /mcp") and each.endswith(KEY) for each in seen),
        60,
        operators.logs,
    )


def test_status_says_the_same_of_every_secret_it_cannot_use(
    kube: Kube, operators: Operators, listener: tuple[str, list[str]]
) -> None:
    """No Secret, no such key, not annotated, not UTF-8: the same words; no key is named."""
    url, seen = listener
    kube.kubectl(
        "create", "-f", "-", stdin=json.dumps(_keyed("vaulted", f"{url}/vaulted/v1", "vault"))
    )
    said = [_probed(kube, operators, "vaulted")]
    annotated = {"agentrun.dev/agents": "vaulted"}
    states: list[tuple[dict[str, str], Manifest]] = [
        (annotated, {"stringData": {"password": KEY, "token": KEY}}),  # no key openai
        ({}, {"stringData": {"openai": KEY}}),  # not annotated
        (annotated, {"data": {"openai": "/w=="}}),  # not UTF-8
    ]
    for generation, (opt_in, data) in enumerate(states):
        metadata = {"name": "vault", "annotations": opt_in}
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, **data}
        kube.kubectl("delete", "secret", "vault", "--ignore-not-found")
        kube.kubectl("create", "-f", "-", stdin=json.dumps(secret))
        _touch(kube, "vaulted", f"Say done {generation}.")
        said.append(_probed(kube, operators, "vaulted"))
    assert {(each["status"], each["reason"]) for each in said} == {("False", "SecretUnavailable")}
    messages = {each["message"] for each in said}
    assert messages == {
        f"Secret reference vault/openai is not usable: it must exist in namespace "
        f"{kube.namespace} with key openai and be annotated agentrun.dev/agents listing Agent "
        "vaulted (or *); the request that needed it was not sent"
    }
    assert not [each for each in seen if " /vaulted/" in each]  # nothing was sent at all
