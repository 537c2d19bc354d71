"""Markers by directory, in one place: what a test needs follows from where it lives.

``make test-fast`` deselects every test that needs a server (``-m "not kube and not redis and not
postgres and not slow"``), so a test that starts kube-apiserver, Redis or PostgreSQL must live in
the directory named for it; a marker written by hand on a file could be forgotten, a directory
cannot. tests/e2e (a real cluster) runs only when ``-m`` names ``e2e``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

_HERE = Path(__file__).parent

# directory under tests/ -> the markers every test in it carries
_MARKERS_BY_DIRECTORY: dict[str, tuple[str, ...]] = {
    "kube": ("kube", "redis"),  # the operator's tests also start Redis as its store
    "redis": ("redis",),
    "postgres": ("postgres",),
    "crash": ("slow",),
    "e2e": ("e2e",),  # a real cluster: `make e2e` only, never `make test`
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(item.path).resolve().relative_to(_HERE.resolve())
        for marker in _MARKERS_BY_DIRECTORY.get(relative.parts[0], ()):
            item.add_marker(marker)
    # The end-to-end suite starts a whole cluster (and builds it first on a fresh machine): it
    # runs only when a marker expression names it (`make e2e`: -m e2e), never by default.
    if "e2e" not in (config.option.markexpr or ""):
        deselected = [item for item in items if item.get_closest_marker("e2e")]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not item.get_closest_marker("e2e")]


@pytest.fixture
def tenant() -> str:
    """A tenant of the test's own: one server serves a whole session of tests, which keep apart
    by tenant."""
    return f"tenant-{uuid.uuid4().hex[:12]}"
