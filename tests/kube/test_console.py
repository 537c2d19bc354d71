"""The run console in a real browser, against a real API server, real operators and Redis.

People are ServiceAccounts that sign in with tokens the API server issued: ``alice`` may view,
approve and resolve in this namespace; ``bob`` may edit runs (patch them) but not decide for
them; ``carol`` may view another namespace and nothing of this one. The console holds only list
and watch on AgentRuns: everything else it does, it does as them. Behind a proxy, people are
named in headers and impersonated (``dana``, ``eve``).
"""

from __future__ import annotations

import http.cookiejar
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from tests.support.agent_manifests import openai_agent
from tests.support.agentruns import (
    count_effects,
    get_run,
    has_condition,
    text_cut_short,
)
from tests.support.console import (
    CHROMIUM_ARGS,
    ConsoleProcess,
    bind,
    chromium_binary,
    console_process,
    screenshot,
    signed_in,
    token_of,
    user_of,
)
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer

PENDING = {"requestId": "apr-1", "callId": "call-1", "tool": "refund"}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture(scope="module")
def console(
    kube: Kube, redis: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    with console_process(kube, redis.url, tmp_path_factory.mktemp("console")) as process:
        yield process


@pytest.fixture(scope="module")
def people(kube: Kube) -> dict[str, str]:
    """Tokens of alice (view, approve, resolve), bob (edit) and carol (another namespace)."""
    tokens = {name: token_of(kube, name) for name in ("alice", "bob", "carol")}
    bind(kube, "alice", "agentrun-view", "agentrun-approve")
    bind(kube, "bob", "agentrun-edit")
    other = f"{kube.namespace}-other"
    kube.kubectl("create", "namespace", other)
    bind(kube, "carol", "agentrun-view", namespace=other)
    return tokens


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_binary(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _signed_in(browser: Browser, console: ConsoleProcess, token: str) -> Page:
    return signed_in(browser, console.url, token)


def _waiting_on_approval(kube: Kube, name: str) -> None:
    """A run that waits on approval apr-1, as an operator would have left it (no operator
    watches a run of agent ``nobody``)."""
    manifest = {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"agent": "nobody", "input": "refund order 7"},
    }
    kube.kubectl("create", "-f", "-", stdin=json.dumps(manifest))
    status = {
        "traceId": TRACE_ID,
        "pendingApproval": PENDING,
        "conditions": [
            {
                "type": "Succeeded", "status": "Unknown", "reason": "AwaitingApproval",
                "message": "waiting on approval apr-1",
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            },
            {
                "type": "AwaitingApproval", "status": "True", "reason": "ApprovalRequested",
                "message": "refund", "lastTransitionTime": "2026-12-01T00:00:00Z",
            },
        ],
    }  # fmt: skip
    kube.kubectl(
        "patch", "agentrun", name, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def test_an_undecidable_call_is_resolved_in_the_browser_and_the_page_follows_live(
    kube: Kube,
    operators: Operators,
    effects: Path,
    console: ConsoleProcess,
    people: dict[str, str],
    browser: Browser,
) -> None:
    call = text_cut_short(kube, operators, effects, "texted")

    page = _signed_in(browser, console, people["alice"])
    page.goto("/inbox")
    row = page.locator("tr.undecidable", has_text="texted")
    expect(row).to_contain_text("send_sms")
    expect(row).to_contain_text(call["callId"])
    expect(row).to_contain_text('"phone": "+49"')  # the call's arguments, from the frontier
    screenshot(page, "inbox")
    row.locator("a").click()
    expect(page.locator("#state")).to_have_text("Indeterminate")
    section = page.locator(f"#undecidable-{call['callId']}")
    expect(section).to_contain_text("send_sms")
    screenshot(page, "run-undecidable")
    section.locator("input[name=result]").fill("sent")
    section.locator("button.ran").click()
    expect(page.locator("#said")).to_contain_text("your answer was recorded")
    # From here on the page must follow the run without a reload: a marker set on the window
    # now would be gone after one.
    page.evaluate("window.__notReloaded = true")
    wait_for("texted to succeed", lambda: has_condition(kube, "texted", "Succeeded", "True"), 60)
    succeeded = time.monotonic()
    expect(page.locator("#state")).to_have_text("Completed", timeout=10_000)
    followed = time.monotonic() - succeeded
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
    print(f"the page showed Completed {followed:.2f} s after kubectl saw Succeeded=True")
    screenshot(page, "run-completed")
    [resolution] = get_run(kube, "texted")["spec"]["resolutions"]
    assert resolution == {
        "callId": call["callId"],
        "outcome": "ran",
        "result": "sent",
        "by": user_of(kube, "alice"),
    }
    assert count_effects(effects, "sms") == 1
    expect(page.locator("ol.transcript")).to_contain_text("send_sms")
    expect(page.locator("section.cost")).to_contain_text("spent by iteration 2")
    expect(page.locator("#model-calls tbody tr")).to_have_count(2)  # one a model call
    # A finished run has nothing to suspend: bob (edit) is offered delete and no suspend, and a
    # suspend sent all the same is refused before it reaches the API server.
    page = _signed_in(browser, console, people["bob"])
    page.goto(f"/runs/{kube.namespace}/texted")
    expect(page.locator("#delete")).to_have_count(1)
    expect(page.locator("#suspend")).to_have_count(0)
    page.evaluate(
        """([namespace]) => {
            const form = document.createElement("form");
            form.method = "post";
            form.action = `/runs/${namespace}/texted/suspend`;
            const input = document.createElement("input");
            input.type = "hidden"; input.name = "csrf";
            input.value = document.querySelector("input[name=csrf]").value;
            form.appendChild(input);
            document.body.appendChild(form);
            form.submit();
        }""",
        [kube.namespace],
    )
    expect(page.locator("#refused")).to_contain_text("nothing to suspend")
    assert "suspend" not in get_run(kube, "texted")["spec"]


def test_a_viewer_sees_no_approve_button_and_a_forged_approval_is_refused_by_the_api_server(
    kube: Kube, console: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    _waiting_on_approval(kube, "refund-viewed")
    page = _signed_in(browser, console, people["bob"])
    page.goto(f"/runs/{kube.namespace}/refund-viewed")
    expect(page.locator("#approval")).to_contain_text("refund")
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#deny")).to_have_count(0)
    expect(page.locator("#approval")).to_contain_text("You may not approve")
    # The form bob was not given, posted from his own signed-in page with his CSRF token.
    page.evaluate(
        """([namespace]) => {
            const form = document.createElement("form");
            form.method = "post";
            form.action = `/runs/${namespace}/refund-viewed/decide`;
            for (const [name, value] of [["csrf", document.querySelector("input[name=csrf]").value],
                                         ["request", "apr-1"], ["decision", "approve"]]) {
                const input = document.createElement("input");
                input.type = "hidden"; input.name = name; input.value = value;
                form.appendChild(input);
            }
            document.body.appendChild(form);
            form.submit();
        }""",
        [kube.namespace],
    )
    refused = page.locator("#refused")
    expect(refused).to_contain_text("the API server refused")
    expect(refused).to_contain_text("may not approve")
    screenshot(page, "refused")
    assert get_run(kube, "refund-viewed")["spec"].get("approvals") in (None, [])


def test_an_approver_approves_as_themselves(
    kube: Kube, console: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    _waiting_on_approval(kube, "refund-approved")
    page = _signed_in(browser, console, people["alice"])
    page.goto(f"/runs/{kube.namespace}/refund-approved")
    expect(page.locator("#trace-id")).to_have_text(TRACE_ID)  # status.traceId, when traced
    page.fill("#approval input[name=reason]", "customer verified")
    page.click("#approve")
    expect(page.locator("#said")).to_contain_text("your decision was recorded")
    # Words in the URL the console did not sign are not shown as its own.
    page.goto(f"/runs/{kube.namespace}/refund-approved?said=Your+session+expired&sig=forged")
    expect(page.locator("#said")).to_have_count(0)
    assert get_run(kube, "refund-approved")["spec"]["approvals"] == [
        {
            "requestId": "apr-1",
            "decision": "approve",
            "by": user_of(kube, "alice"),
            "reason": "customer verified",
        }
    ]


def test_a_person_without_access_to_a_namespace_sees_none_of_its_runs(
    kube: Kube, console: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    _waiting_on_approval(kube, "refund-hidden")
    wait_for(
        "the console to list it", lambda: _listed(console, people["alice"], "refund-hidden"), 30
    )
    page = _signed_in(browser, console, people["carol"])
    page.goto(f"/runs?namespace={kube.namespace}")
    expect(page.locator("table.runs tbody tr")).to_have_count(0)
    page.goto("/inbox")
    expect(page.locator("table.inbox")).not_to_contain_text("refund-hidden")
    answer = page.goto(f"/runs/{kube.namespace}/refund-hidden")
    assert answer is not None
    assert answer.status == 404
    expect(page.locator("main")).to_contain_text("There is no such run, or you may not see it.")
    expect(page.locator("main")).not_to_contain_text("refund order 7")
    answer = page.goto(f"/runs/{kube.namespace}/refund-hidden?transcript=1")
    assert answer is not None
    assert answer.status == 404


def _listed(console: ConsoleProcess, token: str, name: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    body = urllib.parse.urlencode({"token": token, "next": "/runs"}).encode()
    with opener.open(f"{console.url}/sign-in", data=body, timeout=10) as answer:
        return name in answer.read().decode()


def test_a_page_reconnects_after_the_console_restarts_and_catches_up(
    kube: Kube, console: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    page = _signed_in(browser, console, people["alice"])
    page.goto(f"/runs?namespace={kube.namespace}")
    expect(page.locator("#live-status")).to_have_class("live connected")
    page.evaluate("window.__notReloaded = true")
    console.restart()
    _waiting_on_approval(kube, "refund-after-restart")
    row = page.locator("tr", has_text="refund-after-restart")
    expect(row).to_contain_text("AwaitingApproval", timeout=20_000)
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
    screenshot(page, "runs")


def test_writes_from_another_site_or_without_the_form_token_are_refused(
    kube: Kube, console: ConsoleProcess, people: dict[str, str]
) -> None:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    body = urllib.parse.urlencode({"token": people["alice"], "next": "/runs"}).encode()
    with opener.open(f"{console.url}/sign-in", data=body, timeout=10) as answer:
        headers = answer.headers
        policy = headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy, policy
    assert "unsafe-inline" not in policy, policy
    [cookie] = list(jar)
    assert cookie.has_nonstandard_attr("HttpOnly")
    assert cookie.get_nonstandard_attr("SameSite") == "strict"
    assert people["alice"] not in (cookie.value or ""), "the token is sealed, never in clear"
    target = f"{console.url}/runs/{kube.namespace}/anything/suspend"

    def post(extra: dict[str, str], data: dict[str, str]) -> tuple[int, str]:
        request = urllib.request.Request(
            target, data=urllib.parse.urlencode(data).encode(), headers=extra
        )
        try:
            with opener.open(request, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    status, text = post({"Origin": "https://evil.example"}, {"csrf": "x"})
    assert status == 403
    assert "another site" in text
    status, text = post({}, {"csrf": "forged"})
    assert status == 403
    assert "CSRF" in text


def test_the_agents_page_shows_the_agents_the_person_may_list(
    kube: Kube, console: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    agent = openai_agent(
        "refunds", "http://127.0.0.1:9/v1", secret="llm", instructions="Refund when asked."
    )
    kube.kubectl("apply", "-f", "-", stdin=agent)
    page = _signed_in(browser, console, people["alice"])
    page.goto("/agents")
    section = page.locator(f"#agent-{kube.namespace}-refunds")
    expect(section).to_contain_text("openai gpt-4o-mini")
    screenshot(page, "agents")
    page = _signed_in(browser, console, people["carol"])
    page.goto("/agents")
    expect(page.locator(f"#agent-{kube.namespace}-refunds")).to_have_count(0)


@pytest.fixture(scope="module")
def read_only(
    kube: Kube, redis: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    workdir = tmp_path_factory.mktemp("console-read-only")
    with console_process(kube, redis.url, workdir, "--read-only") as process:
        yield process


def test_a_read_only_console_offers_no_action_and_takes_none(
    kube: Kube, read_only: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    _waiting_on_approval(kube, "refund-read-only")
    page = _signed_in(browser, read_only, people["alice"])
    page.goto(f"/runs/{kube.namespace}/refund-read-only")
    expect(page.locator("#approval")).to_contain_text("refund")
    for button in ("#approve", "#deny", "#suspend", "#delete"):
        expect(page.locator(button)).to_have_count(0)
    expect(page.locator("header")).to_contain_text("read-only")
    page.evaluate(
        """([namespace]) => fetch(`/runs/${namespace}/refund-read-only/decide`, {
            method: "POST",
            headers: {"Content-Type": "application/x-www-form-urlencoded"},
            body: new URLSearchParams({
                csrf: document.querySelector("input[name=csrf]").value,
                request: "apr-1", decision: "approve"}),
        }).then(r => window.__answer = r.status)""",
        [kube.namespace],
    )
    page.wait_for_function("window.__answer !== undefined")
    assert page.evaluate("window.__answer") == 403
    assert get_run(kube, "refund-read-only")["spec"].get("approvals") in (None, [])


@pytest.fixture(scope="module")
def behind_a_proxy(
    kube: Kube, redis: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    """A console that trusts the proxy's headers and impersonates whom they name: its
    ServiceAccount may impersonate (the chart grants it only in this mode)."""
    admin = Kube(kube.control_plane, kube.namespace, kube.kubectl_bin)
    admin.kubectl("apply", "-f", "-", stdin=json.dumps(IMPERSONATOR))
    admin.kubectl(
        "create", "clusterrolebinding", f"console-impersonates-{kube.namespace}",
        "--clusterrole=agentrun-console-impersonator",
        f"--serviceaccount={kube.namespace}:console",
    )  # fmt: skip
    workdir = tmp_path_factory.mktemp("console-proxy")
    with console_process(kube, redis.url, workdir, "--auth", "proxy") as process:
        yield process


IMPERSONATOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "agentrun-console-impersonator"},
    "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}],
}


def test_behind_a_proxy_the_console_acts_as_the_user_the_proxy_names(
    kube: Kube, behind_a_proxy: ConsoleProcess, browser: Browser
) -> None:
    kube.grant("dana", "agentrun-view", "agentrun-approve")
    _waiting_on_approval(kube, "refund-proxied")
    context = browser.new_context(
        base_url=behind_a_proxy.url, extra_http_headers={"X-Forwarded-User": "dana"}
    )
    page = context.new_page()
    page.goto(f"/runs/{kube.namespace}/refund-proxied")
    page.click("#approve")
    expect(page.locator("#said")).to_contain_text("your decision was recorded")
    [approval] = get_run(kube, "refund-proxied")["spec"]["approvals"]
    assert approval["by"] == "dana"
    # Nobody named, nothing shown; somebody without rights here, nothing of this namespace.
    anonymous = browser.new_context(base_url=behind_a_proxy.url).new_page()
    answer = anonymous.goto(f"/runs/{kube.namespace}/refund-proxied")
    assert answer is not None
    assert answer.status == 401
    stranger = browser.new_context(
        base_url=behind_a_proxy.url, extra_http_headers={"X-Forwarded-User": "eve"}
    ).new_page()
    answer = stranger.goto(f"/runs/{kube.namespace}/refund-proxied")
    assert answer is not None
    assert answer.status == 404


def test_a_selection_is_acted_on_run_by_run_as_the_person(
    kube: Kube, console: ConsoleProcess, people: dict[str, str], browser: Browser
) -> None:
    for name in ("bulk-a", "bulk-b"):
        _waiting_on_approval(kube, name)
    page = _signed_in(browser, console, people["alice"])
    page.goto(f"/runs?namespace={kube.namespace}")
    for name in ("bulk-a", "bulk-b"):
        page.check(f"input[name=run][value='{kube.namespace}/{name}']")
    page.click("#bulk-suspend")
    expect(page.locator("h1")).to_have_text("Suspend: 2 of 2 done")
    for name in ("bulk-a", "bulk-b"):
        assert get_run(kube, name)["spec"]["suspend"] is True
    # bob may patch runs but not approve: each approval of his selection is refused by the API
    # server on its own, and nothing is appended.
    page = _signed_in(browser, console, people["bob"])
    page.goto("/inbox")
    for name in ("bulk-a", "bulk-b"):
        page.check(f"input[name=run][value='{kube.namespace}/{name}/apr-1']")
    page.click("#bulk-approve")
    expect(page.locator("h1")).to_have_text("Approve: 0 of 2 done")
    expect(page.locator("table.bulk")).to_contain_text("may not approve")
    screenshot(page, "bulk-refused")
    for name in ("bulk-a", "bulk-b"):
        assert get_run(kube, name)["spec"].get("approvals") in (None, [])


def test_a_console_whose_store_is_not_up_yet_serves_what_the_api_server_holds(
    kube: Kube, tmp_path_factory: pytest.TempPathFactory, people: dict[str, str], browser: Browser
) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    _waiting_on_approval(kube, "refund-no-store")
    with console_process(kube, nowhere, tmp_path_factory.mktemp("console-no-store")) as process:
        page = _signed_in(browser, process, people["alice"])
        page.goto(f"/runs/{kube.namespace}/refund-no-store")
        expect(page.locator("#approval")).to_contain_text("refund")
        expect(page.locator("main")).to_contain_text("the store cannot be reached yet")
        assert "the store cannot be opened yet" in process.log()
