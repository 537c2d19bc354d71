"""What the operator's loops try again, and how their waits grow (``operator._retrying``)."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, ProtocolError

from agentrun._errors import StoreRefusedError, StoreUnavailableError
from agentrun.operator._kubeapi import Rejected
from agentrun.operator._retrying import Backoff, described, recoverable


@pytest.mark.parametrize(
    "error",
    [
        StoreUnavailableError("redis", "read the lease", ConnectionResetError("reset")),
        ApiException(status=503, reason="Service Unavailable"),
        ApiException(status=429, reason="Too Many Requests"),
        MaxRetryError(None, "/apis", reason=ConnectionRefusedError("refused")),  # type: ignore[arg-type]
        ProtocolError("Connection aborted."),
        ConnectionRefusedError("refused"),
        Rejected("the object changed under the patch"),
    ],
    ids=type,
)
def test_a_store_or_api_server_away_is_tried_again(error: Exception) -> None:
    assert recoverable(error)


@pytest.mark.parametrize(
    "error",
    [
        StoreRefusedError("redis", "write the checkpoint", ValueError("too large")),
        ApiException(status=403, reason="Forbidden"),
        ApiException(status=404, reason="Not Found"),
        ApiException(status=400, reason="Bad Request"),
        KeyError("metadata"),
        TypeError("'NoneType' object is not subscriptable"),
    ],
    ids=type,
)
def test_what_fails_the_same_way_every_time_is_not(error: Exception) -> None:
    assert not recoverable(error)


def test_waits_double_up_to_the_cap_each_in_its_upper_half_and_start_over_after_a_success() -> None:
    backoff = Backoff(first=2.0, cap=60.0)
    ceilings = [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    for ceiling in ceilings:
        assert ceiling / 2 <= backoff.next() <= ceiling
    for _ in range(2000):  # far past where 2**n overflows a float
        assert 30.0 <= backoff.next() <= 60.0
    backoff.reset()
    assert 1.0 <= backoff.next() <= 2.0


def test_an_api_servers_refusal_is_described_by_its_status_and_its_own_message() -> None:
    refusal = ApiException(status=403, reason="Forbidden")
    refusal.body = '{"kind":"Status","message":"namespaces \\"a\\" is forbidden","code":403}'
    said = described(refusal)
    assert said == 'the API server answered 403 Forbidden: namespaces "a" is forbidden'
    assert described(KeyError("metadata")) == "KeyError: 'metadata'"
