"""The settings' sections: each connector's, each channel's and each part's options in a model of its own, so a new
connector or channel adds a section here and one field to ``config.Settings`` rather than prefixed fields there.

A section's options keep their flat variable names (``APPLE_FLOW_AFM_COMMAND`` is ``settings.afm.command``, users'
``.env`` files keep working): a field's variable is the section's ``prefix`` followed by the field's name, unless
``renamed`` names another. ``config`` gathers the variables into their sections.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

AfmBackend = Literal["auto", "fm", "openai"]
WEB_TOKEN_MIN_CHARS = 32


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def parse_json(text: str, accepted: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc}); accepted: {accepted}") from None


def split_list(value: Any) -> Any:
    """Accept ``a,b,c`` (the natural .env form) as well as a JSON list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return parse_json(text, "a,b,c or a JSON list")
        return [item.strip() for item in text.split(",") if item.strip()]
    return value


class Section(BaseModel):
    """The options of one part, each read from ``APPLE_FLOW_<prefix><field>`` (or the variable ``renamed`` names)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)  # defaults too: "~" expanded

    prefix: ClassVar[str] = ""
    renamed: ClassVar[dict[str, str]] = {}  # field -> its variable (lower case, without APPLE_FLOW_)

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Variable (lower case, without ``APPLE_FLOW_``) -> field, for every field of the section."""
        return {cls.renamed.get(name, cls.prefix + name): name for name in cls.model_fields}


# --- Connectors -------------------------------------------------------------------------------------------------


class AfmSettings(Section):
    """The afm connector: apple-code (connectors/afm.py) on Apple's on-device model or an OpenAI-compatible server."""

    prefix: ClassVar[str] = "afm_"

    command: str = "apple-code"
    context_window: int = Field(default=1, ge=0)
    max_prompt_chars: int = Field(default=3000, ge=200)
    soul_max_chars: int = Field(default=500, ge=0)
    timeout_seconds: float = Field(default=120, gt=0)
    max_turns: int | None = Field(default=None, ge=1)  # apple-code --max-turns; unset: apple-code's own (16)
    backend: AfmBackend = "auto"
    model: str | None = None
    base_url: str | None = None
    context_tokens: int | None = Field(default=None, ge=256)
    # Tasks (the plan to approve, then the work) on another server and/or model (a larger one for the work, the
    # quick one for chat): unset, the same as every turn. ./scripts/run.sh sets the server to the local task
    # model's (APPLE_FLOW_LOCAL_TASK_MODEL).
    task_base_url: str | None = None
    task_model: str | None = None
    plan_tasks: bool = True
    mcp_config: Path | None = None  # apple-code --mcp-config: MCP servers whose tools are offered too

    @field_validator("mcp_config", mode="after")
    @classmethod
    def _expand_mcp_config(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None


class OllamaSettings(Section):
    """The ollama connector: the afm connector on Ollama (apple-code --backend openai), for Macs without Apple
    Intelligence."""

    prefix: ClassVar[str] = "ollama_"

    base_url: str = "http://127.0.0.1:11434/v1"  # Ollama's own default
    model: str = "qwen2.5-coder:7b"


class CliSettings(Section):
    """An agent CLI's connector: its command, how many earlier exchanges go with a prompt, its model."""

    command: str
    context_window: int = Field(default=3, ge=0)
    model: str | None = None


class CodexSettings(CliSettings):
    prefix: ClassVar[str] = "codex_"
    command: str = "codex"


class ClaudeSettings(CliSettings):
    prefix: ClassVar[str] = "claude_"
    command: str = "claude"


class GeminiSettings(CliSettings):
    prefix: ClassVar[str] = "gemini_"
    command: str = "gemini"


class ClineSettings(CliSettings):
    prefix: ClassVar[str] = "cline_"
    command: str = "cline"


class KiloSettings(CliSettings):
    prefix: ClassVar[str] = "kilo_"
    command: str = "kilo"
    model: str | None = None  # provider/model, e.g. anthropic/claude-sonnet-4


# --- Channels ---------------------------------------------------------------------------------------------------


class ImessageSettings(Section):
    """The iMessage channel: reading chat.db, sending through Messages, the files that come and go with texts."""

    messages_db_path: Path = Path("~/Library/Messages/chat.db")
    poll_interval_seconds: float = Field(default=2, gt=0)
    startup_catchup_window_seconds: int = Field(default=60, ge=0)
    max_startup_replay_rows: int = Field(default=50, ge=0)
    max_message_age_seconds: int = Field(default=300, ge=0)  # older rows are not answered (iCloud replays); 0: no limit
    # Rows older than that but within these hours (a Mac that slept) are listed to their sender, run on `run`.
    catch_up_hours: float = Field(default=12, ge=0)
    group_replies: bool = False  # answer allowed senders in group chats, into the group
    echo_window_seconds: int = Field(default=600, ge=0)
    osascript_command: str = "osascript"
    send_timeout_seconds: float = Field(default=15, gt=0)
    send_retries: int = Field(default=2, ge=0)
    send_retry_backoff_seconds: float = Field(default=1, ge=0)  # wait before retry n is n times this
    send_confirm_seconds: float = Field(default=10, ge=0)  # wait for a sent text's row in chat.db; 0: trust osascript
    reply_chunk_chars: int = Field(default=1500, ge=100)
    # Files: where Messages keeps received attachments (only files inside it are ever read), the limits on what is
    # copied into the workspace's .apple-flow/inbox/ (per file, per message) and on what the agent may send back.
    messages_attachments_path: Path = Path("~/Library/Messages/Attachments")
    attachment_max_bytes: int = Field(default=25_000_000, ge=0)
    attachment_max_message_bytes: int = Field(default=50_000_000, ge=0)
    attachment_wait_seconds: float = Field(default=15, ge=0)  # for attachments still downloading; then reported missing
    send_file_max_bytes: int = Field(default=25_000_000, ge=0)
    send_files_per_reply: int = Field(default=5, ge=0)  # 0: the agent cannot send files

    @field_validator("messages_db_path", "messages_attachments_path", mode="after")
    @classmethod
    def _expand_paths(cls, value: Path) -> Path:
        return value.expanduser()


# --- The daemon's parts -----------------------------------------------------------------------------------------


class VerifySettings(Section):
    """The command that says whether an approved task's work is done (apple-code --verify): unset, found from the
    workspace (daemon/deciding/verify_command.py) unless ``detect`` is off."""

    prefix: ClassVar[str] = "verify_"

    command: str | None = None
    detect: bool = True
    rounds: int = Field(default=2, ge=0)  # apple-code --verify-rounds: repair rounds after a failing check

    @field_validator("command", mode="after")
    @classmethod
    def _command_or_none(cls, value: str | None) -> str | None:
        return value.strip() if value is not None and value.strip() else None


class WorkspacesSettings(Section):
    """Where the agent works: the default folder, the ones a message may pick, and their aliases."""

    renamed: ClassVar[dict[str, str]] = {
        "default": "default_workspace", "allowed": "allowed_workspaces", "aliases": "workspace_aliases",
    }

    default: Path = Path.home()
    allowed: list[Path] = Field(default_factory=list)
    # alias -> folder, e.g. {"site": "~/code/site"}; `@site fix the tests` runs there.
    aliases: dict[str, Path] = Field(default_factory=dict)

    @field_validator("allowed", mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases_json(cls, value: Any) -> Any:
        # Decoded here rather than by pydantic, whose JSON error names no variable.
        if isinstance(value, str):
            return parse_json(value, 'a JSON object, e.g. {"site": "~/code/site"}')
        return value

    @field_validator("default", mode="after")
    @classmethod
    def _expand_default(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("allowed", mode="after")
    @classmethod
    def _expand_allowed(cls, value: list[Path]) -> list[Path]:
        return [path.expanduser() for path in value]

    @field_validator("aliases", mode="after")
    @classmethod
    def _expand_aliases(cls, value: dict[str, Path]) -> dict[str, Path]:
        return {name.lower(): path.expanduser() for name, path in value.items()}


class LimitsSettings(Section):
    """How much the daemon takes on and how long it waits."""

    approval_ttl_minutes: int = Field(default=20, gt=0)
    max_messages_per_minute: int = Field(default=30, gt=0)
    max_concurrent_ai_calls: int = Field(default=4, gt=0)
    progress_interval_seconds: float = Field(default=20, ge=0)
    shutdown_grace_seconds: float = Field(default=10, ge=0)


class ServiceSettings(Section):
    """The launchd service: its label and where it logs."""

    prefix: ClassVar[str] = "service_"
    renamed: ClassVar[dict[str, str]] = {"log_dir": "log_dir"}

    label: str = "com.apple-flow.daemon"
    log_dir: Path = Path("~/.apple-flow/logs")

    @field_validator("log_dir", mode="after")
    @classmethod
    def _expand_log_dir(cls, value: Path) -> Path:
        return value.expanduser()


class LocalModelSettings(Section):
    """The local model (machines without Apple Intelligence): which one, where its files live, where it is served."""

    prefix: ClassVar[str] = "local_model_"
    renamed: ClassVar[dict[str, str]] = {"name": "local_model", "task_name": "local_task_model",
                                         "task_port": "local_task_model_port"}

    # qwen2.5-coder-0.5b (the default: quick replies), qwen2.5-coder-1.5b (better, about three times slower) or
    # smollm2-135m.
    name: str = "qwen2.5-coder-0.5b"  # catalog.DEFAULT_MODEL
    # The model approved tasks run on, served beside the first on task_port: the 1.5B fixes bugs the 0.5B does not
    # (docs/benchmarks.md). "" or the same name: one model, one server, for everything.
    task_name: str = "qwen2.5-coder-1.5b"  # catalog.DEFAULT_TASK_MODEL
    task_port: int = Field(default=8766, gt=0, lt=65536)
    dir: Path = Path("~/.apple-flow/models")  # where the assembled, verified model files live
    context_tokens: int = Field(default=8192, ge=512)  # the served window (llama.cpp's n_ctx)
    host: str = "127.0.0.1"
    port: int = Field(default=8765, gt=0, lt=65536)

    @field_validator("name", mode="after")
    @classmethod
    def _known_local_model(cls, value: str) -> str:
        from apple_flow.localmodel.catalog import model_named

        return model_named(value).name

    @field_validator("task_name", mode="after")
    @classmethod
    def _known_task_model(cls, value: str) -> str:
        from apple_flow.localmodel.catalog import model_named

        return model_named(value).name if value.strip() else ""

    @property
    def serves_tasks_apart(self) -> bool:
        """Whether approved tasks have a model of their own, served beside the chat one."""
        return bool(self.task_name) and self.task_name != self.name

    @field_validator("dir", mode="after")
    @classmethod
    def _expand_dir(cls, value: Path) -> Path:
        return value.expanduser()


class WebSettings(Section):
    """The web page the daemon serves."""

    prefix: ClassVar[str] = "web_"

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, lt=65536)  # 0: any free port
    allow_remote: bool = False  # a host that is not loopback needs this set to true
    token: str | None = None  # 32 characters or more; created in .env at first start when unset
    base_url: str | None = None  # e.g. https://mac.tailnet.ts.net: replies end with a link to their run
    # The page's own host name on this Mac: its cookie then goes to no other local server (cookies ignore ports).
    local_name: str = "apple-flow.localhost"  # "": served as 127.0.0.1 (see docs/web.md for what that costs)
    session_days: int = Field(default=7, ge=1, le=30)  # a login lasts this long (logging out ends it at once)
    link_minutes: int = Field(default=5, ge=1, le=60)  # a login link texted by `web` works once, for this long

    @field_validator("allow_remote", mode="after")
    @classmethod
    def _loopback_unless_allowed(cls, value: bool, info: ValidationInfo) -> bool:
        host = info.data.get("host")
        if not value and isinstance(host, str) and not is_loopback(host):
            raise ValueError(
                f"APPLE_FLOW_WEB_HOST={host} is not a loopback address, so the web page would be reachable from "
                "other machines; set APPLE_FLOW_WEB_ALLOW_REMOTE=true if you mean that, or use 127.0.0.1 (the "
                "docs/web.md says how to reach it over Tailscale without that)"
            )
        return value

    @field_validator("token", mode="after")
    @classmethod
    def _strong_token(cls, value: str | None) -> str | None:
        if value is not None and len(value.strip()) < WEB_TOKEN_MIN_CHARS:
            raise ValueError(
                f"must be at least {WEB_TOKEN_MIN_CHARS} characters (it has {len(value.strip())}); remove it from .env "
                "and the daemon makes a strong one at its next start"
            )
        return value

    @field_validator("local_name", mode="after")
    @classmethod
    def _local_name(cls, value: str) -> str:
        name = value.strip().lower().rstrip(".")
        if name and (not name.endswith(".localhost") or not re.fullmatch(r"[a-z0-9.-]+", name)):
            raise ValueError("must be a name under .localhost (browsers resolve those to this Mac), e.g. "
                             "apple-flow.localhost, or empty")
        return name

    @field_validator("base_url", mode="after")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://, e.g. https://mac.tailnet.ts.net")
        return value.strip().rstrip("/")
