"""docs/contract.md's table of errors says, for each, what its own outcome says: whether asking
again can succeed (``retryable``) and the CLI's exit code. The table is written by hand (each row
says what the error means in words), so this keeps its two facts from drifting off the code."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import agentrun
from agentrun import AgentRunError
from tests.docs.samples import ROOT

ROW = re.compile(r"^\| `(\w+Error)` \| .* \| (yes|no) \| (\d+)\b.*\|$")


KIT = ("agentrun._", "agentrun.runner", "agentrun.stores")
"""The kit's modules: the command line's and the operator's own errors are theirs to document."""


def _errors() -> dict[str, type[AgentRunError]]:
    """Every error of the kit with an outcome of its own, by name (the base class aside), every
    module of the kit imported first, so what is found does not depend on what ran before."""
    for module in pkgutil.walk_packages(agentrun.__path__, "agentrun."):
        if module.name.startswith(KIT):
            importlib.import_module(module.name)
    found: dict[str, type[AgentRunError]] = {}
    pending = list(AgentRunError.__subclasses__())
    while pending:
        error = pending.pop()
        pending.extend(error.__subclasses__())
        if "outcome" in vars(error) and error.__module__.startswith(KIT):
            found[error.__name__] = error
    return found


def _rows() -> list[tuple[str, bool, int]]:
    text = (ROOT / "docs" / "contract.md").read_text()
    table = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    return [
        (found[1], found[2] == "yes", int(found[3]))
        for line in table.splitlines()
        if (found := ROW.match(line))
    ]


def test_the_table_lists_every_error_the_kit_raises_on_purpose() -> None:
    listed = {name for name, _, _ in _rows()}
    assert set(_errors()) - listed == set(), "add a row to docs/contract.md's Errors"


@pytest.mark.parametrize(("name", "retryable", "exit_code"), _rows(), ids=lambda v: str(v))
def test_a_row_says_what_the_errors_outcome_says(
    name: str, retryable: bool, exit_code: int
) -> None:
    outcome = _errors()[name].outcome
    assert (retryable, exit_code) == (outcome.retryable, int(outcome.exit_code)), outcome
