"""What the two SDK-backed providers share: the key read per request, and what a failure says.

Both vendors' official SDKs do the transport well and the same way: one pooled async HTTP client
(no thread per call), a timeout per request, and retries with exponential backoff on 408, 409,
429, 5xx, timeouts and dropped connections, honouring ``Retry-After`` (``max_retries`` of them).
What is left to a provider is to read the key at each request (so a rotated secret is used at
once and none is kept in a long-lived object), and, once the SDK has given up, to say what the
endpoint said in one ``ProviderError`` — with any secret the request used masked out of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import httpx2

from agentrun.runner._egress import refusal_in
from agentrun.runner._providers.base import ModelReply, ProviderError
from agentrun.runner._secrets import MaybeSecret, Revealed, SecretResolver
from agentrun.runner._spec import RequestSettings

RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The header both SDKs number each attempt's request with (0 on the first)."""

Answer = TypeVar("Answer")

KEY_PLACEHOLDER = "none"
"""What an SDK client is built with: it insists on a key, but every request carries the key read
for it (or no ``Authorization`` at all, ``RequestKeyAuth``), so this one is never sent."""


REQUEST_KEY: ContextVar[str | None] = ContextVar("agentrun_request_key", default=None)
"""The key read for the model request in progress in this task (None: send none)."""


class RequestKeyAuth(httpx2.Auth):
    """Sets each attempt's ``Authorization`` from ``REQUEST_KEY`` as it is sent (or removes it).

    The key goes in here, at send time, rather than in the request's options: both SDKs log the
    options at DEBUG, and Anthropic's does not mask an ``Authorization`` among them."""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        key = REQUEST_KEY.get()
        if key is None:
            request.headers.pop("Authorization", None)
        else:
            request.headers["Authorization"] = f"Bearer {key}"
        yield request


class KeyedByRequest:
    """Mixed into an SDK's async client class (first), so that its requests carry the key of
    the request in progress (``RequestKeyAuth``) rather than the client's own."""

    @property
    def custom_auth(self) -> httpx2.Auth:
        return _REQUEST_KEY_AUTH


_REQUEST_KEY_AUTH = RequestKeyAuth()


def attempts(request: httpx2.Request | None) -> int:
    if request is None:
        return 1
    try:
        return int(request.headers.get(RETRY_COUNT_HEADER, "0")) + 1
    except ValueError:
        return 1


def said(body: object, fallback: str) -> str:
    """The endpoint's own message, from the error bodies OpenAI-compatible servers and Anthropic
    send (``{"error": {"message": ...}}``, or the SDK's unwrapped inner object)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return fallback


class StatusError(Protocol):
    """What both SDKs' ``APIStatusError`` carry."""

    status_code: int
    body: object
    message: str
    request: httpx2.Request


@dataclass(frozen=True)
class Failures:
    """One SDK's exception classes: a status the endpoint answered with, a connection it could
    not make or keep (timeouts included), and a body that does not fit the SDK's types."""

    status: type[Exception]
    connection: type[Exception]
    invalid: type[Exception]


class KeyedEndpoint:
    """The endpoint's URL and the key that is read for each request to it."""

    def __init__(
        self, endpoint: str, api_key: MaybeSecret | None, secrets: SecretResolver | None
    ) -> None:
        self.endpoint = endpoint
        self.api_key = api_key
        self.secrets = secrets

    async def ask(
        self,
        failures: Failures,
        send: Callable[[str | None], Awaitable[Answer]],
        read: Callable[[Answer], ModelReply],
    ) -> ModelReply:
        """``send`` one request with the key read for it (None: send none, as a local server
        wants) and ``read`` the reply; whatever the SDK gave up on, as a ``ProviderError``."""
        revealed = Revealed(self.secrets)
        key = None if self.api_key is None else await revealed.reveal(self.api_key)
        try:
            answer = await send(key)
        except failures.status as error:
            failed = cast(StatusError, error)
            revealed.refused(failed.status_code)
            message = revealed.scrub(said(failed.body, failed.message))[:500]
            raise ProviderError(
                self.endpoint,
                f"answered {failed.status_code}: {message}",
                status=failed.status_code,
                attempts=attempts(failed.request),
            ) from error
        except failures.connection as error:
            if (refused := refusal_in(error)) is not None:
                # The spec's URL, not the network: no retry, nor a run carried on later, helps.
                raise ProviderError(
                    self.endpoint, f"was not asked: {refused}", refused=True
                ) from error
            cause = error.__cause__ or error
            what = revealed.scrub(f"{type(cause).__name__}: {cause}")[:500]
            raise ProviderError(
                self.endpoint,
                f"could not be asked ({what})",
                attempts=attempts(getattr(error, "request", None)),
            ) from error
        except failures.invalid as error:
            raise self.unreadable(error) from error
        try:
            return read(answer)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
            raise self.unreadable(error) from error

    def unreadable(self, error: Exception) -> ProviderError:
        return ProviderError(
            self.endpoint, f"sent a reply this provider cannot read: {error}", unreadable=True
        )


class SdkClient(Protocol):
    """What both SDKs' async clients offer that a provider uses: the public ``post`` (the
    first of its overloads: no stream) and ``close``."""

    async def post(
        self, path: str, *, cast_to: type[Answer], body: object, options: Any
    ) -> Answer: ...

    async def close(self) -> None: ...


Client = TypeVar("Client", bound=SdkClient)


class SdkProvider(Generic[Client]):
    """What both providers are: an SDK client made once, and the settings and key it is used
    with. A subclass names its ``default_url``, the ``path`` it posts to and its SDK's
    ``failures``, and makes its SDK's client (``connect``, a class that is ``KeyedByRequest``).

    A request is sent with the client's public ``post`` rather than the resource method
    (``chat.completions.create``, ``messages.create``) on a ``with_options(api_key=)`` copy: the
    copy builds a whole client per call, and OpenAI's ``create`` walks the whole conversation
    through its typed-dict transform (aliases and file encodings, none of which a chat of plain
    JSON has). ``post`` keeps the rest: the SDK's retries, timeouts, typed errors and typed reply;
    the key read for the request goes in its ``Authorization`` header as the client's own
    ``api_key`` would (both SDKs send it as a bearer token), or the header is left out
    (``RequestKeyAuth``).
    """

    default_url = ""
    path = ""
    failures: Failures
    traced: Mapping[str, str] = {}
    """Request options the resource method would have given ``post`` (the name and route of the
    SDK's span for the call, where the SDK makes one)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: MaybeSecret | None = None,
        secrets: SecretResolver | None = None,
        settings: RequestSettings | None = None,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        """``api_key`` is read for each request (a ``SecretReference`` through ``secrets``);
        None sends none, as a local server wants. ``http_client`` shares a pool with other
        clients (``Connections``); without one the SDK makes its own, which ``aclose`` closes."""
        self.settings = settings or RequestSettings()
        self.owns_pool = http_client is None
        url = base_url or self.default_url
        self.endpoint = KeyedEndpoint(url, api_key, secrets)
        self.client = self.connect(
            api_key=KEY_PLACEHOLDER,
            base_url=url,
            timeout=self.settings.timeout_seconds,
            max_retries=self.settings.max_retries,
            http_client=http_client,
        )

    def connect(self, **options: Any) -> Client:
        raise NotImplementedError

    async def ask(
        self, body: dict[str, Any], cast_to: type[Answer], read: Callable[[Answer], ModelReply]
    ) -> ModelReply:
        """Post ``body`` to ``path`` with the key read for this request, and ``read`` the
        reply (``cast_to``, the SDK's type); see ``KeyedEndpoint.ask`` for what a failure is."""
        client, path, traced = self.client, self.path, dict(self.traced)

        async def send(key: str | None) -> Answer:
            given = REQUEST_KEY.set(key)  # this task's, read by RequestKeyAuth at every attempt
            try:
                return await client.post(path, body=body, cast_to=cast_to, options=traced)
            finally:
                REQUEST_KEY.reset(given)

        return await self.endpoint.ask(self.failures, send, read)

    async def aclose(self) -> None:
        """Close the SDK's own pool; a client that was given is its owner's to close."""
        if self.owns_pool:
            await self.client.close()
