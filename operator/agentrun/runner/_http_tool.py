"""HTTP tools: each call is one request, carrying the call's idempotency key to the service.

The kit can stop a run from repeating a call; only the remote service can stop a request it
already received from taking effect twice. Sending the key as ``Idempotency-Key`` (the header
Stripe and the IETF draft use) lets it deduplicate on its side too.

A tool is declared by an ``HttpToolSpec``: method, URL template, the JSON schema of the
arguments the model gives, key arguments, and headers and fixed arguments that may reference
secrets (read at each call, never shown to the model, never in the URL). Requests go over the
shared connection pool (``Connections``). What the outcomes mean:

* 2xx: the answer's body is the result;
* 4xx: the service refused and says why (``ToolError``, told to the model); a 409 is the
  service still working on a request with the same key (``StillInFlightError``, a ``ToolError``
  too), which a replay that settles a call waits on (``agentrun.runner._settling``);
* no connection could be made, or the egress policy refused one: the request was not sent
  (``ToolError`` as well);
* anything else — a 5xx, a timeout, a connection lost on the way — leaves open whether the
  service acted (``ToolTransportError``): the loop reports a side-effecting call indeterminate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2
from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun.runner._connections import Connections
from agentrun.runner._egress import EgressRefused
from agentrun.runner._json_arguments import JsonSchemaArguments
from agentrun.runner._request_fields import placeholders
from agentrun.runner._secrets import Revealed, SecretResolver, SecretUnavailableError
from agentrun.runner._settlement import (
    Answer,
    MissingPlaceholderError,
    ProbeFunction,
    ProbeSpec,
    Unknown,
    as_text,
    fill,
    url_escape,
)
from agentrun.runner._spec import QUERY_METHODS, HttpToolSpec
from agentrun.runner._tools import (
    Disposition,
    StillInFlightError,
    Tool,
    ToolError,
    ToolTransportError,
)

KEY_HEADER = "Idempotency-Key"
CONFLICT = 409
"""What a service that honours keys answers while a request with the same key is in progress."""


def _retry_after(response: httpx2.Response) -> float | None:
    """``Retry-After`` in seconds, when the service gave it as a number (an HTTP date is not
    worth a clock comparison here: the wait is bounded by the caller anyway)."""
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


async def _exchange(
    client: httpx2.AsyncClient,
    revealed: Revealed,
    method: str,
    url: str,
    where: str,
    *,
    headers: dict[str, str],
    params: dict[str, str] | None = None,
    json: Any = None,
) -> tuple[httpx2.Response, str]:
    """Send one request; the response and its body with the request's secrets scrubbed.

    Raises:
        ToolError: The request was not sent (the egress policy, no connection).
        ToolTransportError: It was sent and no answer came back.
    """
    try:
        response = await client.request(method, url, headers=headers, params=params, json=json)
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
    return response, revealed.scrub(response.text)


def http_probe(
    probe: ProbeSpec, *, client: httpx2.AsyncClient, secrets: SecretResolver | None
) -> ProbeFunction:
    """The question a ``settle.probe.http`` asks: a GET whose URL is written from the call,
    whose headers' secrets are read for that request only; what the answer means is
    ``ProbeSpec.judge``'s. Anything that goes wrong is an ``Unknown``, never a guess."""

    asks = probe.http
    assert asks is not None

    async def ask(arguments: Mapping[str, JsonValue], key: str | None) -> Answer:
        try:
            url = fill(asks.url, arguments, key, escape=url_escape)
        except MissingPlaceholderError as error:
            return Unknown(str(error))
        revealed = Revealed(secrets)
        asked = f"probed GET {url}"
        try:
            headers = await revealed.reveal_all(asks.headers)
            response, text = await _exchange(client, revealed, "GET", url, asked, headers=headers)
        except (SecretUnavailableError, ToolError, ToolTransportError) as error:
            return Unknown(f"{asked}: {revealed.scrub(str(error))}")
        return probe.judge(asked, response.status_code, text)

    return ask


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
        url = spec.url.format_map({name: url_escape(as_text(values.pop(name))) for name in in_url})
        if idempotency_key is not None:
            headers[KEY_HEADER] = idempotency_key
        query = spec.method in QUERY_METHODS
        response, answer = await _exchange(
            client,
            revealed,
            spec.method,
            url,
            where,
            headers=headers,
            params={name: as_text(value) for name, value in values.items()} if query else None,
            json=None if query else values,
        )
        refused = f"{where} refused the request ({response.status_code}): {answer[:300]}"
        if response.status_code == CONFLICT:
            raise StillInFlightError(refused, retry_after=_retry_after(response))
        if 400 <= response.status_code < 500:
            raise ToolError(refused)
        if not response.is_success:
            raise ToolTransportError(
                f"{where} answered {response.status_code} ({answer[:300]}); nobody knows whether "
                "it acted"
            )
        return answer

    settle = None
    if spec.settle is not None:
        asks = spec.settle.probe
        settle = spec.settle.settlement(
            None if asks is None else http_probe(asks, client=client, secrets=secrets),
            sends=f"{where} with the same {KEY_HEADER}",
        )
    return Tool(
        name=spec.name,
        fn=call,
        description=spec.description or where,
        key_arguments=spec.key_arguments,
        read_only=spec.disposition is Disposition.READ_ONLY,
        idempotent=spec.disposition is Disposition.IDEMPOTENT,
        requires_approval=spec.requires_approval,
        version=f"http:{where}",
        settle=settle,
        declared=arguments,
    )
