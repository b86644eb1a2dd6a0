"""The openai backend budgets in the server's own tokens where the server can say them. The scripted
server plays a counting server with a deterministic tokenizer (denser than TokenEstimator on code, as real
tokenizers are): its tokenize endpoint counts texts exactly, its ``usage.prompt_tokens`` reports what its chat
template made of each request. Each run reads files until the window is full; every request must fit the window
as the server counts it, and the window must go to file content rather than to the estimator's margin."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import events, request_tokens, run_apple_code, scripted_args
from support.plan_runs import lines_seen
from support.scripted_server import ScriptedServer, Step, answer, count_tokens, prompt_tokens, tool_call

WINDOW = 4096
FILES = 5
LINES = 150


def module_text(number: int) -> str:
    """150 lines of plain Python of about 70 bytes, every line unique (so 'was this line shown' is a plain search):
    100 of them do not fit what the estimator leaves of the window for one result."""
    lines = [f'"""Module {number}."""']
    step = 0
    while len(lines) < LINES:
        step += 1
        lines += [f"def step_{number}_{step}(order, rate):",
                  f"    total = order.amount * rate  # the rate of module {number} applies, step {step}",
                  f"    return round(total, 2)  # rounded to cents for the ledger of step {step}"]
    return "\n".join(lines[:LINES]) + "\n"


def cjk_text(number: int) -> str:
    """~150 lines of Chinese text, every line unique: TokenEstimator under-counts it (0.7 a byte against the
    server's 1)."""
    line = "订单处理的说明文字，数量与价格相乘再四舍五入。"
    return "".join(f"第{number}章第{index}行：{line}\n" for index in range(1, LINES + 1))


def read_all(suffix: str = "py") -> list[Step]:
    steps: list[Step] = []
    for number in range(1, FILES + 1):
        steps += [tool_call("readFile", {"path": f"m{number}.{suffix}", "startLine": 1, "endLine": 100}),
                  tool_call("readFile", {"path": f"m{number}.{suffix}", "startLine": 101, "endLine": LINES})]
    return [*steps, answer("Read them all.")]


Bodies = list[dict[str, Any]]
Tokenized = list[tuple[str, Any]]


def run(binary: Path, workspace: Path, texts: dict[str, str], **server: Any) -> tuple[Any, Bodies, Tokenized]:
    """apple-code reading every file against a scripted server: the run, its chat requests, its tokenize requests."""
    for name, text in texts.items():
        (workspace / name).write_text(text)
    suffix = next(iter(texts)).rsplit(".", 1)[1]
    with ScriptedServer(read_all(suffix), **server) as scripted:
        done = run_apple_code(binary, *scripted_args(scripted.url, workspace, "--read-only", "--max-turns", "40",
                                                     "--context-tokens", str(WINDOW)), "Read every file.",
                              timeout=120)
        return done, scripted.requests(), scripted.tokenize_requests()


def shown(texts: dict[str, str], requests: list[dict[str, Any]]) -> int:
    return sum(lines_seen([line for line in text.splitlines() if line.strip()], requests) for text in texts.values())


def server_sizes(requests: list[dict[str, Any]]) -> list[int]:
    """Each request as the counting server sees it: its prompt plus the answer reserve it asked for."""
    return [prompt_tokens(body) + int(body["max_tokens"]) for body in requests]


@pytest.fixture
def modules() -> dict[str, str]:
    return {f"m{number}.py": module_text(number) for number in range(1, FILES + 1)}


def test_a_server_with_a_tokenizer_and_usage_gets_exact_budgets(
    apple_code_bin: Path, tmp_path: Path, modules: dict[str, str]
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "exact").mkdir()
    plain, plain_requests, plain_tokenized = run(apple_code_bin, tmp_path / "plain", modules)
    done, requests, tokenized = run(apple_code_bin, tmp_path / "exact", modules, tokenizer="llama-cpp-python",
                                 count_usage=True)
    assert plain.returncode == 0 and done.returncode == 0, (plain.stderr[-2000:], done.stderr[-2000:])
    # The estimator alone: every request within the window by its own count. A server that reports no usage is
    # not asked to tokenize (nothing would tell what its template adds).
    assert max(request_tokens(body) for body in plain_requests) <= WINDOW
    assert plain_tokenized == [] and "token counts" not in plain.stderr
    assert events(plain.stdout)[-1]["usage"]["estimated"] is True
    # Counted exactly: every request within the window as the server counts it, and more file lines shown.
    assert max(server_sizes(requests)) <= WINDOW
    assert "token counts: the server's tokenizer at" in done.stderr and "/extras/tokenize/count" in done.stderr
    assert "budget: exact tokens from request 2 on" in done.stderr
    assert tokenized and all(path == "/extras/tokenize/count" and isinstance(body["input"], str)
                             for path, body in tokenized)
    # Every line of every file reached the model; with the estimator's margin the reads were cut.
    assert shown(modules, requests) == FILES * LINES > shown(modules, plain_requests), shown(modules, plain_requests)
    # What apple-code budgeted for each request counted exactly never under-counts the server, and over-counts it
    # by little more than the stated margin (2%, at least 8 tokens) and its allowance of 8 tokens a message (this
    # server's ChatML costs about 5).
    figures = {int(turn): int(tokens) for turn, tokens in
               re.findall(r"request (\d+): (\d+) of 4096 exact tokens", done.stderr)}
    assert len(figures) == len(requests) - 1
    sizes = dict(enumerate(server_sizes(requests), start=1))
    slack = {turn: figure - sizes[turn] for turn, figure in figures.items()}
    messages = {turn: len(body["messages"]) for turn, body in enumerate(requests, start=1)}
    assert all(0 <= extra <= 0.02 * sizes[turn] + 8 + 4 * messages[turn] + 16 for turn, extra in slack.items()), slack
    # --verbose shows each server count beside apple-code's figure for that request.
    counted = re.findall(r"reply (\d+): the server counted (\d+) prompt tokens \(figured (\d+), (\w+)\)", done.stderr)
    assert len(counted) == len(requests)
    assert all(int(real) <= int(figure) for _, real, figure, kind in counted if kind == "exact")
    usage = events(done.stdout)[-1]["usage"]
    assert usage["estimated"] is False
    # The fixed overhead in the server's tokens: its count of the instructions and tools alone, within a few
    # tokens (the learned template overhead also holds the task message's role markers).
    bare = {"messages": requests[0]["messages"][:1], "tools": requests[0]["tools"]}
    assert abs(usage["fixed_tokens"] - prompt_tokens(bare)) <= 16, (usage, prompt_tokens(bare))
    assert usage["fixed_tokens"] < events(plain.stdout)[-1]["usage"]["fixed_tokens"]


def test_llama_cpps_tokenize_endpoint_and_a_server_that_does_not_stream(
    apple_code_bin: Path, tmp_path: Path, modules: dict[str, str]
) -> None:
    done, requests, tokenized = run(apple_code_bin, tmp_path, modules, tokenizer="llama.cpp", count_usage=True,
                                 streaming=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "/tokenize" in done.stderr and "budget: exact tokens from request 2 on" in done.stderr
    # Asked llama-cpp-python's endpoint once (not found there), then llama.cpp's for everything.
    assert tokenized[0][0] == "/extras/tokenize/count"
    assert tokenized[1:] and all(path == "/tokenize" and isinstance(body["content"], str)
                                 for path, body in tokenized[1:])
    assert max(server_sizes(requests)) <= WINDOW
    assert events(done.stdout)[-1]["usage"]["estimated"] is False


def test_usage_alone_corrects_the_estimate(apple_code_bin: Path, tmp_path: Path, modules: dict[str, str]) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "usage").mkdir()
    _, plain_requests, _ = run(apple_code_bin, tmp_path / "plain", modules)
    done, requests, _ = run(apple_code_bin, tmp_path / "usage", modules, count_usage=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"budget: estimated tokens corrected by -\d+ from request 2 on", done.stderr), done.stderr
    assert max(server_sizes(requests)) <= WINDOW
    assert shown(modules, requests) > shown(modules, plain_requests)
    # The server counted every request, but the fixed overhead is still the estimator's.
    usage = events(done.stdout)[-1]["usage"]
    assert usage["estimated"] is True
    assert usage["input_tokens"] == sum(prompt_tokens(body) for body in requests)


def test_text_the_estimator_under_counts_cannot_overflow_an_exact_budget(apple_code_bin: Path, tmp_path: Path) -> None:
    texts = {f"m{number}.txt": cjk_text(number) for number in range(1, FILES + 1)}
    (tmp_path / "plain").mkdir()
    (tmp_path / "exact").mkdir()
    _, plain_requests, _ = run(apple_code_bin, tmp_path / "plain", texts)
    done, requests, _ = run(apple_code_bin, tmp_path / "exact", texts, tokenizer="llama-cpp-python", count_usage=True)
    assert done.returncode == 0, done.stderr[-2000:]
    # The estimator's requests overflow the window as the server counts them; the exact ones never do.
    assert max(server_sizes(plain_requests)) > WINDOW
    assert max(server_sizes(requests)) <= WINDOW
    assert count_tokens("第") == 3
