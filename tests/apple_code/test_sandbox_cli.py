"""The real apple-code binary and its command sandbox: which workspaces it refuses, and what it reports about the
sandbox. The home folder here is a folder of the test's own (HOME points at it), never the real one."""

from __future__ import annotations

import json
import shutil
import subprocess
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
