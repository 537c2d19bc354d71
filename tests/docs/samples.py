"""The samples in README.md and docs/: where they are, how one is run, and how output is compared.

A sample is a ``console`` block right after an HTML comment naming the state it starts from::

    <!-- sample: killed run=run_9 tenant=acme at=notify holder=worker-7 ttl=60 -->

Each ``$ `` line is run by bash with this checkout's ``agentrun`` first on ``PATH`` and the
scenario's store in ``AGENTRUN_STORE``; the lines after it, up to the next ``$ ``, are what it must
print (stdout and stderr together, in order). ``<!-- sample: continue -->`` carries on from the
state the previous sample of the same file left. A sample that needs a Kubernetes API server is
checked by a test under tests/kube instead, named in the annotation
(``<!-- sample: checked-by tests/kube/FILE -->``). In expected output a line ``...`` stands for
any number of lines, and a line ending in ``...`` for any line starting with what precedes it.
Timestamps and the seconds left on a lease are compared as shapes, not values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

_ANNOTATION = re.compile(
    r"^<!-- sample: (?P<scenario>[\w-]+)(?P<args>(?: [\w./-]+(?:=\S+)?)*) -->$"
)
_VOLATILE = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+00:00"), "<TIME>"),
    (re.compile(r"\b\d+\.\ds left\b"), "<S>s left"),
)


@dataclass(frozen=True)
class Step:
    command: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Sample:
    document: Path
    line: int
    scenario: str
    arguments: dict[str, str]
    steps: tuple[Step, ...]

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def _steps(block: list[str]) -> tuple[Step, ...]:
    steps: list[Step] = []
    command: str | None = None
    expected: list[str] = []
    continued = False
    for line in block:
        if continued and command is not None:  # a command continued with a trailing backslash
            command = f"{command}\n{line}"
            continued = line.endswith("\\")
            continue
        if line.startswith("$ "):
            if command is not None:
                steps.append(Step(command, tuple(expected)))
            command, expected = line[2:], []
            continued = line.endswith("\\")
        elif line.startswith("# ") or command is None:
            continue  # a comment in the session, or text before the first command
        else:
            expected.append(line)
    if command is not None:
        steps.append(Step(command, tuple(expected)))
    return tuple(Step(s.command, _trimmed(s.expected)) for s in steps)


def _trimmed(lines: tuple[str, ...]) -> tuple[str, ...]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def console_blocks(document: Path) -> list[tuple[int, str | None, list[str]]]:
    """Every console block of ``document``: its line, the annotation before it, its lines."""
    lines = document.read_text().splitlines()
    blocks: list[tuple[int, str | None, list[str]]] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```console":
            start = index
            index += 1
            body: list[str] = []
            while index < len(lines) and lines[index].strip() != "```":
                body.append(lines[index])
                index += 1
            before = lines[start - 1].strip() if start else ""
            blocks.append((start + 1, before if before.startswith("<!--") else None, body))
        index += 1
    return blocks


def samples() -> list[Sample]:
    found: list[Sample] = []
    for document in DOCUMENTS:
        for line, annotation, body in console_blocks(document):
            if annotation is None:
                continue
            match = _ANNOTATION.match(annotation)
            if match is None:
                raise ValueError(f"{document}:{line}: unreadable sample annotation {annotation!r}")
            words = [word.partition("=") for word in match["args"].split()]
            arguments = {name: value for name, _, value in words}
            found.append(Sample(document, line, match["scenario"], arguments, _steps(body)))
    return found


def unchecked_output() -> list[str]:
    """Console blocks that show output but carry no sample annotation, so nothing checks them."""
    return [
        f"{document.relative_to(ROOT)}:{line}"
        for document in DOCUMENTS
        for line, annotation, body in console_blocks(document)
        if annotation is None and any(step.expected for step in _steps(body))
    ]


def normalized(text: str) -> str:
    for pattern, shape in _VOLATILE:
        text = pattern.sub(shape, text)
    return text.rstrip()


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``; ``...`` lines and ``...`` line endings are wildcards."""
    want = [normalized(line) for line in expected]
    got = [normalized(line) for line in actual]
    # can[i][j]: want[i:] matches got[j:]
    can = [[False] * (len(got) + 1) for _ in range(len(want) + 1)]
    can[len(want)][len(got)] = True
    for i in range(len(want) - 1, -1, -1):
        for j in range(len(got), -1, -1):
            if want[i].strip() == "...":
                can[i][j] = can[i + 1][j] or (j < len(got) and can[i][j + 1])
            elif j < len(got):
                same = (
                    got[j].startswith(want[i][:-3])
                    if want[i].endswith("...")
                    else got[j] == want[i]
                )
                can[i][j] = same and can[i + 1][j + 1]
    return can[0][0]
