"""Agent manifests the kube tests apply: a declared agent on the fake OpenAI server, its key read
from a Secret (annotated for the Agents that may use it), written once for every test module that
declares one."""

from __future__ import annotations

import json
import textwrap

AGENT_SECRETS_CHECKED = 16
"""The distinct Secrets the chart's policy ``agentrun-agent-secrets`` checks of one Agent (its
``$checked``); an Agent that references more is refused."""


def openai_agent(name: str, url: str, *, secret: str, instructions: str, more: str = "") -> str:
    """An Agent named ``name`` whose model is ``gpt-4o-mini`` at ``url`` with the key in the
    ``openai`` key of Secret ``secret``; ``more``: further lines of its spec, as YAML."""
    head = textwrap.dedent(f"""\
        apiVersion: agentrun.dev/v1alpha1
        kind: Agent
        metadata:
          name: {name}
        spec:
          model:
            provider: openai
            name: gpt-4o-mini
            baseURL: {url}
            apiKey:
              valueFrom:
                secretKeyRef: {{name: {secret}, key: openai}}
            price: {{inputMicrosPerMillion: 150000, outputMicrosPerMillion: 600000}}
            maxRetries: 0
          instructions: {instructions}
        """)
    return head + textwrap.indent(textwrap.dedent(more), "  ")


def agent_secret(name: str, values: dict[str, str], *, agents: str = "*") -> str:
    """A Secret named ``name`` holding ``values``, annotated ``agentrun.dev/agents: <agents>``
    (the operator uses a Secret only for the Agents it lists, ``*`` for all), for
    ``kubectl apply -f -``."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "annotations": {"agentrun.dev/agents": agents}},
            "stringData": values,
        }
    )
