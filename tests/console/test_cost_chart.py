"""The run page's cost chart, drawn from the ledger's charges (``CostChart.of``)."""

from __future__ import annotations

from agentrun.console._timeline import CostChart


def test_the_chart_is_the_cumulative_cost_of_each_iteration() -> None:
    chart = CostChart.of([("model:a:0", 100), ("model:a:1", 300), ("model:a:2", 100)])
    assert chart is not None
    assert (chart.last, chart.total_micros) == (2, 500)
    # x spreads the iterations over the width; y falls as the total rises (SVG's y points down)
    assert chart.points == "0.0,64.0 180.0,16.0 360.0,0.0"


def test_a_call_made_again_after_a_crash_counts_in_both_executions() -> None:
    chart = CostChart.of([("model:a:0", 100), ("model:a:1", 200), ("model:b:1", 200)])
    assert chart is not None
    assert chart.total_micros == 500


def test_iterations_are_read_as_numbers_and_other_charges_left_out() -> None:
    # charge ids come back ordered as text: model:a:10 before model:a:2
    charges = [("model:a:0", 1), ("model:a:10", 1), ("model:a:2", 1), ("tool:refund", 99)]
    chart = CostChart.of(charges)
    assert chart is not None
    assert (chart.last, chart.total_micros) == (10, 3)


def test_fewer_than_two_iterations_draw_nothing() -> None:
    assert CostChart.of([]) is None
    assert CostChart.of([("model:a:0", 100)]) is None
    assert CostChart.of([("not-a-model-call", 5), ("model:a:x", 5)]) is None
