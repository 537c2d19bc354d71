"""``agentrun_runs``: every run counted under the reason it shows now, once, and gone with it.

``Metrics.run_is`` moves a run between reasons at every watch event instead of recounting every
run (that made a replica's CPU per event grow with the runs it knows); what the gauge says must
stay what a recount would say.
"""

from __future__ import annotations

from agentrun.operator._metrics import Metrics


def _gauge(metrics: Metrics) -> dict[str, float]:
    return {
        sample.labels["reason"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "agentrun_runs"
        for sample in family.samples
    }


def test_the_gauge_counts_each_run_under_its_current_reason() -> None:
    metrics = Metrics()
    for uid in ("a", "b", "c"):
        metrics.run_is(uid, "Pending")
    metrics.run_is("a", "Pending")  # an event that changes nothing
    assert _gauge(metrics) == {"Pending": 3}
    metrics.run_is("a", "Running")
    metrics.run_is("b", "Running")
    metrics.run_is("a", "Completed")
    assert _gauge(metrics) == {"Pending": 1, "Running": 1, "Completed": 1}


def test_a_reason_no_run_shows_leaves_the_gauge() -> None:
    metrics = Metrics()
    metrics.run_is("a", "Pending")
    metrics.run_is("b", "Completed")
    metrics.run_is("a", "Completed")
    metrics.run_is("b", None)
    metrics.run_is("ghost", None)  # a DELETED event of a run never seen
    assert _gauge(metrics) == {"Completed": 1}
    metrics.run_is("a", None)
    assert _gauge(metrics) == {}
