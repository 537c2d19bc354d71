"""The console's settings, from its command line and environment (the chart sets both)."""

from __future__ import annotations

import os
from enum import StrEnum

from pydantic import Field

from agentrun._base import FrozenModel


class AuthMode(StrEnum):
    TOKEN = "token"
    PROXY = "proxy"
    LOCAL = "local"
    """No Kubernetes: the runs of a store (``agentrun console``), as the operating system's
    user, for whoever opens the address it printed (its ``local_token``): not for every local
    user who can reach its loopback port."""


class ConsoleSettings(FrozenModel):
    """How the console signs people in, what it watches and where it reads runs from."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    auth: AuthMode = AuthMode.TOKEN
    read_only: bool = False
    namespace: str | None = None
    """Watch only this namespace's runs (the chart's ``watchNamespace``); all when None."""
    store: str | None = None
    """The operator's store, for a run's transcript and tool calls; pages show status only
    without it."""
    session_key: str | None = Field(default=None, repr=False)
    """Seals sign-in cookies; a console without one makes its own, and a restart signs
    everyone out."""
    local_token: str | None = Field(default=None, repr=False)
    """A local console's sign-in token (``AGENTRUN_CONSOLE_TOKEN``), which the address it
    prints carries; made afresh at each start when not given."""
    secure_cookies: bool = False
    """Mark cookies Secure (served over HTTPS, as behind an Ingress with TLS)."""
    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"
    token_header: str = "X-Forwarded-Access-Token"

    @classmethod
    def environment_defaults(cls) -> dict[str, object]:
        """What the environment sets (``AGENTRUN_CONSOLE_*``, and the operator's store URL)."""
        found: dict[str, object] = {}
        for variable, name in (
            ("AGENTRUN_CONSOLE_SESSION_KEY", "session_key"),
            ("AGENTRUN_STORE_URL", "store"),
            ("AGENTRUN_CONSOLE_NAMESPACE", "namespace"),
            ("AGENTRUN_CONSOLE_TOKEN", "local_token"),
        ):
            value = os.environ.get(variable)
            if value:
                found[name] = value
        key_file = os.environ.get("AGENTRUN_CONSOLE_SESSION_KEY_FILE")
        if key_file:
            with open(key_file, encoding="utf-8") as handle:
                found["session_key"] = handle.read().strip()
        return found
