"""Arguments declared as a JSON schema: an MCP server's tool listing, an HTTP tool's spec.

The schema is what the model is shown and what its arguments are checked against before anything
is dispatched, so a call that does not fit is answered without reaching the remote side.
``fixed`` names arguments the tool supplies itself (from its declaration, often from a secret):
they are taken out of the schema the model sees, and a model that sends one anyway is refused,
so no value a model wrote can stand in for one a person configured.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun.runner._tools import KEY_PARAMETER, ToolArgumentsError

ARGUMENTS = "arguments"
"""The keyword a schema-declared tool's function takes the checked arguments under."""


def _without(schema: dict[str, JsonValue], fixed: frozenset[str]) -> dict[str, JsonValue]:
    if not fixed:
        return schema
    shown = copy.deepcopy(schema)
    properties = shown.get("properties")
    if isinstance(properties, dict):
        for name in fixed:
            properties.pop(name, None)
    required = shown.get("required")
    if isinstance(required, list):
        shown["required"] = [name for name in required if name not in fixed]
    return shown


class JsonSchemaArguments:
    """Arguments checked against a JSON schema (draft 2020-12) of an object."""

    def __init__(
        self, tool: str, schema: Mapping[str, JsonValue], *, fixed: Iterable[str] = ()
    ) -> None:
        self.tool = tool
        whole = dict(schema)
        if whole.get("type", "object") != "object":
            raise ConfigurationError(
                f"tool {tool!r}: the schema of its arguments must describe an object "
                f"(type: object), not {whole.get('type')!r}"
            )
        whole.setdefault("type", "object")
        try:
            Draft202012Validator.check_schema(whole)
        except SchemaError as error:
            raise ConfigurationError(
                f"tool {tool!r}: the schema of its arguments is not a valid JSON schema: "
                f"{error.message}"
            ) from error
        self.fixed = frozenset(fixed)
        self._shown = _without(whole, self.fixed)
        self._validator = Draft202012Validator(self._shown)
        properties = whole.get("properties")
        self._names = frozenset(properties) if isinstance(properties, dict) else frozenset()

    @property
    def names(self) -> frozenset[str]:
        return self._names - self.fixed

    def schema(self) -> dict[str, JsonValue]:
        return copy.deepcopy(self._shown)

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        given = dict(arguments)
        supplied = sorted(self.fixed & set(given))
        if supplied:
            raise ToolArgumentsError(
                f"arguments for {self.tool} do not fit: {', '.join(supplied)} is set by the "
                "tool's configuration, not by the model; leave it out"
            )
        errors = sorted(self._validator.iter_errors(given), key=lambda e: list(e.path))
        if errors:
            described = "; ".join(
                f"{'/'.join(str(p) for p in error.path) or '(arguments)'}: {error.message}"
                for error in errors[:5]
            )
            raise ToolArgumentsError(f"arguments for {self.tool} do not fit: {described}")
        return given

    def bind(self, values: dict[str, Any], key: str | None) -> dict[str, Any]:
        return {ARGUMENTS: values, KEY_PARAMETER: key}
