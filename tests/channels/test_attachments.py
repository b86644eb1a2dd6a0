"""Inbound attachments from real-schema chat.db rows and real files: a message of files alone is a message; each
file is taken only from inside the Messages attachments folder (never through `..`, an outside path or a link);
files still downloading are waited for, within a bound, then reported missing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from apple_flow.channels.base import Attachment, InboundMessage, Skipped
from apple_flow.channels.imessage.ingress import IMessageIngress
from support.chatdb import ChatDbWriter
from support.ingress_helpers import take

PREFIX = "~/Library/Messages/Attachments"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The Messages attachments folder of these tests."""
    path = tmp_path / "Attachments"
    path.mkdir()
    return path


def stored(root: Path, name: str, content: bytes = b"line 1\nline 2\n", folder: str = "ab/01/GUID-1") -> str:
    """A file as Messages stores a received one; returns its ``filename`` as chat.db holds it."""
    path = root / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return f"{PREFIX}/{folder}/{name}"


def ingress(db: ChatDbWriter, root: Path, wait: float = 0) -> IMessageIngress:
    return IMessageIngress(db.path, default_region="US", sent=None, poll_seconds=0.2, attachments_root=root,
                           attachment_wait_seconds=wait)


def one(db: ChatDbWriter, root: Path, wait: float = 0) -> InboundMessage:
    """The first message, with its attachments as they are when the ingress reads it."""
    skipped: list[Skipped] = []
    got = take(ingress(db, root, wait), after=0, count=1, skipped=skipped)
    assert got, f"no message; skipped: {skipped}"
    return got[0]


def settled(db: ChatDbWriter, root: Path, wait: float) -> tuple[InboundMessage, tuple[Attachment, ...]]:
    """The first message as read, and its attachments once settled (as its turn asks when it starts)."""
    reader = ingress(db, root, wait)
    [message] = take(reader, after=0, count=1)
    return message, reader.settle_attachments(message, threading.Event())


def test_a_message_of_one_attachment_alone_is_a_message_with_its_file(chat_db: ChatDbWriter, root: Path) -> None:
    filename = stored(root, "crash.log")
    rowid = chat_db.message("\ufffc", files=[{"filename": filename, "transfer_name": "crash.log",
                                              "mime_type": "text/plain", "total_bytes": 14}])

    message = one(chat_db, root)

    assert message.rowid == rowid and message.text == ""
    assert message.attachments == (
        Attachment("crash.log", "text/plain", 14, root.resolve() / "ab/01/GUID-1/crash.log"),
    )


def test_text_with_files_loses_the_markers_and_keeps_every_file_in_order(chat_db: ChatDbWriter, root: Path) -> None:
    first = stored(root, "a.txt", folder="aa/00/G1")
    second = stored(root, "IMG_0001.HEIC", b"\x00\x00\x00\x18ftypheic", folder="bb/00/G2")
    chat_db.message("look at these \ufffc\ufffc", files=[
        {"filename": first, "transfer_name": "a.txt", "mime_type": "text/plain", "total_bytes": 14},
        {"filename": second, "transfer_name": "IMG_0001.HEIC", "mime_type": "image/heic", "total_bytes": 12},
    ])

    message = one(chat_db, root)

    assert message.text == "look at these"
    assert [(a.name, a.mime_type, a.source is not None) for a in message.attachments] == [
        ("a.txt", "text/plain", True), ("IMG_0001.HEIC", "image/heic", True),
    ]


def test_an_absolute_filename_inside_the_folder_is_taken(chat_db: ChatDbWriter, root: Path) -> None:
    stored(root, "notes.md")
    chat_db.message("\ufffc", files=[{"filename": str(root / "ab/01/GUID-1/notes.md"), "transfer_name": "notes.md"}])

    assert one(chat_db, root).attachments[0].source == root.resolve() / "ab/01/GUID-1/notes.md"


def test_u_fffc_without_an_attachment_row_is_still_skipped_as_empty(chat_db: ChatDbWriter, root: Path) -> None:
    chat_db.message("\ufffc")
    skipped: list[Skipped] = []
    assert take(ingress(chat_db, root), after=0, count=1, timeout=1.5, skipped=skipped) == []
    assert [s.reason for s in skipped] == ["empty"]


@pytest.mark.parametrize("hostile", ["dotdot", "outside", "file link", "folder link", "relative", "folder"])
def test_hostile_filenames_are_refused_and_the_message_still_arrives(
    chat_db: ChatDbWriter, root: Path, tmp_path: Path, hostile: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private key\n")
    (root / "ab").mkdir()
    if hostile == "file link":
        (root / "ab" / "secret.txt").symlink_to(secret)
    if hostile == "folder link":
        (root / "ab" / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    (root / "ab" / "dir.txt").mkdir()
    filename = {
        "dotdot": f"{PREFIX}/ab/../../secret.txt",
        "outside": str(secret),
        "file link": f"{PREFIX}/ab/secret.txt",
        "folder link": f"{PREFIX}/ab/elsewhere/secret.txt",
        "relative": "ab/secret.txt",
        "folder": f"{PREFIX}/ab/dir.txt",
    }[hostile]
    chat_db.message("what is this \ufffc", files=[{"filename": filename, "transfer_name": "secret.txt"}])

    message = one(chat_db, root)

    assert message.text == "what is this"
    [attachment] = message.attachments
    assert attachment.source is None
    assert attachment.name == "secret.txt"
    expected = {"dotdot": "(..)", "outside": "outside the Messages attachments folder", "file link": "link",
                "folder link": "link", "relative": "not absolute", "folder": "not a regular file"}[hostile]
    assert expected in attachment.problem


def test_a_missing_file_is_reported_not_taken(chat_db: ChatDbWriter, root: Path) -> None:
    chat_db.message("\ufffc", files=[{"filename": f"{PREFIX}/zz/gone.pdf", "transfer_name": "gone.pdf"}])
    [attachment] = one(chat_db, root).attachments
    assert attachment.source is None and "not in the Messages attachments folder" in attachment.problem


def test_a_failed_download_is_reported(chat_db: ChatDbWriter, root: Path) -> None:
    chat_db.message("\ufffc", files=[{"filename": stored(root, "v.caf"), "transfer_name": "v.caf",
                                      "transfer_state": 6}])
    [attachment] = one(chat_db, root).attachments
    assert attachment.source is None and attachment.problem == "Messages could not download it"


def test_a_file_still_downloading_is_waited_for_and_taken_when_it_finishes(
    chat_db: ChatDbWriter, root: Path
) -> None:
    filename = f"{PREFIX}/cc/00/G3/report.pdf"
    rowid = chat_db.message("\ufffc", files=[{"filename": filename, "transfer_name": "report.pdf",
                                              "transfer_state": 3}])

    def finish() -> None:
        stored(root, "report.pdf", b"%PDF-1.7\n", folder="cc/00/G3")
        writer = ChatDbWriter(chat_db.path)
        writer.update_attachments(rowid, transfer_state=5)
        writer.close()

    message = one(chat_db, root, wait=60)
    assert message.attachments[0].problem == "still downloading"  # the ingress itself does not wait
    timer = threading.Timer(0.5, finish)
    timer.start()
    try:
        reader = ingress(chat_db, root, wait=60)
        [attachment] = reader.settle_attachments(message, threading.Event())  # the wait ends when it finishes
    finally:
        timer.cancel()
    assert attachment.source == root.resolve() / "cc/00/G3/report.pdf"


def test_a_file_still_downloading_after_the_wait_is_reported_missing(chat_db: ChatDbWriter, root: Path) -> None:
    chat_db.message("\ufffc", files=[{"filename": f"{PREFIX}/dd/x.mov", "transfer_name": "x.mov",
                                      "transfer_state": 1}])
    _message, [attachment] = settled(chat_db, root, wait=0.5)
    assert attachment.source is None and attachment.problem == "still downloading after 0.5 s"


def test_settling_finished_files_does_not_wait(chat_db: ChatDbWriter, root: Path) -> None:
    chat_db.message("\ufffc", files=[{"filename": stored(root, "a.txt"), "transfer_name": "a.txt"}])
    message, attachments = settled(chat_db, root, wait=600)  # would hang the test if it waited
    assert attachments == message.attachments and attachments[0].source is not None


def test_apple_flow_inbox_lists_a_message_of_files_as_handled_with_their_names(
    chat_db: ChatDbWriter, root: Path
) -> None:
    from apple_flow.cli.diagnostics import inbox_rows
    from apple_flow.config import load_settings

    chat_db.message("\ufffc", files=[{"filename": stored(root, "crash.log"), "transfer_name": "crash.log"}])
    settings = load_settings(env_file=None, allowed_senders=["+15551234567"])
    [entry] = inbox_rows(chat_db.path, 5, settings)
    assert (entry["text"], entry["files"], entry["skipped"], entry["allowed"]) == ("", ["crash.log"], None, True)
