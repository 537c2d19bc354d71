"""The operator's settings, from its environment (the Helm chart sets them)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket

from pydantic import Field

from agentrun._base import FrozenModel
from agentrun._errors import ConfigurationError
from agentrun._history import SegmentForm
from agentrun.operator._kube_secrets import DEFAULT_MAX_AGE
from agentrun.operator._resource import CONTROLLER_PATTERN
from agentrun.runner._egress import CLUSTER_RANGES, EgressPolicy

DEFAULT_CONTROLLER = "agentrun.dev/operator"
"""The controller name of an install that does not set ``AGENTRUN_CONTROLLER_NAME``."""


class OperatorConfig(FrozenModel):
    store_url: str
    worker_id: str = Field(min_length=1)
    controller_name: str = Field(
        default=DEFAULT_CONTROLLER, max_length=253, pattern=CONTROLLER_PATTERN
    )
    metrics_port: int = Field(default=9090, ge=0, le=65535)
    metrics_secure: bool = True
    """Metrics over HTTPS to scrapers the API server vouches for (``metrics_server``); False:
    plain HTTP to anybody who reaches the port."""
    metrics_cert_dir: str = ""
    """A directory with the metrics endpoint's ``tls.crt`` and ``tls.key``; empty: a certificate
    the replica signs itself at start (``metrics_tls``)."""
    lease_ttl: float = Field(default=60.0, gt=0)
    lease_renew_within: float = Field(default=20.0, gt=0)
    poll_interval: float = Field(default=1.0, gt=0)
    kube_threads: int = Field(default=32, ge=1, le=1024)
    """Threads of ``KubeApi``'s pool: the Kubernetes calls one replica has in flight at most."""
    max_active_runs: int = Field(default=0, ge=0)
    """Runs this replica works on at once, 0 for no limit (``scheduler``)."""
    secret_max_age: float = Field(default=DEFAULT_MAX_AGE, ge=0)
    """Seconds a Secret read is used for before it is read again, 0 at every request
    (``kube_secrets``)."""
    accept_unauthenticated_decisions: bool = False
    """Act on approvals and resolutions even where the API server does not authenticate them
    (``decision_authentication``): anyone who may patch a run may then decide in anyone's
    name. Unsafe; the chart's ``accessControl.acceptUnauthenticatedDecisions``."""
    settling: bool = True
    """Settle undecidable calls whose tools declare a way to (``settle`` on the Agent) by asking
    their services (``settling``); False leaves every one to a person. The chart's
    ``settling.enabled``."""
    segment_form: SegmentForm = SegmentForm.ZSTD
    """The form transcript segments are written in (``SegmentForm``): ``zlib-json`` while
    replicas of chart 0.2.0 or earlier may still take runs over."""
    egress: EgressPolicy = EgressPolicy()
    """Where the operator may connect for an Agent (``agentrun.runner._egress``)."""

    @classmethod
    def from_environment(cls) -> OperatorConfig:
        store = os.environ.get("AGENTRUN_STORE_URL") or os.environ.get("AGENTRUN_STORE")
        if not store:
            from agentrun._errors import ConfigurationError

            raise ConfigurationError(
                "AGENTRUN_STORE_URL is not set; point it at the Redis or PostgreSQL store "
                "(the Helm chart sets it from the store Secret)"
            )
        controller = os.environ.get("AGENTRUN_CONTROLLER_NAME") or DEFAULT_CONTROLLER
        if len(controller) > 253 or not re.match(CONTROLLER_PATTERN, controller):
            from agentrun._errors import ConfigurationError

            raise ConfigurationError(
                f"AGENTRUN_CONTROLLER_NAME={controller!r} is not a controller name: a DNS "
                f"subdomain, a slash and a name, like {DEFAULT_CONTROLLER} (the chart's value "
                "sets it)"
            )
        pod = os.environ.get("AGENTRUN_WORKER_ID") or os.environ.get("HOSTNAME") or "operator"
        return cls(
            store_url=store,
            # Unique per process, not per pod: a restarted container is a new holder.
            worker_id=f"{pod}-{os.getpid()}-{secrets.token_hex(2)}",
            controller_name=controller,
            metrics_port=int(os.environ.get("AGENTRUN_METRICS_PORT", "9090")),
            metrics_secure=_switch("AGENTRUN_METRICS_SECURE", default=True),
            metrics_cert_dir=os.environ.get("AGENTRUN_METRICS_CERT_DIR", ""),
            lease_ttl=float(os.environ.get("AGENTRUN_LEASE_TTL", "60")),
            lease_renew_within=float(os.environ.get("AGENTRUN_LEASE_RENEW_WITHIN", "20")),
            poll_interval=float(os.environ.get("AGENTRUN_POLL_INTERVAL", "1")),
            kube_threads=int(os.environ.get("AGENTRUN_KUBE_THREADS", "32")),
            max_active_runs=int(os.environ.get("AGENTRUN_MAX_ACTIVE_RUNS", "0")),
            secret_max_age=float(os.environ.get("AGENTRUN_SECRET_MAX_AGE", str(DEFAULT_MAX_AGE))),
            accept_unauthenticated_decisions=_switch(
                "AGENTRUN_ACCEPT_UNAUTHENTICATED_DECISIONS", default=False
            ),
            settling=_switch("AGENTRUN_SETTLING", default=True),
            segment_form=_segment_form(os.environ.get("AGENTRUN_SEGMENT_FORM")),
            egress=_egress_policy(),
        )


def _switch(variable: str, default: bool) -> bool:
    """An on/off setting: ``true`` or ``false``; anything else is refused rather than guessed,
    since a typo must neither switch off the one guarding an endpoint nor switch on the one
    that accepts unauthenticated decisions."""
    given = os.environ.get(variable, "").strip().lower()
    if not given:
        return default
    if given not in ("true", "false"):
        raise ConfigurationError(f"{variable}={given!r} is neither true nor false")
    return given == "true"


def _segment_form(given: str | None) -> SegmentForm:
    if not given:
        default: SegmentForm = OperatorConfig.model_fields["segment_form"].default
        return default
    try:
        return SegmentForm(given)
    except ValueError:
        raise ConfigurationError(
            f"AGENTRUN_SEGMENT_FORM={given!r} is not a segment form: use "
            f"{' or '.join(form.value for form in SegmentForm)} (the chart's segmentForm sets it)"
        ) from None


def _listed(variable: str, default: str = "") -> list[str]:
    return [each.strip() for each in os.environ.get(variable, default).split(",") if each.strip()]


def _api_server() -> list[tuple[str, str]]:
    """The API server's addresses as a pod sees it: the address its environment names and what
    ``kubernetes.default.svc`` resolves to (read only inside a cluster, where that name exists)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    if not host:
        return []
    addresses = {host}
    with contextlib.suppress(OSError):  # the environment's address is refused all the same
        found = socket.getaddrinfo("kubernetes.default.svc", 443)
        addresses |= {str(info[4][0]) for info in found}
    return [(address, "the API server") for address in sorted(addresses)]


def _egress_policy() -> EgressPolicy:
    """The policy the chart's ``egress`` values set: what ``AGENTRUN_EGRESS_ALLOW`` allows, and
    the API server and ``AGENTRUN_EGRESS_CLUSTER_RANGES`` (unset: ``CLUSTER_RANGES``) refused."""
    allow = _listed("AGENTRUN_EGRESS_ALLOW")
    ranges = _listed("AGENTRUN_EGRESS_CLUSTER_RANGES", ",".join(CLUSTER_RANGES))
    try:
        EgressPolicy.of([], [(network, "") for network in ranges])
    except ValueError as error:
        raise ConfigurationError(
            f"AGENTRUN_EGRESS_CLUSTER_RANGES={','.join(ranges)!r}: {error}; list CIDRs, comma "
            "separated (the chart's egress.clusterRanges sets it)"
        ) from None
    try:
        return EgressPolicy.of(
            allow, [*_api_server(), *((network, "cluster-internal") for network in ranges)]
        )
    except ValueError as error:
        raise ConfigurationError(
            f"AGENTRUN_EGRESS_ALLOW={','.join(allow)!r}: {error}; list URL prefixes, CIDRs or "
            "host names, comma separated (the chart's egress.allow sets it)"
        ) from None
