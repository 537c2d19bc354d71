"""``agentrun_quota_*``: each RunQuota's limits and status as the watch shows them, gone with it.

Every replica sets them from the quota's watch events, whichever replica writes its status, so
each reports the same numbers (aggregate with ``max``, as ``agentrun_runs``).
"""

from __future__ import annotations

from typing import Any

from agentrun.operator._metrics import Metrics


def _gauges(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    return {
        (family.name, sample.labels["namespace"], sample.labels["runquota"]): sample.value
        for family in metrics.registry.collect()
        if family.name.startswith("agentrun_quota_")
        for sample in family.samples
    }


def _quota(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"namespace": "team", "name": "q"}, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def test_a_quota_shows_its_limits_and_what_its_status_counts() -> None:
    metrics = Metrics()
    spec = {"maxActiveRuns": 5, "budget": {"window": "24h", "maxTokens": 9000}}
    metrics.quota_is("team", "q", _quota(spec))  # no status written yet: only the limits
    assert _gauges(metrics) == {
        ("agentrun_quota_max_active_runs", "team", "q"): 5,
        ("agentrun_quota_budget_tokens", "team", "q"): 9000,
    }
    status = {"active": 3, "queued": 7, "spentTokens": 1200, "spentMicros": 40, "queuedX": 1}
    metrics.quota_is("team", "q", _quota(spec, status))
    assert _gauges(metrics) == {
        ("agentrun_quota_max_active_runs", "team", "q"): 5,
        ("agentrun_quota_budget_tokens", "team", "q"): 9000,
        ("agentrun_quota_active_runs", "team", "q"): 3,
        ("agentrun_quota_queued_runs", "team", "q"): 7,
        ("agentrun_quota_spent_tokens", "team", "q"): 1200,
        ("agentrun_quota_spent_micros", "team", "q"): 40,
    }


def test_a_limit_dropped_from_the_spec_leaves_its_gauge_and_a_deleted_quota_every_one() -> None:
    metrics = Metrics()
    metrics.quota_is("team", "q", _quota({"maxActiveRuns": 5}, {"active": 1, "queued": 0}))
    metrics.quota_is("other", "q", _quota({"maxActiveRuns": 2}))
    metrics.quota_is("team", "q", _quota({"budget": {"maxCostMicros": 10}}, {"active": 1}))
    assert _gauges(metrics) == {
        ("agentrun_quota_budget_micros", "team", "q"): 10,
        ("agentrun_quota_active_runs", "team", "q"): 1,
        ("agentrun_quota_max_active_runs", "other", "q"): 2,
    }
    metrics.quota_is("team", "q", None)
    metrics.quota_is("ghost", "q", None)  # a DELETED event of a quota never seen
    assert _gauges(metrics) == {("agentrun_quota_max_active_runs", "other", "q"): 2}


def test_a_value_that_is_not_a_count_has_no_sample() -> None:
    """A quota stored under an older CRD, or edited by hand around its schema, shows nothing
    rather than a wrong number or an error in the watch handler."""
    metrics = Metrics()
    metrics.quota_is(
        "team", "q", _quota({"maxActiveRuns": "5", "budget": "lots"}, {"active": True})
    )
    assert _gauges(metrics) == {}
