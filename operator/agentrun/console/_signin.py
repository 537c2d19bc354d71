"""Signing in with a token, and out: the only pages a person sees before the console knows them."""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agentrun.console._callers import BearerToken
from agentrun.console._sessions import COOKIE, LIFETIME
from agentrun.console._settings import AuthMode
from agentrun.console._web import LOCAL_USER, console_of, render


def _local(target: str) -> str:
    """Only a path on this console may be where sign-in returns to (no open redirect)."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/runs"
    return target


async def sign_in_form(request: Request) -> Response:
    if console_of(request).settings.auth is AuthMode.PROXY:
        return RedirectResponse("/runs", status_code=303)
    return render(request, "signin.html", next=_local(request.query_params.get("next", "/runs")))


async def sign_in(request: Request) -> Response:
    console = console_of(request)
    if console.settings.auth is AuthMode.PROXY:
        return RedirectResponse("/runs", status_code=303)
    form = await request.form()
    token = str(form.get("token", "")).strip()
    target = _local(str(form.get("next", "/runs")))
    if not token:
        return render(request, "signin.html", status=400, next=target, error="Paste a token.")
    answer = await console.apiserver.call(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        BearerToken(token),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    info = (answer.body.get("status") or {}).get("userInfo") or {}
    if not answer.ok or not info.get("username"):
        why = (
            "the API server does not accept this token" if answer.status == 401 else answer.message
        )
        return render(
            request, "signin.html", status=401, next=target, error=f"Not signed in: {why}."
        )
    groups = tuple(str(g) for g in info.get("groups") or ())
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        console.sealer.seal(str(info["username"]), groups, token),
        max_age=LIFETIME,
        httponly=True,
        samesite="strict",
        secure=console.settings.secure_cookies,
        path="/",
    )
    return response


async def local_sign_in(request: Request) -> Response:
    """A local console's door: the address it printed at start (``/sign-in?token=...``) opens
    a session in this browser; without the token, or with another, it says where to find it.
    So another user of the same machine, who can reach the loopback port too, cannot act as
    the one who started it."""
    console = console_of(request)
    given = request.query_params.get("token", "")
    expected = console.settings.local_token or ""
    if not given or not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        error = "That is not this console's token." if given else ""
        return render(request, "signin_local.html", status=401, error=error)
    response = RedirectResponse(_local(request.query_params.get("next", "/runs")), 303)
    response.set_cookie(
        COOKIE,
        console.sealer.seal(LOCAL_USER, (), ""),
        max_age=LIFETIME,
        httponly=True,
        samesite="strict",
        path="/",
    )
    return response


async def sign_out(request: Request) -> Response:
    response = RedirectResponse("/sign-in", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
