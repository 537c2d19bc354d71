"""The kit example in README.md runs as written, on the public imports, against a real file."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from agentrun import RunStatus

README = Path(__file__).parents[2] / "README.md"


async def test_the_readme_kit_example_runs(tmp_path: Path) -> None:
    section = README.read_text().split("## The kit", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "README.md has no python example under 'The kit'"
    example = found.group(1).replace(
        "sqlite:///./.agentrun/state.db", f"sqlite:///{tmp_path / 'state.db'}"
    )
    imports = "".join(line + "\n" for line in example.splitlines() if line.startswith("from "))
    body = "".join(
        line + "\n" for line in example.splitlines() if line and not line.startswith("from ")
    )
    namespace: dict[str, object] = {}
    exec(
        imports
        + "async def example():\n"
        + textwrap.indent(body, "    ")
        + "    return run, backend\n",
        namespace,
    )
    example_function = namespace["example"]
    assert callable(example_function)
    run, backend = await example_function()
    await backend.close()
    assert run.status is RunStatus.COMPLETED
    assert run.resumed
