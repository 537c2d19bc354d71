"""Markers by directory, in one place: what a test needs follows from where it lives.

``make test-fast`` deselects every test that needs a server (``-m "not kube and not redis and not
postgres and not slow"``), so a test that starts kube-apiserver, Redis or PostgreSQL must live in
the directory named for it; a marker written by hand on a file could be forgotten, a directory
cannot.
"""

from __future__ import annotations

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(item.path).resolve().relative_to(_HERE.resolve())
        for marker in _MARKERS_BY_DIRECTORY.get(relative.parts[0], ()):
            item.add_marker(marker)
