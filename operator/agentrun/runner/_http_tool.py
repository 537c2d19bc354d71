"""HTTP tools: each call is one request, carrying the call's idempotency key to the service.

The kit can stop a run from repeating a call; only the remote service can stop a request it
already received from taking effect twice. Sending the key as ``Idempotency-Key`` (the header
Stripe and the IETF draft use) lets it deduplicate on its side too.

A tool is declared by an ``HttpToolSpec``: method, URL template, the JSON schema of the
arguments the model gives, key arguments, and headers and fixed arguments that may reference
secrets (read at each call, never shown to the model, never in the URL). Requests go over the
shared connection pool (``Connections``). What the outcomes mean:

* 2xx: the answer's body is the result;
* 4xx: the service refused and says why (``ToolError``, told to the model);
* no connection could be made, or the egress policy refused one: the request was not sent
  (``ToolError`` as well);
* anything else — a 5xx, a timeout, a connection lost on the way — leaves open whether the
  service acted (``ToolTransportError``): the loop reports a side-effecting call indeterminate.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx2
from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun.runner._connections import Connections
from agentrun.runner._egress import EgressRefused
from agentrun.runner._json_arguments import JsonSchemaArguments
from agentrun.runner._secrets import Revealed, SecretResolver, SecretUnavailableError
from agentrun.runner._spec import QUERY_METHODS, HttpToolSpec, placeholders
from agentrun.runner._tools import Disposition, Tool, ToolError, ToolTransportError

KEY_HEADER = "Idempotency-Key"


def _text(value: JsonValue) -> str:
    """A value as it is written in a URL: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def http_tool(
    spec: HttpToolSpec, *, connections: Connections, secrets: SecretResolver | None = None
) -> Tool:
    arguments = JsonSchemaArguments(spec.name, spec.parameters, fixed=spec.arguments)
    required = arguments.schema().get("required")
    in_url = placeholders(spec.url)
    unfilled = sorted(
        set(in_url) - set(spec.arguments) - set(required if isinstance(required, list) else [])
    )
    if unfilled:
        raise ConfigurationError(
            f"HTTP tool {spec.name!r}: the url has placeholders {unfilled} that are neither "
            "required arguments in its parameters nor fixed arguments; add them to "
            "parameters.required, or to arguments"
        )
    client = connections.client(timeout=spec.timeout_seconds)
    where = f"{spec.method} {spec.url}"

    async def call(arguments: dict[str, Any], idempotency_key: str | None) -> str:
        revealed = Revealed(secrets)
        try:
            headers = await revealed.reveal_all(spec.headers)
            values: dict[str, Any] = {**arguments, **await revealed.reveal_all(spec.arguments)}
        except SecretUnavailableError as error:
            raise ToolError(f"the call was not made: {error}") from error
        url = spec.url.format_map(
            {name: quote(_text(values.pop(name)), safe="") for name in in_url}
        )
        if idempotency_key is not None:
            headers[KEY_HEADER] = idempotency_key
        query = spec.method in QUERY_METHODS
        try:
            response = await client.request(
                spec.method,
                url,
                headers=headers,
                params={name: _text(value) for name, value in values.items()} if query else None,
                json=None if query else values,
            )
        except EgressRefused as error:
            raise ToolError(f"the call was not made: {where}: {error}") from error
        except httpx2.ConnectError as error:
            # Scrubbed: an error may name the URL (aiohttp's connection timeout does), whose
            # query may carry revealed values.
            said = revealed.scrub(str(error))
            raise ToolError(f"the call was not made: {where} could not connect ({said})") from error
        except httpx2.HTTPError as error:
            said = revealed.scrub(f"{type(error).__name__}: {error}")
            raise ToolTransportError(
                f"{where} was sent and no answer came back ({said}); nobody knows whether it acted"
            ) from error
        revealed.refused(response.status_code)
        answer = revealed.scrub(response.text)
        if 400 <= response.status_code < 500:
            raise ToolError(f"{where} refused the request ({response.status_code}): {answer[:300]}")
        if not response.is_success:
            raise ToolTransportError(
                f"{where} answered {response.status_code} ({answer[:300]}); nobody knows whether "
                "it acted"
            )
        return answer

    return Tool(
        name=spec.name,
        fn=call,
        description=spec.description or where,
        key_arguments=spec.key_arguments,
        read_only=spec.disposition is Disposition.READ_ONLY,
        idempotent=spec.disposition is Disposition.IDEMPOTENT,
        requires_approval=spec.requires_approval,
        version=f"http:{where}",
        declared=arguments,
    )
