"""The web page in a real browser: headless Chromium (Debian's ``chromium``, driven by Playwright) against a real
``apple-flow run`` process whose agent is the real apple-code binary on the scripted model. Skipped, saying why,
where no browser is installed; ``scripts/test.sh`` installs one and then requires it."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.ports import free_port
from support.scripted_server import ScriptedServer, answer, tool_call

ANA = "+15551234567"
TOKEN = "browser-test-token-0123456789-0123456789"
WEB_LINE = re.compile(r"Web page: (http://apple-flow\.localhost:\d+)")
LINK = re.compile(r"http://apple-flow\.localhost:\d+/login/link/\S+")
SECONDS = 20_000  # Playwright waits in ms: seconds-scale margins on two busy cores


def chromium() -> str | None:
    for name in (os.environ.get("APPLE_FLOW_TEST_BROWSER"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def skip_or_fail(reason: str) -> None:
    if os.environ.get("APPLE_FLOW_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (scripts/test.sh found a Chromium, so the browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    if executable is None:
        skip_or_fail("no Chromium to drive: install Debian's chromium (apt-get install chromium) or set "
                     "APPLE_FLOW_TEST_BROWSER to a Chromium binary")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Playwright is not installed: pip install -e '.[browser]' (scripts/test.sh does)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def browser_daemon(new_daemon: MakeDaemon, workspace: Path,
                   apple_code_bin: Path) -> DaemonProcess:
    """The scripted agent's daemon serving its page on a free port, with app.py in the workspace."""
    (workspace / "app.py").write_text("def greet():\n    return 'hello'\n")
    return new_daemon({
        **scripted_agent(apple_code_bin, workspace),
        "APPLE_FLOW_ALLOWED_SENDERS": ANA,
        "APPLE_FLOW_AFM_TIMEOUT_SECONDS": "60",
        "APPLE_FLOW_WEB_ENABLED": "true",
        "APPLE_FLOW_WEB_PORT": "0",
        "APPLE_FLOW_WEB_TOKEN": TOKEN,
    })


def web_url(browser_daemon: DaemonProcess) -> str:
    found = wait_for(lambda: WEB_LINE.search(browser_daemon.log()), 20, "the web page's address in the daemon's log")
    return str(found.group(1))


def pending_approval(browser_daemon: DaemonProcess) -> str:
    def newest() -> str | None:
        with sqlite3.connect(browser_daemon.db_path) as db:
            row = db.execute("SELECT id FROM approvals WHERE state = 'pending' ORDER BY created_at DESC").fetchone()
        return str(row[0]) if row else None

    return str(wait_for(newest, 60, "an approval request"))


def log_in(page: Any, url: str, token: str) -> None:
    page.goto(f"{url}/runs")
    assert page.url == f"{url}/login"
    page.fill("#token", token)
    page.click("button[type=submit]")


@pytest.mark.slow
def test_log_in_watch_runs_see_a_diff_and_approve_a_task(
    browser: Any, browser_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path
) -> None:
    from playwright.sync_api import expect

    steps = [
        tool_call("readFile", {"path": "app.py"}),  # a file is read before it is edited
        tool_call("editFile", {"path": "app.py", "oldText": "'hello'", "newText": "'hi'"}),
        tool_call("runCommand", {"command": "grep -c hi app.py"}),
        answer("Changed the greeting to hi.", delay=4),
        answer("1. Add farewell.py with a farewell() function."),  # the task's read-only planning turn
        tool_call("writeFile", {"path": "farewell.py", "content": "def farewell():\n    return 'bye'\n"}),
        answer("Added farewell.py.", delay=2),
    ]
    with ScriptedServer(steps) as server:
        browser_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        url = web_url(browser_daemon)
        page = browser.new_page()
        log_in(page, url, TOKEN)
        expect(page).to_have_url(f"{url}/runs")
        expect(page.locator("main")).to_contain_text("No runs yet")

        # A run appears while it runs, and finishes, without reloading the page.
        chat_db.message("fix the greeting in app.py", sender=ANA)
        row = page.locator("tr", has_text="fix the greeting in app.py")
        expect(row.locator(".state")).to_have_text("running", timeout=SECONDS)
        expect(row.locator(".state")).to_have_text("done", timeout=SECONDS)
        expect(row).to_contain_text("openai · scripted")

        # Its page: the tool calls, the command's exit code, the diff, the reply as sent.
        row.locator("a").click()
        expect(page.locator("h1")).to_contain_text("done")
        expect(page.locator('li[data-tool="editFile"]')).to_contain_text("edited app.py")
        expect(page.locator('li[data-tool="runCommand"] .exit')).to_have_text("exit 0")
        expect(page.locator(".diff .del").first).to_have_text("-    return 'hello'")
        expect(page.locator(".diff .add").first).to_have_text("+    return 'hi'")
        expect(page.locator("table.commands")).to_contain_text("grep -c hi app.py")
        expect(page.locator("pre.reply")).to_have_text("Changed the greeting to hi.")

        # A task waits for approval; Approve runs it, and the run shows up and finishes.
        chat_db.message("task: add a farewell function", sender=ANA)
        request = pending_approval(browser_daemon)
        page.goto(f"{url}/approvals")
        card = page.locator(f"article#{request}")
        expect(card).to_contain_text("Add farewell.py")
        card.locator("button.approve").click()
        expect(page).to_have_url(f"{url}/runs?approved={request}")
        expect(page.locator(".notice")).to_contain_text(f"Approved {request}")
        approved = page.locator("tr", has_text="add a farewell function").filter(has_text="approve")
        expect(approved.locator(".state")).to_have_text("done", timeout=SECONDS)
        assert (workspace / "farewell.py").read_text() == "def farewell():\n    return 'bye'\n"
        wait_for(lambda: any(t.startswith(f"Done ({request}") for t in browser_daemon.sends_to(ANA)), 20,
                 "the task's reply")
        page.goto(f"{url}/approvals")
        expect(page.locator("main")).to_contain_text("Nothing is waiting")


class _AttackerSite:
    """Another web page, on a port of its own, whose form posts to the apple-flow page as soon as it loads."""

    def __init__(self, target: str) -> None:
        self.cookies: list[str]  # the Cookie header of each request it got
        form = (
            f'<form id="f" method="post" action="{target}"><input name="csrf" value="guessed"></form>'
            '<script>document.getElementById("f").submit()</script>'
        ).encode()

        cookies = self.cookies = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                cookies.append(self.headers.get("Cookie", ""))
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(form)))
                self.end_headers()
                self.wfile.write(form)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_wrong_token_and_a_cross_site_post_are_refused(
    browser: Any, browser_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    from playwright.sync_api import expect

    with ScriptedServer([answer("the secret plan")]) as server:
        browser_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        url = web_url(browser_daemon)
        chat_db.message("task: rotate the secret keys", sender=ANA)
        request = pending_approval(browser_daemon)

        stranger = browser.new_context()
        page = stranger.new_page()
        log_in(page, url, TOKEN[:-1] + "x")
        expect(page.locator(".error")).to_have_text("Wrong token.")
        for path in ("/runs", "/approvals", "/runs?fragment"):
            response = page.goto(url + path)
            assert "rotate the secret keys" not in page.content() and request not in page.content()
            assert response is not None and response.status in (200, 401)  # the login page, or 401
        stranger.close()

        owner = browser.new_context()
        page = owner.new_page()
        log_in(page, url, TOKEN)
        expect(page).to_have_url(f"{url}/runs")
        # Another local server, on 127.0.0.1 or localhost, any port: another site to the browser, which sends it
        # no cookie of the page's (served under a name of its own) and no cookie with its forged form.
        # The page's own name on another port is the same site: that server would get the cookie (docs/web.md
        # says so), and the Origin and CSRF checks refuse its form.
        for host, refusal, gets_cookie in (("127.0.0.1", "Log in first", False), ("localhost", "Log in first", False),
                                           ("apple-flow.localhost", "Refused", True)):
            attacker = _AttackerSite(f"{url}/approvals/{request}/approve")
            try:
                page.goto(f"http://{host}:{attacker.port}/")
                page.wait_for_url(f"{url}/approvals/{request}/approve")
                expect(page.locator("body")).to_contain_text(refusal)
                assert any("apple_flow_session" in c for c in attacker.cookies) is gets_cookie, (host, attacker.cookies)
            finally:
                attacker.close()
        with sqlite3.connect(browser_daemon.db_path) as db:
            assert db.execute("SELECT state FROM approvals WHERE id = ?", (request,)).fetchone()[0] == "pending"
        owner.close()


def test_a_texted_link_logs_the_phone_in_once_and_login_returns_to_the_page_asked_for(
    browser: Any, browser_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    from playwright.sync_api import expect

    browser_daemon.start()
    url = web_url(browser_daemon)
    chat_db.message("web", sender=ANA)
    text = wait_for(lambda: browser_daemon.sends_to(ANA), 20, "the reply to `web`")[0]
    found = LINK.search(text)
    assert found is not None, text
    link = found.group(0)

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = phone.new_page()
    page.goto(link)
    page.reload()  # a second look (a link preview, say) uses nothing up
    page.locator("#use-link").tap()
    expect(page).to_have_url(f"{url}/runs")
    expect(page.locator("nav")).to_contain_text("Approvals")
    expect(page.locator("main")).to_contain_text("No runs yet")
    phone.close()

    other = browser.new_context()
    page = other.new_page()
    page.goto(link)
    expect(page.locator("main")).to_contain_text("used already or has expired")
    # A page asked for before logging in is the one shown after.
    page.goto(f"{url}/approvals")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fapprovals$"))
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{url}/approvals")
    other.close()


@pytest.mark.slow
def test_the_approvals_page_and_the_pending_count_update_live(
    browser: Any, browser_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    from playwright.sync_api import expect

    with ScriptedServer([answer("1. Add farewell.py.")]) as server:
        browser_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        url = web_url(browser_daemon)
        page = browser.new_page()
        log_in(page, url, TOKEN)
        page.goto(f"{url}/approvals")
        expect(page.locator("main")).to_contain_text("Nothing is waiting")
        expect(page.locator("#pending .count")).to_have_count(0)

        chat_db.message("task: add a farewell function", sender=ANA)
        request = pending_approval(browser_daemon)
        card = page.locator(f"article#{request}")
        expect(card).to_contain_text("Add farewell.py", timeout=SECONDS)  # no reload
        expect(page.locator("#pending .count")).to_have_text("1")
        page.fill(f"article#{request} input[name=notes]", "keep it short")
        page.locator("h1").click()  # away from the field: the next refresh may swap the list, and keeps the words
        page.wait_for_timeout(5000)
        expect(card.locator("input[name=notes]")).to_have_value("keep it short")

        chat_db.message(f"deny {request}", sender=ANA)
        expect(card).to_have_count(0, timeout=SECONDS)
        expect(page.locator("main")).to_contain_text("Nothing is waiting")
        expect(page.locator("#pending .count")).to_have_count(0)


@pytest.mark.slow
def test_a_stopped_daemon_shows_as_stopped_and_the_page_comes_back_with_it(
    browser: Any, browser_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    from playwright.sync_api import expect

    port = free_port()
    with ScriptedServer([answer("Done at last.", delay=60)]) as server:
        env = {"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_WEB_PORT": str(port)}
        browser_daemon.start(env)
        url = web_url(browser_daemon)
        page = browser.new_page()
        log_in(page, url, TOKEN)
        chat_db.message("take your time", sender=ANA)
        row = page.locator("tr", has_text="take your time")
        expect(row.locator(".state")).to_have_text("running", timeout=SECONDS)
        row.locator("a").click()
        expect(page.locator("h1 .state")).to_have_text("running")
        expect(page.locator("#offline")).to_be_hidden()

        browser_daemon.kill9()
        banner = page.locator("#offline")
        expect(banner).to_be_visible(timeout=SECONDS)
        expect(banner).to_contain_text("The daemon is not answering")
        assert "not known" in page.evaluate(
            "getComputedStyle(document.querySelector('h1 .state.running'), '::after').content"
        )

        browser_daemon.start(env)  # the same port: the session was kept by the daemon, the page picks up again
        expect(banner).to_be_hidden(timeout=SECONDS)
        expect(page.locator("h1 .state")).not_to_have_text("running", timeout=SECONDS)
