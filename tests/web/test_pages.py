"""The web page over HTTP: nothing without the token, what a run did from its stored events, approvals decided by
the same rules as over iMessage, and requests from other pages refused."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from apple_flow.connectors.events import parse_event
from apple_flow.daemon.running.turn_runner import RunLog
from apple_flow.daemon.store import FinishedTurn
from apple_flow.web.auth import COOKIE
from support.daemon_harness import ANA
from web.conftest import TOKEN, Page

SECRET_REQUEST = "rename the launch codes file"


def record_run(page: Page, run_id: str = "run_abc123", state: str = "done") -> None:
    """A finished chat run as the daemon records it: the run, the agent's events, the message and its reply."""
    store = page.store
    store.messages.take_message("imessage", 41, ANA, SECRET_REQUEST)
    store.runs.start_run(run_id, ANA, "chat", "/Users/ana/site", SECRET_REQUEST, message="imessage:41")
    events: list[dict[str, Any]] = [
        {"type": "start", "backend": "openai", "model": "qwen2.5:3b", "cwd": "/Users/ana/site"},
        {"type": "tool_call", "id": "c1", "name": "editFile",
         "arguments": {"path": "app.py", "oldText": "'hello'", "newText": "'hi'"}},
        {"type": "tool_result", "id": "c1", "name": "editFile", "ok": True, "summary": "edited app.py line 2",
         "truncated": False, "output": "Edited app.py: replaced 1 occurrence at line 2",
         "diff": "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def greet():\n-    return 'hello'\n+    return 'hi'\n"},
        {"type": "tool_call", "id": "c2", "name": "runCommand", "arguments": {"command": "make test"}},
        {"type": "tool_result", "id": "c2", "name": "runCommand", "ok": False, "summary": "make test: exit 2",
         "truncated": False, "output": "exit code 2\nFAILED test_greet <script>alert(1)</script>", "exit_code": 2},
        {"type": "notice", "message": "context full: continued in a new window"},
        {"type": "result", "subtype": "success", "is_error": False, "result": "Renamed it.", "num_turns": 3,
         "usage": {"input_tokens": 2900, "output_tokens": 310, "estimated": True}, "files_changed": ["app.py"],
         "commands_run": 1, "backend": "openai", "model": "qwen2.5:3b"},
    ]
    with RunLog(store, run_id) as log:  # its last events are written as it closes
        for event in events:
            log(parse_event(event))
    store.runs.finish_run(run_id, FinishedTurn(None, state, "Renamed it."))
    store.messages.record_message_reply("imessage", 41, "Renamed it. (sent)")
    store.messages.mark_message_sent("imessage", 41)


def pending_request(page: Page, task: str = "add a --verbose flag") -> str:
    approval = page.approvals.create(ANA, task, "1. edit cli.py", "/Users/ana/site")
    page.store.approvals.add_approval(approval)
    return approval.id


def test_without_the_token_nothing_is_shown(page: Page) -> None:
    record_run(page)
    approval = pending_request(page, task="secret task words")
    client = page.client()
    for path in ("/", "/runs", "/runs/run_abc123", "/approvals", "/health"):
        response = client.get(path)
        wanted = "" if path in ("/", "/runs") else f"?next={path.replace('/', '%2F')}"  # login returns there
        assert response.status_code == 303 and response.headers["location"] == f"/login{wanted}", path
        assert SECRET_REQUEST not in response.text and "run_abc123" not in response.text
    for path in ("/runs?fragment", "/runs/run_abc123?fragment"):
        response = client.get(path)
        assert response.status_code == 401 and SECRET_REQUEST not in response.text
    refused = client.post(f"/approvals/{approval}/approve", data={"csrf": "x"})
    assert refused.status_code == 401
    assert page.store.approvals.get_approval(approval).state == "pending"  # type: ignore[union-attr]
    assert client.get("/static/style.css").status_code == 200  # the login page's own style


def test_a_wrong_token_gets_nothing_and_many_are_refused(page: Page) -> None:
    record_run(page)
    client = page.client()
    wrong = client.post("/login", data={"token": TOKEN[:-1] + "X"})
    assert wrong.status_code == 401 and "Wrong token" in wrong.text
    assert COOKIE not in wrong.cookies and SECRET_REQUEST not in wrong.text
    assert client.get("/runs").status_code == 303
    statuses = [client.post("/login", data={"token": f"guess-{i}"}).status_code for i in range(12)]
    assert statuses[:9] == [401] * 9 and statuses[-1] == 429
    # Wrong tokens from anyone (every local process is 127.0.0.1) never lock the owner out.
    assert client.post("/login", data={"token": TOKEN}).status_code == 303
    assert client.get("/runs").status_code == 200


def test_a_forged_or_old_cookie_is_not_a_session(page: Page) -> None:
    client = page.client()
    client.cookies.set(COOKIE, f"{int(time.time())}.{'0' * 64}")
    assert client.get("/runs").status_code == 303
    client.cookies.set(COOKIE, TOKEN)
    assert client.get("/runs").status_code == 303


def test_login_sets_a_private_cookie_and_shows_the_runs(page: Page) -> None:
    record_run(page)
    client = page.client()
    response = client.post("/login", data={"token": TOKEN})
    cookie = response.headers["set-cookie"]
    assert response.status_code == 303 and response.headers["location"] == "/runs"
    assert all(part in cookie for part in ("HttpOnly", "SameSite=strict", "Path=/"))
    assert TOKEN not in cookie
    runs = client.get("/runs")
    assert runs.status_code == 200 and SECRET_REQUEST in runs.text
    assert "qwen2.5:3b" in runs.text and "2,900 in / 310 out" in runs.text
    assert "default-src 'none'" in runs.headers["content-security-policy"]
    fragment = client.get("/runs?fragment")
    assert fragment.text.lstrip().startswith("<table") and 'data-run="run_abc123"' in fragment.text


def test_a_run_page_shows_tool_calls_commands_diff_and_the_reply_as_sent(page: Page) -> None:
    record_run(page)
    html = page.logged_in().get("/runs/run_abc123").text
    assert SECRET_REQUEST in html
    assert html.count('<li class="step') == 2 and 'data-tool="editFile"' in html and 'data-tool="runCommand"' in html
    assert '<span class="del">-    return &#39;hello&#39;</span>' in html
    assert '<span class="add">+    return &#39;hi&#39;</span>' in html
    assert '<span class="exit bad">exit 2</span>' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html  # escaped
    assert "context full: continued in a new window" in html
    assert "Renamed it. (sent)" in html and ">Sent<" in html
    assert re.search(r"<code>app.py</code>", html)


def test_a_failed_run_says_why(page: Page) -> None:
    page.store.runs.start_run("run_bad", ANA, "chat", "/ws", "do it")
    with RunLog(page.store, "run_bad") as log:
        log(parse_event({"type": "result", "subtype": "error_timeout", "is_error": True, "result": "x"}))
    page.store.runs.finish_run("run_bad", FinishedTurn(None, "failed", "Error: Request timed out after 120s."))
    html = page.logged_in().get("/runs/run_bad").text
    assert "Error: Request timed out after 120s. (error_timeout)" in html
    assert page.logged_in().get("/runs/run_nope").status_code == 404


def test_approve_runs_the_task_once(page: Page) -> None:
    approval = pending_request(page)
    client = page.logged_in()
    html = client.get("/approvals").text
    assert approval in html and "add a --verbose flag" in html
    csrf = page.csrf(client)
    origin = {"origin": page.origin}
    done = client.post(f"/approvals/{approval}/approve", data={"csrf": csrf, "notes": "keep it short"}, headers=origin)
    assert done.status_code == 303 and done.headers["location"] == f"/runs?approved={approval}"
    assert [a.id for a in page.started] == [approval] and page.started[0].extra == "keep it short"
    stored = page.store.approvals.get_approval(approval)
    assert stored is not None and stored.state == "approved" and (stored.decided_by or "").startswith("web:")
    again = client.post(f"/approvals/{approval}/approve", data={"csrf": csrf}, headers=origin)
    assert again.status_code == 409 and f"{approval} was already approved." in again.text
    assert len(page.started) == 1


def test_an_agents_question_is_listed_and_answered_on_the_page_without_running_anything(page: Page) -> None:
    question = page.approvals.ask(ANA, "May I delete build/?", "It holds 2 GB.", 600)
    page.store.approvals.add_approval(question)
    client = page.logged_in()
    html = client.get("/approvals").text
    assert question.id in html and "May I delete build/?" in html and "It holds 2 GB." in html and "Question" in html
    done = client.post(f"/approvals/{question.id}/approve", data={"csrf": page.csrf(client), "notes": "yes, all"},
                       headers={"origin": page.origin})
    assert done.status_code == 200 and f"Approved {question.id}: the agent is told." in done.text
    assert page.started == []  # a question runs no task
    stored = page.store.approvals.get_approval(question.id)
    assert stored is not None and stored.state == "approved" and stored.extra == "yes, all"


def test_deny_and_expiry_follow_the_imessage_rules(page: Page) -> None:
    denied, expired = pending_request(page), pending_request(page, task="old")
    page.store.db.write("UPDATE approvals SET expires_at = 1 WHERE id = ?", (expired,))
    client = page.logged_in()
    csrf = page.csrf(client)
    response = client.post(f"/approvals/{denied}/deny", data={"csrf": csrf}, headers={"origin": page.origin})
    assert response.status_code == 200 and f"Denied {denied}; nothing was changed." in response.text
    late = client.post(f"/approvals/{expired}/approve", data={"csrf": csrf}, headers={"origin": page.origin})
    assert late.status_code == 409 and "expired" in late.text
    assert page.started == [] and page.store.approvals.get_approval(expired).state == "pending"  # type: ignore[union-attr]
    assert expired not in client.get("/approvals").text.split("<main>")[1]


def test_posts_from_elsewhere_are_refused(page: Page) -> None:
    approval = pending_request(page)
    client = page.logged_in()
    csrf = page.csrf(client)
    attempts = [
        ({"csrf": csrf}, {"origin": "http://127.0.0.1:1"}),  # same site, another port: the cookie goes along
        ({"csrf": csrf}, {"origin": "null"}),
        ({"csrf": csrf}, {"sec-fetch-site": "cross-site"}),
        ({}, {"origin": page.origin}),  # no CSRF field
        ({"csrf": "0" * 64}, {"origin": page.origin}),
    ]
    for data, headers in attempts:
        response = client.post(f"/approvals/{approval}/approve", data=data, headers=headers)
        assert response.status_code == 403, (data, headers)
    assert page.store.approvals.get_approval(approval).state == "pending" and page.started == []  # type: ignore[union-attr]
    other = page.client()
    assert other.post("/login", data={"token": TOKEN}, headers={"origin": "http://evil.example"}).status_code == 403


def test_health_names_the_agent_the_channel_and_the_last_error(page: Page) -> None:
    page.store.events.log("send_failed", "osascript: not allowed to send", ANA)
    html = page.logged_in().get("/health").text
    assert "afm" in html and "ready" in html and "console channel" in html
    assert "send_failed: osascript: not allowed to send" in html




def test_health_counts_the_sms_and_rcs_messages_not_acted_on(page: Page) -> None:
    assert "none refused" in page.logged_in().get("/health").text
    page.store.events.log("sms_refused", "SMS, not iMessage: its sender can be forged", ANA)
    html = page.logged_in().get("/health").text
    assert "Not acted on: 1 SMS/RCS message" in html and "APPLE_FLOW_ALLOW_SMS=true" in html


def test_health_names_the_model_and_server_the_ollama_connector_talks_to(make_page: Callable[..., Page]) -> None:
    """As it does for the afm connector on a server (the same words, from the settings the connector runs on)."""
    page = make_page(connector="ollama", ollama_base_url="http://10.0.0.7:11434/v1", ollama_model="llama3.2:3b")
    html = page.logged_in().get("/health").text
    assert "ollama, backend openai, model llama3.2:3b at http://10.0.0.7:11434/v1: ready" in html
    afm = make_page(afm_backend="openai", afm_base_url="http://127.0.0.1:8080/v1", afm_model="smollm2")
    html = afm.logged_in().get("/health").text
    assert "afm, backend openai, model smollm2 at http://127.0.0.1:8080/v1: ready" in html
    tasks = make_page(afm_backend="openai", afm_base_url="http://127.0.0.1:8080/v1",
                      afm_task_base_url="http://127.0.0.1:8081/v1")
    html = tasks.logged_in().get("/health").text
    assert ("afm, backend openai at http://127.0.0.1:8080/v1; approved tasks: backend openai at "
            "http://127.0.0.1:8081/v1: ready") in html
