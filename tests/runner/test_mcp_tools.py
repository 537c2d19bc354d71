"""MCP tools against a real MCP server (the SDK's ``MCPServer`` over streamable HTTP, loopback).

The model side is scripted here (the providers have tests of their own); what is checked is what
the server lists and what the kit makes of it, what a call carries, and what each way a call can
fail means for the run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp.types import Tool as McpTool
from mcp.types import ToolAnnotations
from pydantic import JsonValue

from agentrun._errors import ConfigurationError, IndeterminateToolCallError, RevisionMismatchError
from agentrun._idempotency import ClaimState, derive_key, marker_key, remote_key
from agentrun._messages import Message
from agentrun._outcomes import Exit, Outcome
from agentrun.runner._connections import Connections
from agentrun.runner._declared import DeclaredAgent
from agentrun.runner._mcp_tools import McpServer, ToolServerUnavailableError, disposition_of
from agentrun.runner._providers.base import ModelReply
from agentrun.runner._providers.scripted import ScriptedProvider
from agentrun.runner._results import RunStatus
from agentrun.runner._secrets import MappingSecrets, SecretKeyRef, SecretResolver
from agentrun.runner._spec import AgentSpec, McpServerSpec
from agentrun.runner._tools import Disposition, Tool, ToolTransportError
from agentrun.stores._memory import MemoryBackend
from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.mcp_server import serving as mcp_serving
from tests.runner.helpers import KeptSecrets, agent, runner, script, tool_results
from tests.support.gateway import gateway
from tests.support.ports import free_port

ALL_TOOLS = ["book_flight", "charge_card", "find_booking", "search_flights", "send_sms"]


@pytest.fixture
async def pool() -> AsyncIterator[Connections]:
    connections = Connections()
    yield connections
    await connections.aclose()


async def _tools(
    books: McpBooks, pool: Connections, secrets: SecretResolver | None = None, **spec: object
) -> dict[str, Tool]:
    server = McpServer(
        McpServerSpec.model_validate({"name": "airline", "url": books.url, **spec}),
        connections=pool,
        secrets=secrets or MappingSecrets({"airline/token": "airline-token-1"}),
    )
    return {tool.name: tool for tool in await server.discover()}


KEY_HEADER = {
    "Authorization": {
        "valueFrom": {"secretKeyRef": {"name": "airline", "key": "token"}},
        "prefix": "Bearer ",
    }
}


def _listed(annotations: ToolAnnotations | None) -> McpTool:
    return McpTool(name="t", input_schema={"type": "object"}, annotations=annotations)


@pytest.mark.parametrize(
    ("annotations", "disposition", "destructive"),
    [
        (None, Disposition.SIDE_EFFECTING, True),
        (ToolAnnotations(), Disposition.SIDE_EFFECTING, True),
        (ToolAnnotations(readOnlyHint=True), Disposition.READ_ONLY, False),
        (
            ToolAnnotations(readOnlyHint=True, destructiveHint=True),
            Disposition.SIDE_EFFECTING,
            True,
        ),
        (ToolAnnotations(idempotentHint=True), Disposition.IDEMPOTENT, True),
        (
            ToolAnnotations(idempotentHint=True, destructiveHint=False),
            Disposition.IDEMPOTENT,
            False,
        ),
        (ToolAnnotations(destructiveHint=False), Disposition.SIDE_EFFECTING, False),
        (
            ToolAnnotations(readOnlyHint=False, idempotentHint=False),
            Disposition.SIDE_EFFECTING,
            True,
        ),
    ],
    ids=[
        "nothing",
        "empty",
        "read-only",
        "read-only-but-destructive",
        "idempotent",
        "idempotent-not-destructive",
        "not-destructive-only",
        "all-false",
    ],
)
def test_what_the_annotations_claim(
    annotations: ToolAnnotations | None, disposition: Disposition, destructive: bool
) -> None:
    assert disposition_of(_listed(annotations)) == (disposition, destructive)


async def test_the_servers_tools_get_the_dispositions_their_annotations_claim(
    airline: McpBooks, pool: Connections
) -> None:
    server = McpServer(McpServerSpec(name="airline", url=airline.url), connections=pool)
    tools = {tool.name: tool for tool in await server.discover()}
    assert {name: tool.disposition for name, tool in tools.items()} == {
        "search_flights": Disposition.READ_ONLY,
        "find_booking": Disposition.READ_ONLY,
        "book_flight": Disposition.IDEMPOTENT,
        "charge_card": Disposition.SIDE_EFFECTING,
        "send_sms": Disposition.SIDE_EFFECTING,  # declares nothing: never safe
    }
    assert all(tool.key_arguments == () for tool in tools.values())
    assert not tools["send_sms"].safe_to_repeat
    assert {found.name: found.destructive for found in server.discovered} == {
        "search_flights": False,
        "find_booking": False,
        "book_flight": False,
        "charge_card": True,
        "send_sms": True,
    }
    assert tools["charge_card"].schema()["parameters"] == {
        "type": "object",
        "properties": {
            "order_id": {"title": "Order Id", "type": "string"},
            "amount_cents": {"title": "Amount Cents", "type": "integer"},
        },
        "required": ["order_id", "amount_cents"],
        "title": "charge_cardArguments",
    }


async def test_an_override_has_the_last_word(airline: McpBooks, pool: Connections) -> None:
    tools = await _tools(
        airline,
        pool,
        tools={
            "charge_card": {"disposition": "idempotent", "keyArguments": ["order_id"]},
            "search_flights": {"disposition": "side_effecting", "requiresApproval": True},
        },
    )
    assert tools["charge_card"].disposition is Disposition.IDEMPOTENT
    assert tools["charge_card"].key_arguments == ("order_id",)
    assert tools["search_flights"].disposition is Disposition.SIDE_EFFECTING
    assert tools["search_flights"].requires_approval


async def test_the_allow_list_keeps_what_it_names_and_refuses_what_is_not_listed(
    airline: McpBooks, pool: Connections
) -> None:
    kept = await _tools(airline, pool, allowedTools=["search_flights", "book_flight"])
    assert sorted(kept) == ["book_flight", "search_flights"]
    with pytest.raises(ConfigurationError, match=r"does not list \['refund'\]"):
        await _tools(airline, pool, allowedTools=["search_flights", "refund"])
    with pytest.raises(ConfigurationError, match="could not be listed"):
        await _tools(airline, pool, url=airline.url + "-nowhere")


async def test_a_server_down_while_it_is_listed_is_unavailable_and_listed_once_it_is_back(
    pool: Connections,
) -> None:
    """A tool server restarting is no fault of the spec: the listing is retryable (exit 5),
    not a configuration error, and the same spec lists it once it is up again."""
    port = free_port()
    with mcp_serving(port) as books:
        assert sorted(await _tools(books, pool)) == ALL_TOOLS
    with pytest.raises(ToolServerUnavailableError, match="could not be reached") as down:
        await _tools(books, pool)
    assert down.value.retryable
    assert down.value.outcome.exit_code is Exit.UNAVAILABLE
    assert "ConnectError" in str(down.value)
    with mcp_serving(port) as again:
        assert again.url == books.url
        assert sorted(await _tools(again, pool)) == ALL_TOOLS


async def test_a_port_nothing_listens_on_is_unavailable_and_a_spec_the_server_refuses_is_not(
    airline: McpBooks, pool: Connections
) -> None:
    with pytest.raises(ToolServerUnavailableError) as down:
        await _tools(airline, pool, url=f"http://127.0.0.1:{free_port()}/mcp")
    assert down.value.outcome is Outcome.AGENT_NOT_READY
    with pytest.raises(ConfigurationError, match=r"could not be listed.*\(HTTP 404\)"):
        await _tools(airline, pool, url=airline.url + "-nowhere")
    airline.token = "another"
    with pytest.raises(ConfigurationError, match=r"could not be listed.*\(HTTP 401\)"):
        await _tools(airline, pool)


async def test_a_call_carries_the_models_arguments_headers_and_the_key_in_meta(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    tools = await _tools(
        airline,
        pool,
        headers=KEY_HEADER,
        tools={"book_flight": {"keyArguments": ["flight", "passenger"]}},
    )
    arguments = {"flight": "LH1172", "passenger": "Ada"}
    result = await runner(memory, script([("book_flight", arguments)], "done")).run(
        agent(tools["book_flight"], tools["send_sms"]), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    (call,) = airline.calls
    local = derive_key("book_flight", arguments, ("flight", "passenger"))
    assert (call.arguments, call.key) == (arguments, remote_key("t", "r", local))
    assert call.headers["authorization"] == "Bearer airline-token-1"
    assert '"seat": "12A"' in tool_results(result.messages)["c0_0"]


async def test_a_key_the_server_refuses_is_read_afresh_and_the_call_was_not_made(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    """The key is rotated behind the agent's back: the server answers 401 to the old one. A
    resolver that keeps values is told which Secret was refused (so the next call reads it
    afresh), and a call refused at the door was not made."""
    kept = KeptSecrets({"airline/token": "airline-token-1"})
    tools = await _tools(airline, pool, kept, headers=KEY_HEADER)
    assert kept.refusals == []
    airline.token = "airline-token-2"
    result = await runner(memory, script([("send_sms", {"phone": "1", "text": "x"})], "done")).run(
        agent(tools["send_sms"]), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert tool_results(result.messages)["c0_0"].startswith("error: the call was not made: ")
    assert airline.calls == []
    assert set(kept.refusals) == {"airline/token"}
    kept.refusals.clear()
    with pytest.raises(ConfigurationError, match="could not be listed"):
        await _tools(airline, pool, kept, headers=KEY_HEADER)
    assert set(kept.refusals) == {"airline/token"}


@dataclass(frozen=True)
class MountedSecrets:
    """Secrets as a pod has them mounted: a folder per Secret, a file per key."""

    root: Path

    async def resolve(self, ref: SecretKeyRef) -> str:
        return (self.root / ref.name / ref.key).read_text()


async def test_a_secret_that_cannot_be_read_says_why_and_the_call_was_not_made(
    airline: McpBooks, pool: Connections, memory: MemoryBackend, tmp_path: Path
) -> None:
    """The mounted Secret is gone by the time of the call: its resolver fails in its own way
    (no file), which is a secret that cannot be read, said with its cause; nothing was sent,
    so a destructive call is not left undecided."""
    (tmp_path / "airline").mkdir()
    (tmp_path / "airline" / "token").write_text("airline-token-1")
    tools = await _tools(airline, pool, MountedSecrets(tmp_path), headers=KEY_HEADER)
    (tmp_path / "airline" / "token").unlink()
    result = await runner(memory, script([("charge_card", CHARGE)], "done")).run(
        agent(tools["charge_card"]), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    told = tool_results(result.messages)["c0_0"]
    assert told.startswith(
        "error: the call was not made: secret airline/token could not be read: FileNotFoundError: "
    )
    assert airline.calls == []


async def test_an_error_result_is_the_tool_answering_and_is_told_to_the_model(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    tools = await _tools(airline, pool)
    refused = {"order_id": "o-1", "amount_cents": 0}
    result = await runner(memory, script([("charge_card", refused)], "done")).run(
        agent(tools["charge_card"]), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    told = tool_results(result.messages)["c0_0"]
    assert told.startswith("error: ")
    assert "charge_card" in told
    record = await memory.idempotency.read("t", "r", marker_key("c0_0"))
    assert record is not None
    assert record.state is ClaimState.COMPLETED


async def test_a_call_the_server_refuses_to_run_is_answered_not_indeterminate(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    tools = await _tools(airline, pool)
    airline.refuse()
    charge = {"order_id": "o-1", "amount_cents": 4200}
    result = await runner(memory, script([("charge_card", charge)], "done")).run(
        agent(tools["charge_card"]), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert tool_results(result.messages)["c0_0"] == (
        "error: MCP server 'airline' refused the call: refused: these arguments do not fit"
    )
    assert airline.calls == []


async def test_arguments_that_do_not_fit_the_listed_schema_are_never_sent(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    tools = await _tools(airline, pool)
    wrong = {"order_id": "o-1", "amount_cents": "lots"}
    result = await runner(memory, script([("charge_card", wrong)], "done")).run(
        agent(tools["charge_card"]), "go", tenant="t", run_id="r"
    )
    assert "amount_cents: 'lots' is not of type 'integer'" in tool_results(result.messages)["c0_0"]
    assert airline.calls == []


async def test_a_server_gone_before_the_call_means_the_call_was_not_made(
    pool: Connections, memory: MemoryBackend
) -> None:
    with mcp_serving() as books:
        tools = await _tools(books, pool)
    result = await runner(memory, script([("send_sms", {"phone": "1", "text": "x"})], "done")).run(
        agent(tools["send_sms"]), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    told = tool_results(result.messages)["c0_0"]
    assert told.startswith("error: the call was not made: MCP server 'airline'")


@dataclass
class Before:
    """The scripted model, with something done before each of its turns."""

    model: ScriptedProvider
    each_turn: Callable[[], None]

    async def complete(
        self, *, model: str, messages: Sequence[Message], tools: Sequence[dict[str, JsonValue]]
    ) -> ModelReply:
        self.each_turn()
        return await self.model.complete(model=model, messages=messages, tools=tools)


CHARGE: dict[str, JsonValue] = {"order_id": "o-1", "amount_cents": 4200}


async def test_a_call_whose_connection_is_refused_was_not_made_and_is_made_once_the_server_is_up(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    """The session opens, then the server goes down: the ``tools/call`` POST is refused before a
    byte of it is written. The model is told the call was not made, asks again once the server
    is back, and the card is charged once."""
    with gateway(airline.url) as (door, url):
        tools = await _tools(airline, pool, url=url)
        door.forwarded.clear()
        door.go_down_after("server/discover")
        model = Before(
            script([("charge_card", CHARGE)], [("charge_card", CHARGE)], "done"), door.up
        )
        result = await runner(memory, model).run(
            agent(tools["charge_card"]), "go", tenant="t", run_id="r"
        )
    assert result.status is RunStatus.COMPLETED
    told = tool_results(result.messages)
    assert told["c0_0"].startswith("error: the call was not made: MCP server 'airline'")
    assert "ConnectError" in told["c0_0"]
    assert told["c1_0"] == "charged 4200 cents for o-1"
    assert airline.charges == [("o-1", 4200)]
    assert door.forwarded == ["server/discover", "server/discover", "tools/call", "tools/list"]


@pytest.mark.parametrize(
    ("fault", "forwarded"),
    [
        ("dropped after the server answered", ["server/discover", "tools/call"]),
        ("refused after the call, on the listing", ["server/discover", "tools/call"]),
    ],
)
async def test_a_call_that_reached_the_server_stays_indeterminate_whatever_failed_after(
    airline: McpBooks, pool: Connections, memory: MemoryBackend, fault: str, forwarded: list[str]
) -> None:
    """The server received the call and acted. Whether the connection is then dropped, or the
    next request of the session (the listing the SDK reads the result's schema from) is refused
    at connect, the kit cannot know that it acted: indeterminate, and never sent again."""
    with gateway(airline.url) as (door, url):
        tools = await _tools(airline, pool, url=url)
        door.forwarded.clear()
        if fault.startswith("dropped"):
            door.drop("tools/call")
        else:
            door.go_down_after("tools/call")
        with pytest.raises(IndeterminateToolCallError) as raised:
            await runner(memory, script([("charge_card", CHARGE)], "done")).run(
                agent(tools["charge_card"]), "go", tenant="t", run_id="r"
            )
        assert isinstance(raised.value.__cause__, ToolTransportError)
        assert door.forwarded == forwarded
        door.up()
        with pytest.raises(IndeterminateToolCallError):
            await runner(memory, script([("charge_card", CHARGE)], "done"), holder="b").resume(
                agent(tools["charge_card"]), "r", tenant="t"
            )
    assert airline.charges == [("o-1", 4200)]


async def test_a_destructive_call_sent_without_an_answer_is_indeterminate(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    tools = await _tools(airline, pool)
    airline.sever()
    charge = {"order_id": "o-1", "amount_cents": 4200}
    with pytest.raises(IndeterminateToolCallError, match=r"charge_card \(call c0_0\)") as raised:
        await runner(memory, script([("charge_card", charge)], "done")).run(
            agent(tools["charge_card"]), "go", tenant="t", run_id="r"
        )
    assert isinstance(raised.value.__cause__, ToolTransportError)
    assert airline.charges == [("o-1", 4200)]  # it did act; the kit could not know
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script([("charge_card", charge)], "done"), holder="b").resume(
            agent(tools["charge_card"]), "r", tenant="t"
        )
    assert airline.charges == [("o-1", 4200)]


async def test_a_read_only_call_sent_without_an_answer_is_simply_made_again(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    tools = await _tools(airline, pool)
    airline.sever()
    search = {"origin": "MUC", "destination": "LIS"}
    with pytest.raises(ToolTransportError, match="nobody knows whether it acted") as raised:
        await runner(memory, script([("search_flights", search)], "done")).run(
            agent(tools["search_flights"]), "go", tenant="t", run_id="r"
        )
    assert raised.value.retryable
    result = await runner(memory, script([("search_flights", search)], "done"), holder="b").resume(
        agent(tools["search_flights"]), "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert len(airline.made("search_flights")) == 2


async def test_fixed_arguments_are_hidden_from_the_model_and_added_to_the_call(
    airline: McpBooks, pool: Connections, memory: MemoryBackend
) -> None:
    phone = {"valueFrom": {"secretKeyRef": {"name": "airline", "key": "token"}}}
    tools = await _tools(airline, pool, tools={"send_sms": {"arguments": {"phone": phone}}})
    sms = tools["send_sms"]
    assert "phone" not in str(sms.schema()["parameters"])
    result = await runner(
        memory, script([("send_sms", {"text": "hi"})], [("send_sms", {"text": "x", "phone": "1"})])
    ).run(agent(sms), "go", tenant="t", run_id="r")
    assert airline.texts == [("airline-token-1", "hi")]
    second = tool_results(result.messages)["c1_0"]
    assert second.startswith("error: ")
    assert "phone is set by the tool's configuration" in second


async def test_listing_again_sees_a_changed_server_and_the_revision_pins_runs(
    airline: McpBooks, memory: MemoryBackend
) -> None:
    spec = AgentSpec.model_validate(
        {
            "model": {
                "provider": "openai",
                "name": "scripted",
                "baseURL": "http://127.0.0.1:9/v1",
                "price": {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0},
            },
            "instructions": "Search.",
            "tools": {"mcp": [{"name": "airline", "url": airline.url}]},
        }
    )
    declared = await DeclaredAgent.build("searcher", spec)
    try:
        before = declared.definition
        assert (await declared.refresh()).revision == before.revision
        search = {"origin": "MUC", "destination": "LIS"}
        turns = script([("search_flights", search)], "done")
        await runner(memory, turns).run(before, "go", tenant="t", run_id="r")
        assert airline.server is not None
        airline.server.remove_tool("send_sms")
        after = await declared.refresh()
        assert after.revision != before.revision
        assert after.tool("send_sms") is None
        with pytest.raises(RevisionMismatchError):
            await runner(memory, turns, holder="b").resume(after, "r", tenant="t")
    finally:
        await declared.aclose()
