"""The ``agentrun`` command line: what an on-call engineer types at a run that stopped.

``frontier_main`` (``agentrun inspect``) and ``resume_main`` (``agentrun run --resume``) are the
two entry points an embedding product may wire as its own commands, with its own argument lists
(docs/cli.md).
"""

from agentrun.cli.main import frontier_main, main, resume_main

__all__ = ["frontier_main", "main", "resume_main"]
