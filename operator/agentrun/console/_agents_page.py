"""The Agents page: each Agent's probe, its tools and what a crash during each leads to, the
revision new runs pin, and its runs.

Agents are read from the API server as the person (across namespaces when they may list them
cluster-wide, else in each namespace the console knows runs of where they may), so the page shows
exactly the Agents ``kubectl get agents`` would show them; the console keeps no watch of Agents
of its own. Each Agent's runs come from the runs index, counted by state.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from agentrun.console._pages import visible_rows
from agentrun.console._web import console_of, person_of, render, sign_in_first
from agentrun.operator._agent_resource import AGENT_PLURAL
from agentrun.operator._resource import GROUP, VERSION


def _path(namespace: str = "") -> str:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{GROUP}/{VERSION}{scope}/{AGENT_PLURAL}"


async def agents_page(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return sign_in_first(request)
    console = console_of(request)
    rows = await visible_rows(request, person)
    agents: list[dict[str, Any]] = []
    refused: list[str] = []
    everywhere = await console.apiserver.call("GET", _path(), person.caller)
    if everywhere.ok:
        agents = list(everywhere.body.get("items") or ())
    else:
        for namespace in sorted({row.namespace for row in rows}):
            answer = await console.apiserver.call("GET", _path(namespace), person.caller)
            if answer.ok:
                agents.extend(answer.body.get("items") or ())
            else:
                refused.append(f"{namespace}: {answer.message}")
    runs: dict[tuple[str, str], Counter[str]] = {}
    for row in rows:
        runs.setdefault((row.namespace, row.agent), Counter())[row.state] += 1
    agents.sort(key=lambda a: (a["metadata"].get("namespace", ""), a["metadata"]["name"]))
    return render(
        request,
        "agents.html",
        agents=agents,
        runs=runs,
        refused=refused,
        now=datetime.now(UTC),
    )
