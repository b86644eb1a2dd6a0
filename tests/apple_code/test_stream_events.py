"""apple-flow's typed reader of apple-code's stream-json (``connectors.stream_events``) against a sample of the real
binary's output: a run that reads a file, edits it, runs a command, is told its answer was empty and then answers,
and a ``--plan`` run whose workers tag their events. Every line must read as the record of its type, and the record
must hold every field the line carries, with the same value: a field the binary adds or renames fails here."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from apple_flow.connectors.events import parse_line
from apple_flow.connectors.stream_events import Other, Result, StreamEvent
from support.apple_code_run import run_scripted
from support.plan_runs import run_apple_code as run_plan
from support.scripted_server import ScriptedServer, answer, tool_call


def as_json(value: Any) -> Any:
    """A record as the JSON it mirrors: fields left at None are absent, tuples are arrays."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found = {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "raw"}
        return {key: item for key, item in found.items() if item is not None}
    if isinstance(value, tuple | list):
        return [as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    return value


def read(stdout: str) -> list[tuple[dict[str, Any], StreamEvent]]:
    pairs = []
    for line in stdout.splitlines():
        event = parse_line(line)
        assert event is not None, line
        pairs.append((json.loads(line), event))
    return pairs


def check_mirrored(stdout: str) -> list[str]:
    """Every line read as its typed record, holding each of its fields; the types seen."""
    pairs = read(stdout)
    for line, event in pairs:
        assert not isinstance(event, Other), line
        assert event.type == line["type"]
        assert as_json(event) == {key: value for key, value in line.items() if key != "type"}, line
    return [event.type for _, event in pairs]


def test_a_run_with_each_kind_of_tool_reads_as_typed_records(apple_code_bin: Path, workspace: Path) -> None:
    (workspace / "app.py").write_text("print('helo')\n")
    script = [
        tool_call("readFile", {"path": "app.py"}),
        tool_call("editFile", {"path": "app.py", "oldText": "helo", "newText": "hello"}),
        tool_call("runCommand", {"command": "cat app.py"}),
        answer(""),  # an empty answer: apple-code says so in a notice and asks again
        answer("Fixed the greeting."),
    ]
    done, _, _ = run_scripted(apple_code_bin, workspace, script, "fix the greeting")
    assert done.returncode == 0, done.stderr
    types = check_mirrored(done.stdout)
    assert {"start", "tool_call", "tool_result", "text", "notice", "result"} <= set(types), types
    results = [event for _, event in read(done.stdout) if event.type == "tool_result"]
    assert [bool(getattr(r, "diff", None)) for r in results] == [False, True, False]
    assert getattr(results[2], "exit_code", None) == 0


def test_a_verify_check_reads_as_its_event_and_in_the_result(apple_code_bin: Path, workspace: Path) -> None:
    (workspace / "check.py").write_text("import pathlib\nassert pathlib.Path('done.txt').exists(), 'no done.txt'\n")
    script = [
        answer("Done."),  # the check fails: there is no done.txt yet
        tool_call("writeFile", {"path": "done.txt", "content": "yes\n"}),
        answer("Done now."),
    ]
    done, _, _ = run_scripted(apple_code_bin, workspace, script, "make done.txt", "--verify", "python3 check.py")
    assert done.returncode == 0, done.stderr
    types = check_mirrored(done.stdout)
    assert types.count("verify") == 3, types  # before the work, after each answer
    result = read(done.stdout)[-1][1]
    assert isinstance(result, Result) and result.verify is not None and result.verify.passed


def test_the_workers_of_a_plan_run_tag_their_events(apple_code_bin: Path, workspace: Path) -> None:
    (workspace / "a.py").write_text("print('helo')\n")
    script = [
        answer('["Fix the typo in a.py"]'),
        tool_call("readFile", {"path": "a.py"}),
        answer("Fixed it."),
        answer("Done."),
    ]
    with ScriptedServer(script) as server:
        run = run_plan(apple_code_bin, server.url, workspace, "fix the typo in a.py", "--plan")
    assert run.returncode == 0, run.stderr
    check_mirrored(run.stdout)
    assert any(event.subtask == 1 for _, event in read(run.stdout))
