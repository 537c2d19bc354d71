"""The tables of outcomes and exit codes in the docs are generated from ``agentrun._outcomes``.

Each table stands between two marker lines; this test renders it from the enum and fails if the
doc says anything else. After changing an outcome, write the tables again with
``python -m tests.docs.test_outcome_tables``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentrun._outcomes import Exit, Outcome

DOCS = Path(__file__).parents[2] / "docs"
BEGIN = "<!-- generated from agentrun._outcomes by `python -m tests.docs.test_outcome_tables` -->"
END = "<!-- end of generated table -->"


def _conditions(outcome: Outcome) -> str:
    if not outcome.conditions:
        return "—"
    return "; ".join(f"`{c.type}={c.status}` `{c.reason}`" for c in outcome.conditions)


def outcomes_table() -> str:
    lines = [
        "| outcome (metric label) | exit | conditions and reason | event | retry helps | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for outcome in Outcome:
        event = "—"
        if outcome.event is not None:
            event = f"`{outcome.event.reason}`" + (" (Warning)" if outcome.event.warning else "")
        lines.append(
            f"| `{outcome.value}` | {outcome.exit_code.value} | {_conditions(outcome)} | {event} "
            f"| {'yes' if outcome.retryable else 'no'} | {outcome.meaning} |"
        )
    return "\n".join(lines)


def exit_codes_table() -> str:
    lines = ["| Code | Meaning | Outcomes |", "|---|---|---|"]
    for code in Exit:
        named = ", ".join(f"`{o.value}`" for o in Outcome if o.exit_code is code)
        lines.append(f"| {code.value} | {code.meaning} | {named} |")
    return "\n".join(lines)


TABLES: dict[str, Callable[[], str]] = {
    "runbook.md": outcomes_table,
    "cli.md": exit_codes_table,
}


def _split(text: str, doc: str) -> tuple[str, str, str]:
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise AssertionError(f"docs/{doc} needs one generated table between the marker lines")
    head, rest = text.split(BEGIN)
    table, tail = rest.split(END)
    return head, table, tail


@pytest.mark.parametrize("doc", sorted(TABLES))
def test_the_table_in_the_doc_is_the_enum(doc: str) -> None:
    _, table, _ = _split((DOCS / doc).read_text(), doc)
    assert table.strip() == TABLES[doc](), (
        f"docs/{doc} has drifted from agentrun._outcomes: python -m tests.docs.test_outcome_tables"
    )


def main() -> None:
    for doc, render in TABLES.items():
        path = DOCS / doc
        head, _, tail = _split(path.read_text(), doc)
        path.write_text(f"{head}{BEGIN}\n{render()}\n{END}{tail}")


if __name__ == "__main__":
    main()
