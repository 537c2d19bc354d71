"""The secure metrics endpoint answers only scrapers the API server vouches for, over HTTPS.

A real operator replica serves its metrics as the chart's default does (``metrics.secure``):
its own certificate, and each scrape's bearer token reviewed by the real API server (TokenReview,
then SubjectAccessReview of ``get`` on the path). ServiceAccounts with real tokens scrape it: one
bound to the chart's ClusterRole ``agentrun-metrics-reader`` (installed by the session fixture)
reads the metrics, one without it is refused, and a scrape without a valid token is asked to
authenticate. Plain HTTP is not served, and a scraper that comes back often costs the API server
no review each time: the API server's own request counter says how many it made. Given a
certificate (the chart's ``metrics.certSecret``, mounted), a replica serves it, and a scraper
verifies it.
"""

from __future__ import annotations

import http.client
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.kube import ControlPlane, Kube, make_certificates
from tests.support.operator import Operators, Replica, operator_pool, wait_for
from tests.support.redis_server import RedisServer

SCRAPES = 20
"""Scrapes of one scraper in a row: a Prometheus at a short interval for a minute or so."""


@pytest.fixture(scope="module")
def replica(
    kube: Kube, redis: RedisServer, effects: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replica]:
    pool: Operators = operator_pool(
        kube, redis, effects, tmp_path_factory, AGENTRUN_METRICS_SECURE="true"
    )
    started = pool.start("secure")
    try:
        wait_for("the metrics endpoint", lambda: _serves(started), 60, pool.logs)
        yield started
    finally:
        pool.stop_all()


def _serves(replica: Replica) -> bool:
    try:
        replica.scrape()
    except OSError:
        return False
    return True


def _token(kube: Kube, service_account: str, reader: bool) -> str:
    kube.kubectl("create", "serviceaccount", service_account)
    if reader:
        kube.kubectl(
            "create", "clusterrolebinding", f"{kube.namespace}-{service_account}",
            "--clusterrole=agentrun-metrics-reader",
            f"--serviceaccount={kube.namespace}:{service_account}",
        )  # fmt: skip
    return kube.kubectl("create", "token", service_account).stdout.strip()


def _reviews(kube: Kube) -> int:
    """TokenReviews the API server has served so far."""
    plane = kube.control_plane
    assert isinstance(plane, ControlPlane), "the request counter is the envtest plane's"
    return sum(n for key, n in plane.requests().items() if "tokenreviews" in key)


def test_a_scrape_without_a_valid_token_is_asked_to_authenticate(replica: Replica) -> None:
    status, body = replica.scrape()
    assert status == 401, body
    assert "agentrun_" not in body
    status, body = replica.scrape("not-a-token-the-api-server-issued")
    assert status == 401, body
    assert "agentrun_" not in body


def test_a_service_account_without_the_reader_role_is_forbidden(
    kube: Kube, replica: Replica
) -> None:
    status, body = replica.scrape(_token(kube, "stranger", reader=False))
    assert status == 403, body
    assert "agentrun-metrics-reader" in body
    assert "agentrun_" not in body.replace("agentrun-metrics-reader", "")


def test_the_reader_role_reads_the_metrics_and_only_them(kube: Kube, replica: Replica) -> None:
    token = _token(kube, "prometheus", reader=True)
    status, body = replica.scrape(token)
    assert status == 200, body
    assert "agentrun_lease_acquisitions_total" in body
    # The role grants /metrics, not whatever else the exposition would answer on.
    assert replica.scrape(token, "/debug")[0] == 403


def test_plain_http_is_not_served(replica: Replica) -> None:
    with pytest.raises((http.client.HTTPException, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{replica.metrics_port}/metrics", timeout=10)


def test_a_frequent_scraper_is_reviewed_once(kube: Kube, replica: Replica) -> None:
    token = _token(kube, "frequent", reader=True)
    before = _reviews(kube)
    for _ in range(SCRAPES):
        assert replica.scrape(token)[0] == 200
    assert _reviews(kube) - before == 1


def test_a_given_certificate_is_served_and_verifies(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
    replica: Replica,
) -> None:
    made = tmp_path_factory.mktemp("metrics-ca")
    make_certificates(made)
    mounted = tmp_path_factory.mktemp("metrics-tls")  # as a kubernetes.io/tls Secret's keys
    shutil.copy(made / "server.crt", mounted / "tls.crt")
    shutil.copy(made / "server.key", mounted / "tls.key")
    pool = operator_pool(
        kube, redis, effects, tmp_path_factory,
        AGENTRUN_METRICS_SECURE="true", AGENTRUN_METRICS_CERT_DIR=str(mounted),
    )  # fmt: skip
    given = pool.start("certified")
    try:
        wait_for("the metrics endpoint", lambda: _serves(given), 60, pool.logs)
        status, body = given.scrape(_token(kube, "verifier", reader=True), ca=made / "ca.crt")
        assert status == 200, body
        # The self-signed certificate of a replica given none does not verify.
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            replica.scrape(ca=made / "ca.crt")
    finally:
        pool.stop_all()
