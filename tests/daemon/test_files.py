"""Files through the daemon (real store, real files, the in-process connector): a message of files alone reaches
the agent, its files in the workspace's inbox and the prompt saying where they are."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from apple_flow.channels.base import Attachment
from apple_flow.config import Settings
from apple_flow.daemon.deciding.orchestrator import FILES_ONLY_REQUEST
from apple_flow.daemon.running.arrivals import INBOX
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, Harness


def test_a_message_of_files_alone_reaches_the_agent_with_its_files_in_the_inbox(
    harness: Callable[..., Harness], tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "Attachments" / "crash.log"
    log.parent.mkdir()
    log.write_text("Traceback: boom\n")
    h = harness().start()
    h.ingress.add(ANA, "", attachments=(
        Attachment("crash.log", "text/plain", 16, log),
        Attachment("voice.caf", "audio/x-caf", 900, None, "still downloading after 15 s"),
    ))
    assert h.finish() == 0

    [call] = h.connector.calls
    assert call.request.message == FILES_ONLY_REQUEST
    assert f"{INBOX}/1-1-crash.log (16 bytes, text)" in call.request.files_note
    assert "voice.caf: not received (still downloading after 15 s)" in call.request.files_note
    assert (workspace / INBOX / "1-1-crash.log").read_text() == "Traceback: boom\n"
    assert h.egress.to(ANA) == [f"echo: {FILES_ONLY_REQUEST}"]


def test_files_with_a_task_go_to_its_planning_turn(harness: Callable[..., Harness], tmp_path: Path,
                                                   workspace: Path) -> None:
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a\n+++ b\n")
    h = harness().start()
    h.ingress.add(ANA, "task: apply this patch", attachments=(Attachment("fix.patch", "", 12, patch),))
    h.finish()
    [call] = h.connector.calls
    assert call.request.read_only and "apply this patch" in call.request.message
    assert f"{INBOX}/1-1-fix.patch" in call.request.files_note


def test_files_the_answer_attaches_are_sent_after_the_reply_and_outside_ones_refused(
    harness: Callable[..., Harness], workspace: Path, tmp_path: Path
) -> None:
    (workspace / "report.md").write_text("# report\n")
    (tmp_path / "secret.txt").write_text("private\n")
    answer = "Here is the report.\nATTACH: report.md\nATTACH: ../secret.txt"
    h = harness(FakeConnector(lambda prompt, request: answer)).start()
    h.ingress.add(ANA, "write a report")
    h.finish()

    assert h.egress.to(ANA) == [
        "Here is the report.\n\nSending: report.md (9 bytes).\nNot sent: ../secret.txt (outside the workspace)."
    ]
    assert h.egress.files == [(ANA, workspace / "report.md")]
    assert [e.detail for e in h.store.events.recent_events(kind="file_sent")] == ["report.md"]


def test_asking_for_a_file_tells_the_agent_how_and_sends_what_it_changed(
    harness: Callable[..., Harness], workspace: Path
) -> None:
    from apple_flow.connectors.base import Status, TurnOutcome
    from apple_flow.daemon.deciding.files_to_send import ATTACH_HINT

    (workspace / "notes.txt").write_text("milk\n")
    outcome = TurnOutcome(Status.ANSWERED, "I wrote notes.txt.", files_changed=("notes.txt",))
    h = harness(FakeConnector(lambda prompt, request: outcome)).start()
    h.ingress.add(ANA, "write my shopping list and send me the file")
    h.finish()

    assert h.connector.calls[0].prompt.endswith(ATTACH_HINT)
    assert h.egress.to(ANA) == ["I wrote notes.txt.\n\nSending: notes.txt (5 bytes)."]
    assert h.egress.files == [(ANA, workspace / "notes.txt")]


def test_a_file_that_cannot_be_sent_is_said_in_text(harness: Callable[..., Harness], workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    h = harness(FakeConnector(lambda prompt, request: "Done.\nATTACH: a.txt")).start()
    h.egress.fail_for.add(ANA)
    h.ingress.add(ANA, "make a.txt")
    h.finish()
    assert (ANA, "Could not send a.txt: Messages refused the file for " + ANA) in h.egress.progress


def test_without_a_request_for_a_file_changed_files_are_not_sent(
    harness: Callable[..., Harness], workspace: Path
) -> None:
    from apple_flow.connectors.base import Status, TurnOutcome

    (workspace / "a.txt").write_text("a\n")
    outcome = TurnOutcome(Status.ANSWERED, "Fixed a.txt.", files_changed=("a.txt",))
    h = harness(FakeConnector(lambda prompt, request: outcome)).start()
    h.ingress.add(ANA, "fix a.txt")
    h.finish()
    assert h.egress.to(ANA) == ["Fixed a.txt."] and h.egress.files == []
    assert "ATTACH" not in h.connector.calls[0].prompt


def test_sending_files_can_be_turned_off(harness: Callable[..., Harness], workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    h = harness(FakeConnector(lambda prompt, request: "Done.\nATTACH: a.txt"), send_files_per_reply=0).start()
    h.ingress.add(ANA, "send me a.txt")
    h.finish()
    assert h.egress.files == [] and "ATTACH" not in h.connector.calls[0].prompt


def test_files_recorded_before_a_restart_that_turned_sending_files_off_are_said_not_sent(
    daemon_settings: Callable[..., Settings], workspace: Path
) -> None:
    from apple_flow.daemon.store import Store, message_reply

    (workspace / "a.txt").write_text("a\n")
    settings = daemon_settings(send_files_per_reply=0)
    store = Store(settings.db_path)
    store.cursors.set_cursor("imessage", 0)
    store.messages.take_message("imessage", 1, ANA, "send me a.txt")
    with store.transaction():  # as the daemon records it, then killed before sending
        store.messages.record_message_reply("imessage", 1, "Here.\n\nSending: a.txt (2 bytes).")
        store.reply_files.record_files(message_reply("imessage", 1), ANA, ANA, str(workspace),
                                 [("a.txt", str(workspace / "a.txt"))])
    store.close()
    h = Harness(settings).start()
    h.ingress.add(ANA, "send me a.txt", rowid=1)
    h.finish()
    assert h.egress.order == [("text", ANA, "Here.\n\nSending: a.txt (2 bytes)."),
                              ("progress", ANA, "Could not send a.txt: sending files is turned off")]
    assert h.store.reply_files.unsent(message_reply("imessage", 1)) == []
    assert h.store.cursors.get_cursor("imessage") == 1
