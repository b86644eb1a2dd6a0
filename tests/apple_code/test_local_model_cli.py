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


