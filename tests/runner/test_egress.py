"""The egress policy of the shared pool: the address rules, and what reaches a real listener on
loopback through real aiohttp connections when the policy refuses it (nothing) or allows it.

No traffic leaves loopback: a refused destination such as 169.254.169.254 is refused before any
connection is tried, which is the point of the policy."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx2
import pytest

from agentrun._messages import Message
from agentrun._outcomes import Outcome
from agentrun.runner._connections import Connections
from agentrun.runner._egress import CLUSTER_RANGES, EgressPolicy, EgressRefused
from agentrun.runner._http_tool import http_tool
from agentrun.runner._providers.base import ProviderError
from agentrun.runner._providers.openai import OpenAIChatProvider
from agentrun.runner._spec import HttpToolSpec
from agentrun.runner._tools import ToolError
from tests.support.listeners import listening

CLUSTER = [(network, "cluster-internal") for network in CLUSTER_RANGES]
STRICT = EgressPolicy.of([], CLUSTER)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.251", "multicast"),
        ("10.96.0.1", "cluster-internal"),
        ("172.20.3.4", "cluster-internal"),
        ("192.168.1.1", "cluster-internal"),
        ("100.64.0.10", "cluster-internal"),
        ("fd12::1", "cluster-internal"),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
    ],
)
def test_the_ranges_refused_unless_allowed(address: str, why: str | None) -> None:
    assert STRICT.why_refused(address) == why


def test_an_allowed_network_or_host_wins_over_a_refused_range() -> None:
    policy = EgressPolicy.of(["10.96.40.0/24", "169.254.169.254", "vllm.models.svc"], CLUSTER)
    assert policy.why_refused("10.96.40.7") is None
    assert policy.why_refused("10.96.41.7") == "cluster-internal"
    assert policy.why_refused("169.254.169.254") is None
    assert policy.why_refused("169.254.169.253") == "link-local"
    policy.before_connecting(httpx2.URL("http://vllm.models.svc:8000/v1/models"))
    assert policy.trusts("VLLM.models.svc.")


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://10.0.0.5:8000/v1", True),
        ("http://10.0.0.5:8000/v1/chat/completions", True),
        ("http://10.0.0.5:8000/v10", False),
        ("http://10.0.0.5:8000/admin", False),
        ("http://10.0.0.5:8001/v1", False),
        ("https://10.0.0.5:8000/v1", False),
        ("http://10.0.0.5:8000@10.0.0.6:8000/v1", False),
        ("http://vllm.models.svc/v1/models", True),
        ("http://vllm.models.svc/metrics", False),
        ("http://vllm.models.svc:9090/v1", False),
    ],
)
def test_a_url_prefix_allows_what_is_under_it_and_nothing_beside_it(
    url: str, allowed: bool
) -> None:
    policy = EgressPolicy.of(["http://10.0.0.5:8000/v1", "http://vllm.models.svc/v1/"], CLUSTER)
    try:
        policy.before_connecting(httpx2.URL(url))
    except EgressRefused:
        assert not allowed
    else:
        assert allowed


def test_an_entry_that_is_no_destination_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'no such thing'"):
        EgressPolicy.of(["no such thing"])
    with pytest.raises(ValueError, match="'ftp://x/' is not an http"):
        EgressPolicy.of(["ftp://x/"])
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not a CIDR"):
        EgressPolicy.of([], [("10.0.0.0/33", "cluster-internal")])


@pytest.fixture
async def strict() -> AsyncIterator[Connections]:
    connections = Connections(policy=STRICT)
    yield connections
    await connections.aclose()


async def test_a_loopback_address_or_a_name_resolving_to_one_is_refused_before_connecting(
    strict: Connections,
) -> None:
    with listening() as listener:
        client = strict.client(timeout=5)
        for url, said in (
            (listener.url, "egress policy refuses 127.0.0.1 (loopback)"),
            (f"http://localhost:{listener.port}", "refuses localhost (it resolves to 127.0.0.1"),
            (f"http://[::ffff:127.0.0.1]:{listener.port}", "refuses ::ffff:127.0.0.1 (loopback)"),
            ("http://169.254.169.254/latest/meta-data/", "refuses 169.254.169.254 (link-local)"),
        ):
            with pytest.raises(EgressRefused, match=re.escape(said)):
                await client.get(url + "/v1/models")
        assert listener.received == []


async def test_a_redirect_to_a_refused_destination_is_refused(strict: Connections) -> None:
    with listening() as target, listening(f"http://localhost:{target.port}") as redirecting:
        allowed = EgressPolicy.of([f"{redirecting.url}/v1"], CLUSTER)
        connections = Connections(policy=allowed)
        try:
            client = httpx2.AsyncClient(transport=connections.transport, follow_redirects=True)
            with pytest.raises(EgressRefused, match="refuses localhost"):
                await client.get(f"{redirecting.url}/v1/models")
        finally:
            await connections.aclose()
        assert redirecting.received == ["GET /v1/models"]
        assert target.received == []


async def test_what_is_allowed_connects_and_without_a_policy_everything_does() -> None:
    with listening() as listener:
        for policy in (EgressPolicy.of([f"{listener.url}/v1"], CLUSTER), None):
            connections = Connections(policy=policy)
            try:
                answer = await connections.client(timeout=5).get(f"{listener.url}/v1/models")
                assert answer.status_code == 200
            finally:
                await connections.aclose()
        assert listener.received == ["GET /v1/models"] * 2


async def test_a_refused_model_endpoint_fails_the_attempt_for_good_not_as_an_outage(
    strict: Connections,
) -> None:
    with listening() as listener:
        model = OpenAIChatProvider(f"{listener.url}/v1", http_client=strict.client())
        with pytest.raises(
            ProviderError, match=r"was not asked: egress policy refuses 127\.0\.0\.1"
        ) as caught:
            await model.complete(model="gpt-4o-mini", messages=[Message.of("user", "hi")], tools=[])
        assert caught.value.outcome is Outcome.REFUSED
        assert listener.received == []


async def test_an_http_tool_call_to_a_refused_destination_is_not_made(
    strict: Connections,
) -> None:
    with listening() as listener:
        spec = HttpToolSpec.model_validate(
            {"name": "fetch", "url": f"http://localhost:{listener.port}/page", "method": "GET"}
        )
        fetch = http_tool(spec, connections=strict)
        with pytest.raises(ToolError, match=r"the call was not made: GET .* egress policy refuses"):
            await fetch.fn({}, None)
        assert listener.received == []
