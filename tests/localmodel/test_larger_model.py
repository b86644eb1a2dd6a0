"""The default task model (Qwen2.5-Coder-1.5B: approved tasks run on it, beside the 0.5B that answers chat) through
the real apple-code on a real task: the benchmark's own one-line bug (scripts/bench_task_set.py: its wording, its
workspace, its check and its hidden checker), fixed so its tests pass. The 0.5B is faster but "fixes" this bug as
`return 5`, which passes the workspace's one case and fails the checker's others (docs/benchmarks.md): that is why
tasks have a model of their own."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apple_flow.localmodel import DEFAULT_TASK_MODEL, LocalModelServer
from support.local_model import running_local_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench_task_set import TASKS, make_workspace

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

LARGER_MODEL = DEFAULT_TASK_MODEL


@pytest.fixture(scope="module")
def larger_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    with running_local_model(tmp_path_factory.mktemp("larger-model"), context_tokens=8192,
                             model=LARGER_MODEL) as server:
        yield server


def test_apple_code_on_the_default_task_model_fixes_a_one_line_bug(
        larger_model_server: LocalModelServer, apple_code_bin: Path, tmp_path: Path) -> None:
    task = next(task for task in TASKS if task.name == "fix-failing-test")
    assert task.check is not None
    workspace = make_workspace(task, tmp_path / "ws")
    done = subprocess.run(
        [str(apple_code_bin), "--backend", "openai", "--base-url", larger_model_server.url, "--cwd", str(workspace),
         "--timeout", "240", "--max-turns", "8", "--verify", task.check, "--output-format", "stream-json",
         task.prompt],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    verdict = task.judge(workspace, json.loads(done.stdout.splitlines()[-1])["result"])
    assert verdict.solved, verdict.why  # the checker's verdict on the workspace, never the agent's words
