"""Every relative link in README.md and docs/ leads to a file of the repository, and every
``#anchor`` to a heading of the page it names: a moved page or a renamed section fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.samples import DOCUMENTS, ROOT

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text())
    return {_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(document: Path) -> None:
    broken: list[str] = []
    for target in _LINK.findall(_FENCE.sub("", document.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto: are not this repository's
        path, _, anchor = target.partition("#")
        page = (document.parent / path).resolve() if path else document
        if not page.exists():
            broken.append(
                f"{target}: no {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}"
            )
        elif anchor and page.suffix == ".md" and anchor not in _anchors(page):
            broken.append(f"{target}: no heading for #{anchor} in {page.relative_to(ROOT)}")
    assert broken == []
