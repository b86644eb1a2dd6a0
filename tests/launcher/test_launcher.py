"""apple-flow-launcher, the executable of Apple Flow.app, with real processes: it starts its program as a child
(spawn, not exec: it stays the parent, which is what keeps it responsible for the child on macOS), passes SIGTERM
and SIGINT on, exits with the child's status, gives the child its environment plus APPLE_FLOW_LAUNCHER, and says
clearly when the child dies or never starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from support.daemon_process import wait_for

# The child: records its pid, parent and environment, then waits for a signal and exits with a code of its own.
CHILD = textwrap.dedent("""
    import json, os, signal, sys, time
    out = sys.argv[1]
    def stop(number, frame):
        with open(out + ".signal", "w") as f:
            f.write(str(number))
        sys.exit(40 + number)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(out + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "ppid": os.getppid(), "env": dict(os.environ)}, f)
    os.rename(out + ".tmp", out)
    time.sleep(60)
    sys.exit(99)
""")


def start(launcher: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(launcher), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, start_new_session=True,  # its own group: a signal to it reaches nobody else
    )


def started_child(launcher: Path, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[
    subprocess.Popen[str], dict[str, object]
]:
    import json

    record = tmp_path / "child.json"
    process = start(launcher, sys.executable, "-c", CHILD, str(record), env=env)
    wait_for(lambda: record.exists() or process.poll() is not None, 20, "the child to start")
    assert record.exists(), process.communicate()
    return process, json.loads(record.read_text())


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_is_passed_to_the_child_and_its_status_is_the_launchers(
    launcher_bin: Path, tmp_path: Path, number: int
) -> None:
    process, child = started_child(launcher_bin, tmp_path)
    assert child["ppid"] == process.pid and child["pid"] != process.pid  # spawned, not exec'd: still the parent
    os.kill(process.pid, number)
    _, stderr = process.communicate(timeout=20)
    assert (tmp_path / "child.json.signal").read_text() == str(number)
    assert process.returncode == 40 + number
    assert f"exited with status {40 + number}" in stderr


def test_the_child_gets_the_environment_and_the_launchers_path(launcher_bin: Path, tmp_path: Path) -> None:
    env = {**os.environ, "SOME_KEY": "some value", "APPLE_FLOW_LAUNCHER": "stale"}
    process, child = started_child(launcher_bin, tmp_path, env)
    os.kill(process.pid, signal.SIGTERM)
    process.communicate(timeout=20)
    seen = child["env"]
    assert isinstance(seen, dict)
    assert seen["SOME_KEY"] == "some value" and seen["PATH"] == os.environ["PATH"]
    assert seen["APPLE_FLOW_LAUNCHER"] == str(launcher_bin)


def test_a_relative_launcher_path_is_made_absolute(launcher_bin: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [f"./{launcher_bin.name}", sys.executable, "-c", "import os; print(os.environ['APPLE_FLOW_LAUNCHER'])"],
        cwd=launcher_bin.parent, capture_output=True, text=True, timeout=20, check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = done.stdout.strip()
    assert shown.startswith("/") and "/./" not in shown and os.path.samefile(shown, launcher_bin)


def test_the_childs_exit_status_and_output_pass_through(launcher_bin: Path) -> None:
    done = subprocess.run(
        [str(launcher_bin), "sh", "-c", "echo out; echo err >&2; exit 7"],  # a bare name: looked up on PATH
        capture_output=True, text=True, timeout=20, check=False,
    )
    assert done.returncode == 7
    assert done.stdout == "out\n"
    assert done.stderr.startswith("err\n")
    assert "apple-flow-launcher: the daemon (pid " in done.stderr and "exited with status 7" in done.stderr
    success = subprocess.run([str(launcher_bin), "true"], capture_output=True, text=True, timeout=20, check=False)
    assert (success.returncode, success.stderr) == (0, "")


def test_a_child_that_dies_of_a_signal_is_named(launcher_bin: Path, tmp_path: Path) -> None:
    process, child = started_child(launcher_bin, tmp_path)
    os.kill(int(str(child["pid"])), signal.SIGKILL)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 128 + signal.SIGKILL
    assert f"the daemon (pid {child['pid']}) was ended by SIGKILL" in stderr


def test_a_child_that_never_starts_gets_a_clear_message(launcher_bin: Path, tmp_path: Path) -> None:
    missing = tmp_path / "gone" / ".venv" / "bin" / "python3"
    done = subprocess.run([str(launcher_bin), str(missing), "-m", "apple_flow"], capture_output=True, text=True,
                          timeout=20, check=False)
    assert done.returncode == 127
    assert f"cannot start {missing}: No such file or directory" in done.stderr
    assert "apple-flow service install" in done.stderr

    not_executable = tmp_path / "python3"
    not_executable.write_text("")
    not_executable.chmod(0o644)
    denied = subprocess.run([str(launcher_bin), str(not_executable)], capture_output=True, text=True, timeout=20,
                            check=False)
    if os.geteuid() == 0 and denied.returncode != 126:
        pytest.skip("root may execute a file without an execute bit on this system")
    assert denied.returncode == 126 and "Permission denied" in denied.stderr


def test_without_a_program_it_says_how_it_is_used(launcher_bin: Path) -> None:
    done = subprocess.run([str(launcher_bin)], capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == 64
    assert "usage: apple-flow-launcher PROGRAM" in done.stderr


def test_the_launcher_leaves_no_process_behind(launcher_bin: Path, tmp_path: Path) -> None:
    process, child = started_child(launcher_bin, tmp_path)
    os.kill(process.pid, signal.SIGTERM)
    process.communicate(timeout=20)
    pid = int(str(child["pid"]))
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
