# syntax=docker/dockerfile:1
# The agentrun operator image. Build: docker build -t agentrun-operator:dev .
#
# Two stages: the first builds the project's wheel and the wheels of everything the `operator`
# extra needs; the second installs only those wheels into a slim Python, without a compiler or
# pip's cache. It runs as the numeric non-root user 10001 (so runAsNonRoot can verify it) and
# works with a read-only root filesystem: no byte code is written, and HOME is /tmp, the one
# writable mount the Helm chart gives it. Agents are Python entry points (group
# agentrun.agents): extend this image with a package that registers yours.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[operator]"

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HOME=/tmp
# /wheels holds exactly the versions the build stage resolved, so nothing here is left to float.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "agentrun[operator]" \
    && groupadd --system --gid 10001 agentrun \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin agentrun
USER 10001:10001
WORKDIR /tmp
# 8080: kopf's liveness endpoint (/healthz); 9090: Prometheus metrics.
EXPOSE 8080 9090
ENTRYPOINT ["python", "-m", "agentrun.operator"]
CMD ["--standalone", "--all-namespaces", "--liveness=http://0.0.0.0:8080/healthz"]
