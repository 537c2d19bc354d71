"""How many Kubernetes calls a replica has in flight is a setting (``AGENTRUN_KUBE_THREADS``), and
so are the form transcript segments are written in (``AGENTRUN_SEGMENT_FORM``), the egress
policy (``AGENTRUN_EGRESS_ALLOW``, ``AGENTRUN_EGRESS_CLUSTER_RANGES``) and whether its metrics
are secure (``AGENTRUN_METRICS_SECURE``).

``make bench-agents`` shows why: with hundreds of runs in flight, 32 threads make status writes
wait for a thread, and a replica on a faster API server is served by more.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrun._errors import ConfigurationError
from agentrun._history import SegmentForm
from agentrun.operator._config import OperatorConfig


def test_the_pool_is_32_threads_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.delenv("AGENTRUN_KUBE_THREADS", raising=False)
    assert OperatorConfig.from_environment().kube_threads == 32
    monkeypatch.setenv("AGENTRUN_KUBE_THREADS", "128")
    assert OperatorConfig.from_environment().kube_threads == 128
    monkeypatch.setenv("AGENTRUN_KUBE_THREADS", "0")
    with pytest.raises(ValidationError, match="kube_threads"):
        OperatorConfig.from_environment()


def test_the_segment_form_is_zstd_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.delenv("AGENTRUN_SEGMENT_FORM", raising=False)
    assert OperatorConfig.from_environment().segment_form is SegmentForm.ZSTD
    monkeypatch.setenv("AGENTRUN_SEGMENT_FORM", "deflate")
    assert OperatorConfig.from_environment().segment_form is SegmentForm.DEFLATE
    monkeypatch.setenv("AGENTRUN_SEGMENT_FORM", "zlib-json")
    assert OperatorConfig.from_environment().segment_form is SegmentForm.ZLIB_JSON
    monkeypatch.setenv("AGENTRUN_SEGMENT_FORM", "zlib")
    with pytest.raises(ConfigurationError, match=r"AGENTRUN_SEGMENT_FORM='zlib'.*zlib-json"):
        OperatorConfig.from_environment()


def test_the_egress_policy_refuses_the_cluster_and_the_api_server_unless_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.delenv("AGENTRUN_EGRESS_ALLOW", raising=False)
    monkeypatch.delenv("AGENTRUN_EGRESS_CLUSTER_RANGES", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "203.0.113.7")  # a public address, as on EKS
    policy = OperatorConfig.from_environment().egress
    assert policy.why_refused("203.0.113.7") == "the API server"
    assert policy.why_refused("10.43.0.10") == "cluster-internal"
    assert policy.why_refused("127.0.0.1") == "loopback"
    assert policy.why_refused("203.0.113.8") is None

    monkeypatch.setenv("AGENTRUN_EGRESS_ALLOW", "http://vllm.models.svc:8000/v1, 10.43.0.0/24")
    monkeypatch.setenv("AGENTRUN_EGRESS_CLUSTER_RANGES", "10.42.0.0/16,10.43.0.0/16")
    policy = OperatorConfig.from_environment().egress
    assert policy.why_refused("10.43.0.10") is None
    assert policy.why_refused("10.42.0.10") == "cluster-internal"
    assert policy.why_refused("10.44.0.10") is None
    assert policy.trusts("vllm.models.svc")


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("AGENTRUN_EGRESS_ALLOW", "10.0.0.0/8,not a host", "AGENTRUN_EGRESS_ALLOW=.*'not a host'"),
        ("AGENTRUN_EGRESS_ALLOW", "gopher://x/", "AGENTRUN_EGRESS_ALLOW=.*'gopher://x/'"),
        ("AGENTRUN_EGRESS_CLUSTER_RANGES", "10.0.0.0/8,10.300.0.0/16", "CLUSTER_RANGES=.*'10.300"),
    ],
)
def test_a_bad_egress_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=said):
        OperatorConfig.from_environment()


def test_metrics_are_secure_unless_told_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.delenv("AGENTRUN_METRICS_SECURE", raising=False)
    assert OperatorConfig.from_environment().metrics_secure is True
    monkeypatch.setenv("AGENTRUN_METRICS_SECURE", "false")
    assert OperatorConfig.from_environment().metrics_secure is False
    # A typo must not switch the guard off, nor be taken for on: it is refused.
    monkeypatch.setenv("AGENTRUN_METRICS_SECURE", "flase")
    with pytest.raises(ConfigurationError, match="AGENTRUN_METRICS_SECURE='flase'"):
        OperatorConfig.from_environment()
