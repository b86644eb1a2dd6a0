"""A page session carries the rights of whoever opened it: the token (the owner at the Mac) sees and decides
everyone's runs and approvals; a session a login link opened (`web`, texted to one allowed sender) sees and decides
only that sender's, as by text, where only the asker can approve."""

from __future__ import annotations

import time

import httpx

from support.daemon_harness import ANA
from web.conftest import Page

BEN = "+15557654321"


def linked(page: Page, sender: str) -> httpx.Client:
    """A client logged in by a login link texted to ``sender``."""
    secret = f"secret-{time.monotonic_ns()}-0123456789abcdefghij"
    page.logins.add_link(secret, sender, 300)
    client = page.client()
    assert client.post(f"/login/link/{secret}", headers={"origin": page.origin}).status_code == 303
    return client


def setup(page: Page) -> tuple[str, str]:
    """Ana's plan waiting for approval and run, and Ben's; the approvals' ids."""
    ids = []
    for sender, task in ((ANA, "the secret plan of ana"), (BEN, "a small fix for ben")):
        approval = page.approvals.create(sender, task, f"1. {task}", "/Users/x/site")
        page.store.approvals.add_approval(approval)
        ids.append(approval.id)
        page.store.runs.start_run(f"run_{sender[-4:]}", sender, "chat", "/Users/x/site", f"run of {task}")
    return ids[0], ids[1]


def test_a_link_session_sees_only_its_senders_runs_and_approvals(page: Page) -> None:
    ana_approval, _ = setup(page)
    ben = linked(page, BEN)
    approvals = ben.get("/approvals").text
    assert "a small fix for ben" in approvals and "the secret plan of ana" not in approvals
    assert ana_approval not in approvals
    runs = ben.get("/runs").text
    assert "run_4321" in runs and "run_4567" not in runs and "the secret plan of ana" not in runs
    assert ben.get("/runs/run_4567").status_code == 404
    assert ben.get("/runs/run_4321").status_code == 200
    assert ">1</span>" in ben.get("/approvals/count?fragment").text
    # The daemon's health (other senders' SMS counts among it) is the owner's view.
    assert ben.get("/health").status_code == 403
    assert 'href="/health"' not in ben.get("/runs").text


def test_a_link_session_cannot_decide_another_senders_request(page: Page) -> None:
    ana_approval, ben_approval = setup(page)
    ben = linked(page, BEN)
    csrf = page.csrf(ben)
    origin = {"origin": page.origin}
    for action in ("approve", "deny"):
        refused = ben.post(f"/approvals/{ana_approval}/{action}", data={"csrf": csrf}, headers=origin)
        assert refused.status_code == 409 and f"No approval request {ana_approval}." in refused.text
    stored = page.store.approvals.get_approval(ana_approval)
    assert stored is not None and stored.state == "pending" and page.started == []
    own = ben.post(f"/approvals/{ben_approval}/approve", data={"csrf": csrf}, headers=origin)
    assert own.status_code == 303 and [a.id for a in page.started] == [ben_approval]
    # ?approved= tells nothing of another sender's request either.
    assert ana_approval not in ben.get(f"/runs?approved={ana_approval}").text


def test_the_token_login_keeps_the_owners_view(page: Page) -> None:
    ana_approval, ben_approval = setup(page)
    owner = page.logged_in()
    approvals = owner.get("/approvals").text
    assert ana_approval in approvals and ben_approval in approvals
    runs = owner.get("/runs").text
    assert "run_4567" in runs and "run_4321" in runs
    assert owner.get("/health").status_code == 200
    csrf = page.csrf(owner)
    done = owner.post(f"/approvals/{ana_approval}/approve", data={"csrf": csrf}, headers={"origin": page.origin})
    assert done.status_code == 303 and [a.id for a in page.started] == [ana_approval]
