"""scripts/check-macos.sh, run here with fake macOS commands on PATH (uname, sw_vers, xcrun, swift and the built
apple-code cannot be real on Linux). The fakes record their argv, so the tests check exactly what the script asks
of the toolchain and of apple-code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

FAKES = {
    "uname": '[ "$1" = -m ] && echo "${FAKE_ARCH:-arm64}" || echo "${FAKE_OS:-Darwin}"',
    "sw_vers": 'echo "${FAKE_MACOS:-26.1}"',
    "xcrun": 'echo "$*" >>"$FAKE_LOG/xcrun.argv"; echo "${FAKE_SDK:-26.4}"',
    "xcode-select": '[ "$1" = -p ] && echo "${FAKE_DEVELOPER_DIR:-/Applications/Xcode.app/Contents/Developer}"',
    "swift": (
        'echo "$*" >>"$FAKE_LOG/swift.argv"\n'
        'case " $* " in *" --show-bin-path "*) echo "$FAKE_BIN";; esac\n'
        'exit "${FAKE_BUILD_EXIT:-0}"'
    ),
}

APPLE_CODE = """\
printf '%s\\n' "$@" >"$FAKE_LOG/apple-code.$(date +%s%N).argv"
if [ "$1" = --sandbox-check ]; then
    echo 'sandbox: sandbox-exec (writes: the workspace and the temp folders; network: loopback only)'
    echo 'ok    a command runs in the workspace and writes there'
    echo "${FAKE_SANDBOX_LINE:-ok    a write outside the workspace is refused}"
    case $FAKE_SANDBOX_LINE in FAIL*) exit 1 ;; esac
    exit 0
fi
if [ "$1" = --check ]; then
    echo '{"backend":"fm","available":'"$FAKE_AVAILABLE"',"reason":"'"$FAKE_REASON"'"}'
    [ "$FAKE_AVAILABLE" = true ] && exit 0 || exit 3
fi
while [ $# -gt 0 ]; do [ "$1" = --cwd ] && cwd=$2; shift; done
printf '3\\n' >"$cwd/count.txt"
echo '{"type":"tool_call","id":"c1","name":"readFile","arguments":{"path":"fruit.txt"}}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"3"}'
"""


@pytest.fixture()
def fake_mac_env(tmp_path: Path) -> dict[str, str]:
    bin_dir, log_dir, build_dir = tmp_path / "bin", tmp_path / "log", tmp_path / "release"
    for d in (bin_dir, log_dir, build_dir):
        d.mkdir()
    for name, body in FAKES.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (build_dir / "apple-code").write_text("#!/bin/sh\n" + APPLE_CODE)
    (build_dir / "apple-code").chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_LOG": str(log_dir),
        "FAKE_BIN": str(build_dir),
        "FAKE_AVAILABLE": "true",
        "FAKE_REASON": "ready",
    }


def run_script(project_root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(project_root / "scripts" / "check-macos.sh"), *args],
        env=env, capture_output=True, text=True, timeout=60,
    )


def apple_code_calls(env: dict[str, str]) -> list[list[str]]:
    files = sorted(Path(env["FAKE_LOG"]).glob("apple-code.*.argv"))
    return [f.read_text().splitlines() for f in files]


def test_builds_release_checks_the_model_and_runs_a_task(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    result = run_script(project_root, fake_mac_env)
    assert result.returncode == 0, result.stderr
    swift = (Path(fake_mac_env["FAKE_LOG"]) / "swift.argv").read_text().splitlines()
    package = str(project_root / "apple_code")
    assert swift[0] == f"build --package-path {package} -c release -Xswiftc -DFM_SDK_26_4"
    calls = apple_code_calls(fake_mac_env)
    assert calls[0] == ["--sandbox-check"]
    assert calls[1] == ["--check", "--backend", "fm"]
    task = calls[2]
    assert task[:2] == ["--backend", "fm"] and "--cwd" in task and task[task.index("--timeout") + 1] == "180"
    assert task[-1].startswith("Read fruit.txt")
    workspace = Path(task[task.index("--cwd") + 1])
    assert (workspace / "fruit.txt").read_text() == "apples\npears\nplums\n"
    assert sorted(p.name for p in workspace.iterdir()) == ["count.txt", "fruit.txt"]
    assert "ok    task finished (exit 0) in " in result.stderr
    for line in ("ok    release build", "ok    Apple's on-device model is available", "ok    count.txt says 3",
                 "ok    the model called tools (1 calls)", "ok    sandbox: a write outside the workspace is refused"):
        assert line in result.stderr
    assert "sandbox-exec (writes: the workspace" in result.stderr


def test_an_older_sdk_builds_without_the_26_4_flag(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    result = run_script(project_root, {**fake_mac_env, "FAKE_SDK": "26.2"})
    assert result.returncode == 0, result.stderr
    swift = (Path(fake_mac_env["FAKE_LOG"]) / "swift.argv").read_text().splitlines()
    assert "FM_SDK_26_4" not in swift[0]


@pytest.mark.parametrize(("sdk", "variant"), [
    ("26", False), ("26.3", False), ("26.3.1", False), ("26.4", True), ("26.10", True), ("27", True), ("27.0", True),
])
def test_only_an_sdk_of_26_4_or_later_builds_the_26_4_variant(
    project_root: Path, fake_mac_env: dict[str, str], sdk: str, variant: bool
) -> None:
    # "26" has no minor number: it is 26.0, not 26.26.
    result = run_script(project_root, {**fake_mac_env, "FAKE_SDK": sdk})
    assert result.returncode == 0, result.stderr
    swift = (Path(fake_mac_env["FAKE_LOG"]) / "swift.argv").read_text().splitlines()
    assert ("-DFM_SDK_26_4" in swift[0].split()) is variant


def test_unavailable_model_exits_3_with_the_reason_and_runs_no_task(
    project_root: Path, fake_mac_env: dict[str, str]
) -> None:
    reason = "Apple Intelligence is turned off: turn it on in System Settings"
    result = run_script(project_root, {**fake_mac_env, "FAKE_AVAILABLE": "false", "FAKE_REASON": reason})
    assert result.returncode == 3
    check = next(line.strip() for line in result.stderr.splitlines() if line.strip().startswith("{"))
    assert json.loads(check)["reason"] == reason
    assert [call[0] for call in apple_code_calls(fake_mac_env)] == ["--sandbox-check", "--check"]


def test_a_failed_build_stops_with_exit_1(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    result = run_script(project_root, {**fake_mac_env, "FAKE_BUILD_EXIT": "1"})
    assert result.returncode == 1
    assert "FAIL  release build failed" in result.stderr
    assert apple_code_calls(fake_mac_env) == []


def test_not_a_mac_says_so(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    result = run_script(project_root, {**fake_mac_env, "FAKE_OS": "Linux"})
    assert result.returncode == 1
    assert "this is Linux, not macOS" in result.stderr


def test_tests_option_runs_the_framework_tests(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    result = run_script(project_root, fake_mac_env, "--tests")
    assert result.returncode == 0, result.stderr
    swift = (Path(fake_mac_env["FAKE_LOG"]) / "swift.argv").read_text().splitlines()
    package = str(project_root / "apple_code")
    assert swift[2] == (f"test --package-path {package} -Xswiftc -DFM_SDK_26_4 "
                        "--filter PlatformTests|LogicTests|MirrorDeclarationTests")
    assert "ok    Foundation Models backend tests" in result.stderr


def test_failing_framework_tests_fail_the_check(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    fake_swift = Path(fake_mac_env["PATH"].split(":")[0]) / "swift"
    fake_swift.write_text(fake_swift.read_text().replace('exit "${FAKE_BUILD_EXIT:-0}"',
                                                         '[ "$1" = test ] && exit 1; exit 0'))
    result = run_script(project_root, fake_mac_env, "--tests")
    assert result.returncode == 1
    assert "FAIL  Foundation Models backend tests failed" in result.stderr


def test_a_failing_sandbox_check_fails_the_check(project_root: Path, fake_mac_env: dict[str, str]) -> None:
    line = "FAIL  `open` cannot start a program outside the sandbox: open exited 0"
    result = run_script(project_root, {**fake_mac_env, "FAKE_SANDBOX_LINE": line})
    assert result.returncode == 1
    assert "FAIL  sandbox: `open` cannot start a program outside the sandbox: open exited 0" in result.stderr
    assert "ok    task finished" in result.stderr  # the model's own checks still ran


def command_line_tools(tmp_path: Path, *, testing: bool) -> Path:
    """A developer folder laid out like /Library/Developer/CommandLineTools (with or without Swift Testing)."""
    developer = tmp_path / "Library" / "Developer" / "CommandLineTools"
    (developer / "usr" / "bin").mkdir(parents=True)
    if testing:
        (developer / "Library" / "Developer" / "Frameworks" / "Testing.framework").mkdir(parents=True)
        (developer / "Library" / "Developer" / "usr" / "lib").mkdir(parents=True)
    return developer


def test_tests_with_only_the_command_line_tools_find_swift_testing(
    project_root: Path, fake_mac_env: dict[str, str], tmp_path: Path
) -> None:
    developer = command_line_tools(tmp_path, testing=True)
    result = run_script(project_root, {**fake_mac_env, "FAKE_DEVELOPER_DIR": str(developer)}, "--tests")
    assert result.returncode == 0, result.stderr
    swift = (Path(fake_mac_env["FAKE_LOG"]) / "swift.argv").read_text().splitlines()
    package = str(project_root / "apple_code")
    frameworks = f"{developer}/Library/Developer/Frameworks"
    # -F to compile, one rpath to load Testing.framework, one for lib_TestingInterop.dylib beside it.
    assert swift[2] == (f"test --package-path {package} -Xswiftc -DFM_SDK_26_4 -Xswiftc -F -Xswiftc {frameworks} "
                        f"-Xlinker -rpath -Xlinker {frameworks} "
                        f"-Xlinker -rpath -Xlinker {developer}/Library/Developer/usr/lib "
                        "--filter PlatformTests|LogicTests|MirrorDeclarationTests")
    assert "ok    Foundation Models backend tests" in result.stderr
    assert "Command Line Tools" in result.stderr


def test_tests_with_command_line_tools_lacking_swift_testing_say_xcode_is_needed(
    project_root: Path, fake_mac_env: dict[str, str], tmp_path: Path
) -> None:
    developer = command_line_tools(tmp_path, testing=False)
    result = run_script(project_root, {**fake_mac_env, "FAKE_DEVELOPER_DIR": str(developer)}, "--tests")
    assert result.returncode == 1
    swift = (Path(fake_mac_env["FAKE_LOG"]) / "swift.argv").read_text().splitlines()
    assert not any(line.startswith("test ") for line in swift)
    assert "FAIL  the backend's tests need Swift Testing" in result.stderr
    assert "xcode-select -s /Applications/Xcode.app" in result.stderr
    # The rest of the check still ran: the model was asked and the task done.
    assert "ok    count.txt says 3" in result.stderr


def test_bench_runs_the_task_benchmark_on_apples_model(
    project_root: Path, fake_mac_env: dict[str, str], tmp_path: Path
) -> None:
    python = tmp_path / "python"  # scripts/bench_tasks runs $PYTHON: this one records what it was asked to run
    python.write_text('#!/bin/sh\nprintf "%s\\n" "$@" >"$FAKE_LOG/bench.argv"\n')
    python.chmod(0o755)
    env = {**fake_mac_env, "PYTHON": str(python)}
    assert run_script(project_root, env).returncode == 0
    assert not (Path(fake_mac_env["FAKE_LOG"]) / "bench.argv").exists()  # only with --bench
    result = run_script(project_root, env, "--bench")
    assert result.returncode == 0, result.stderr
    assert (Path(fake_mac_env["FAKE_LOG"]) / "bench.argv").read_text().splitlines() == [
        str(project_root / "scripts" / "bench_tasks.py"), "--apple-code", f"{fake_mac_env['FAKE_BIN']}/apple-code",
        "--backend", "fm", "--report", str(project_root / "reports" / "bench_tasks-mac.md"),
    ]
    assert "ok    task benchmark: reports/bench_tasks-mac.md" in result.stderr
