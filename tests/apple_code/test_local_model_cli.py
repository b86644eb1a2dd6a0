"""apple-code against the real local llama.cpp server (SmolLM2-135M): a real tool-call round trip that ends in an
answer. The model is a 135M demo: the test checks the mechanics (calls run, results go back folded into user
messages, the run ends with an answer within its limits), not the quality of what it says."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from apple_flow.localmodel import LocalModelServer
from support.apple_code_run import events, run_apple_code
from support.local_model import running_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    with running_local_model(tmp_path_factory.mktemp("local-model")) as server:
        yield server


def test_a_real_tool_call_round_trip_ends_in_an_answer(
    apple_code_bin: Path, server: LocalModelServer, tmp_path: Path
) -> None:
    (tmp_path / "hello.py").write_text("print('hi')\n")
    (tmp_path / "notes.txt").write_text("buy milk\n")
    done = run_apple_code(
        apple_code_bin, "--backend", "openai", "--base-url", server.url, "--cwd", str(tmp_path), "--read-only",
        "--max-turns", "8", "--timeout", "240", "--output-format", "stream-json", "--verbose",
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


def test_reading_until_the_window_is_full_never_overflows_the_real_server(
    apple_code_bin: Path, server: LocalModelServer, tmp_path: Path
) -> None:
    """Issue 17, item 3: the server runs with a 4,096-token context and apple-code with --context-tokens 4096, so a
    request over the window is a real server error (llama.cpp refuses a prompt that does not fit its context).
    The files are long enough that one read fills what the window leaves; every request the model makes must still
    be accepted, and where the server counted a prompt, apple-code's figure for it was not below that count."""
    line = "    total = order.amount * rate + tax  # line {n}: adjusted for the customer's region and currency\n"
    for name in ("orders.py", "billing.py", "ledger.py"):
        (tmp_path / name).write_text("".join(line.format(n=n) for n in range(1, 401)))
    done = run_apple_code(
        apple_code_bin, "--backend", "openai", "--base-url", server.url, "--cwd", str(tmp_path), "--read-only",
        "--context-tokens", "4096", "--max-turns", "6", "--timeout", "400", "--output-format", "stream-json",
        "--verbose", "Read orders.py, billing.py and ledger.py with readFile, then say what they compute.",
        timeout=450,
    )
    lines = events(done.stdout)
    result = lines[-1]
    assert result["type"] == "result"
    assert "exceed context window" not in done.stderr and "Requested tokens" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, (result, done.stderr[-3000:])
    reads = [e for e in lines if e["type"] == "tool_result" and e["name"] == "readFile" and e["ok"]]
    assert reads, done.stderr[-3000:]
    # The server's own counts (usage.prompt_tokens of the requests it answered in one JSON body) against
    # apple-code's figures: each fits the window with the answer reserve, and none was figured below it.
    counted = re.findall(r"reply \d+: the server counted (\d+) prompt tokens \(figured (\d+), (\w+)\)", done.stderr)
    assert counted, done.stderr[-3000:]
    for real, figure, kind in counted:
        assert int(real) + 512 <= 4096
        if kind != "estimated":
            assert int(real) <= int(figure), (real, figure, kind)
    # The server can tokenize (llama-cpp-python's /extras/tokenize/count): requests after the first are exact.
    assert "/extras/tokenize/count" in done.stderr
    assert " of 4096 exact tokens" in done.stderr, done.stderr[-3000:]
