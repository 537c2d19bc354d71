"""``agentrun console``: the run console over a store, without Kubernetes, in a real browser.

A run of the demo's ``booking-approved`` agent stops waiting for a person's approval of its text
(SQLite store, this checkout's CLI). The local console lists it and shows it in the inbox; the
approval is given in the browser (recorded as ``agentrun approve`` records it, by the login
name); ``agentrun run --resume`` carries the run on, and the page that stayed open follows it
without a reload. A console asked to listen beyond loopback, where it would sign nobody in, is
refused.
"""

from __future__ import annotations

import getpass
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.support.cli import COMMAND, cli_env
from tests.support.console import CHROMIUM_ARGS, chromium_binary, screenshot
from tests.support.ports import free_port

TENANT = "acme"
RUN = "trip-7"


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    env = cli_env()
    env.update(
        AGENTRUN_STORE=f"sqlite:///{tmp_path / 'state.db'}",
        AGENTRUN_DEMO_DIR=str(tmp_path / "demo"),
        PYTHONUNBUFFERED="1",
    )
    return env


def _agentrun(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@dataclass(frozen=True)
class LocalConsole:
    url: str
    opened: str
    """The address it printed, with its token."""
    log: Path


@pytest.fixture
def console(world: dict[str, str], tmp_path: Path) -> Iterator[LocalConsole]:
    started = _agentrun(
        world, "run", "booking-approved", "--input", "Book Ada to Lisbon", "--tenant", TENANT,
        "--run-id", RUN,
    )  # fmt: skip
    assert "waiting on approval" in started.stdout, started.stdout + started.stderr
    port = free_port()
    log = (tmp_path / "console.log").open("wb")
    process = subprocess.Popen(
        [*COMMAND, "console", "--port", str(port)], env=world, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "console.log").read_text()
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, (tmp_path / "console.log").read_text()
                time.sleep(0.2)
        printed = (tmp_path / "console.log").read_text()
        opened = re.search(r"open (http://127\.0\.0\.1:\d+/sign-in\?token=\S+)", printed)
        assert opened, printed
        yield LocalConsole(url, opened[1], tmp_path / "console.log")
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()


def test_a_run_waiting_on_approval_is_approved_in_the_browser_and_followed(
    world: dict[str, str], console: LocalConsole
) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_binary(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(base_url=console.url).new_page()
            page.goto(console.opened)
            expect(page).to_have_url(f"{console.url}/runs")
            page.goto("/runs")
            row = page.locator("tr", has_text=RUN)
            expect(row).to_contain_text("AwaitingApproval")
            expect(page.locator("header")).to_contain_text(getpass.getuser())
            page.goto("/inbox")
            expect(page.locator("tr.approval", has_text=RUN)).to_contain_text("notify_passenger")
            page.locator("tr.approval a").click()
            expect(page.locator("#state")).to_have_text("AwaitingApproval")
            screenshot(page, "local-run")
            page.click("#approve")
            expect(page.locator("#said")).to_contain_text("approved")
            page.evaluate("window.__notReloaded = true")
            resumed = _agentrun(world, "run", "--resume", RUN, "--tenant", TENANT)
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            expect(page.locator("#state")).to_have_text("Checkpointed", timeout=15_000)
            assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
            expect(page.locator("ol.transcript")).to_contain_text("notify_passenger")
            # the ledger's charges, one a model call, drawn over the iterations
            expect(page.locator("section.cost")).to_contain_text("spent by iteration")
            assert page.locator("#cost-chart polyline").count() == 1
            # each model call with its own tokens, price and time, linked to its message
            calls = page.locator("#model-calls tbody tr")
            expect(calls).to_have_count(page.locator("ol.transcript li.role-assistant").count())
            first = calls.first.locator("td")
            assert int(first.nth(2).inner_text()) > 0
            assert int(first.nth(3).inner_text()) > 0
            expect(first.nth(5)).to_contain_text(" ms")
            expect(
                page.locator("ol.transcript li.role-assistant .model-call").first
            ).to_contain_text(" in, ")
        finally:
            browser.close()
    assert "completed" in resumed.stdout, resumed.stdout


def test_a_local_console_listens_on_loopback_only(world: dict[str, str]) -> None:
    refused = _agentrun(world, "console", "--host", "0.0.0.0", "--port", str(free_port()))
    assert refused.returncode == 2
    assert "loopback address only" in refused.stderr


def test_only_the_printed_address_lets_a_browser_in(console: LocalConsole) -> None:
    """Another user of the machine reaches the loopback port too: without the token the console
    printed, every page sends them to a page that says where the token is, no run is shown,
    and a form sent all the same answers nothing; a wrong token is told so."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_binary(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(base_url=console.url).new_page()
            for path in ("/runs", "/inbox", f"/runs/{TENANT}/{RUN}"):
                page.goto(path)
                expect(page.locator("h1")).to_have_text("Open the address the console printed")
                expect(page.locator("main")).not_to_contain_text(RUN)
            page.goto("/sign-in?token=guessed")
            expect(page.locator("#sign-in-error")).to_contain_text("not this console's token")
            answer = page.request.post(
                f"/runs/{TENANT}/{RUN}/decide",
                form={"csrf": "x", "request": "anything", "decision": "approve"},
                headers={"Origin": console.url},
                max_redirects=0,
            )
            assert answer.status in (303, 403), answer.status
            assert "/sign-in" in answer.headers.get("location", "/sign-in")
        finally:
            browser.close()


def test_what_the_console_logs_is_masked(world: dict[str, str]) -> None:
    """A store's error quotes its URL: a key that looks like one in it is masked in the log
    line, the traceback included, as everywhere else the kit writes."""
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789"
    failed = _agentrun(
        world, "--store", f"sqlite:////nonexistent/{key}/state.db", "console", "--port",
        str(free_port()),
    )  # fmt: skip
    assert failed.returncode != 0
    assert "there is no SQLite store" in failed.stderr, failed.stderr
    assert "[REDACTED]" in failed.stderr
    assert key not in failed.stdout + failed.stderr
