"""``--kube``: answer for a run in a cluster by patching its AgentRun, through ``kubectl``.

The operator reads people's answers from the AgentRun's spec (``spec.approvals``,
``spec.resolutions``); these commands append one, after checking that the run is waiting on
exactly that. They shell out to ``kubectl`` so that the user's context, namespace defaults and
credentials apply as they do to every other command they type, and the kit needs no Kubernetes
client. The patch is guarded by the object's ``resourceVersion``, so an answer is never
appended to a run that changed since it was checked.

The answer's ``by`` is not typed by anyone: it is the user the API server authenticates these
very credentials as (``kubectl auth whoami``, a SelfSubjectReview), since the chart's admission
policy refuses an entry naming anybody else.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from agentrun._decisions import append_operations
from agentrun._errors import AgentRunError, ConfigurationError
from agentrun._outcomes import Outcome


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
        # kubectl's own last line is the reason ("Error from server (NotFound): ..."); the
        # lines before it are warnings and retries nobody needs to read here.
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise KubectlError(f"kubectl {' '.join(argv[1:])} failed: {lines[-1]}")
    return done.stdout


def _agentrun(namespace: str | None, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_kubectl(namespace, "get", "agentrun", name, "-o", "json"))
    return found


def whoami(namespace: str | None) -> str:
    """The user the API server authenticates the current kubectl credentials as."""
    review: dict[str, Any] = json.loads(_kubectl(namespace, "auth", "whoami", "-o", "json"))
    username = str((review.get("status") or {}).get("userInfo", {}).get("username") or "")
    if not username:
        raise KubectlError(
            "kubectl auth whoami named no user; the API server must serve SelfSubjectReview "
            "(authentication.k8s.io/v1, Kubernetes 1.28+) for --kube to know who is answering"
        )
    return username


def _append(
    namespace: str | None, current: dict[str, Any], field: str, entry: dict[str, Any]
) -> None:
    operations = append_operations(current, field, entry)
    _kubectl(
        namespace,
        "patch",
        "agentrun",
        current["metadata"]["name"],
        "--type=json",
        "-p",
        json.dumps(operations),
    )


def approve(
    namespace: str | None, name: str, request: str, *, approved: bool, reason: str
) -> tuple[str, str]:
    """Append a decision for ``request``; the tool it was for, and who decided."""
    current = _agentrun(namespace, name)
    pending = (current.get("status") or {}).get("pendingApproval") or {}
    if pending.get("requestId") != request:
        now = f"approval {pending['requestId']}" if pending else "nothing"
        raise ConfigurationError(
            f"AgentRun {name} is not waiting on approval {request!r} (it "
            f"is waiting on {now}); check `kubectl describe agentrun {name}`"
        )
    by = whoami(namespace)
    entry: dict[str, Any] = {
        "requestId": request,
        "decision": "approve" if approved else "deny",
        "by": by,
    }
    if reason:
        entry["reason"] = reason
    _append(namespace, current, "approvals", entry)
    return str(pending.get("tool", "the call")), by


def resolve(
    namespace: str | None, name: str, call_id: str, *, ran: bool, result: str | None
) -> tuple[str, str]:
    """Append an answer for ``call_id``; the tool it was a call of, and who answered."""
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
    by = whoami(namespace)
    entry: dict[str, Any] = {"callId": call_id, "outcome": "ran" if ran else "didNotRun", "by": by}
    if ran:
        entry["result"] = result
    _append(namespace, current, "resolutions", entry)
    return str(calls[call_id]), by
