# The agentrun operator image. Build: docker build -t agentrun-operator:dev .
#
# Two stages: the first builds the project's wheel and the wheels of everything the `operator`
# extra needs; the second installs only those wheels into a virtualenv (/opt/agentrun, first on
# PATH), without a compiler or pip's cache. It runs as the numeric non-root user 10001 (so
# runAsNonRoot can verify it) and works with a read-only root filesystem: no byte code is
# written, and HOME is /tmp, the one writable mount the Helm chart gives it. Agents are Python
# entry points (group agentrun.agents): extend this image with a package that registers yours.
#
# BASE_IMAGE is any image with Python 3.11 or later and its venv module; the default is the
# public slim Python image. hack/images.sh passes a Debian base it makes without a registry.
# pip installs into virtualenvs only, so a distribution's "externally managed" Python is fine.
# The optional build secret `ca-certificates` (a PEM bundle) is what pip then trusts, for a
# network whose proxy re-signs TLS: docker build --secret id=ca-certificates,src=BUNDLE .

ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN --mount=type=secret,id=ca-certificates \
    python3 -m venv /opt/build \
    && if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
    && /opt/build/bin/pip wheel --no-cache-dir --wheel-dir /wheels ".[operator]"

FROM ${BASE_IMAGE}
ENV PATH=/opt/agentrun/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HOME=/tmp
# /wheels holds exactly the versions the build stage resolved, so nothing here is left to float.
# tini is PID 1 (the entry point): the kernel drops a signal sent to a container's PID 1 unless
# that process has a handler for it, and Python has none for SIGTERM until the operator's entry
# point installs one, so a pod deleted while starting would run for its whole grace period. tini
# handles every signal and passes it on to the operator, which exits at once when it comes before
# its own handler. Debian's package; hack/images.sh's base has it already (no apt there).
# hadolint ignore=DL3008,DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    if ! command -v tini >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends tini \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/agentrun \
    && pip install --no-cache-dir --no-index --find-links=/wheels "agentrun[operator]" \
    && groupadd --system --gid 10001 agentrun \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin agentrun
USER 10001:10001
WORKDIR /tmp
# 8080: kopf's liveness endpoint (/healthz); 9090: Prometheus metrics.
EXPOSE 8080 9090
ENTRYPOINT ["tini", "--", "python", "-m", "agentrun.operator"]
CMD ["--standalone", "--all-namespaces", "--liveness=http://0.0.0.0:8080/healthz"]
