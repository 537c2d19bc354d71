"""aiohttp's internals agentrun relies on (aiohttp pinned to 3.14 in ``pyproject.toml``;
``tests/compat/test_aiohttp.py`` fails if an upgrade moves them)."""

from __future__ import annotations

import aiohttp


def never_resend(session: aiohttp.ClientSession) -> None:
    """Switch off ``session``'s one resend of an idempotent request (GET, PUT, DELETE...) whose
    connection closed before an answer (RFC 9112 allows it).

    A tool's PUT is a booking whose outcome is then unknown: it must be reported indeterminate,
    never sent twice. aiohttp has no public switch for it; its own tests set this attribute,
    which ``ClientSession.__init__`` sets to True and ``_request`` reads."""
    session._retry_connection = False
