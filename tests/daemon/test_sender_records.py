"""`history`, `usage` and `cancel <run id>` through the daemon (real SQLite store, the in-process connector of the
other daemon tests): each answers at once, even while the sender's turn runs, and only about the sender's own runs."""

from __future__ import annotations

import re
from collections.abc import Callable

from apple_flow.connectors.base import Status, TurnOutcome, TurnRequest, Usage
from apple_flow.daemon.deciding.reports import REPLY_MAX_CHARS
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, BOB, Harness, ask, wait_until

# --- history ---------------------------------------------------------------------------------------------------


def test_history_lists_the_senders_own_requests_newest_first(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    ask(h, ANA, "fix the parser")
    ask(h, ANA, "add a test for the lexer")
    ask(h, BOB, "bob's secret roadmap")
    reply = ask(h, ANA, "history")
    newer, older = h.store.runs.of_sender(ANA, 2)
    assert reply.startswith("Your requests, newest first:")
    assert reply.index(newer.id) < reply.index("You: add a test for the lexer") < reply.index(older.id)
    assert "You: fix the parser\nReply: echo: fix the parser" in reply
    assert "roadmap" not in reply and h.store.runs.of_sender(BOB)[0].id not in reply
    h.finish()


def test_history_searches_any_case_and_script_and_never_finds_another_senders_runs(
    harness: Callable[..., Harness],
) -> None:
    h = harness().start()
    ask(h, ANA, "Rename the CAFÉ module")
    ask(h, ANA, "fix the lexer")
    ask(h, BOB, "café roadmap for bob")
    found = ask(h, ANA, "history café")
    assert found.startswith('Your requests matching "café", newest first:')
    assert "Rename the CAFÉ module" in found and "lexer" not in found and "bob" not in found
    assert ask(h, ANA, "history: roadmap for bob") == 'Nothing of yours matches "roadmap for bob".'
    assert ask(h, BOB, "history").count("You: ") == 1
    h.finish()


def test_history_fits_one_message_and_says_how_to_find_older_ones(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    for i in range(8):
        ask(h, ANA, f"request {i} " + "with a long explanation " * 40)
    reply = ask(h, ANA, "history")
    assert len(reply) <= REPLY_MAX_CHARS
    assert "request 7" in reply and "request 0" not in reply
    assert reply.endswith("Older ones: `history WORDS` finds them; `status RUN` shows one.")
    h.finish()


def test_history_and_usage_answer_at_once_while_a_turn_runs(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "SLOW: refactor everything")
    wait_until(lambda: h.connector.running == 1)
    history = ask(h, ANA, "history")
    assert "You: SLOW: refactor everything\nReply: (still running)" in history
    assert "1 turn" in ask(h, ANA, "usage")
    h.connector.release.set()
    h.finish()
    assert h.egress.to(ANA)[-1] == "echo: SLOW: refactor everything"
    assert [call.prompt for call in h.connector.calls] == ["SLOW: refactor everything"]  # nothing else ran


def test_no_history_yet(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    assert ask(h, ANA, "history") == "No requests of yours yet."
    h.finish()


# --- usage -----------------------------------------------------------------------------------------------------


def reported(tokens: dict[str, tuple[int, int, bool]]) -> Callable[[str, TurnRequest], TurnOutcome]:
    """Answers with the token usage ``tokens`` gives for the sender (input, output, estimated), on "openai"."""

    def answer(prompt: str, request: TurnRequest) -> TurnOutcome:
        given = tokens.get(request.sender)
        usage = Usage(given[0], given[1], estimated=given[2]) if given else None
        return TurnOutcome(Status.ANSWERED, text="ok", agent="apple-code", usage=usage, backend="openai",
                           model="qwen2.5:3b")

    return answer


def test_usage_sums_the_senders_turns_time_and_tokens_per_day_and_backend(harness: Callable[..., Harness]) -> None:
    tokens = {ANA: (1200, 80, True), BOB: (999_999, 7, False)}
    h = harness(FakeConnector(answer=reported(tokens))).start()
    ask(h, ANA, "one")
    ask(h, ANA, "two")
    ask(h, BOB, "bob's")
    reply = ask(h, ANA, "usage")
    lines = reply.splitlines()
    assert lines[0] == "Your usage, last 7 days (newest first):"
    # The turns take a moment each; under load, a second or two.
    assert re.fullmatch(r"\w{3} \d\d, afm:openai \(qwen2\.5:3b\): 2 turns, [\d.]+ s, 2,400 tokens in / 160 out "
                        r"\(estimated\)", lines[1])
    assert re.fullmatch(r"Total: 2 turns, [\d.]+ s, 2,400 tokens in / 160 out \(estimated\)", lines[2])
    assert "999,999" not in reply
    run = h.store.runs.of_sender(ANA)[0]
    assert (run.backend, run.input_tokens, run.tokens_estimated) == ("afm:openai (qwen2.5:3b)", 1200, 1)
    h.finish()


def test_usage_says_which_tokens_were_estimated_and_which_turns_reported_none(
    harness: Callable[..., Harness],
) -> None:
    counted = iter([(10, 1, False), (20, 2, True), None])

    def answer(prompt: str, request: TurnRequest) -> TurnOutcome:
        given = next(counted)
        usage = Usage(given[0], given[1], estimated=given[2]) if given else None
        return TurnOutcome(Status.ANSWERED, text="ok", usage=usage)

    h = harness(FakeConnector(answer=answer), connector="codex-cli").start()
    for text in ("a", "b", "c"):
        ask(h, ANA, text)
    line = ask(h, ANA, "usage").splitlines()[1]
    assert re.search(
        r", codex-cli: 3 turns, [\d.]+ s, 30 tokens in / 3 out \(1 estimated; 2 of 3 turns reported them\)$", line
    )
    h.finish()


def test_usage_with_no_turns(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    assert ask(h, ANA, "usage") == "No turns of yours in the last 7 days."
    h.finish()


# --- cancel <run id> -------------------------------------------------------------------------------------------


def test_cancel_by_id_stops_that_run_and_only_its_owner_can(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "SLOW forever")
    wait_until(lambda: h.connector.running == 1)
    run_id = wait_until(lambda: h.store.runs.of_sender(ANA)[0].id if h.store.runs.of_sender(ANA) else None)
    # Another sender cannot stop it, nor learn it exists.
    assert ask(h, BOB, f"cancel {run_id}") == f"No run {run_id} of yours. `history` lists your runs."
    assert ask(h, ANA, "cancel run_000000") == "No run run_000000 of yours. `history` lists your runs."
    assert h.connector.cancelled == [] and h.connector.running == 1
    assert ask(h, ANA, f"cancel {run_id.removeprefix('run_').upper()}") == f"Stopped {run_id}."
    h.finish()
    assert h.connector.cancelled == [ANA]
    assert h.store.runs.get_run(run_id).state == "cancelled"  # type: ignore[union-attr]
    assert len(h.egress.to(ANA)) == 2  # the two answers to the commands, no reply for the cancelled run


def test_cancel_by_id_leaves_a_newer_run_alone(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    ask(h, ANA, "quick one")
    done = h.store.runs.of_sender(ANA)[0].id
    h.ingress.add(ANA, "SLOW: the long one")
    wait_until(lambda: h.connector.running == 1)
    assert ask(h, ANA, f"cancel {done}") == f"{done} is not running (done); nothing was stopped."
    assert h.connector.cancelled == []
    h.connector.release.set()
    h.finish()
    assert h.egress.to(ANA)[-1] == "echo: SLOW: the long one"


def test_help_names_the_new_commands(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    text = ask(h, ANA, "help")
    assert "history [WORDS]" in text and "usage" in text and "cancel [RUN]" in text
    h.finish()
