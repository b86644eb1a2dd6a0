"""The ``run_task`` tool: the apple-code agent in a workspace, run exactly as the daemon runs a turn.

The run goes through ``AfmConnector.run`` itself, so its command line (backend chain, ``--hide`` of the
daemon's ``.env`` and state, ``--deny-port`` of the web page, ``--read-only``, ``--verify``), its environment
allowlist, its process handling and its reading of the outcome are the daemon's, not a copy. Only the workspace
rule is this module's: the folder must be the default workspace or inside ``APPLE_FLOW_ALLOWED_WORKSPACES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apple_flow.config import Settings
from apple_flow.connectors.afm import AfmConnector
from apple_flow.connectors.base import Status, TurnOutcome, TurnRequest

# The runs of this server are cancelled under this owner name (ProcessRunner.cancel).
RUN_OWNER = "mcp"
MAX_TIMEOUT_SECONDS = 3600.0


class TaskRefused(ValueError):
    """The task cannot run as asked (a workspace not allowed, a bad argument); the message says why."""


class TaskFailed(RuntimeError):
    """apple-code could not do the task (no model, not found, failed); the message is the daemon's own line."""


@dataclass(frozen=True)
class TaskSpec:
    prompt: str
    cwd: str | None = None
    read_only: bool = True
    verify: str | None = None
    timeout_seconds: float | None = None


def allowed_workspace(settings: Settings, cwd: str | None) -> Path:
    """The real path of ``cwd`` when the owner allowed it: the default workspace itself, or a folder inside one of
    ``allowed_workspaces``. Anything else raises ``TaskRefused``."""
    default = settings.workspaces.default.expanduser().resolve()
    if cwd is None or not cwd.strip():
        return default
    given = Path(cwd).expanduser()
    if not given.is_absolute():
        raise TaskRefused(f"cwd must be an absolute path, got {cwd!r}")
    real = given.resolve()
    roots = [root.expanduser().resolve() for root in settings.workspaces.allowed]
    if real != default and not any(real == root or real.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(root) for root in roots) or "none"
        raise TaskRefused(
            f"{cwd} is outside the folders the owner allowed: the default workspace {default} and "
            f"APPLE_FLOW_ALLOWED_WORKSPACES ({allowed})"
        )
    if not real.is_dir():
        raise TaskRefused(f"{cwd} is not a folder")
    return real


class TaskRun:
    """One run_task call: checked and built by ``prepare`` (``TaskRefused`` when it may not run), then ``run`` on a
    worker thread; ``cancel`` stops this run alone (its own connector and runner)."""

    def __init__(self, connector: AfmConnector, request: TurnRequest) -> None:
        self._connector = connector
        self._request = request

    @classmethod
    def prepare(cls, settings: Settings, spec: TaskSpec) -> TaskRun:
        if not spec.prompt.strip():
            raise TaskRefused("prompt must not be empty")
        if spec.verify is not None and spec.read_only:
            raise TaskRefused("verify needs read_only false: a run that may not change files cannot repair a check")
        workspace = allowed_workspace(settings, spec.cwd)
        timeout = settings.afm.timeout_seconds if spec.timeout_seconds is None else spec.timeout_seconds
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
            raise TaskRefused(f"timeout_seconds must be above 0 and at most {MAX_TIMEOUT_SECONDS:g}, got {timeout:g}")
        afm = settings.afm.model_copy(update={"timeout_seconds": timeout})
        connector = AfmConnector(settings.model_copy(update={"afm": afm}))
        request = TurnRequest(spec.prompt, workspace=workspace, read_only=spec.read_only, sender=RUN_OWNER,
                              verify=spec.verify or None)
        return cls(connector, request)

    def run(self, progress: Callable[[str], None]) -> dict[str, Any]:
        """Runs to the end (blocking), calling ``progress`` with each progress line apple-code's events make;
        returns what the caller is told."""
        turn = self._connector.run(self._request)
        try:
            for event in turn.events:
                for line in event.progress:
                    progress(line)
        except BaseException:
            turn.close()
            raise
        outcome = turn.outcome()
        assert self._request.workspace is not None
        return task_result(outcome, self._request.workspace)

    def cancel(self) -> None:
        self._connector.cancel(RUN_OWNER)


def task_result(outcome: TurnOutcome, workspace: Path) -> dict[str, Any]:
    """The outcome as the tool returns it; a run that did no work because it could not raises ``TaskFailed``."""
    if outcome.status in (Status.NO_MODEL, Status.BINARY_MISSING, Status.FAILED, Status.CANCELLED):
        raise TaskFailed(outcome.as_text().removeprefix("Error: "))
    check = outcome.check
    return {
        "status": outcome.status.value,
        "answer": outcome.text,
        "detail": outcome.detail,
        "workspace": str(workspace),
        "files_changed": list(outcome.files_changed),
        "commands_run": outcome.commands_run,
        "check": None if check is None else {
            "command": check.command, "passed": check.passed, "rounds": check.rounds, "runs": check.runs,
            "exit_code": check.exit_code, "output_tail": check.output_tail,
        },
        "backend": outcome.backend,
        "model": outcome.model,
    }
