"""The real apple-code binary and its command sandbox: which workspaces it refuses, and what it reports about the
sandbox. The home folder here is a folder of the test's own (HOME points at it), never the real one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support.apple_code_run import clean_env, run_apple_code

DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens: a run that gets past the workspace check ends with exit 3


def run_in(binary: Path, home: Path, cwd: Path | str, *extra: str) -> tuple[int, str]:
    done = run_apple_code(binary, "--backend", "openai", "--base-url", DEAD_URL, "--cwd", str(cwd),
                          "--output-format", "json", *extra, "list the files", env=clean_env(HOME=str(home)))
    return done.returncode, json.loads(done.stdout)["result"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / "me"
    (folder / "code" / "site").mkdir(parents=True)
    return folder


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("root", "is the root folder"),
        ("home", "is the home folder"),
        ("above", "holds the home folder"),
    ],
)
def test_a_workspace_of_root_home_or_above_is_a_usage_error(
    apple_code_bin: Path, home: Path, where: str, said: str
) -> None:
    cwd = {"root": Path("/"), "home": home, "above": home.parent}[where]
    code, result = run_in(apple_code_bin, home, cwd)
    assert code == 2, result
    assert said in result and "use a project folder" in result and "--read-only" in result


def test_a_project_folder_and_a_read_only_home_are_accepted(apple_code_bin: Path, home: Path) -> None:
    # Exit 3: past the workspace check, stopped by the backend nobody listens for.
    assert run_in(apple_code_bin, home, home / "code" / "site")[0] == 3
    assert run_in(apple_code_bin, home, home, "--read-only")[0] == 3


def test_check_says_which_sandbox_commands_get(apple_code_bin: Path, tmp_path: Path) -> None:
    done = run_apple_code(apple_code_bin, "--check", "--backend", "openai", "--base-url", DEAD_URL)
    report = json.loads(done.stdout)
    bwrap = shutil.which("bwrap")
    works = bwrap is not None and subprocess.run([bwrap, "--ro-bind", "/", "/", "true"]).returncode == 0
    expected = "bwrap (" if works else "none ("
    assert report["sandbox"].startswith(expected), report


def bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    return bwrap is not None and subprocess.run([bwrap, "--ro-bind", "/", "/", "true"]).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not bwrap_works(), reason="needs a working bwrap")
def test_sandbox_check_passes_every_check_under_bwrap(apple_code_bin: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    secret = tmp_path / "state"
    secret.mkdir()
    (secret / "relay.db").write_text("db")
    done = run_apple_code(apple_code_bin, "--sandbox-check", "--hide", str(secret), "--deny-port", "8787",
                          env=clean_env(HOME=str(home)), timeout=300)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0].startswith("sandbox: bwrap (")
    checks = [line for line in lines[1:] if line.strip()]
    assert all(line.startswith(("ok    ", "skip  ")) for line in checks), checks
    names = " | ".join(checks)
    # The whole list runs here; the Mac-only checks are skipped and say why.
    for expected in ("writes there", "outside the workspace is refused", ".git/hooks", "outlive", "swift build",
                     "ok    `umount` of a hidden path is refused",
                     "ok    .git/commondir and a nested submodule's config cannot be written",
                     "ok    a folder holding a hidden path cannot be renamed",
                     "ok    a read-write remount of the file system is refused",
                     "ok    every hidden path is unreadable (4 here)", "core.hooksPath", "curl https://example.com",
                     "DNS lookup", "loopback server", "denied loopback port", "TIOCSTI", "`kill` of a process"):
        assert expected in names, expected
    for mac_only in (".GIT/hooks/pre-commit", "osascript", "launchctl submit", "`open`"):
        (line,) = [line for line in checks if mac_only in line]
        assert line.startswith("skip  ") and ": macOS only" in line
    assert sorted(p.name for p in home.iterdir()) == [".ssh"]  # the write aimed at the home folder was refused


NOBODY = 65534


@pytest.mark.skipif(not bwrap_works(), reason="needs a working bwrap")
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to become nobody (as a normal user the test above is this one)")
def test_sandbox_check_passes_as_a_normal_user(apple_code_bin: Path) -> None:
    """The capability checks as a user without root: bwrap then makes a user namespace itself, and --cap-drop ALL
    must not get in its way. A folder of the test's own under /tmp (pytest's tmp_path is root's alone)."""
    with tempfile.TemporaryDirectory(prefix="apple-code-nobody-") as folder:
        base = Path(folder)
        home, tmp = base / "home", base / "tmp"
        for path in (home / ".ssh", tmp):
            path.mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("key")
        for path in (base, home, home / ".ssh", home / ".ssh" / "id_ed25519", tmp):
            os.chown(path, NOBODY, NOBODY)
        env = clean_env(HOME=str(home), TMPDIR=str(tmp), PATH="/usr/bin:/bin")  # no swift: no 10-minute build
        done = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
             str(apple_code_bin), "--sandbox-check"],
            capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        assert done.returncode == 0, done.stdout + done.stderr
        assert "ok    `umount` of a hidden path is refused" in lines
        assert "ok    a read-write remount of the file system is refused" in lines
        assert "ok    .git/commondir and a nested submodule's config cannot be written" in lines
        assert "ok    a folder holding a hidden path cannot be renamed" in lines
        assert "ok    every hidden path is unreadable (3 here)" in lines
        assert sorted(p.name for p in home.iterdir()) == [".ssh"]


@pytest.mark.skipif(sys.platform != "linux", reason="the missing sandbox here is bwrap")
def test_sandbox_check_without_a_sandbox_fails_and_runs_nothing(apple_code_bin: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # No bwrap on PATH (the shell's tools stay reachable by absolute path; none is needed to fail).
    done = run_apple_code(apple_code_bin, "--sandbox-check", env=clean_env(HOME=str(home), PATH=str(tmp_path)))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "sandbox: none (bwrap not installed; install the bubblewrap package)",
        "FAIL  a working command sandbox: none (bwrap not installed; install the bubblewrap package)",
    ]
    assert list(home.iterdir()) == []
