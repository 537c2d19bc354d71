"""``--kube``: answer for a run in a cluster by patching its AgentRun, through ``kubectl``.

The operator reads people's answers from the AgentRun's spec (``spec.approvals``,
``spec.resolutions``); these commands append one, after checking that the run is waiting on
exactly that. They shell out to ``kubectl`` so that the user's context, namespace defaults and
credentials apply as they do to every other command they type, and the kit needs no Kubernetes
client. The patch is guarded by the object's ``resourceVersion``, so an answer is never
appended to a run that changed since it was checked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from agentrun.decisions import ApprovalDecision
from agentrun.errors import AgentRunError, ConfigurationError
from agentrun.outcomes import Outcome


class KubectlError(AgentRunError):
    """kubectl failed (no access, the object is gone); the message is kubectl's."""

    outcome = Outcome.REFUSED


def _kubectl(namespace: str | None, *args: str, stdin: str | None = None) -> str:
    binary = shutil.which("kubectl")
    if binary is None:
        raise ConfigurationError("--kube needs kubectl on the PATH")
    argv = [binary, *(["--namespace", namespace] if namespace else []), *args]
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KubectlError(f"{' '.join(argv[1:])} failed: {done.stderr.strip()}")
    return done.stdout


def _agentrun(namespace: str | None, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_kubectl(namespace, "get", "agentrun", name, "-o", "json"))
    return found


def _append(
    namespace: str | None, current: dict[str, Any], field: str, entry: dict[str, Any]
) -> None:
    existing = (current.get("spec") or {}).get(field)
    operations = [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": current["metadata"]["resourceVersion"],
        },
        {"op": "add", "path": f"/spec/{field}/-", "value": entry}
        if existing is not None
        else {"op": "add", "path": f"/spec/{field}", "value": [entry]},
    ]
    _kubectl(
        namespace,
        "patch",
        "agentrun",
        current["metadata"]["name"],
        "--type=json",
        "-p",
        json.dumps(operations),
    )


def approve(namespace: str | None, name: str, request: str, decision: ApprovalDecision) -> str:
    current = _agentrun(namespace, name)
    pending = (current.get("status") or {}).get("pendingApproval") or {}
    if pending.get("requestId") != request:
        now = f"approval {pending['requestId']}" if pending else "nothing"
        raise ConfigurationError(
            f"AgentRun {name} is not waiting on approval {request!r} (it "
            f"is waiting on {now}); check `kubectl describe agentrun {name}`"
        )
    entry: dict[str, Any] = {
        "requestId": request,
        "decision": "approve" if decision.approved else "deny",
        "by": decision.by,
    }
    if decision.reason:
        entry["reason"] = decision.reason
    _append(namespace, current, "approvals", entry)
    return str(pending.get("tool", "the call"))


def resolve(
    namespace: str | None, name: str, call_id: str, *, ran: bool, result: str | None, by: str
) -> str:
    current = _agentrun(namespace, name)
    calls = {
        c["callId"]: c["tool"]
        for c in (current.get("status") or {}).get("indeterminateCalls") or ()
    }
    if call_id not in calls:
        listed = ", ".join(calls) or "none"
        raise ConfigurationError(
            f"AgentRun {name} has no undecidable call {call_id!r} (undecidable: {listed})"
        )
    entry: dict[str, Any] = {"callId": call_id, "outcome": "ran" if ran else "didNotRun", "by": by}
    if ran:
        entry["result"] = result
    _append(namespace, current, "resolutions", entry)
    return str(calls[call_id])
