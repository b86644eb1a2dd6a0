"""Sending a file: the iMessage egress with a fake osascript recording argv and the script, and the console
channel. The path is only ever an `on run argv` argument; the file goes from a copy staged inside Messages' own
attachments folder; a link, a folder or an oversized file is refused; the file's echo (texting yourself) is not a
request."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.base import SendError, SentTexts
from apple_flow.channels.console import PlainConsoleEgress
from apple_flow.channels.imessage import build_imessage_egress
from apple_flow.channels.imessage.egress import FILE_SCRIPTS
from apple_flow.channels.imessage.ingress import IMessageIngress
from support.chatdb import ChatDbWriter
from support.fake_osascript import FakeOsascript
from support.ingress_helpers import take

OWNER = "+15551234567"
HOSTILE_NAMES = [
    'report" & (do shell script "id") & ".txt',
    "end run\non run argv\ndo shell script \"id\".txt",
    "back\\slash 'quote' ü.md",
]


def egress_for(channel_settings: Any, attachments: Path, sent: SentTexts | None = None, **overrides: Any) -> Any:
    return build_imessage_egress(channel_settings(messages_attachments_path=attachments, **overrides), sent)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_path_is_an_argument_never_script_source(
    name: str, channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path
) -> None:
    file = workspace / name
    file.write_text("the report\n")

    egress_for(channel_settings, attachments).send_file("+1 (555) 123-4567", file)

    (call,) = fake_osascript.calls()
    assert call["stdin"] == FILE_SCRIPTS["participant"]
    assert "POSIX file (read (POSIX file (item 2 of argv))" in call["stdin"]
    assert name not in call["stdin"] and str(workspace) not in call["stdin"]
    handle, staged = call["argv"][1:]
    assert call["argv"][0] == "-" and handle == "+15551234567"
    staged_path = Path(staged)
    assert staged_path.name == name
    assert staged_path.parent.parent == attachments / "apple-flow"  # where Messages (sandboxed) can read it
    assert staged_path.read_text() == "the report\n"


def test_sms_and_group_recipients_get_their_file_forms(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path
) -> None:
    file = workspace / "a.txt"
    file.write_text("a\n")
    egress = egress_for(channel_settings, attachments)
    egress.send_file(f"SMS;-;{OWNER}", file)
    egress.send_file("iMessage;+;chat123", file)
    sms, group = fake_osascript.calls()
    assert sms["stdin"] == FILE_SCRIPTS["sms"] and sms["argv"][1] == OWNER
    assert group["stdin"] == FILE_SCRIPTS["group"] and group["argv"][1] == "iMessage;+;chat123"


def test_a_link_a_folder_and_an_oversized_file_are_refused_and_nothing_runs(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    link = workspace / "link.txt"
    link.symlink_to(secret)
    big = workspace / "big.bin"
    big.write_bytes(b"x" * 2000)
    egress = egress_for(channel_settings, attachments, send_file_max_bytes=1000)

    with pytest.raises(SendError, match=r"cannot read link\.txt"):
        egress.send_file(OWNER, link)
    with pytest.raises(SendError, match=r"big\.bin is larger than 1000 bytes"):
        egress.send_file(OWNER, big)
    folder = workspace / "folder"
    folder.mkdir()
    with pytest.raises(SendError, match=r"folder is not a regular file"):
        egress.send_file(OWNER, folder)
    assert fake_osascript.calls() == []


def test_a_refused_send_says_so(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path
) -> None:
    file = workspace / "a.txt"
    file.write_text("a\n")
    fake_osascript.mode("fail")
    with pytest.raises(SendError, match=r"Messages did not take a\.txt"):
        egress_for(channel_settings, attachments, send_retries=0).send_file(OWNER, file)


def test_the_file_coming_back_to_yourself_is_an_echo_not_a_request(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path,
    chat_db: ChatDbWriter, sent_texts: SentTexts,
) -> None:
    fake_osascript.owner(OWNER, received_copy=True)  # texting yourself: the sent row and the received copy
    file = workspace / "report.txt"
    file.write_text("numbers\n")
    egress_for(channel_settings, attachments, sent_texts).send_file(OWNER, file)
    later = chat_db.message("thanks", sender=OWNER, destination_caller_id=OWNER)

    skipped: list[Any] = []
    ingress = IMessageIngress(chat_db.path, default_region="US", sent=sent_texts, poll_seconds=0.2,
                              attachments_root=attachments)
    [message] = take(ingress, after=0, count=1, skipped=skipped)

    assert message.rowid == later and message.text == "thanks"
    assert [s.reason for s in skipped] == ["echo", "echo"]


def test_the_console_shows_which_file_it_would_send(workspace: Path) -> None:
    file = workspace / "out.txt"
    file.write_text("12345")
    out = io.StringIO()
    PlainConsoleEgress(out, io.StringIO()).send_file("console", file)
    assert out.getvalue() == f"[file] would send {file} (5 bytes)\n\n"
    assert os.path.exists(file)


# --- a file is confirmed by its row in chat.db, as a text is -----------------------------------------------------


def test_a_file_is_confirmed_by_its_row_in_chat_db(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path
) -> None:
    file = workspace / "report.txt"
    file.write_text("numbers\n")
    egress_for(channel_settings, attachments).send_file(OWNER, file)  # the fake leaves a row naming the file
    assert len(fake_osascript.calls()) == 1


@pytest.mark.parametrize(
    ("mode", "rows", "why", "calls"),
    [
        ("fail-participant", "none-for-buddy", r"no trace of it in .*chat\.db after 1 s", 2),
        ("ok", "none", r"no trace of it in .*chat\.db after 1 s", 1),
        ("ok", "error", r"Messages could not send report\.txt \(chat\.db row \d+ has error 22\)", 1),
    ],
    ids=["buddy-exits-0-without-a-row", "exit-0-without-a-row", "row-with-an-error"],
)
def test_a_file_send_without_a_good_row_did_not_go_out_and_is_not_resent(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path, workspace: Path,
    mode: str, rows: str, why: str, calls: int,
) -> None:
    file = workspace / "report.txt"
    file.write_text("numbers\n")
    fake_osascript.mode(mode)
    fake_osascript.rows(rows)
    with pytest.raises(SendError, match=why):
        egress_for(channel_settings, attachments, send_retries=2).send_file(OWNER, file)
    assert len(fake_osascript.calls()) == calls  # an exit 0 is never sent again


def test_a_progress_line_whose_send_exits_0_without_a_row_fails_once(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path
) -> None:
    fake_osascript.mode("fail-participant")
    fake_osascript.rows("none-for-buddy")
    with pytest.raises(SendError, match=r"no trace of it in .*chat\.db"):
        egress_for(channel_settings, attachments, send_retries=2).send_progress(OWNER, "reading src/app.py")
    assert len(fake_osascript.calls()) == 2  # participant refused, buddy exit 0: no third try


def test_a_progress_line_is_not_waited_on_until_sent(
    channel_settings: Any, fake_osascript: FakeOsascript, attachments: Path
) -> None:
    fake_osascript.rows("queued")  # Messages has the row but has not sent it: enough for a progress line
    delivery = egress_for(channel_settings, attachments).deliver(OWNER, "reading src/app.py", until_sent=False)
    assert delivery.note.startswith("Messages has it (chat.db row ") and "not sent it yet" not in delivery.note
    assert len(delivery.guids) == 1
