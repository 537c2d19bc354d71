"""An agent whose model is a fake chat-completions server on loopback, for the CLI tests of a
provider that fails: registered through ``AGENTRUN_AGENT_MODULES``, the server's URL in
``AGENTRUN_TEST_PROVIDER_URL``."""

from __future__ import annotations

import os

from agentrun import AgentDefinition, OpenAIChatProvider, RegisteredAgent

REMOTE = RegisteredAgent(
    definition=AgentDefinition(name="remote", instructions="Answer.", model="m"),
    provider=lambda: OpenAIChatProvider(os.environ["AGENTRUN_TEST_PROVIDER_URL"], timeout=5),
)
