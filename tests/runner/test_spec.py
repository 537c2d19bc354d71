"""What a declaration may say, and the errors that name the field and the fix when it may not."""

from __future__ import annotations

import pytest
from pydantic import JsonValue, ValidationError

from agentrun._errors import ConfigurationError
from agentrun.runner._connections import Connections
from agentrun.runner._http_tool import http_tool
from agentrun.runner._json_arguments import JsonSchemaArguments
from agentrun.runner._secrets import (
    EnvironmentSecrets,
    SecretKeyRef,
    SecretReference,
    SecretUnavailableError,
    environment_variable,
)
from agentrun.runner._spec import AgentSpec, HttpToolSpec, McpServerSpec, ModelSpec
from agentrun.runner._tools import SignatureArguments, Tool, ToolArgumentsError

SECRET: dict[str, JsonValue] = {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
PRICE: dict[str, JsonValue] = {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0}


def test_camel_case_and_snake_case_read_the_same() -> None:
    camel = ModelSpec.model_validate(
        {
            "provider": "openai",
            "name": "m",
            "baseURL": "http://h/v1",
            "maxTokens": 5,
            "price": PRICE,
        }
    )
    snake = ModelSpec(
        provider="openai",
        name="m",
        base_url="http://h/v1",
        max_tokens=5,
        price={"input_micros_per_million": 0, "output_micros_per_million": 0},
    )
    assert camel == snake
    assert camel.model_dump()["baseURL"] == "http://h/v1"


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ({"provider": "gemini", "name": "m", "price": PRICE}, "model.provider"),
        ({"provider": "openai", "name": "m"}, "model.price"),
        ({"provider": "openai", "name": "m", "price": PRICE, "apiKey": "sk-1"}, "model.apiKey"),
        ({"provider": "openai", "name": "m", "price": PRICE, "maxRetries": -1}, "model.maxRetries"),
        ({"provider": "openai", "name": "m", "price": PRICE, "temperatur": 1}, "temperatur"),
    ],
    ids=["unknown-provider", "no-price", "literal-key", "negative-retries", "typo"],
)
def test_a_model_that_cannot_work_is_refused_naming_the_field(
    model: dict[str, JsonValue], says: str
) -> None:
    with pytest.raises(ValidationError, match=says.replace(".", r"\.")):
        AgentSpec.model_validate({"model": model, "instructions": "x"})


def test_an_api_key_is_only_ever_a_reference() -> None:
    spec = ModelSpec.model_validate(
        {"provider": "anthropic", "name": "m", "price": PRICE, "apiKey": SECRET}
    )
    assert spec.api_key == SecretReference.to("s", "k")


def test_overrides_outside_the_allow_list_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"tools overrides \['b'\] name tools outside"):
        McpServerSpec.model_validate(
            {"name": "x", "url": "http://h/mcp", "allowedTools": ["a"], "tools": {"b": {}}}
        )


def test_two_servers_of_one_name_are_refused() -> None:
    server = {"name": "x", "url": "http://h/mcp"}
    with pytest.raises(ValidationError, match=r"MCP servers \['x'\] are named twice"):
        AgentSpec.model_validate(
            {
                "model": {"provider": "openai", "name": "m", "price": PRICE},
                "instructions": "x",
                "tools": {"mcp": [server, server]},
            }
        )


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        (
            {"url": "http://h/{token}", "arguments": {"token": SECRET}},
            r"arguments \['token'\] are secrets and would be written into the URL",
        ),
        (
            {"url": "http://h/x", "method": "GET", "arguments": {"token": SECRET}},
            "GET sends arguments in the query string",
        ),
        ({"url": "http://h/x", "name": "no spaces"}, "name"),
    ],
    ids=["secret-in-url", "secret-in-query", "bad-name"],
)
def test_an_http_tool_that_would_leak_a_secret_is_refused(
    tool: dict[str, JsonValue], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        HttpToolSpec.model_validate({"name": "t", **tool})


async def test_a_url_placeholder_must_be_a_required_or_fixed_argument() -> None:
    spec = HttpToolSpec.model_validate(
        {
            "name": "t",
            "url": "http://h/{flight}",
            "parameters": {"type": "object", "properties": {"flight": {"type": "string"}}},
        }
    )
    pool = Connections()
    try:
        with pytest.raises(ConfigurationError, match=r"placeholders \['flight'\]"):
            http_tool(spec, connections=pool)
    finally:
        await pool.aclose()


def test_schema_arguments_are_checked_before_anything_is_sent() -> None:
    arguments = JsonSchemaArguments(
        "t",
        {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "token": {"type": "string"}},
            "required": ["n", "token"],
        },
        fixed=["token"],
    )
    assert arguments.names == {"n"}
    assert arguments.schema() == {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    assert arguments.validate({"n": 3}) == {"n": 3}
    with pytest.raises(ToolArgumentsError, match="n: 'x' is not of type 'integer'"):
        arguments.validate({"n": "x"})
    with pytest.raises(ToolArgumentsError, match="token is set by the tool's configuration"):
        arguments.validate({"n": 3, "token": "forged"})
    with pytest.raises(ConfigurationError, match="must describe an object"):
        JsonSchemaArguments("t", {"type": "string"})
    with pytest.raises(ConfigurationError, match="not a valid JSON schema"):
        JsonSchemaArguments("t", {"type": "object", "properties": 3})


async def test_environment_secrets_are_read_from_a_variable_named_for_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ref = SecretKeyRef(name="model-keys", key="openai.token")
    assert environment_variable(ref) == "AGENTRUN_SECRET_MODEL_KEYS_OPENAI_TOKEN"
    with pytest.raises(SecretUnavailableError, match="AGENTRUN_SECRET_MODEL_KEYS_OPENAI_TOKEN"):
        await EnvironmentSecrets().resolve(ref)
    monkeypatch.setenv("AGENTRUN_SECRET_MODEL_KEYS_OPENAI_TOKEN", "v")
    assert await EnvironmentSecrets().resolve(ref) == "v"


def test_a_tool_schema_is_built_with_the_tool_and_each_caller_gets_its_own_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signature's schema is built once, with the tool (pydantic builds it anew per call, and
    a run shows the model its tools at every turn); changing the copy one caller got changes
    nothing for the next."""

    async def book(flight: str, seats: int = 1) -> str:
        return flight

    fresh = Tool(name="book", fn=book).schema()
    booking = Tool(name="book", fn=book)
    assert isinstance(booking.arguments, SignatureArguments)

    def built_again() -> object:
        pytest.fail("the schema was built again")

    monkeypatch.setattr(booking.arguments.model, "model_json_schema", built_again)
    shown = booking.schema()
    parameters = shown["parameters"]
    assert isinstance(parameters, dict)
    assert parameters["required"] == ["flight"]
    assert "title" not in parameters
    parameters["required"] = ["seats"]
    shown["name"] = "changed"
    assert booking.schema() == fresh
    assert booking.schema()["parameters"] == {**parameters, "required": ["flight"]}
