"""Prometheus metrics: what an on-call engineer graphs and alerts on.

Runs by their ``Succeeded`` reason (every replica counts every run of its install from its watch,
so each reports the same numbers: aggregate with ``max``, not ``sum``), how
attempts at runs ended (by ``Outcome``), resumes, undecidable calls, checkpoint sizes, refusals
and write latency, lease acquisitions and losses, and how long fenced status writes take and
Kubernetes calls wait for a thread of ``KubeApi``'s pool (what says that pool is too small).
Each RunQuota's limits and what its status shows (active and queued runs, spent budget), again
from the watch, the same on every replica. ``metrics_server`` serves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

SIZE_BUCKETS = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
QUOTA_GAUGES = {
    "agentrun_quota_active_runs": ("Runs of the namespace doing work", "status", "active"),
    "agentrun_quota_max_active_runs": ("The most runs active at once", "spec", "maxActiveRuns"),
    "agentrun_quota_queued_runs": ("Runs of the namespace waiting for a place", "status", "queued"),
    "agentrun_quota_spent_micros": ("Cost spent in the budget's window", "status", "spentMicros"),
    "agentrun_quota_budget_micros": ("Cost allowed a window", "budget", "maxCostMicros"),
    "agentrun_quota_spent_tokens": ("Tokens spent in the budget's window", "status", "spentTokens"),
    "agentrun_quota_budget_tokens": ("Tokens allowed a window", "budget", "maxTokens"),
}
"""Each RunQuota gauge: its help, and where in the RunQuota its value is (``budget``: its spec's
budget)."""

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
"""Seconds, from a millisecond: a status write on a quiet API server takes a few."""


class Metrics:
    """The operator's Prometheus metrics, in a registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.runs = Gauge(
            "agentrun_runs",
            "AgentRuns by the reason of their Succeeded condition",
            ["reason"],
            registry=r,
        )
        self.outcomes = Counter(
            "agentrun_outcomes",
            "Attempts at runs by how they ended (the kit's Outcome)",
            ["outcome"],
            registry=r,
        )
        self.resumes = Counter("agentrun_resumes", "Runs carried on from a checkpoint", registry=r)
        self.indeterminate = Counter(
            "agentrun_indeterminate_calls",
            "Tool calls refused as undecidable on resume",
            registry=r,
        )
        self.settled_calls = Counter(
            "agentrun_settled_calls",
            "Undecidable calls the operator asked the tool's service about, by the tool's way of "
            "settling (replay, probe) and what it concluded (ran, didNotRun, inconclusive)",
            ["mode", "outcome"],
            registry=r,
        )
        self.checkpoint_bytes = Histogram(
            "agentrun_checkpoint_bytes",
            "Size of checkpoints written",
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.checkpoint_refusals = Counter(
            "agentrun_checkpoint_refusals",
            "Checkpoints not written, by reason",
            ["reason"],
            registry=r,
        )
        self.checkpoint_seconds = Histogram(
            "agentrun_checkpoint_write_seconds",
            "Time to mask, encode and store a checkpoint",
            registry=r,
        )
        self.lease_acquisitions = Counter(
            "agentrun_lease_acquisitions", "Run leases taken by this replica", registry=r
        )
        self.lease_losses = Counter(
            "agentrun_lease_losses", "Run leases this replica lost while working", registry=r
        )
        self.status_write_seconds = Histogram(
            "agentrun_status_write_seconds",
            "Time of each status patch, from asking to the API server's answer (thread wait "
            "included), by lane: a lease holder's writes, or others (claims)",
            ["lane"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.kube_pool_wait_seconds = Histogram(
            "agentrun_kube_pool_wait_seconds",
            "Time each Kubernetes call waited for a thread of the operator's pool, by lane",
            ["lane"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.start_limit = Gauge(
            "agentrun_start_limit",
            "Runs this replica may have at work now: as many as its status writes stay quick with",
            registry=r,
        )
        self.quota_gauges = {
            name: Gauge(name, text, ["namespace", "runquota"], registry=r)
            for name, (text, _, _) in QUOTA_GAUGES.items()
        }
        self._reasons: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def run_is(self, uid: str, reason: str | None) -> None:
        """Record the run's current reason (None: it is gone) and move it between the gauge's
        reasons. Called at every watch event of every run, so it touches the two reasons that
        change, not all the runs (recounting them made a replica's CPU per event grow with the
        runs it knows: a tenth of its CPU at 1,000 runs); a reason no run has leaves the gauge."""
        was = self._reasons.pop(uid, None) if reason is None else self._reasons.get(uid)
        if reason is not None:
            self._reasons[uid] = reason
        if was == reason:
            return
        if was is not None:
            self._counts[was] -= 1
            if self._counts[was]:
                self.runs.labels(reason=was).set(self._counts[was])
            else:
                del self._counts[was]
                self.runs.remove(was)
        if reason is not None:
            self._counts[reason] = self._counts.get(reason, 0) + 1
            self.runs.labels(reason=reason).set(self._counts[reason])

    def quota_is(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> None:
        """Show a RunQuota as the watch shows it (None: it is gone). A field it does not set, or
        does not hold a number in (one stored under an older CRD), has no sample."""
        spec = _mapping(body, "spec")
        parts = {
            "spec": spec,
            "status": _mapping(body, "status"),
            "budget": _mapping(spec, "budget"),
        }
        for gauge_name, (_, part, key) in QUOTA_GAUGES.items():
            gauge = self.quota_gauges[gauge_name]
            value = parts[part].get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                gauge.labels(namespace=namespace, runquota=name).set(value)
            else:
                gauge.remove(namespace, name)


def _mapping(within: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """``within[key]`` if it is a mapping, else an empty one."""
    value = (within or {}).get(key)
    return value if isinstance(value, Mapping) else {}
