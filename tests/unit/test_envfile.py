"""Editing .env: values come back from the reader the settings use (python-dotenv) exactly as set, every other
line is kept byte for byte, the write is one atomic step at mode 0600, and a generated secret is one call."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from dotenv import dotenv_values

from apple_flow.envfile import EnvEdit, EnvFileError, format_value, set_value

TRICKY = [
    "plain",
    "+15551234567,me@icloud.com",
    "~/My Projects",
    "a #not a comment",
    "it's",
    'say "hi"',
    "back\\slash \\' both",
    "$HOME stays",
    "http://127.0.0.1:11434/v1",
    "中文 café 👋🏽",
    "",
    " padded ",
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("value", TRICKY)
def test_a_value_reads_back_exactly_as_set(tmp_path: Path, value: str) -> None:
    env = tmp_path / ".env"
    set_value(env, "APPLE_FLOW_X", value)
    assert dotenv_values(env)["APPLE_FLOW_X"] == value


@pytest.mark.parametrize("value", ["two\nlines", "a ${HOME} b", "cr\r"])
def test_what_the_reader_would_change_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        format_value(value)


def test_changes_replace_their_line_in_place_and_keep_every_other_byte(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    original = (
        "# mine\n"
        "APPLE_FLOW_A=1\n"
        "\n"
        "not a setting at all\n"
        "OTHER='multi\nline'\n"
        "apple_flow_a = 2   # the reader ignores case; the last one wins\n"
        "# APPLE_FLOW_B=\n"
        "  KEEP=\"x\"  "
    )
    env.write_bytes(original.encode())
    env.chmod(0o644)
    edit = EnvEdit(env)
    assert edit.get("APPLE_FLOW_A") == "2"
    edit.set("APPLE_FLOW_A", "3")
    edit.set("APPLE_FLOW_B", "b")
    edit.set("APPLE_FLOW_C", "c c")
    assert env.read_bytes() == original.encode()  # nothing written before save
    edit.save()
    assert env.read_text() == (
        "# mine\n"
        "APPLE_FLOW_A=1\n"
        "\n"
        "not a setting at all\n"
        "OTHER='multi\nline'\n"
        "APPLE_FLOW_A=3\n"
        "# APPLE_FLOW_B=\n"
        "APPLE_FLOW_B=b\n"
        "  KEEP=\"x\"  \n"
        "APPLE_FLOW_C='c c'\n"
    )
    assert mode(env) == 0o600
    assert dotenv_values(env) == {"APPLE_FLOW_A": "3", "OTHER": "multi\nline", "APPLE_FLOW_B": "b", "KEEP": "x",
                                  "APPLE_FLOW_C": "c c"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]  # no temporary file left


def test_an_unchanged_value_is_not_rewritten(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("export APPLE_FLOW_A=same\n")
    edit = EnvEdit(env)
    edit.set("APPLE_FLOW_A", "same")
    assert edit.changed == []
    edit.save()
    assert env.read_text() == "export APPLE_FLOW_A=same\n"


def test_a_generated_secret_is_one_call_and_kept_on_the_next_run(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    edit = EnvEdit(env, template="# settings\n# APPLE_FLOW_WEB_TOKEN=\n")
    token = edit.secret("APPLE_FLOW_WEB_TOKEN")
    assert len(token) >= 40
    edit.save()
    assert env.read_text() == f"# settings\n# APPLE_FLOW_WEB_TOKEN=\nAPPLE_FLOW_WEB_TOKEN={token}\n"
    again = EnvEdit(env)
    assert again.secret("APPLE_FLOW_WEB_TOKEN") == token and again.changed == []


def test_a_new_file_starts_from_the_template_and_is_private(tmp_path: Path) -> None:
    env = tmp_path / "sub" / ".env"
    old = os.umask(0o022)
    try:
        edit = EnvEdit(env, template="# documented\nAPPLE_FLOW_A=default\n")
        assert not edit.existed and edit.get("APPLE_FLOW_A") == "default"
        edit.set("APPLE_FLOW_A", "mine")
        edit.save()
    finally:
        os.umask(old)
    assert env.read_text() == "# documented\nAPPLE_FLOW_A=mine\n" and mode(env) == 0o600


def test_a_file_that_cannot_be_written_is_a_clear_error_and_stays_as_it_was(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.mkdir()  # a folder where the file should be: unwritable for root too
    with pytest.raises(EnvFileError, match="cannot"):
        set_value(env, "APPLE_FLOW_A", "1")
    assert env.is_dir()
