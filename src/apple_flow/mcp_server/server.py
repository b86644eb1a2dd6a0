"""``apple-flow mcp``: a stdio MCP server (the official SDK's ``MCPServer``) offering the daemon's model and agent
to any MCP client (Claude Code, Codex, Cursor).

Tools: ``apple_foundation_models`` (``foundation``) and ``run_task`` (``tasks``). Both block on apple-code, so they
run on a worker thread and the server keeps answering; ``run_task`` sends each progress line of apple-code's events
as an MCP progress notification (when the client asked for them with a progress token). A failure the caller can
act on (no model, a refused workspace, a bad argument) is raised as ``ToolError``: the client gets a tool result
with ``isError`` and the reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from apple_flow import __version__
from apple_flow.config import Settings
from apple_flow.mcp_server.foundation import FoundationModels, ModelFailed, ModelUnavailable, Sampling
from apple_flow.mcp_server.owner import OwnerClient, OwnerError
from apple_flow.mcp_server.tasks import TaskFailed, TaskRefused, TaskRun, TaskSpec
from apple_flow.owner_socket import socket_path

Action = Literal["status", "hardware", "models", "generate", "respond", "summarize", "classify"]
INSTRUCTIONS = (
    "apple-flow runs on the owner's Mac. apple_foundation_models answers with the Mac's own model (Apple's "
    "on-device model, else the configured local server) without tools; run_task runs the apple-code agent in an "
    "allowed workspace, read-only unless read_only is false."
)


def build_server(settings: Settings) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("apple-flow", version=__version__, instructions=INSTRUCTIONS)
    models = FoundationModels(settings)

    @server.tool(
        name="apple_foundation_models",
        description=(
            "The Mac's own language model, with no tools. action: status (which backend answers, whether Apple "
            "Intelligence is on and why not, the window), hardware (chip, memory, OS), models (what is available), "
            "generate (prompt; max_tokens, temperature), respond (prompt and system, the same), summarize (text), "
            "classify (text and labels: returns one label). An unavailable model is an error that says why."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def apple_foundation_models(
        action: Annotated[Action, Field(description="what to do")],
        prompt: Annotated[str | None, Field(description="generate, respond: the prompt")] = None,
        system: Annotated[str | None, Field(description="respond: instructions for the model")] = None,
        text: Annotated[str | None, Field(description="summarize, classify: the text")] = None,
        labels: Annotated[list[str] | None, Field(description="classify: the labels to choose from")] = None,
        max_tokens: Annotated[int | None, Field(description="generate, respond: at most this many tokens")] = None,
        temperature: Annotated[float | None, Field(description="generate, respond: temperature, 0 to 2")] = None,
    ) -> dict[str, Any]:
        sampling = Sampling(temperature, max_tokens)

        def work() -> dict[str, Any]:
            if action == "status":
                return models.status()
            if action == "hardware":
                return models.hardware()
            if action == "models":
                return models.models()
            if action == "generate":
                return models.generate(prompt or "", sampling).as_dict()
            if action == "respond":
                return models.respond(prompt or "", system, sampling).as_dict()
            if action == "summarize":
                return models.summarize(text or "").as_dict()
            return models.classify(text or "", labels or []).as_dict()

        try:
            return await anyio.to_thread.run_sync(work)
        except (ModelUnavailable, ModelFailed, ValueError) as exc:
            raise ToolError(f"apple_foundation_models {action}: {exc}") from exc

    @server.tool(
        name="run_task",
        description=(
            "Run the apple-code agent on the Mac's own model in a workspace the owner allowed (cwd: the default "
            "workspace when omitted), in apple-flow's sandbox. read_only (default true) lets it read, not change; "
            "verify is a command that must pass when it is done (needs read_only false). Returns the answer, the "
            "files changed and the check's verdict; sends progress notifications as it works."
        ),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
    )
    async def run_task(
        prompt: Annotated[str, Field(description="the task")],
        ctx: Context,
        cwd: Annotated[str | None, Field(description="absolute path of the workspace")] = None,
        read_only: Annotated[bool, Field(description="only read files (no edits, no commands)")] = True,
        verify: Annotated[str | None, Field(description="a check command, e.g. `pytest -q`")] = None,
        timeout_seconds: Annotated[float | None, Field(description="wall-clock limit of the run")] = None,
    ) -> dict[str, Any]:
        spec = TaskSpec(prompt, cwd, read_only, verify, timeout_seconds)
        count = 0

        def progress(line: str) -> None:
            nonlocal count
            count += 1
            anyio.from_thread.run(ctx.report_progress, count, None, line)

        try:
            job = TaskRun.prepare(settings, spec)
        except TaskRefused as exc:
            raise ToolError(f"run_task: {exc}") from exc
        try:
            return await anyio.to_thread.run_sync(lambda: job.run(progress), abandon_on_cancel=True)
        except TaskFailed as exc:
            raise ToolError(f"run_task: {exc}") from exc
        except anyio.get_cancelled_exc_class():
            job.cancel()  # the client gave up on this call: its apple-code and commands stop too
            raise

    _owner_tools(server, OwnerClient(socket_path(settings)))
    return server


def _owner_tools(server: MCPServer[Any], owner: OwnerClient) -> None:
    """notify_owner, ask_owner, send_file_to_owner: through the running daemon (``owner``), which texts the owner
    over iMessage and takes only the owner's answer."""

    async def through_daemon(name: str, work: Any) -> dict[str, Any]:
        try:
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except OwnerError as exc:
            raise ToolError(f"{name}: {exc}") from exc

    @server.tool(
        name="notify_owner",
        description="Text the Mac's owner on their phone (iMessage), through the running apple-flow daemon.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
    )
    async def notify_owner(text: Annotated[str, Field(description="the text")]) -> dict[str, Any]:
        return await through_daemon("notify_owner", lambda: owner.notify(text))

    @server.tool(
        name="ask_owner",
        description=(
            "Ask the Mac's owner a question by iMessage and wait for the answer: outcome approved (a like or love "
            "tapback, or `approve <id>`), denied (a dislike, or `deny <id>`), answered (a plain reply: its text is "
            "in answer) or timed-out. Only the owner's own iMessage answer counts (or the web page's)."
        ),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
    )
    async def ask_owner(
        question: Annotated[str, Field(description="the question, e.g. `May I delete build/?`")],
        details: Annotated[str | None, Field(description="more context, sent after the question")] = None,
        timeout_seconds: Annotated[float | None, Field(
            description="how long to wait (default: the daemon's APPLE_FLOW_APPROVAL_TTL_MINUTES)")] = None,
    ) -> dict[str, Any]:
        return await through_daemon("ask_owner", lambda: owner.ask(question, details, timeout_seconds))

    @server.tool(
        name="send_file_to_owner",
        description=("Send the owner a file by iMessage: an absolute path inside the default workspace or an "
                     "allowed workspace, within the daemon's size limit."),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
    )
    async def send_file_to_owner(
        path: Annotated[str, Field(description="absolute path of the file")],
    ) -> dict[str, Any]:
        return await through_daemon("send_file_to_owner", lambda: owner.send_file(path))


def serve(settings: Settings) -> None:
    """Serves on stdin/stdout until the client closes them."""
    anyio.run(build_server(settings).run_stdio_async)
