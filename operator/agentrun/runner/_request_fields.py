"""What a declaration writes for an HTTP request: a URL, its placeholders, and headers.

Shared by every declaration that sends a request (an MCP server, an HTTP tool, a settlement's
probe), so each is held to the bounds the Agent CRD (crds/agents.agentrun.dev.yaml) states: an
agent declared in a file is held to what a declared resource is, and the operator refuses, naming
the field, what an older CRD let through.
"""

from __future__ import annotations

import string
from typing import Annotated

from pydantic import Field

from agentrun.runner._secrets import SecretReference

URL = Annotated[str, Field(max_length=2048, pattern=r"^https?://[!-~]+$")]
"""An http or https URL written in printable ASCII (RFC 3986; an international host name in its
punycode form): a space, a control character or a bidirectional override is refused, not sent."""
HeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")]
"""An HTTP field name (RFC 9110's token): anything else no client can send."""
HeaderValue = Annotated[str, Field(max_length=8192, pattern=r"^[\t\x20-\x7e]*$")]
"""Printable ASCII, spaces and tabs: a line break or a NUL would end or split the header, and
the HTTP client sends nothing else (a value from a Secret is read at each request, not here)."""
Headers = Annotated[dict[HeaderName, HeaderValue | SecretReference], Field(max_length=64)]


def placeholders(template: str) -> list[str]:
    """The ``{name}`` placeholders of ``template``, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
