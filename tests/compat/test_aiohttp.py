"""aiohttp's internals ``agentrun._compat.aiohttp`` uses are where it expects them: an upgrade of
aiohttp that moves one fails here, by name (``tests/runner/test_http_tool.py`` shows the effect:
a request is never sent twice)."""

from __future__ import annotations

import inspect

import aiohttp

from agentrun._compat.aiohttp import never_resend


async def test_a_session_resends_unless_its_private_switch_is_off() -> None:
    async with aiohttp.ClientSession() as session:
        assert session._retry_connection is True  # set by ClientSession.__init__
        never_resend(session)
        assert session._retry_connection is False
    # ... and read where a request decides whether to send again.
    assert "self._retry_connection and method in IDEMPOTENT_METHODS" in inspect.getsource(
        aiohttp.ClientSession._request
    )
