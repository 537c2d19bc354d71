"""``python -m agentrun.cli``: the CLI of whichever checkout or installation is on the path."""

from agentrun.cli.main import main

raise SystemExit(main())
