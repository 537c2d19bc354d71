"""The run console: every run's timeline, and approvals, resolutions and suspensions from a
browser, done as the person at it.

Server-rendered pages over one watch of AgentRuns per console replica, with live updates pushed
to browsers as Server-Sent Events; every read of the API server and every write is made as the
signed-in person (their token passed through, or impersonated behind an authenticating proxy),
and the store is read only after the API server says they may get the run. ``docs/console.md``
says how to run it and how sign-in works in each mode.
"""

from agentrun.console._app import create_app
from agentrun.console._settings import AuthMode, ConsoleSettings

__all__ = ["AuthMode", "ConsoleSettings", "create_app"]
