"""An agent whose model is a fake chat-completions server on loopback, for the CLI tests of a
provider that fails: registered through ``AGENTRUN_AGENT_MODULES``, the server's URL in
``AGENTRUN_TEST_PROVIDER_URL``. One attempt a call (no retries), so a failure is final at once."""

from __future__ import annotations

import os

from agentrun import AgentDefinition, RegisteredAgent
from agentrun.runner._providers.openai import OpenAIChatProvider
from agentrun.runner._spec import RequestSettings

REMOTE = RegisteredAgent(
    definition=AgentDefinition(name="remote", instructions="Answer.", model="m"),
    provider=lambda: OpenAIChatProvider(
        base_url=os.environ["AGENTRUN_TEST_PROVIDER_URL"],
        settings=RequestSettings(timeout_seconds=5, max_retries=0),
    ),
)
