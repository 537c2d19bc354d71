"""Sign-in: who the person at the browser is, and the token that acts as them.

Two modes (``ConsoleSettings.auth``):

* ``token``: the person pastes a bearer token the API server accepts (``kubectl create token``,
  their OIDC id token). The console asks the API server who that is (a SelfSubjectReview made
  with it) and keeps the token only in the browser, sealed in a cookie (``Fernet``: encrypted and
  authenticated with the console's key), HttpOnly, SameSite=Strict, Secure when served over
  HTTPS. Nothing of it is written on the console's side, and a console restarted with the same
  key (the chart keeps it in a Secret) still knows the cookie: a session survives a rollout.
* ``proxy``: an authenticating proxy in front (oauth2-proxy) has signed the person in and says
  who they are in headers. With the access token passed on (oauth2-proxy's
  ``--pass-access-token``) the console acts with it; otherwise it impersonates the user and
  groups the headers name. The console must then be reachable only through the proxy (the
  chart binds it to the pod's loopback beside the proxy's sidecar).

Every form that writes carries a token bound to the session (``csrf``), and a write whose
``Origin`` is not the console's own is refused before that: a page on another site cannot make
a signed-in browser act.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field

from cryptography.fernet import Fernet, InvalidToken

from agentrun.console._callers import BearerToken, Person

COOKIE = "agentrun_console"
LIFETIME = 8 * 3600
"""Seconds a sign-in lasts; the token's own expiry, if sooner, ends it first."""


@dataclass(frozen=True)
class Session:
    """What the cookie holds, once opened."""

    user: str
    groups: tuple[str, ...]
    token: str = field(repr=False)
    nonce: str = field(repr=False)
    expires: float

    def person(self) -> Person:
        return Person(self.user, self.groups, BearerToken(self.token))


class Sealer:
    """Seals sessions into cookies and CSRF tokens to sessions, with one key."""

    def __init__(self, key: bytes | None = None) -> None:
        self.generated = key is None
        self._key = key or Fernet.generate_key()
        self._fernet = Fernet(self._key)
        self._mac_key = hashlib.sha256(b"agentrun-console-csrf\x00" + self._key).digest()

    @staticmethod
    def key_from_text(text: str) -> bytes:
        """A key as the chart's Secret holds it: 32 bytes, URL-safe base64 (``Fernet``'s form).
        Any other text of at least 32 characters is hashed into one."""
        raw = text.strip().encode()
        try:
            if len(base64.urlsafe_b64decode(raw)) == 32:
                return raw
        except ValueError:
            pass
        if len(raw) < 32:
            raise ValueError("the console's session key must be at least 32 characters")
        return base64.urlsafe_b64encode(hashlib.sha256(raw).digest())

    def seal(self, user: str, groups: tuple[str, ...], token: str) -> str:
        payload = {
            "u": user,
            "g": list(groups),
            "t": token,
            "n": secrets.token_urlsafe(16),
            "e": time.time() + LIFETIME,
        }
        return self._fernet.encrypt(json.dumps(payload).encode()).decode()

    def open(self, cookie: str | None) -> Session | None:
        """The session in ``cookie``; None when there is none, it was not sealed with this key,
        or it has expired."""
        if not cookie:
            return None
        try:
            payload = json.loads(self._fernet.decrypt(cookie.encode(), ttl=LIFETIME + 60))
        except (InvalidToken, ValueError):
            return None
        if not isinstance(payload, dict) or float(payload.get("e", 0)) < time.time():
            return None
        return Session(
            user=str(payload["u"]),
            groups=tuple(str(g) for g in payload.get("g") or ()),
            token=str(payload["t"]),
            nonce=str(payload["n"]),
            expires=float(payload["e"]),
        )

    def csrf(self, bound_to: str) -> str:
        """The form token for a session (its nonce) or, behind a proxy, a user."""
        return hmac.new(self._mac_key, bound_to.encode(), hashlib.sha256).hexdigest()
