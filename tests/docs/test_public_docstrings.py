"""The public entry points document their arguments, what they return and what they raise, in one
form a reference can be rendered from (Google style), and every CLI argument has a help text.

The entry points: ``AgentRunner``, ``Checkpointer``, ``open_backend`` and the store protocols
(``IdempotencyStore``, ``LeaseStore``, ``CheckpointStore``, ``HistoryStore``, ``Ledger``,
``QuotaStore``, ``CommitStore``). For each function, and each public method a class defines
(``_``-less name; properties and attributes aside), the docstring must have

- an ``Args:`` section naming every parameter of ``inspect.signature`` but ``self``/``cls``, and
  no other (``**observers`` is named with its stars); none when there are no parameters;
- a ``Returns:`` section when the return annotation is not ``None``;
- a ``Raises:`` section with at least one entry (``Name: what it means``).

A class's own docstring documents its constructor: an ``Args:`` section naming every parameter of
``inspect.signature(cls)``. A section is a line holding only its title at the docstring's
indentation; an entry is a line one level deeper, ``name: text``, continued by deeper lines.
"""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentrun import (
    AgentRunner,
    Checkpointer,
    CheckpointStore,
    HistoryStore,
    IdempotencyStore,
    LeaseStore,
    Ledger,
    QuotaStore,
    open_backend,
)
from agentrun._commits import CommitStore
from agentrun.cli.main import build_parser

CLASSES: tuple[type, ...] = (AgentRunner, Checkpointer)
PROTOCOLS: tuple[type, ...] = (
    IdempotencyStore,
    LeaseStore,
    CheckpointStore,
    HistoryStore,
    Ledger,
    QuotaStore,
    CommitStore,
)
FUNCTIONS: tuple[Callable[..., Any], ...] = (open_backend,)

_ENTRY = re.compile(r"^(\*{0,2}\w+)(?: \([^)]*\))?:(?: |$)")


def sections(docstring: str) -> dict[str, list[str]]:
    """The Google-style sections of ``docstring``: each title, with the names of its entries."""
    lines = inspect.cleandoc(docstring).splitlines()
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    entry_indent: int | None = None
    for line in lines:
        if line in {"Args:", "Returns:", "Raises:", "Yields:"}:
            current = found.setdefault(line[:-1], [])
            entry_indent = None
            continue
        if current is None:
            continue
        if line and not line[0].isspace():
            current = None  # back at the docstring's indentation: the section ended
            continue
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if entry_indent is None:
            entry_indent = indent
        if indent == entry_indent:
            match = _ENTRY.match(stripped)
            current.append(match.group(1) if match else stripped)
    return found


def _public(owner: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in vars(owner).items():
        if name.startswith("_"):
            continue
        if isinstance(member, classmethod | staticmethod):
            yield name, member.__func__
        elif inspect.isfunction(member):
            yield name, member


def _callables() -> list[tuple[str, Callable[..., Any]]]:
    found = [(function.__name__, function) for function in FUNCTIONS]
    for owner in (*CLASSES, *PROTOCOLS):
        found.extend((f"{owner.__name__}.{name}", member) for name, member in _public(owner))
    return found


def _parameters(function: Callable[..., Any]) -> list[str]:
    names = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name in {"self", "cls"}:
            continue
        stars: dict[inspect._ParameterKind, str] = {
            inspect.Parameter.VAR_POSITIONAL: "*",
            inspect.Parameter.VAR_KEYWORD: "**",
        }
        names.append(stars.get(parameter.kind, "") + parameter.name)
    return names


def problems(function: Callable[..., Any]) -> list[str]:
    """What the docstring of ``function`` lacks, by the rules of this module."""
    found = sections(function.__doc__ or "")
    wrong = []
    wanted = _parameters(function)
    if wanted and sorted(found.get("Args", [])) != sorted(wanted):
        wrong.append(f"Args: {found.get('Args')} is not {wanted}")
    if not wanted and found.get("Args"):
        wrong.append("Args: for a function without parameters")
    returns = inspect.signature(function).return_annotation
    if returns not in (None, "None", inspect.Signature.empty) and not found.get("Returns"):
        wrong.append("no Returns: section")
    if not found.get("Raises"):
        wrong.append("no Raises: section")
    return wrong


def test_the_sections_are_read() -> None:
    def example(a: int, *, b: str, **rest: int) -> int:
        """Does it.

        Args:
            a: One.
            b (str): Two,
                continued.
            **rest: The rest.

        Returns:
            A number.

        Raises:
            ValueError: When it must.
        """
        return a

    assert sections(example.__doc__ or "") == {
        "Args": ["a", "b", "**rest"],
        "Returns": ["A number."],
        "Raises": ["ValueError"],
    }
    assert problems(example) == []
    example.__doc__ = "Does it.\n\nArgs:\n    a: One.\n"
    assert problems(example) == [
        "Args: ['a'] is not ['a', 'b', '**rest']",
        "no Returns: section",
        "no Raises: section",
    ]


def test_every_entry_point_is_listed() -> None:
    names = [name for name, _ in _callables()]
    assert {"AgentRunner.run", "AgentRunner.resume", "open_backend", "Checkpointer.write"} <= set(
        names
    )
    assert len(names) > 30


@pytest.mark.parametrize(
    ("name", "function"), [pytest.param(name, f, id=name) for name, f in _callables()]
)
def test_a_public_callable_documents_its_arguments_and_errors(
    name: str, function: Callable[..., Any]
) -> None:
    assert problems(function) == [], name


@pytest.mark.parametrize("owner", CLASSES, ids=lambda owner: owner.__name__)
def test_a_class_documents_its_constructor(owner: type) -> None:
    documented = sections(owner.__doc__ or "").get("Args", [])
    assert sorted(documented) == sorted(_parameters(owner))


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    found = [("agentrun", parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend((f"agentrun {name}", sub) for name, sub in action.choices.items())
    return found


@pytest.mark.parametrize(
    ("name", "parser"), [pytest.param(name, parser, id=name) for name, parser in _commands()]
)
def test_every_cli_argument_has_help(name: str, parser: argparse.ArgumentParser) -> None:
    undocumented = [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not (action.help or "").strip()
    ]
    assert undocumented == []


def test_every_cli_command_has_help() -> None:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: (choice.help or "").strip() for choice in commands._choices_actions}
    assert set(helps) == set(commands.choices)
    assert all(helps.values())
