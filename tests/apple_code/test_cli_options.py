"""Options that shape the request: extra instructions, which tools are offered, the default budget, the API key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.apple_code_run import events, run_apple_code
from support.scripted_server import ScriptedServer, answer

READ_ONLY = ["readFile", "listDirectory", "searchFiles", "searchContent"]


def first_request(binary: Path, *args: str) -> tuple[list[dict[str, object]], dict[str, object]]:
    with ScriptedServer([answer("ok")]) as server:
        done = run_apple_code(binary, "--backend", "openai", "--base-url", server.url, "--output-format",
                              "stream-json", *args, "task")
        assert done.returncode == 0, done.stderr
        log = server.request_log()
        return events(done.stdout), {"body": server.requests()[0], "headers": log[-1]["headers"]}


def test_extra_instructions_follow_the_built_in_ones(apple_code_bin: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra.txt"
    extra.write_text("Answer in French.")
    _, sent = first_request(apple_code_bin, "--system", "Be terse.", "--system-file", str(extra))
    system = sent["body"]["messages"][0]["content"]  # type: ignore[index]
    assert system.startswith("You are apple-code")
    assert system.endswith("\n\nBe terse.\n\nAnswer in French.")


def test_an_unreadable_system_file_is_a_usage_error(apple_code_bin: Path, tmp_path: Path) -> None:
    done = run_apple_code(apple_code_bin, "--system-file", str(tmp_path / "missing.txt"), "--output-format", "json",
                          "task")
    assert done.returncode == 2
    assert "cannot read it" in json.loads(done.stdout)["result"]


@pytest.mark.parametrize(
    ("flags", "tools"),
    [
        (["--read-only"], READ_ONLY),
        (["--no-commands"], ["readFile", "writeFile", "editFile", "listDirectory", "searchFiles", "searchContent"]),
    ],
)
def test_read_only_and_no_commands_offer_fewer_tools(apple_code_bin: Path, flags: list[str], tools: list[str]) -> None:
    lines, sent = first_request(apple_code_bin, *flags)
    assert lines[0]["tools"] == tools
    assert [t["function"]["name"] for t in sent["body"]["tools"]] == tools  # type: ignore[index]


def test_no_tools_offers_none_and_sends_no_tools_field(apple_code_bin: Path) -> None:
    lines, sent = first_request(apple_code_bin, "--no-tools")
    assert lines[0]["tools"] == []
    assert "tools" not in sent["body"] and "tool_choice" not in sent["body"]  # type: ignore[operator]


def test_temperature_and_max_tokens_shape_every_request(apple_code_bin: Path) -> None:
    _, sent = first_request(apple_code_bin, "--temperature", "0.3", "--max-tokens", "40")
    assert sent["body"]["temperature"] == 0.3 and sent["body"]["max_tokens"] == 40  # type: ignore[index]
    _, sent = first_request(apple_code_bin, "--max-tokens", "100000")  # never above the answer reserve
    # Not given: temperature 0 (the same reply to the same request), the whole answer reserve.
    assert sent["body"]["max_tokens"] == 512 and sent["body"]["temperature"] == 0  # type: ignore[index]


@pytest.mark.parametrize(("flag", "value"), [("--temperature", "3"), ("--temperature", "hot"), ("--max-tokens", "0")])
def test_a_bad_temperature_or_max_tokens_is_a_usage_error(apple_code_bin: Path, flag: str, value: str) -> None:
    done = run_apple_code(apple_code_bin, flag, value, "--output-format", "json", "task")
    assert done.returncode == 2 and flag in json.loads(done.stdout)["result"]


@pytest.mark.parametrize("other", [["--verify", "true"], ["--plan"]])
def test_no_tools_with_verify_or_plan_is_a_usage_error(apple_code_bin: Path, other: list[str]) -> None:
    done = run_apple_code(apple_code_bin, "--no-tools", *other, "--output-format", "json", "task")
    assert done.returncode == 2
    assert "--no-tools cannot go with" in json.loads(done.stdout)["result"]


def test_defaults_budget_4096_and_bearer_key(apple_code_bin: Path) -> None:
    lines, sent = first_request(apple_code_bin, "--api-key", "sekrit")
    assert lines[0]["context_tokens"] == 4096
    assert sent["body"]["max_tokens"] == 512  # type: ignore[index]
    assert sent["headers"]["authorization"] == "Bearer sekrit"  # type: ignore[index]
    assert sent["body"]["stream"] is True  # type: ignore[index]
