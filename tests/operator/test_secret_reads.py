"""What a failed Secret read says, and to whom.

``KubeSecrets`` is asked through the official client, as the operator asks: of a port nothing
listens on (the API server away), and of a loopback server answering as the API server answers
a read it forbids (a ``Status`` with its reason). An API server away is said with its cause,
chained and in the message. A read it forbids reads, for the Agent's author, as any Secret they
cannot use does ("not usable"); the API server's words go to the operator's log only, and the
response's headers nowhere.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from agentrun.operator._kube_secrets import KubeSecrets, SecretCache, SecretNotUsableError
from agentrun.operator._kubeapi import KubeApi
from agentrun.runner._secrets import SecretKeyRef, SecretUnavailableError
from tests.support.ports import LOOPBACK, free_port

FORBIDDEN = (
    'secrets "model-keys" is forbidden: User "system:serviceaccount:agents:runner" cannot get '
    'resource "secrets" in API group "" in the namespace "agents"'
)
COOKIE = "session=a-header-no-message-repeats"


class _Forbidding(BaseHTTPRequestHandler):
    """Answers every request as the API server answers a read RBAC does not allow."""

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": FORBIDDEN,
                "reason": "Forbidden",
                "code": 403,
            }
        ).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", COOKIE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def _forbidding() -> Iterator[str]:
    server = ThreadingHTTPServer((LOOPBACK, 0), _Forbidding)
    thread = threading.Thread(target=server.serve_forever, name="api server", daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


async def _read(host: str) -> SecretUnavailableError:
    configuration = client.Configuration(host=host)
    configuration.retries = 0
    api = KubeApi(client.ApiClient(configuration), threads=1)
    try:
        with pytest.raises(SecretUnavailableError) as failed:
            await KubeSecrets(SecretCache(api, max_age=0), "agents", "booker").resolve(
                SecretKeyRef(name="model-keys", key="openai")
            )
    finally:
        api.close()
    return failed.value


async def test_a_read_the_api_server_forbids_is_not_usable_and_logged_with_its_words(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = "agentrun.operator._kube_secrets"
    with caplog.at_level(logging.WARNING, logger=logger), _forbidding() as host:
        error = await _read(host)
    assert isinstance(error, SecretNotUsableError)
    assert str(error).startswith("Secret reference model-keys/openai is not usable")
    assert FORBIDDEN not in str(error)
    assert error.__cause__ is None
    assert error.retryable
    assert f"(ForbiddenException: 403 Forbidden: {FORBIDDEN})" in caplog.text
    assert COOKIE not in str(error) + caplog.text


async def test_a_read_of_an_api_server_that_is_away_says_what_the_connection_met() -> None:
    error = await _read(f"http://{LOOPBACK}:{free_port()}")
    assert not isinstance(error, SecretNotUsableError)
    assert error.__cause__ is not None
    assert type(error.__cause__).__name__ in str(error)
    assert "Connection refused" in str(error)
