"""The real apple-code binary against the scripted server: usage errors, exit codes, backend failures, timeout,
signals, output formats. Every stream-json run ends with the result event as its last line."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.apple_code_run import clean_env, events, run_apple_code
from support.scripted_server import ScriptedServer, answer, hang, http_error, raw_body, tool_call, tool_calls
from support.waiting import wait_for

DEAD_URL = "http://127.0.0.1:9/v1"  # the discard port: nothing listens on loopback


def openai_args(url: str, *extra: str) -> list[str]:
    return ["--backend", "openai", "--base-url", url, "--model", "scripted", *extra]


def last_result(stdout: str) -> dict[str, object]:
    lines = events(stdout)
    assert lines, "no output"
    assert lines[-1]["type"] == "result"
    return lines[-1]


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["--bogus", "x"], None, "unknown option --bogus"),
        ([], None, "the prompt is empty"),  # stdin /dev/null: not a terminal, read, empty
        (["--cwd", "/no/such/folder", "x"], None, "no such folder"),
        (["--plan", "--parallel", "x"], None, "--read-only"),
        (["--timeout", "-3", "x"], None, "--timeout"),
        (["a", "b"], None, "one PROMPT"),
        (["-"], "   \n", "the prompt is empty"),
    ],
)
def test_usage_errors_exit_2_with_the_result_last(
    apple_code_bin: Path, args: list[str], stdin: str | None, expected: str
) -> None:
    done = run_apple_code(apple_code_bin, "--output-format", "stream-json", *args, stdin=stdin)
    assert done.returncode == 2, done.stderr
    result = last_result(done.stdout)
    assert result["subtype"] == "error_usage"
    assert result["is_error"] is True
    assert expected in str(result["result"])
    assert expected in done.stderr


def test_usage_error_in_text_and_json_formats(apple_code_bin: Path, tmp_path: Path) -> None:
    text = run_apple_code(apple_code_bin, "--cwd", str(tmp_path / "missing"), "x")
    assert text.returncode == 2
    assert text.stdout == ""
    assert "no such folder" in text.stderr
    one = run_apple_code(apple_code_bin, "--output-format", "json", "--max-turns", "zero", "x")
    assert one.returncode == 2
    assert json.loads(one.stdout)["subtype"] == "error_usage"
    assert len(one.stdout.splitlines()) == 1


def test_version_and_help(apple_code_bin: Path) -> None:
    version = run_apple_code(apple_code_bin, "--version")
    assert version.returncode == 0
    assert version.stdout.startswith("apple-code ")
    helped = run_apple_code(apple_code_bin, "--help")
    assert helped.returncode == 0
    assert "--context-tokens" in helped.stdout and "Exit codes" in helped.stdout


def test_connection_refused_exits_3_naming_the_url_and_how_to_start(apple_code_bin: Path) -> None:
    done = run_apple_code(apple_code_bin, *openai_args(DEAD_URL), "--output-format", "stream-json", "hi")
    assert done.returncode == 3
    result = last_result(done.stdout)
    assert result["subtype"] == "error_model_unavailable"
    assert DEAD_URL in str(result["result"])
    assert "scripts/local-model.sh start" in str(result["result"]) and "ollama serve" in str(result["result"])


def test_auto_without_fm_and_without_a_configured_server_exits_3(apple_code_bin: Path) -> None:
    done = run_apple_code(apple_code_bin, "--output-format", "json", "hi")
    assert done.returncode == 3
    result = json.loads(done.stdout)
    assert result["subtype"] == "error_model_unavailable"
    assert "APPLE_CODE_BASE_URL" in result["result"]


def test_auto_uses_the_server_from_the_environment(apple_code_bin: Path) -> None:
    with ScriptedServer([answer("from env")]) as server:
        env = clean_env(APPLE_CODE_BASE_URL=server.url, APPLE_CODE_MODEL="scripted")
        done = run_apple_code(apple_code_bin, "hi", env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "from env\n"
        assert server.requests()[0]["model"] == "scripted"


def test_http_error_exits_1(apple_code_bin: Path) -> None:
    with ScriptedServer([http_error(500, '{"error":{"message":"boom"}}')]) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url), "--output-format", "stream-json", "hi")
    assert done.returncode == 1
    result = last_result(done.stdout)
    assert result["subtype"] == "error_backend"
    assert "HTTP 500" in str(result["result"]) and "boom" in str(result["result"])


def test_non_json_body_exits_1(apple_code_bin: Path) -> None:
    with ScriptedServer([raw_body("<html>gateway</html>")]) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url), "--output-format", "json", "hi")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert "not JSON" in result["result"] and "<html>gateway" in result["result"]


def test_a_server_that_never_answers_is_bounded_by_timeout_with_the_partial_answer(apple_code_bin: Path) -> None:
    with ScriptedServer([tool_calls(tool_call("nosuchTool", {}), content="Let me look first."), hang()]) as server:
        started = time.monotonic()
        done = run_apple_code(
            apple_code_bin, *openai_args(server.url), "--timeout", "2", "--output-format", "stream-json", "hi"
        )
        elapsed = time.monotonic() - started
    assert done.returncode == 124
    assert elapsed < 8
    result = last_result(done.stdout)
    assert result["subtype"] == "error_timeout"
    assert "Let me look first." in str(result["result"])
    assert result["num_turns"] == 2


def test_timeout_in_text_mode_prints_the_partial_answer(apple_code_bin: Path) -> None:
    with ScriptedServer([tool_calls(tool_call("nosuchTool", {}), content="Partial so far."), hang()]) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url), "--timeout", "1.5", "hi")
    assert done.returncode == 124
    assert done.stdout == "Partial so far.\n"
    assert "error_timeout" in done.stderr


def test_sigterm_exits_130_with_the_result_last(apple_code_bin: Path) -> None:
    with ScriptedServer([hang()]) as server:
        process = subprocess.Popen(
            [str(apple_code_bin), *openai_args(server.url), "--output-format", "stream-json", "hi"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
        )
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        assert first["type"] == "start"
        wait_for(server.requests, 5, "the request")
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=10)
    assert process.returncode == 130
    assert last_result(rest)["subtype"] == "error_interrupted"


def test_max_turns_exits_1_error_max_turns(apple_code_bin: Path) -> None:
    script = [tool_call("nosuchTool", {"n": i}) for i in range(5)]
    with ScriptedServer(script) as server:
        done = run_apple_code(
            apple_code_bin, *openai_args(server.url), "--max-turns", "2", "--output-format", "json", "x"
        )
        assert len(server.requests()) == 2
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["subtype"] == "error_max_turns" and result["num_turns"] == 2


def test_budget_that_cannot_be_met_exits_4_with_the_figures(apple_code_bin: Path) -> None:
    with ScriptedServer([answer("never")]) as server:
        done = run_apple_code(
            apple_code_bin, *openai_args(server.url), "--context-tokens", "150", "--output-format", "json", "x"
        )
        assert server.requests() == []
    assert done.returncode == 4
    result = json.loads(done.stdout)
    assert result["subtype"] == "error_context"
    assert "--context-tokens 150" in result["result"] and "instructions" in result["result"]


def test_check_reports_availability_as_json(apple_code_bin: Path) -> None:
    with ScriptedServer([]) as server:
        ok = run_apple_code(apple_code_bin, "--check", "--backend", "openai", "--base-url", server.url)
    assert ok.returncode == 0
    report = json.loads(ok.stdout)
    assert isinstance(report.pop("sandbox"), str)  # test_sandbox_cli.py checks what it says
    assert report == {
        "backend": "openai", "available": True,
        "reason": f"OpenAI-compatible server at {server.url} answers (models: scripted)",
    }
    down = run_apple_code(apple_code_bin, "--check", "--backend", "openai", "--base-url", DEAD_URL)
    assert down.returncode == 3
    report = json.loads(down.stdout)
    assert report["available"] is False and DEAD_URL in report["reason"]
    fm = run_apple_code(apple_code_bin, "--check", "--backend", "fm")
    assert fm.returncode == 3
    assert json.loads(fm.stdout)["backend"] == "fm"


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that accepts connections (the kernel completes them) and never answers anything."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def test_check_calls_a_silent_server_busy_not_unavailable(apple_code_bin: Path, silent_url: str) -> None:
    """A server that accepts the connection but does not answer /models within 3 s is there
    (llama.cpp answers /models only between generations): available, and the reason says it is busy."""
    started = time.monotonic()
    done = run_apple_code(apple_code_bin, "--check", "--backend", "openai", "--base-url", silent_url, timeout=20)
    assert done.returncode == 0
    report = json.loads(done.stdout)
    assert report["available"] is True and "busy" in report["reason"] and silent_url in report["reason"]
    assert time.monotonic() - started < 10


def test_a_run_against_a_silent_server_ends_at_its_timeout_never_as_no_model(
    apple_code_bin: Path, silent_url: str
) -> None:
    """A server that accepts connections is never "no model" (exit 3): the run waits for it and ends at its own
    --timeout (exit 124), whether that comes before the 3 s probe gives up or after."""
    for seconds in ("1", "2.5", "5"):
        timed = run_apple_code(apple_code_bin, *openai_args(silent_url), "--timeout", seconds, "--output-format",
                               "json", "--verbose", "hi", timeout=20)
        assert timed.returncode == 124, (seconds, timed.stdout)
        assert json.loads(timed.stdout)["subtype"] == "error_timeout"
        if seconds == "5":
            assert "busy" in timed.stderr


def test_a_busy_server_is_waited_for_and_answers(apple_code_bin: Path) -> None:
    """/models takes 5 s (the server is generating for someone else): the run waits, then goes on."""
    with ScriptedServer([answer("ok")], models_delay=5) as server:
        started = time.monotonic()
        done = run_apple_code(apple_code_bin, *openai_args(server.url), "--timeout", "30", "--output-format",
                              "json", "--verbose", "hi", timeout=40)
        elapsed = time.monotonic() - started
        assert [entry["path"] for entry in server.request_log()][-1].endswith("/chat/completions")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "ok"
    assert elapsed >= 5
    assert "busy" in done.stderr


def test_prompt_from_stdin_and_the_model_from_the_server(apple_code_bin: Path) -> None:
    with ScriptedServer([answer("ok")]) as server:
        done = run_apple_code(apple_code_bin, "--backend", "openai", "--base-url", server.url, "-",
                              stdin="Explain the code\nplease")
        body = server.requests()[0]
    assert done.returncode == 0
    assert body["model"] == "scripted"  # learnt from GET /models
    assert body["messages"][1] == {"role": "user", "content": "Explain the code\nplease"}
    assert body["messages"][0]["role"] == "system"


def test_long_answers_keep_every_stream_line_under_16_kib(apple_code_bin: Path) -> None:
    long_answer = "word " * 12_000
    with ScriptedServer([answer(long_answer)]) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url), "--output-format", "stream-json", "x")
    assert done.returncode == 0
    lines = events(done.stdout)
    assert "".join(str(e["delta"]) for e in lines if e["type"] == "text") == long_answer
    assert "line limit 16 KiB" in str(lines[-1]["result"])
    whole = run_json_answer(apple_code_bin, long_answer)
    assert whole == long_answer


def test_huge_tool_arguments_of_short_values_keep_stream_lines_under_16_kib(apple_code_bin: Path) -> None:
    """Arguments with no one long string (thousands of numbers or keys) are cut too, and `type` stays intact."""
    numbers = tool_call("readFile", {"path": "a.txt", "junk": list(range(5000))})
    keys = tool_call("readFile", {f"k{i}": "v" for i in range(3000)})
    with ScriptedServer([numbers, keys, answer("done")]) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url), "--output-format", "stream-json",
                              "--context-tokens", "100000", "x")
    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    assert [e["type"] for e in lines] == ["start", "tool_call", "tool_result", "tool_call", "tool_result", "text",
                                          "result"]
    calls = [e for e in lines if e["type"] == "tool_call"]
    assert calls[0]["arguments"]["path"] == "a.txt"
    assert all("line limit 16 KiB" in json.dumps(call["arguments"]) for call in calls)


def run_json_answer(binary: Path, text: str) -> str:
    with ScriptedServer([answer(text)]) as server:
        done = run_apple_code(binary, *openai_args(server.url), "--output-format", "json", "x")
    return str(json.loads(done.stdout)["result"])
