"""Who may scrape the metrics: the API server decides, as for controller-runtime's secure metrics.

A scrape's bearer token is sent to the API server in a TokenReview (is it valid, and whose is
it?), and that user in a SubjectAccessReview (may they ``get`` the non-resource URL scraped?
The ClusterRole ``agentrun-metrics-reader`` grants it for ``/metrics``). The operator so keeps no
list of scrapers and honours every kind of token the cluster does, revocation included.

Both answers are kept for a while, by a hash of the token (never the token itself) and the
path: a scraper that comes back every few seconds costs no API request until they expire, a
refusal expires sooner than a grant so that a newly bound role counts soon, and the cache holds
at most ``CACHED`` answers so that a flood of made-up tokens cannot grow it. Answers the API
server could not give are not kept. The token is never logged.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import threading
import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

logger = logging.getLogger(__name__)

ALLOWED_FOR = 60.0
"""Seconds a granted scrape is remembered: a revoked token or role still scrapes this long."""
REFUSED_FOR = 10.0
"""Seconds a refused scrape is remembered: a newly granted scraper waits this long at most."""
CACHED = 256
"""Answers kept at most: far more scrapers than one installation has."""


class Verdict(enum.Enum):
    """What a scrape gets, as the HTTP status it is answered with."""

    ALLOWED = 200
    UNAUTHENTICATED = 401
    FORBIDDEN = 403
    UNREVIEWED = 503


class ScrapeReviews:
    """Asks the API server about each scraper, and remembers its answers for a while."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self._authentication = client.AuthenticationV1Api(api_client)
        self._authorization = client.AuthorizationV1Api(api_client)
        self._answers: dict[tuple[bytes, str], tuple[float, Verdict]] = {}
        self._lock = threading.Lock()

    def verdict(self, token: str, path: str) -> Verdict:
        """Whether the holder of ``token`` may ``get`` ``path``, from the cache or the API server.

        Args:
            token: the scrape's bearer token, empty when it sent none.
            path: the URL path it asks for.

        Returns:
            ``UNAUTHENTICATED`` for no or an invalid token, ``FORBIDDEN`` for a user without the
            grant, ``UNREVIEWED`` when the API server did not answer, else ``ALLOWED``.
        """
        if not token:
            return Verdict.UNAUTHENTICATED
        key = (hashlib.sha256(token.encode()).digest(), path)
        now = time.monotonic()
        with self._lock:
            kept = self._answers.get(key)
            if kept is not None and kept[0] > now:
                return kept[1]
        try:
            verdict = self._review(token, path)
        except (ApiException, HTTPError) as error:
            status = getattr(error, "status", None) or type(error).__name__
            logger.warning("a metrics scrape could not be reviewed: the API server said %s", status)
            return Verdict.UNREVIEWED
        self._keep(key, verdict, now)
        return verdict

    def _review(self, token: str, path: str) -> Verdict:
        reviewed = self._authentication.create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        )
        status = reviewed.status
        if status is None or not status.authenticated or status.user is None:
            return Verdict.UNAUTHENTICATED
        user = status.user
        asked = self._authorization.create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=user.username,
                    groups=user.groups,
                    uid=user.uid,
                    extra=user.extra,
                    non_resource_attributes=client.V1NonResourceAttributes(path=path, verb="get"),
                )
            )
        )
        allowed = asked.status is not None and asked.status.allowed
        return Verdict.ALLOWED if allowed else Verdict.FORBIDDEN

    def _keep(self, key: tuple[bytes, str], verdict: Verdict, now: float) -> None:
        lasts = ALLOWED_FOR if verdict is Verdict.ALLOWED else REFUSED_FOR
        with self._lock:
            if len(self._answers) >= CACHED:
                self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
                while len(self._answers) >= CACHED:
                    del self._answers[next(iter(self._answers))]
            self._answers[key] = (now + lasts, verdict)
