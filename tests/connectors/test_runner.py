"""ProcessRunner against real child processes that misbehave the ways agent CLIs do (field notes §3)."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from apple_flow.connectors.runner import ProcessRunner, SpawnError
from support.waiting import wait_for


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


# A child that starts a grandchild which ignores SIGTERM and inherits (so holds open) stdout and stderr.
GRANDCHILD = textwrap.dedent("""
    import signal, subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('grandchild up', flush=True); "
        "time.sleep(60)"])
    print(grandchild.pid, flush=True)
    time.sleep(0.3)
""")


@pytest.fixture
def runner() -> ProcessRunner:
    return ProcessRunner(drain_seconds=0.5, kill_grace_seconds=0.5)


def gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_prompt_goes_to_stdin_and_is_closed(runner: ProcessRunner, tmp_path: Path) -> None:
    # The child reads stdin to EOF: it only finishes if stdin is closed after the prompt.
    result = runner.run(
        python("import sys, os; data = sys.stdin.read(); print(len(data)); print(data.upper()); print(os.getcwd())"),
        "héllo wörld",
        cwd=tmp_path,
        timeout=10,
    )
    assert result.exit_code == 0
    assert result.stdout_lines == ["11", "HÉLLO WÖRLD", str(tmp_path)]
    assert not result.timed_out


def test_child_runs_in_its_own_session(runner: ProcessRunner) -> None:
    result = runner.run(python("import os; print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid())"),
                        timeout=10)
    assert result.stdout_lines == ["True True"]


def test_child_never_has_a_terminal_on_stdin(runner: ProcessRunner) -> None:
    result = runner.run(python("import sys; print(sys.stdin.isatty())"), timeout=10)
    assert result.stdout_lines == ["False"]


def test_five_megabyte_line_arrives_whole(runner: ProcessRunner) -> None:
    result = runner.run(python("import sys; sys.stdout.write('x' * 5_000_000 + '\\nend\\n')"), timeout=20)
    assert result.exit_code == 0
    assert len(result.stdout_lines) == 2
    assert len(result.stdout_lines[0]) == 5_000_000
    assert result.stdout_lines[1] == "end"


def test_child_that_never_reads_stdin_still_finishes(runner: ProcessRunner) -> None:
    # 1 MB of prompt cannot fit the pipe buffer; the writer blocks, the turn must not.
    result = runner.run(python("print('done without reading')"), "p" * 1_000_000, timeout=10)
    assert result.exit_code == 0
    assert result.stdout_lines == ["done without reading"]


def test_child_that_never_reads_stdin_and_hangs_is_killed_at_the_deadline(runner: ProcessRunner) -> None:
    started = time.monotonic()
    result = runner.run(python("import time; print('up', flush=True); time.sleep(60)"), "p" * 1_000_000, timeout=1)
    assert result.timed_out
    assert result.exit_code is not None and result.exit_code < 0  # died of our signal
    assert result.stdout_lines == ["up"]
    assert time.monotonic() - started < 5


def test_non_zero_exit_keeps_the_stderr_tail() -> None:
    runner = ProcessRunner(drain_seconds=6, kill_grace_seconds=0.5)
    started = time.monotonic()
    result = runner.run(
        python("import sys; sys.stderr.write('noise\\n' * 100000 + 'fatal: it broke\\n'); sys.exit(7)"), timeout=10
    )
    assert result.exit_code == 7
    assert result.last_stderr_line == "fatal: it broke"
    assert len(result.stderr_tail) <= 8192
    # A child that is done is not waited on for the drain time (6 s; seconds of margin on a busy machine).
    assert time.monotonic() - started < 3


def test_missing_command_raises_spawn_error(runner: ProcessRunner, tmp_path: Path) -> None:
    with pytest.raises(SpawnError) as info:
        runner.run([str(tmp_path / "nope")], timeout=5)
    assert info.value.reason == "not_found"


def test_non_executable_file_raises_spawn_error(runner: ProcessRunner, tmp_path: Path) -> None:
    script = tmp_path / "agent"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(SpawnError) as info:
        runner.run([str(script)], timeout=5)
    assert info.value.reason == "not_executable"


def test_missing_working_directory_is_named(runner: ProcessRunner, tmp_path: Path) -> None:
    with pytest.raises(SpawnError) as info:
        runner.run(python("print(1)"), cwd=tmp_path / "missing", timeout=5)
    assert info.value.reason == "bad_cwd"


def test_timeout_kills_child_and_sigterm_ignoring_grandchild(runner: ProcessRunner) -> None:
    started = time.monotonic()
    result = runner.run(python(GRANDCHILD + "time.sleep(60)\n"), timeout=2)
    elapsed = time.monotonic() - started
    assert result.timed_out
    grandchild = int(result.stdout_lines[0])
    assert "grandchild up" in result.stdout_lines
    assert elapsed < 2 + 0.5 * 3 + 1.5, elapsed  # deadline + kill grace + bounded drain
    wait_for(lambda: gone(grandchild), 3, "the grandchild to be gone")
    assert runner.active_count() == 0


def test_child_that_exits_while_grandchild_holds_the_pipes_returns(runner: ProcessRunner) -> None:
    started = time.monotonic()
    result = runner.run(python(GRANDCHILD), timeout=30)
    assert not result.timed_out
    assert result.exit_code == 0
    assert time.monotonic() - started < 5  # bounded drain, not the grandchild's 60 s
    grandchild = int(result.stdout_lines[0])
    wait_for(lambda: gone(grandchild), 3, "the grandchild to be gone")


def test_lines_are_yielded_as_they_arrive(runner: ProcessRunner) -> None:
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    code = "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second', flush=True)"
    with runner.start(python(code), timeout=10) as child:
        for line in child:
            seen.append((line, time.monotonic() - started))
    assert [line for line, _ in seen] == ["first", "second"]
    assert seen[0][1] < seen[1][1] - 0.5  # the first line was handed over before the child slept
    assert child.result is not None and child.result.stdout_lines == ["first", "second"]


def test_an_error_while_reading_still_kills_the_child(runner: ProcessRunner) -> None:
    with pytest.raises(RuntimeError), runner.start(python("import time; print('x', flush=True); time.sleep(60)"),
                                                   timeout=30) as child:
        for line in child:
            raise RuntimeError(f"bad line {line}")
    assert runner.active_count() == 0


def test_a_run_never_read_is_killed_when_its_block_ends(runner: ProcessRunner) -> None:
    with runner.start(python("import time; time.sleep(60)"), timeout=30) as child:
        pid = next(iter(runner._live))
        assert runner.active_count() == 1
    assert child.result is None
    assert runner.active_count() == 0
    assert gone(pid)


def run_in_background(runner: ProcessRunner, key: str, results: dict[str, object]) -> threading.Thread:
    def work() -> None:
        results[key] = runner.run(python("import time; print('up', flush=True); time.sleep(60)"), timeout=30, owner=key)

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_cancel_by_key_kills_only_that_run(runner: ProcessRunner) -> None:
    results: dict[str, object] = {}
    alice = run_in_background(runner, "alice", results)
    bob = run_in_background(runner, "bob", results)
    wait_for(lambda: runner.active_count() == 2, 5, "both runs to start")
    assert runner.cancel("alice") == 1
    alice.join(5)
    assert not alice.is_alive()
    assert results["alice"].cancelled  # type: ignore[attr-defined]
    assert bob.is_alive()
    assert runner.cancel("nobody") == 0
    runner.shutdown()
    bob.join(5)
    assert not bob.is_alive()
    assert results["bob"].cancelled  # type: ignore[attr-defined]
    assert runner.active_count() == 0


def test_kept_stdout_is_bounded_but_every_line_is_yielded() -> None:
    runner = ProcessRunner(drain_seconds=0.5, kill_grace_seconds=0.5, max_kept_stdout_chars=1000)
    with runner.start(python("for n in range(100): print(str(n) * 50)"), timeout=10) as child:
        seen = list(child)
    result = child.result
    assert result is not None
    assert len(seen) == 100
    assert result.stdout_truncated
    assert sum(len(line) for line in result.stdout_lines) <= 1000
    assert result.stdout_lines == seen[: len(result.stdout_lines)]


def test_a_line_without_end_is_cut_at_the_line_limit_and_the_rest_skipped() -> None:
    # A runaway child printing without newlines must not grow one line until memory runs out.
    runner = ProcessRunner(drain_seconds=0.5, kill_grace_seconds=0.5, max_line_bytes=1_000_000)
    result = runner.run(python("import sys; sys.stdout.write('x' * 5_000_000 + '\\nend\\n')"), timeout=20)
    assert result.exit_code == 0
    assert result.stdout_lines == ["x" * 1_000_000, "end"]
