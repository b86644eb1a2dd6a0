"""Files that came with a message, copied into the workspace's `.apple-flow/inbox/` (real files): safe unique names,
the size limits per file and per message, never through a link out of the inbox or over a workspace file; and the
note for the agent, within its share of the 3,000-character prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from apple_flow.channels.base import Attachment
from apple_flow.connectors.prompt import fit_prompt
from apple_flow.daemon.running.arrivals import INBOX, NOTE_MAX_CHARS, Arrival, FileLimits, describe, receive, safe_name

ROOMY = FileLimits(file_bytes=1_000_000, message_bytes=2_000_000)


def source(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content)
    return path


def test_files_are_copied_into_the_inbox_under_safe_unique_names(tmp_path: Path, workspace: Path) -> None:
    log = source(tmp_path / "att", "crash.log", b"Traceback: boom\n")
    photo = source(tmp_path / "att", "p.heic", b"\x00\x00\x00\x18ftypheic")
    hostile = source(tmp_path / "att", "x", b"echo hi\n")

    arrivals = receive([
        Attachment("crash.log", "text/plain", 16, log),
        Attachment("IMG 0001.HEIC", "image/heic", 12, photo),
        Attachment("../../.bashrc", "", 8, hostile),
    ], workspace, 42, ROOMY)

    assert [a.path for a in arrivals] == [
        f"{INBOX}/42-1-crash.log", f"{INBOX}/42-2-IMG_0001.HEIC", f"{INBOX}/42-3-bashrc",
    ]
    assert [a.text for a in arrivals] == [True, False, True]
    assert (workspace / INBOX / "42-1-crash.log").read_bytes() == b"Traceback: boom\n"
    assert sorted(p.name for p in (workspace / INBOX).iterdir()) == ["42-1-crash.log", "42-2-IMG_0001.HEIC",
                                                                      "42-3-bashrc"]
    assert not (workspace.parent / ".bashrc").exists()


def test_an_existing_file_of_that_name_is_never_overwritten(tmp_path: Path, workspace: Path) -> None:
    (workspace / INBOX).mkdir(parents=True)
    (workspace / INBOX / "7-1-a.txt").write_text("the first one\n")
    new = source(tmp_path / "att", "a.txt", b"the second one\n")

    [arrival] = receive([Attachment("a.txt", "text/plain", 15, new)], workspace, 7, ROOMY)

    assert arrival.path == f"{INBOX}/7-1-a-2.txt"
    assert (workspace / INBOX / "7-1-a.txt").read_text() == "the first one\n"
    assert (workspace / INBOX / "7-1-a-2.txt").read_text() == "the second one\n"


def test_size_limits_hold_per_file_and_per_message(tmp_path: Path, workspace: Path) -> None:
    big = source(tmp_path / "att", "big.bin", b"x" * 2000)
    mid = source(tmp_path / "att", "mid.txt", b"y" * 600)
    small = source(tmp_path / "att", "small.txt", b"z" * 100)

    arrivals = receive([
        Attachment("big.bin", "", 2000, big),
        Attachment("mid.txt", "", 600, mid),
        Attachment("mid again.txt", "", 600, mid),
        Attachment("small.txt", "", 100, small),
    ], workspace, 1, FileLimits(file_bytes=1000, message_bytes=800))

    assert [a.path is not None for a in arrivals] == [False, True, False, True]
    assert "too large (2.0 KB; the limit is 1000 bytes a file)" in arrivals[0].problem
    assert "over the limit for one message's files" in arrivals[2].problem
    assert sorted(p.name for p in (workspace / INBOX).iterdir()) == ["1-2-mid.txt", "1-4-small.txt"]


@pytest.mark.parametrize("part", [".apple-flow", "inbox"])
def test_an_inbox_that_is_a_link_is_not_used(tmp_path: Path, workspace: Path, part: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if part == ".apple-flow":
        (workspace / ".apple-flow").symlink_to(elsewhere, target_is_directory=True)
    else:
        (workspace / ".apple-flow").mkdir()
        (workspace / ".apple-flow" / "inbox").symlink_to(elsewhere, target_is_directory=True)
    file = source(tmp_path / "att", "a.txt", b"hello\n")

    [arrival] = receive([Attachment("a.txt", "text/plain", 6, file)], workspace, 3, ROOMY)

    assert arrival.path is None and f"{part} in the workspace is a link" in arrival.problem
    assert list(elsewhere.rglob("*")) == []


def test_a_source_swapped_for_a_link_after_the_check_is_not_followed(tmp_path: Path, workspace: Path) -> None:
    secret = source(tmp_path, "secret.txt", b"private\n")
    link = tmp_path / "att" / "a.txt"
    link.parent.mkdir()
    link.symlink_to(secret)

    [arrival] = receive([Attachment("a.txt", "text/plain", 8, link)], workspace, 4, ROOMY)

    assert arrival.path is None and "could not be read" in arrival.problem
    assert list((workspace / INBOX).iterdir()) == []


def test_a_source_that_is_a_folder_is_not_copied(tmp_path: Path, workspace: Path) -> None:
    folder = tmp_path / "att" / "photos"
    folder.mkdir(parents=True)

    [arrival] = receive([Attachment("photos", "", 0, folder)], workspace, 6, ROOMY)

    assert arrival.path is None and arrival.problem == "it is not a regular file"
    assert list((workspace / INBOX).iterdir()) == []


def test_what_did_not_arrive_keeps_its_reason(workspace: Path) -> None:
    [arrival] = receive([Attachment("v.caf", "audio/x-caf", 900, None, "still downloading after 15 s")],
                        workspace, 5, ROOMY)
    assert arrival == Arrival("v.caf", "audio/x-caf", 900, None, False, "still downloading after 15 s")


def test_safe_names() -> None:
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("C:\\Users\\x\\evil.bat") == "evil.bat"
    assert safe_name("..") == "file"
    assert safe_name(".env") == "env"
    assert safe_name("a\nb\x00c.txt") == "a_b_c.txt"
    long = safe_name("n" * 300 + ".patch")
    assert len(long) == 80 and long.endswith(".patch")


def test_the_note_says_where_each_file_is_what_it_is_and_what_is_missing() -> None:
    note = describe([
        Arrival("crash.log", "text/plain", 2048, f"{INBOX}/9-1-crash.log", True),
        Arrival("IMG.HEIC", "image/heic", 3 * 1024 * 1024, f"{INBOX}/9-2-IMG.HEIC", False),
        Arrival("v.caf", "audio/x-caf", 900, None, False, "still downloading after 15 s"),
    ])
    assert note == (
        "The user sent 3 files with this message:\n"
        f"- {INBOX}/9-1-crash.log (2.0 KB, text): read it with your file tools\n"
        f"- {INBOX}/9-2-IMG.HEIC (image/heic, 3.0 MB): not text, you cannot read it\n"
        "- v.caf: not received (still downloading after 15 s)"
    )


def test_the_note_of_many_files_stays_within_its_bound_and_counts_the_rest() -> None:
    arrivals = [Arrival(f"f{i}.txt", "text/plain", 10, f"{INBOX}/1-{i}-f{i}.txt", True) for i in range(60)]
    note = describe(arrivals)
    assert len(note) <= NOTE_MAX_CHARS
    assert note.splitlines()[-1].startswith("- and ") and note.splitlines()[-1].endswith(f"more in {INBOX}/")
    shown = len(note.splitlines()) - 2
    assert note.splitlines()[-1] == f"- and {60 - shown} more in {INBOX}/"


def test_the_note_survives_a_long_message_and_history_within_the_prompt_budget() -> None:
    from apple_flow.connectors.base import Exchange

    note = describe([Arrival("a.txt", "text/plain", 5, f"{INBOX}/3-1-a.txt", True)])
    prompt = fit_prompt("please " * 2000, [Exchange("earlier " * 100, "answer " * 100)], 3000, note)
    assert len(prompt) <= 3000
    assert prompt.endswith(note)
