"""Which files an answer asks to send (`ATTACH:` lines, or the files changed when the user asked for a file) and
which may go: only regular files inside the workspace (resolved: no link leads out), within the limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from apple_flow.daemon.deciding.files_to_send import Outgoing, asks_for_file, check, check_all, note, take_attach_lines


def test_attach_lines_are_taken_out_of_the_answer() -> None:
    answer = "I wrote the report.\n\nATTACH: report.md\n- attach: `out/data.csv`\nATTACH: report.md\n"
    assert take_attach_lines(answer) == ("I wrote the report.", ["report.md", "out/data.csv"])
    assert take_attach_lines("No files here. To attach one, ask.") == ("No files here. To attach one, ask.", [])


@pytest.mark.parametrize("request_text", [
    "send me the log", "can you send the report back to me?", "attach the diff", "text me the patch",
    "give me the output as a file",
])
def test_asking_for_a_file(request_text: str) -> None:
    assert asks_for_file(request_text)


@pytest.mark.parametrize("request_text", ["fix the failing test", "what does main.py do?", "send an email later"])
def test_not_asking_for_a_file(request_text: str) -> None:
    assert not asks_for_file(request_text)


@pytest.fixture
def files(workspace: Path, tmp_path: Path) -> Path:
    (workspace / "out").mkdir()
    (workspace / "out" / "report.md").write_text("# report\n")
    (workspace / "big.bin").write_bytes(b"x" * 5000)
    (tmp_path / "secret.txt").write_text("private\n")
    (workspace / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "inside-link.md").symlink_to(workspace / "out" / "report.md")
    return workspace


@pytest.mark.parametrize(("named", "problem"), [
    ("../secret.txt", "outside the workspace"),
    ("out/../../secret.txt", "outside the workspace"),
    ("SECRET", "outside the workspace"),  # replaced by the absolute path below
    ("escape.txt", "outside the workspace"),
    ("out", "not a file"),
    ("missing.txt", "no such file"),
    ("big.bin", "too large (4.9 KB; the limit is 1000 bytes)"),
    ("", "no file name"),
])
def test_files_that_may_not_go(files: Path, tmp_path: Path, named: str, problem: str) -> None:
    named = str(tmp_path / "secret.txt") if named == "SECRET" else named
    outgoing = check(named, files, 1000)
    assert outgoing.path is None and outgoing.problem == problem


def test_files_that_may_go_are_resolved_inside_the_workspace(files: Path) -> None:
    assert check("out/report.md", files, 1000) == Outgoing("out/report.md", files / "out" / "report.md", 9)
    assert check(str(files / "out" / "report.md"), files, 1000).path == files / "out" / "report.md"
    assert check("inside-link.md", files, 1000).path == files / "out" / "report.md"  # a link that stays inside


def test_at_most_so_many_files_a_reply_and_none_when_off(files: Path) -> None:
    checked = check_all(["out/report.md", "out/report.md", "out/report.md"], files, 1000, 2)
    assert [o.problem for o in checked] == ["", "", "at most 2 files a reply"]
    assert check_all(["out/report.md"], files, 1000, 0)[0].problem == "sending files is turned off"


def test_the_note_says_what_is_sent_and_what_not() -> None:
    assert note([
        Outgoing("report.md", Path("/w/report.md"), 2048),
        Outgoing("../secret.txt", problem="outside the workspace"),
    ]) == "Sending: report.md (2.0 KB).\nNot sent: ../secret.txt (outside the workspace)."
