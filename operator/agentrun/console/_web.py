"""What every page handler shares: the console's parts, who is asking, rendering, refusals.

Every string a page shows goes through one masker: the template environment's ``finalize``
masks each value a template prints before it is escaped, so a status message, a tool's argument
or an API server's refusal that carries a secret is masked on every page and in every live
update, with nothing for a template to forget.
"""

from __future__ import annotations

import getpass
import hmac
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from agentrun._backend import Backend
from agentrun._redaction import Masker
from agentrun.console._access import AccessPolicy
from agentrun.console._apiserver import ApiServer
from agentrun.console._callers import BearerToken, Impersonated, LocalUser, Person
from agentrun.console._inbox import InboxArguments
from agentrun.console._index import RunIndex
from agentrun.console._sessions import COOKIE, Sealer
from agentrun.console._settings import AuthMode, ConsoleSettings

HERE = Path(__file__).parent
LOCAL_USER = getpass.getuser()
"""Who acts at a local console: the operating system's user who started it."""


@dataclass
class Console:
    """The console's parts, built once (``create_app``) and shared by every request."""

    settings: ConsoleSettings
    api: ApiServer | None
    index: RunIndex
    access: AccessPolicy
    sealer: Sealer
    masker: Masker
    templates: Environment
    backend: Backend | None = None
    store_error: str = ""
    """Why the store could not be opened yet, while the console keeps trying."""
    refresh: Callable[[], Awaitable[None]] | None = None
    """Brings the index up to date before a page is rendered from it: the local console's
    store listing (``_local``); None where a watch keeps it so."""

    @property
    def apiserver(self) -> ApiServer:
        """The API server; a local console has none, and none of its routes asks for it."""
        if self.api is None:
            raise RuntimeError("a local console has no API server")
        return self.api

    inbox_arguments: InboxArguments = field(default_factory=InboxArguments)


def environment(masker: Masker) -> Environment:
    def finalize(value: object) -> object:
        if isinstance(value, str) and not isinstance(value, Markup):
            return masker.text(value)
        return value

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = age
    env.filters["micros"] = lambda micros: f"{int(micros) / 1_000_000:.6f}".rstrip("0").rstrip(".")
    env.filters["milliseconds"] = lambda ms: f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"
    env.filters["q"] = lambda text: quote(str(text), safe="")
    # A plain string, not Jinja's Markup: so it is masked (finalize) and escaped like any other.
    env.filters["tojson"] = lambda value, indent=None: json.dumps(
        masker.json(value), indent=indent, ensure_ascii=False
    )
    return env


def age(when: datetime | None, now: datetime | None = None) -> str:
    """``3d4h``, ``5m12s``: how long ago, the way kubectl's AGE column says it."""
    if when is None:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - when).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{seconds}s" if seconds else f"{minutes}m"
    return f"{seconds}s"


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def person_of(request: Request) -> Person | None:
    """Who is asking: from the sealed cookie, or from the proxy's headers."""
    console = console_of(request)
    settings = console.settings
    if settings.auth is AuthMode.LOCAL:
        session = console.sealer.open(request.cookies.get(COOKIE))
        if session is None or session.user != LOCAL_USER:
            return None
        return Person(LOCAL_USER, (), LocalUser(LOCAL_USER))
    if settings.auth is AuthMode.PROXY:
        user = request.headers.get(settings.user_header, "").strip()
        if not user:
            return None
        groups = tuple(
            g.strip() for g in request.headers.get(settings.groups_header, "").split(",")
        )
        groups = tuple(g for g in groups if g)
        token = request.headers.get(settings.token_header, "").strip()
        if token[:7].lower() == "bearer ":
            token = token[7:].strip()
        caller = BearerToken(token) if token else Impersonated(user, groups)
        return Person(user, groups, caller)
    session = console.sealer.open(request.cookies.get(COOKIE))
    return None if session is None else session.person()


def csrf_token(request: Request) -> str:
    console = console_of(request)
    if console.settings.auth is AuthMode.PROXY:
        person = person_of(request)
        return console.sealer.csrf(f"{console.settings.auth}:" + (person.user if person else ""))
    session = console.sealer.open(request.cookies.get(COOKIE))
    return console.sealer.csrf("session:" + (session.nonce if session else ""))


def csrf_ok(request: Request, given: str) -> bool:
    """Whether a form's ``csrf`` field is the one this person's pages carry."""
    return person_of(request) is not None and hmac.compare_digest(csrf_token(request), given)


def back_to(request: Request, path: str, key: str, text: str) -> Response:
    """Back to ``path``, saying ``text`` (``key``: said or refused) on the page: signed with
    the console's key, so a link made elsewhere cannot put words in the console's mouth."""
    signature = console_of(request).sealer.csrf(f"{key}:{text}")[:32]
    return RedirectResponse(f"{path}?{key}={quote(text, safe='')}&sig={signature}", status_code=303)


def what_was_said(request: Request) -> tuple[str, str]:
    """What the action before this page said (``back_to``), as (said, refused); nothing for
    words whose signature does not match."""
    query, sealer = request.query_params, console_of(request).sealer
    found = {"said": "", "refused": ""}
    for key in found:
        text = query.get(key, "")
        expected = sealer.csrf(f"{key}:{text}")[:32]
        if text and hmac.compare_digest(query.get("sig", ""), expected):
            found[key] = text
    return found["said"], found["refused"]


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    console = console_of(request)
    person = person_of(request)
    page = console.templates.get_template(template).render(
        request=request,
        person=person,
        read_only=console.settings.read_only,
        csrf=csrf_token(request) if person else "",
        proxy=console.settings.auth is AuthMode.PROXY,
        local=console.settings.auth is AuthMode.LOCAL,
        generation=console.index.generation,
        **context,
    )
    return HTMLResponse(page, status_code=status)


def sign_in_first(request: Request) -> Response:
    if console_of(request).settings.auth is AuthMode.PROXY:
        return render(
            request,
            "error.html",
            status=401,
            title="Not signed in",
            detail=f"The proxy in front of the console named nobody "
            f"({console_of(request).settings.user_header} is missing).",
        )
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/sign-in?next={quote(target, safe='')}", status_code=303)


def nothing_here(request: Request) -> HTMLResponse:
    """A run that does not exist and a run the person may not see look the same."""
    return render(
        request,
        "error.html",
        status=404,
        title="No such run",
        detail="There is no such run, or you may not see it.",
    )
