"""Every place agentrun reaches into a third party's internals, one module per dependency family.

A private attribute has no deprecation period: an upgrade may move it without a word. Keeping
each such reach here, and nowhere else, means an upgrade has one file to check, the version
ranges in ``pyproject.toml`` stop at the minor the tests prove, and ``tests/compat`` asserts that
every attribute used here still exists with the shape used, so an upgrade that moves one fails
there, by name, rather than somewhere in a run.

One module per family because of the layers (``pyproject.toml``'s import-linter contracts): the
kit may import aiohttp but never kopf, so ``kopf`` is imported only by the operator's side.
"""
