"""``python -m agentrun.console``: serve the console (what the chart's console Deployment runs)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import secrets
import sys
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from agentrun._redaction import Masker, MaskingFilter
from agentrun.console import AuthMode, ConsoleSettings, create_app


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agentrun.console",
        description="Serve the run console: runs, the inbox of what waits on a person, each "
        "run's timeline, and approve/resolve/suspend/delete done as the signed-in person. The "
        "API server is found as kubectl finds it (in-cluster, else KUBECONFIG).",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default %(default)s)"
    )
    parser.add_argument("--port", type=int, default=8080, help="port (default %(default)s)")
    parser.add_argument(
        "--auth",
        choices=[m.value for m in AuthMode],
        default=AuthMode.TOKEN.value,
        help="token: people sign in with a bearer token the API server accepts; proxy: an "
        "authenticating proxy in front names them in headers; local: no Kubernetes, the runs "
        "of --store, for whoever reaches the loopback address, as this user (what `agentrun "
        "console` runs) (default %(default)s)",
    )
    parser.add_argument("--read-only", action="store_true", help="show runs; offer no action")
    parser.add_argument("--namespace", help="watch only this namespace's runs (default: all)")
    parser.add_argument(
        "--store",
        help="the operator's store URL, for transcripts and tool calls (env AGENTRUN_STORE_URL)",
    )
    parser.add_argument(
        "--secure-cookies", action="store_true", help="mark cookies Secure (served over HTTPS)"
    )
    proxy = parser.add_argument_group("with --auth proxy: where the proxy names the person")
    proxy.add_argument(
        "--user-header", default="X-Forwarded-User", help="the user's name (default %(default)s)"
    )
    proxy.add_argument(
        "--groups-header",
        default="X-Forwarded-Groups",
        help="their groups, comma-separated (default %(default)s)",
    )
    proxy.add_argument(
        "--token-header",
        default="X-Forwarded-Access-Token",
        help="a token the API server accepts, used as theirs when present, with or without "
        "'Bearer ' (Authorization, for oauth2-proxy's --pass-authorization-header); without it "
        "the console impersonates the user and groups (default %(default)s)",
    )
    return parser


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    given = (
        {
            "host": args.host,
            "port": args.port,
            "auth": args.auth,
            "read_only": args.read_only,
            "secure_cookies": args.secure_cookies,
        }
        | ({"namespace": args.namespace} if args.namespace else {})
        | ({"store": args.store} if args.store else {})
    )
    try:
        settings = ConsoleSettings(**(ConsoleSettings.environment_defaults() | given))
    except (ValidationError, OSError, ValueError) as error:
        print(f"agentrun console: {error}", file=sys.stderr)
        return 2
    if settings.auth is AuthMode.LOCAL:
        if not settings.store:
            print(
                "agentrun console: --auth local needs --store (the store to show)", file=sys.stderr
            )
            return 2
        if not _loopback(settings.host):
            print(
                f"agentrun console: --host {settings.host}: a local console signs nobody in, so "
                "it listens on a loopback address only (127.0.0.1, ::1, localhost); put an "
                "authenticating proxy in front and use the cluster's console for more",
                file=sys.stderr,
            )
            return 2
        if not settings.local_token:
            settings = settings.model_copy(update={"local_token": secrets.token_urlsafe(32)})
        print(
            f"agentrun console: open http://{_url_host(settings.host)}:{settings.port}"
            f"/sign-in?token={settings.local_token}",
            flush=True,
        )
    # Every line the console logs (uvicorn's too: log_config=None hands its loggers to the
    # root's handler) goes through the kit's one masking path: a store's error can quote a URL
    # with its password, a page's failure a run's text.
    masking = MaskingFilter(Masker.build())
    for handler in logging.getLogger().handlers:
        handler.addFilter(masking)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        log_config=None,
        proxy_headers=False,
        timeout_graceful_shutdown=5,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
