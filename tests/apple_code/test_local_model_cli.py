"""apple-code against the real local llama.cpp server (SmolLM2-135M): a real tool-call round trip that ends in an
answer, and a run stopped while the model writes its answer leaves the server free for the next request. The model
is a 135M demo: the tests check the mechanics (calls run, results go back folded into user messages, the run ends
with an answer within its limits; the generation stops), not the quality of what it says."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from apple_flow.localmodel import LocalModelServer
from support.apple_code_run import clean_env, events, run_apple_code, scripted_args
from support.local_model import require_local_model, running_local_model
from support.scripted_server import ScriptedServer, answer, tool_call

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


def test_a_real_tool_call_round_trip_ends_in_an_answer(
    apple_code_bin: Path, fast_model_server: LocalModelServer, tmp_path: Path
) -> None:
    (tmp_path / "hello.py").write_text("print('hi')\n")
    (tmp_path / "notes.txt").write_text("buy milk\n")
    done = run_apple_code(
        apple_code_bin, "--backend", "openai", "--base-url", fast_model_server.url, "--cwd", str(tmp_path),
        "--read-only", "--max-turns", "8", "--timeout", "240", "--output-format", "stream-json", "--verbose",
        "Which files are in this folder? Call listDirectory.", timeout=300,
    )
    lines = events(done.stdout)
    result = lines[-1]
    assert result["type"] == "result"
    assert done.returncode == 0, (result, done.stderr[-2000:])
    assert result["subtype"] == "success"
    assert result["model"] == "smollm2-135m"
    calls = [e for e in lines if e["type"] == "tool_call"]
    results = [e for e in lines if e["type"] == "tool_result"]
    assert calls and [c["id"] for c in calls] == [r["id"] for r in results]
    assert any(r["ok"] and r["name"] == "listDirectory" for r in results), results
    assert str(result["result"]).strip()
    # The llama.cpp server was recognised (it drops role "tool" messages), and every request fitted.
    assert "tool results folded into user messages" in done.stderr
    sizes = [int(size) for size in re.findall(r"request \d+: (\d+) of 4096 (?:estimated|calibrated|exact) tokens",
                                              done.stderr)]
    assert sizes and max(sizes) <= 4096


# An answer that takes the model a while to write: SmolLM2 writes such a story to the 512 tokens of the answer
# reserve (measured: 512 of 512 in 4 tries; numbers "1 to 400" sometimes stop early).
LONG_ANSWER = "Write a very long story about a dragon, at least 1000 words."


def seconds_until_models_answers(url: str) -> float:
    """How long the server takes to answer GET /models: llama.cpp answers it only between generations."""
    started = time.monotonic()
    with urllib.request.urlopen(f"{url}/models", timeout=300) as response:
        assert response.status == 200
    return time.monotonic() - started


def abandon_unstreamed(url: str, prompt: str, after: float) -> None:
    """The same kind of request sent without streaming, its connection closed after ``after`` seconds: what an
    abandoned request did before requests streamed."""
    parsed = urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port, timeout=after)
    body = {"model": "smollm2-135m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 512,
            "stream": False}
    connection.request("POST", f"{parsed.path}/chat/completions", json.dumps(body),
                       {"Content-Type": "application/json"})
    try:
        connection.getresponse()  # the whole answer would arrive at its end; the timeout comes first
        raise AssertionError("the unstreamed answer was complete within the wait: it was too short to tell")
    except TimeoutError:
        pass
    finally:
        connection.close()


def test_a_run_stopped_while_the_model_writes_leaves_the_server_free(
    apple_code_bin: Path, fast_model_server: LocalModelServer, tmp_path: Path
) -> None:
    """On llama.cpp itself: stopping a run (here SIGTERM, a cancel; --timeout stops it the same
    way) closes the streamed request, which stops the generation, so the next request is answered at once and does
    not wait behind the abandoned answer. The control shows what that wait is: the same kind of answer asked
    without streaming and abandoned keeps the server busy until it is written."""
    abandon_unstreamed(fast_model_server.url, LONG_ANSWER, after=1.0)
    busy = seconds_until_models_answers(fast_model_server.url)

    (tmp_path / "notes.txt").write_text("buy milk\n")
    # --max-turns 2: one request with tools, then the answer request, which offers none and streams.
    process = subprocess.Popen(
        [str(apple_code_bin), "--backend", "openai", "--base-url", fast_model_server.url, "--cwd", str(tmp_path),
         "--read-only", "--max-turns", "2", "--timeout", "240", "--output-format", "stream-json", "--verbose",
         LONG_ANSWER],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
    )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:  # until the answer starts to arrive
        seen.append(json.loads(line))
        if seen[-1]["type"] in ("text", "result"):
            break
    assert seen[-1]["type"] == "text", seen
    process.send_signal(signal.SIGTERM)
    rest, stderr = process.communicate(timeout=60)
    free = seconds_until_models_answers(fast_model_server.url)
    print(f"abandoned unstreamed: the server answered after {busy:.1f} s; stopped run: after {free:.2f} s")

    assert process.returncode == 130, stderr[-2000:]
    assert events(rest)[-1]["subtype"] == "error_interrupted"
    # Stopped: the server answers at once, not after writing the rest of the answer (the control's wait).
    assert busy > 1.0, f"the control answer took only {busy:.1f} s more: too short to tell"
    assert free < busy / 3, f"the server answered {free:.1f} s after the stop; the abandoned control took {busy:.1f} s"


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    """The local model server with a 2,048-token context: reading files fills it in a few reads, and each request
    costs the 2-core machine half the prompt evaluation of a 4,096-token one."""
    with running_local_model(tmp_path_factory.mktemp("local-model-2048"), context_tokens=2048) as server:
        yield server


def test_reading_until_the_window_is_full_never_overflows_the_local_models_window(
    apple_code_bin: Path, tmp_path: Path
) -> None:
    """In the local model's own tokens: the reads are scripted (a 135M model does not read files on
    request reliably) by a server that plays llama-cpp-python exactly where it counts: each request is rendered by
    llama-cpp-python's own chatml-function-calling handler (its template, tools and HTML escaping) and counted with
    SmolLM2's tokenizer, and a prompt that fills the 2,048-token context is refused as that server refuses it. (The
    same requests sent through the real server took over 9 minutes each to evaluate on this loaded 2-core machine;
    the next test runs the real server with its context equal to --context-tokens.) Four reads of 60 long lines
    fill the window again and again; no prompt may be refused, each must leave the answer reserve, and apple-code's
    figure for a request must never be below the count."""
    require_local_model()
    from apple_flow.localmodel import model_file

    line = "    total = order.amount * rate + tax  # line {n}: adjusted for the customer's \"region\" & currency\n"
    names = ["orders.py", "billing.py"]
    for name in names:
        (tmp_path / name).write_text("".join(line.format(n=n) for n in range(1, 201)))
    reads = [tool_call("readFile", {"path": name, "startLine": start, "endLine": start + 59})
             for name in names for start in (1, 61)]
    with ScriptedServer([*reads, answer("They compute totals.")], tokenizer="llama-cpp-python", count_usage=True,
                        count_model=str(model_file("smollm2-135m")), count_context=2048) as scripted:
        done = run_apple_code(apple_code_bin, *scripted_args(scripted.url, tmp_path, "--read-only", "--context-tokens",
                                                             "2048", "--max-turns", "12", "--timeout", "540"),
                              "Read the two files.", timeout=600)
        counted = scripted.counted()
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(counted) == len(reads) + 1
    assert [entry["error"] for entry in counted if entry["prompt_tokens"] is None] == []
    sizes = [entry["prompt_tokens"] + entry["max_tokens"] for entry in counted]
    assert max(sizes) <= 2048
    assert max(sizes) > 2048 * 0.85, sizes  # the reads did fill the window
    assert "budget: exact tokens from request 2 on" in done.stderr, done.stderr[-3000:]
    figures = re.findall(r"reply \d+: the server counted (\d+) prompt tokens \(figured (\d+), (\w+)\)", done.stderr)
    assert len(figures) == len(counted)
    assert all(int(real) <= int(figure) for real, figure, kind in figures if kind == "exact"), figures
    results = [e for e in events(done.stdout) if e["type"] == "tool_result"]
    assert len(results) == len(reads) and all(r["ok"] for r in results)


def test_a_real_run_counts_exactly_with_the_servers_tokenizer(
    apple_code_bin: Path, small_server: LocalModelServer, tmp_path: Path
) -> None:
    """The model decides, against a server whose context is --context-tokens: after the first request (whose usage
    the server reports) requests are counted with the server's tokenizer, and none was figured below the server's
    own count."""
    (tmp_path / "orders.py").write_text("total = amount * rate  # the customer's \"net\" total\n" * 80)
    done = run_apple_code(
        apple_code_bin, "--backend", "openai", "--base-url", small_server.url, "--cwd", str(tmp_path), "--read-only",
        "--context-tokens", "2048", "--max-turns", "3", "--timeout", "300", "--output-format", "stream-json",
        "--verbose", "Call readFile with path orders.py.", timeout=360,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "/extras/tokenize/count" in done.stderr and " of 2048 exact tokens" in done.stderr, done.stderr[-3000:]
    figures = re.findall(r"reply \d+: the server counted (\d+) prompt tokens \(figured (\d+), (\w+)\)", done.stderr)
    assert any(kind == "exact" for _, _, kind in figures)
    assert all(int(real) <= int(figure) for real, figure, kind in figures if kind == "exact"), figures
    assert 300 < events(done.stdout)[-1]["usage"]["fixed_tokens"] < 600
