"""Approved tasks are checked (the workspace's check goes to the agent, the reply ends with the verdict), and a failed
apple-code run of one may be escalated to another connector on the owner's word."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apple_flow.connectors.base import CheckReport, Status, TurnOutcome, TurnRequest
from apple_flow.daemon.deciding.escalation import NOT_SET_UP
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, BOB, Harness, ask, wait_until

FAILING_TAIL = (
    "============ test session starts ============\ncollected 3 items\n\n"
    "tests/test_parser.py ..F\n"
    "FAILED tests/test_parser.py::test_empty - assert parse('') == []\n"
    "1 failed, 2 passed in 0.03s\n"
)


def agent(executed: Callable[[TurnRequest], str | TurnOutcome]) -> Callable[[str, TurnRequest], str | TurnOutcome]:
    """Plans read-only turns; ``executed`` answers the approved turn."""

    def answer(prompt: str, request: TurnRequest) -> str | TurnOutcome:
        return "1. Fix parse()\n2. Run the tests" if request.read_only else executed(request)

    return answer


def check_failed(request: TurnRequest) -> TurnOutcome:
    return TurnOutcome(
        Status.CHECK_FAILED, text="I changed parser.py.", detail="the check `make test` still fails.",
        agent="apple-code", exit_code=5, subtype="error_verify",
        check=CheckReport(request.verify or "?", False, 2, FAILING_TAIL),
    )


@pytest.fixture
def make_test_workspace(workspace: Path) -> Path:
    (workspace / "Makefile").write_text("test:\n\tpytest -q\n")
    return workspace


@pytest.fixture
def start(harness: Callable[..., Harness]) -> Callable[..., Harness]:
    def make(main: FakeConnector, escalation: FakeConnector | None = None, **overrides: Any) -> Harness:
        return harness(main, escalation, **overrides).start()

    return make


def approved(h: Harness, task: str = "fix the parser", sender: str = ANA) -> tuple[str, str]:
    """Sends a task, approves its plan; (the request id, the reply to the approved run)."""
    plan = ask(h, sender, f"task: {task}")
    match = re.search(r"approve (req_[0-9a-f]{8})", plan)
    assert match, plan
    return match.group(1), ask(h, sender, f"approve {match.group(1)}")


def run_id_of(reply: str) -> str:
    match = re.search(r"\((req_[0-9a-f]{8}), (run_[0-9a-f]{6})", reply)
    assert match, reply
    return match.group(2)


def test_an_approved_task_is_given_the_workspace_check_and_the_reply_ends_with_the_verdict(
    start: Callable[..., Harness], make_test_workspace: Path
) -> None:
    main = FakeConnector(agent(lambda r: TurnOutcome(
        Status.ANSWERED, text="Fixed parse().", agent="apple-code",
        check=CheckReport(r.verify or "?", True, 1, "3 passed in 0.02s"),
    )))
    h = start(main)
    request, reply = approved(h)
    planning, execution = main.calls
    assert planning.request.verify is None  # the read-only planning turn is not checked
    assert execution.request.verify == "make test"
    assert reply.startswith(f"Done ({request}, run_") and "Fixed parse()." in reply
    assert reply.endswith("\n\nCheck passed: `make test` (after 1 repair round).")


def test_a_failing_check_ends_the_reply_with_its_first_failing_line(
    start: Callable[..., Harness], make_test_workspace: Path
) -> None:
    h = start(FakeConnector(agent(check_failed)))
    request, reply = approved(h)
    run = run_id_of(reply)
    assert reply == (
        f"Not done ({request}, {run}): the check still fails after 2 repair rounds.\nI changed parser.py.\n\n"
        "Check failed: `make test`: FAILED tests/test_parser.py::test_empty - assert parse('') == []"
    )  # no escalation is set up: none is offered
    stored = h.store.runs.get_run(run)
    assert stored is not None and (stored.state, stored.outcome) == ("failed", "check_failed")
    assert ask(h, ANA, f"escalate {run}") == NOT_SET_UP


def test_without_a_check_the_reply_is_the_answer_and_status_says_why(
    start: Callable[..., Harness], workspace: Path
) -> None:
    main = FakeConnector(agent(lambda r: "Done the thing."))
    h = start(main)
    request, reply = approved(h)
    assert main.calls[1].request.verify is None
    assert reply == f"Done ({request}, {run_id_of(reply)}):\nDone the thing."
    assert ask(h, ANA, "status").endswith(
        f"\nNo check found in {workspace} (no test target, test script or tests); approved tasks are not checked. "
        "APPLE_FLOW_VERIFY_COMMAND sets one.")


def test_the_setting_names_the_check_and_status_shows_it(
    start: Callable[..., Harness], make_test_workspace: Path
) -> None:
    main = FakeConnector(agent(lambda r: "ok"))
    h = start(main, verify_command="./ci.sh")
    assert ask(h, ANA, "status").endswith(
        f"Check for approved tasks in {make_test_workspace}: `./ci.sh` (APPLE_FLOW_VERIFY_COMMAND).")
    approved(h)
    assert main.calls[1].request.verify == "./ci.sh"


def test_status_shows_the_found_check_of_the_workspace_asked_about(
    start: Callable[..., Harness], make_test_workspace: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "go.mod").write_text("module site\n")
    h = start(FakeConnector(), workspace_aliases={"site": site}, allowed_workspaces=[make_test_workspace, site])
    assert ask(h, ANA, "status") == (
        f"Nothing running, nothing pending.\nCheck for approved tasks in {make_test_workspace}: `make test` "
        "(the test target of Makefile)."
    )
    assert ask(h, ANA, "@site status").endswith(f"Check for approved tasks in {site}: `go test ./...` (go.mod).")
    assert ask(h, ANA, "@nowhere status").endswith("Unknown workspace @nowhere (known: @site).")


def test_a_failed_run_offers_escalation_which_runs_the_same_task_on_the_other_connector(
    start: Callable[..., Harness], make_test_workspace: Path
) -> None:
    main = FakeConnector(agent(check_failed))
    cloud = FakeConnector(lambda prompt, request: "Fixed parse() for the empty string.")
    h = start(main, cloud, escalate_connector="claude-cli")
    request, reply = approved(h)
    run = run_id_of(reply)
    assert reply.endswith(f"\nReply `escalate {run}` to run it again on claude-cli.")
    assert cloud.calls == []  # nothing left the Mac before the owner asked

    escalated = ask(h, ANA, f"escalate {run}")
    new_run = run_id_of(escalated)
    assert escalated == (
        f"Escalated {run} on claude-cli ({request}, {new_run}):\nFixed parse() for the empty string.\n\n"
        "Not checked by apple-flow: claude-cli was asked to run `make test` itself."
    )
    assert any(text == f"Escalating {run} ({request}) to claude-cli: working on it in {make_test_workspace}."
               for _, text in h.egress.progress)
    [call] = cloud.calls
    assert "fix the parser" in call.prompt and "1. Fix parse()" in call.prompt  # the task and its approved plan
    assert call.request.verify == "make test" and call.request.workspace == make_test_workspace
    assert not call.request.read_only
    assert len(main.calls) == 2  # planning and the failed run; the escalation did not go to apple-code
    record = h.store.runs.get_run(new_run)
    assert record is not None
    assert (record.kind, record.escalated_from, record.approval, record.state) == ("escalate", run, request, "done")
    assert record.backend == "claude-cli"

    # Once is enough: the same run is not escalated again, and the escalation is not offered for escalation.
    assert ask(h, ANA, f"escalate {run}") == f"{run} was escalated already: {new_run} (done)."
    assert ask(h, ANA, f"escalate {new_run}") == (
        f"{new_run} is not an approved task's run; only those can be escalated.")


@pytest.mark.parametrize("outcome", [
    TurnOutcome(Status.FAILED, detail="apple-code execution failed (exit code 1). max turns reached",
                agent="apple-code", exit_code=1, subtype="error_max_turns"),
    TurnOutcome(Status.TIMED_OUT, detail="Request timed out after 120s.", agent="apple-code", limit_seconds=120),
    TurnOutcome(Status.EMPTY, agent="apple-code"),
])
def test_other_ways_of_getting_stuck_offer_escalation_too(
    start: Callable[..., Harness], workspace: Path, outcome: TurnOutcome
) -> None:
    h = start(FakeConnector(agent(lambda r: outcome)), FakeConnector(), escalate_connector="codex-cli")
    request, reply = approved(h)
    run = run_id_of(reply)
    assert reply.startswith(f"Not done ({request}, {run}): ")
    assert reply.endswith(f"Reply `escalate {run}` to run it again on codex-cli.")


def test_a_missing_model_or_a_done_task_is_not_offered_nor_escalated(
    start: Callable[..., Harness], workspace: Path
) -> None:
    answers: Iterator[str | TurnOutcome] = iter([
        TurnOutcome(Status.NO_MODEL, detail="Apple Intelligence is not enabled.", agent="apple-code", exit_code=3),
        "All done.",
    ])
    cloud = FakeConnector()
    h = start(FakeConnector(agent(lambda r: next(answers))), cloud, escalate_connector="claude-cli")
    _, no_model = approved(h)
    assert "escalate" not in no_model
    run = run_id_of(no_model)
    assert ask(h, ANA, f"escalate {run}").startswith(f"{run} did not get stuck (failed, no_model)")
    _, done = approved(h)
    assert "escalate" not in done
    done_run = run_id_of(done)
    assert ask(h, ANA, "escalate") == f"{done_run} did not get stuck (done, answered); only a failed run can be " \
                                      "escalated."
    assert cloud.calls == []


def test_escalate_finds_the_run_by_its_request_or_as_the_latest_and_only_the_senders_own(
    start: Callable[..., Harness], workspace: Path
) -> None:
    cloud = FakeConnector(lambda prompt, request: "cloud answer")
    h = start(FakeConnector(agent(check_failed)), cloud, escalate_connector="gemini-cli")
    request, reply = approved(h)
    run = run_id_of(reply)
    assert ask(h, BOB, f"escalate {run}") == f"No run {run} of yours. `history` lists your runs."
    assert ask(h, BOB, "escalate") == "You have no recent task runs to escalate."
    assert ask(h, ANA, "escalate run_zzzzzz") == "No run run_zzzzzz of yours. `history` lists your runs."
    assert ask(h, ANA, f"escalate {request}").startswith(f"Escalated {run} on gemini-cli ({request}, run_")
    assert len(cloud.calls) == 1


def test_escalation_is_not_offered_when_the_daemon_does_not_run_apple_code(
    start: Callable[..., Harness], workspace: Path
) -> None:
    h = start(FakeConnector(agent(check_failed)), FakeConnector(), connector="codex-cli",
              escalate_connector="claude-cli")
    _, reply = approved(h)
    assert "escalate" not in reply
    assert ask(h, ANA, "escalate") == NOT_SET_UP


def test_cancelling_an_escalated_run_stops_it_on_the_escalation_connector(
    start: Callable[..., Harness], workspace: Path
) -> None:
    main = FakeConnector(agent(check_failed))
    main.release.set()  # SLOW (in the task) holds only the escalated run
    cloud = FakeConnector()
    h = start(main, cloud, escalate_connector="claude-cli")
    _, reply = approved(h, "fix the parser SLOW")
    run = run_id_of(reply)
    h.ingress.add(ANA, f"escalate {run}")
    wait_until(lambda: cloud.calls)
    assert ask(h, ANA, "cancel") == "Stopped your running request."
    assert ANA in cloud.cancelled
    wait_until(lambda: (r := h.store.runs.escalation_of(run)) is not None and r.state == "cancelled")


def test_a_run_that_ended_before_a_final_answer_says_its_check_did_not_run(
    start: Callable[..., Harness], make_test_workspace: Path
) -> None:
    h = start(FakeConnector(agent(lambda r: TurnOutcome(
        Status.FAILED, detail="apple-code execution failed (exit code 1). max turns (16) reached", agent="apple-code",
        exit_code=1, subtype="error_max_turns", check=CheckReport("make test", False, 0, "", runs=0),
    ))))
    request, reply = approved(h)
    assert reply == (f"Not done ({request}, {run_id_of(reply)}): Sorry, the agent failed: apple-code execution failed "
                     "(exit code 1). max turns (16) reached\n\nCheck not run: `make test`.")


def test_health_says_whether_the_escalation_connector_is_ready(
    start: Callable[..., Harness], workspace: Path
) -> None:
    h = start(FakeConnector(), FakeConnector(), escalate_connector="claude-cli")
    assert "Connector afm: ready; escalation to claude-cli ready." in ask(h, ANA, "health")
    broken = FakeConnector()
    broken.fail_start = "claude CLI not found at 'claude'"
    other = start(FakeConnector(), broken, escalate_connector="claude-cli",
                  db_path=workspace.parent / "other" / "relay.db")
    assert ("escalation to claude-cli not ready: claude CLI not found at 'claude'"
            in ask(other, ANA, "health"))
