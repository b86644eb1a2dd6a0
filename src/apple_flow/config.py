"""All settings, in one class. Read from the environment (prefix ``apple_flow_``) and ``.env``.

Every other module takes a ``Settings`` instance; nothing else reads the environment for configuration.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# The connectors: apple_flow.connectors.registry maps each name to its class (a test keeps the two alike).
ConnectorName = Literal["afm", "ollama", "codex-cli", "claude-cli", "gemini-cli", "cline", "kilo-cli"]
ChannelName = Literal["auto", "imessage", "console"]
AfmBackend = Literal["auto", "fm", "openai"]
ProfileName = Literal["standard", "demo"]

# The demo profile: limits that fit the small local demo model (SmolLM2-135M on llama.cpp, on a laptop's CPU), which
# answers in seconds when it answers at all and otherwise loops: a few model turns, a reply stopped after tens of
# seconds rather than two minutes, and requests of 2,048 tokens, whose answer reserve (an eighth: 256 tokens) bounds
# answers it would otherwise ramble on to 512 tokens (at about 12 tokens/s on two busy cores). Only the settings not
# set explicitly take these values; scripts/run.sh picks the profile where it starts that model, so an Apple-model or
# real-server setup keeps the standard limits. Its chat turns only read: a model this small calls writeFile with
# made-up paths and contents when asked a question (measured in scripts/bench_demo), and a read-only turn offers
# four tool definitions instead of seven, fewer tokens to process per request; `task:` still changes files, after
# the user approves its plan.
DEMO_PROFILE: dict[str, Any] = {
    "afm_max_turns": 4,
    "afm_timeout_seconds": 45,
    "turn_timeout_seconds": 75,
    "afm_context_tokens": 2048,
    "chat_read_only": True,
}


# Where the daemon reads its settings, relative to the folder it runs in (and where a new web token is written).
ENV_FILE = ".env"
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


WEB_TOKEN_MIN_CHARS = 32
SECRET_FIELDS = frozenset({"web_token"})  # never echoed in an error


def _connector_name(value: Any) -> Any:
    # Before the Literal's own check, whose message would not say "unknown connector".
    names = get_args(ConnectorName)
    if isinstance(value, str) and value not in names:
        raise ValueError(f"unknown connector; accepted: {', '.join(names)}")
    return value


class SettingsError(ValueError):
    """Invalid configuration; the message names the variable and what it accepts."""


def _json(text: str, accepted: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc}); accepted: {accepted}") from None


def _split_list(value: Any) -> Any:
    """Accept ``a,b,c`` (the natural .env form) as well as a JSON list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return _json(text, "a,b,c or a JSON list")
        return [item.strip() for item in text.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="apple_flow_",
        env_file=".env",
        env_file_encoding="utf-8",
        case_sensitive=False,
        extra="ignore",
    )

    # --- Connector -------------------------------------------------------------------------------------
    connector: ConnectorName = "afm"
    profile: ProfileName = "standard"  # demo: the DEMO_PROFILE limits for the settings not set explicitly
    turn_timeout_seconds: float = Field(300, gt=0)
    chat_read_only: bool = False  # plain chat turns may read, not change; `task:` changes files after approval

    # --- afm: the connector that runs apple-code (connectors/apple_code.py), on Apple's on-device model or on an
    # OpenAI-compatible server; "afm" names the connector and these settings, whatever model answers ----------
    afm_command: str = "apple-code"
    afm_context_window: int = Field(1, ge=0)
    afm_max_prompt_chars: int = Field(3000, ge=200)
    afm_soul_max_chars: int = Field(500, ge=0)
    afm_timeout_seconds: float = Field(120, gt=0)
    afm_max_turns: int | None = Field(None, ge=1)  # apple-code --max-turns; unset: apple-code's own (16)
    afm_backend: AfmBackend = "auto"
    afm_model: str | None = None
    afm_base_url: str | None = None
    afm_context_tokens: int | None = Field(None, ge=256)
    afm_plan_tasks: bool = True
    afm_mcp_config: Path | None = None  # apple-code --mcp-config: MCP servers whose tools are offered too

    # --- ollama: the afm connector on Ollama (apple-code --backend openai), for Macs without Apple Intelligence --
    ollama_base_url: str = "http://127.0.0.1:11434/v1"  # Ollama's own default
    ollama_model: str = "qwen2.5-coder:7b"

    # --- codex / claude / gemini / cline / kilo CLIs -------------------------------------------------------
    codex_command: str = "codex"
    codex_context_window: int = Field(3, ge=0)
    codex_model: str | None = None
    claude_command: str = "claude"
    claude_context_window: int = Field(3, ge=0)
    claude_model: str | None = None
    gemini_command: str = "gemini"
    gemini_context_window: int = Field(3, ge=0)
    gemini_model: str | None = None
    cline_command: str = "cline"
    cline_context_window: int = Field(3, ge=0)
    cline_model: str | None = None
    kilo_command: str = "kilo"
    kilo_context_window: int = Field(3, ge=0)
    kilo_model: str | None = None  # provider/model, e.g. anthropic/claude-sonnet-4

    # --- Checking approved work, and escalating a stuck task ---------------------------------------------
    # The command that says whether an approved task's work is done (apple-code --verify): unset, found from the
    # workspace (daemon/deciding/verify_command.py) unless verify_detect is off.
    verify_command: str | None = None
    verify_detect: bool = True
    verify_rounds: int = Field(2, ge=0)  # apple-code --verify-rounds: repair rounds after a failing check
    # Another connector an approved task whose apple-code run failed may be run on again, when the owner says
    # `escalate <run>`; unset: nothing is offered.
    escalate_connector: ConnectorName | None = None

    # More variables of the daemon's environment passed to the agent (a proxy, a CA file); APPLE_FLOW_* never are.
    agent_environment: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # --- Agent persona -----------------------------------------------------------------------------------
    soul_prompt: str = ""
    soul_file: Path | None = None

    # --- Workspaces ----------------------------------------------------------------------------------------
    default_workspace: Path = Path.home()
    allowed_workspaces: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    # alias -> folder, e.g. {"site": "~/code/site"}; `@site fix the tests` runs there.
    workspace_aliases: Annotated[dict[str, Path], NoDecode] = Field(default_factory=dict)

    # --- Channel and senders -----------------------------------------------------------------------------
    channel: ChannelName = "auto"
    allowed_senders: Annotated[list[str], NoDecode] = Field(default_factory=list)
    default_region: str = "US"
    reply_to_unknown_senders: bool = False
    # SMS and RCS sender IDs can be forged: such messages are not acted on unless this is true, and then they can
    # never approve, deny or cancel, and their turns only read.
    allow_sms: bool = False

    # --- iMessage ------------------------------------------------------------------------------------------
    messages_db_path: Path = Path("~/Library/Messages/chat.db")
    poll_interval_seconds: float = Field(2, gt=0)
    startup_catchup_window_seconds: int = Field(60, ge=0)
    max_startup_replay_rows: int = Field(50, ge=0)
    max_message_age_seconds: int = Field(300, ge=0)  # older rows are not answered (iCloud replays); 0: no limit
    # Rows older than that but within these hours (a Mac that slept) are listed to their sender, run on `run`.
    catch_up_hours: float = Field(12, ge=0)
    group_replies: bool = False  # answer allowed senders in group chats, into the group
    echo_window_seconds: int = Field(600, ge=0)
    osascript_command: str = "osascript"
    send_timeout_seconds: float = Field(15, gt=0)
    send_retries: int = Field(2, ge=0)
    send_retry_backoff_seconds: float = Field(1, ge=0)  # wait before retry n is n times this
    send_confirm_seconds: float = Field(10, ge=0)  # wait for a sent text's row in chat.db; 0: trust osascript
    reply_chunk_chars: int = Field(1500, ge=100)
    # Files: where Messages keeps received attachments (only files inside it are ever read), the limits on what is
    # copied into the workspace's .apple-flow/inbox/ (per file, per message) and on what the agent may send back.
    messages_attachments_path: Path = Path("~/Library/Messages/Attachments")
    attachment_max_bytes: int = Field(25_000_000, ge=0)
    attachment_max_message_bytes: int = Field(50_000_000, ge=0)
    attachment_wait_seconds: float = Field(15, ge=0)  # for attachments still downloading; then reported missing
    send_file_max_bytes: int = Field(25_000_000, ge=0)
    send_files_per_reply: int = Field(5, ge=0)  # 0: the agent cannot send files

    # --- Daemon ----------------------------------------------------------------------------------------------
    db_path: Path = Path("~/.apple-flow/relay.db")
    approval_ttl_minutes: int = Field(20, gt=0)
    max_messages_per_minute: int = Field(30, gt=0)
    max_concurrent_ai_calls: int = Field(4, gt=0)
    progress_interval_seconds: float = Field(20, ge=0)
    shutdown_grace_seconds: float = Field(10, ge=0)

    # --- Service (launchd) ----------------------------------------------------------------------------------
    service_label: str = "com.apple-flow.daemon"
    log_dir: Path = Path("~/.apple-flow/logs")

    # --- Local model (machines without Apple Intelligence) ------------------------------------------------
    # qwen2.5-coder-0.5b (the default), qwen2.5-coder-1.5b (better, about three times slower) or smollm2-135m.
    local_model: str = "qwen2.5-coder-0.5b"
    local_model_dir: Path = Path("~/.apple-flow/models")  # where the assembled, verified model files live
    local_model_context_tokens: int = Field(8192, ge=512)  # the served window (llama.cpp's n_ctx)
    local_model_host: str = "127.0.0.1"
    local_model_port: int = Field(8765, gt=0, lt=65536)

    # --- Web page (served by the daemon itself) ------------------------------------------------------------
    web_enabled: bool = True
    web_host: str = "127.0.0.1"
    web_port: int = Field(8787, ge=0, lt=65536)  # 0: any free port
    web_allow_remote: bool = False  # a web_host that is not loopback needs this set to true
    web_token: str | None = None  # 32 characters or more; created in .env at first start when unset
    web_base_url: str | None = None  # e.g. https://mac.tailnet.ts.net: replies end with a link to their run
    # The page's own host name on this Mac: its cookie then goes to no other local server (cookies ignore ports).
    web_local_name: str = "apple-flow.localhost"  # "": served as 127.0.0.1 (see docs/web.md for what that costs)
    web_session_days: int = Field(7, ge=1, le=30)  # a login lasts this long (logging out ends it at once)
    web_link_minutes: int = Field(5, ge=1, le=60)  # a login link texted by `web` works once, for this long

    @field_validator("connector", mode="before")
    @classmethod
    def _known_connector(cls, value: Any) -> Any:
        return _connector_name(value)

    @field_validator("escalate_connector", mode="before")
    @classmethod
    def _known_escalate_connector(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None  # APPLE_FLOW_ESCALATE_CONNECTOR= (empty): nothing is offered
        return _connector_name(value)

    @field_validator("escalate_connector", mode="after")
    @classmethod
    def _escalate_elsewhere(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and value == info.data.get("connector"):
            raise ValueError(
                f"{value} is the connector every turn runs on already (APPLE_FLOW_CONNECTOR); name another one "
                "(e.g. claude-cli), or unset it"
            )
        return value

    @field_validator("verify_command", mode="after")
    @classmethod
    def _command_or_none(cls, value: str | None) -> str | None:
        return value.strip() if value is not None and value.strip() else None

    @field_validator("allowed_senders", "allowed_workspaces", "agent_environment", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("agent_environment", mode="after")
    @classmethod
    def _variable_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _VARIABLE.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name; accepted: names such as HTTPS_PROXY,NO_PROXY")
            if name.upper().startswith("APPLE_FLOW_"):
                raise ValueError(f"{name} is one of the daemon's own settings, which never reach the agent")
        return value

    @field_validator(
        "default_workspace", "allowed_workspaces", "messages_db_path", "db_path", "log_dir", "soul_file",
        "afm_mcp_config", "messages_attachments_path", "local_model_dir", mode="after",
    )
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if isinstance(value, Path):
            return value.expanduser()
        if isinstance(value, list):
            return [v.expanduser() if isinstance(v, Path) else v for v in value]
        return value

    @field_validator("local_model", mode="after")
    @classmethod
    def _known_local_model(cls, value: str) -> str:
        from apple_flow.localmodel.catalog import model_named

        return model_named(value).name

    @field_validator("workspace_aliases", mode="before")
    @classmethod
    def _aliases_json(cls, value: Any) -> Any:
        # Decoded here rather than by pydantic-settings, whose JSON error names no variable.
        if isinstance(value, str):
            return _json(value, 'a JSON object, e.g. {"site": "~/code/site"}')
        return value

    @field_validator("workspace_aliases", mode="after")
    @classmethod
    def _expand_aliases(cls, value: dict[str, Path]) -> dict[str, Path]:
        return {name.lower(): path.expanduser() for name, path in value.items()}

    @field_validator("web_allow_remote", mode="after")
    @classmethod
    def _loopback_unless_allowed(cls, value: bool, info: ValidationInfo) -> bool:
        host = info.data.get("web_host")
        if not value and isinstance(host, str) and not is_loopback(host):
            raise ValueError(
                f"APPLE_FLOW_WEB_HOST={host} is not a loopback address, so the web page would be reachable from "
                "other machines; set APPLE_FLOW_WEB_ALLOW_REMOTE=true if you mean that, or use 127.0.0.1 (the "
                "docs/web.md says how to reach it over Tailscale without that)"
            )
        return value

    @field_validator("web_token", mode="after")
    @classmethod
    def _strong_token(cls, value: str | None) -> str | None:
        if value is not None and len(value.strip()) < WEB_TOKEN_MIN_CHARS:
            raise ValueError(
                f"must be at least {WEB_TOKEN_MIN_CHARS} characters (it has {len(value.strip())}); remove it from .env "
                "and the daemon makes a strong one at its next start"
            )
        return value

    @field_validator("web_local_name", mode="after")
    @classmethod
    def _local_name(cls, value: str) -> str:
        name = value.strip().lower().rstrip(".")
        if name and (not name.endswith(".localhost") or not re.fullmatch(r"[a-z0-9.-]+", name)):
            raise ValueError("must be a name under .localhost (browsers resolve those to this Mac), e.g. "
                             "apple-flow.localhost, or empty")
        return name

    @field_validator("web_base_url", mode="after")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://, e.g. https://mac.tailnet.ts.net")
        return value.strip().rstrip("/")

    @model_validator(mode="after")
    def _profile_limits(self) -> Settings:
        if self.profile == "demo":
            for name, value in DEMO_PROFILE.items():
                if name not in self.model_fields_set:
                    setattr(self, name, value)
        return self

    # Not settings but what this process read and serves, which the agent must not reach (connectors/apple_code.py):
    # the .env file the settings came from (`run --env-file FILE`, the service's) and the port the web page
    # actually listens on (APPLE_FLOW_WEB_PORT=0 lets the system choose it).
    _env_file_read: Path | None = PrivateAttr(default=None)
    _web_port_listening: int | None = PrivateAttr(default=None)

    @property
    def env_file_read(self) -> Path | None:
        return self._env_file_read

    @property
    def web_port_listening(self) -> int | None:
        return self._web_port_listening

    def note_web_port(self, port: int) -> None:
        """The web page listens on ``port`` now."""
        self._web_port_listening = port

    def profile_line(self) -> str | None:
        """The demo profile's limits in one line, shown when the daemon starts; None for the standard profile."""
        if self.profile != "demo":
            return None
        turns = f"at most {self.afm_max_turns} model turns" if self.afm_max_turns else "apple-code's model turns"
        window = f", {self.afm_context_tokens}-token requests" if self.afm_context_tokens else ""
        chat = "; chat only reads files (task: changes them, after approval)" if self.chat_read_only else ""
        return (f"Demo profile (APPLE_FLOW_PROFILE=demo, limits for the small local model): {turns} and "
                f"{self.afm_timeout_seconds:g} s per reply{window}{chat} (APPLE_FLOW_AFM_MAX_TURNS, "
                f"APPLE_FLOW_AFM_TIMEOUT_SECONDS, APPLE_FLOW_AFM_CONTEXT_TOKENS, APPLE_FLOW_CHAT_READ_ONLY change "
                f"them)")

    def soul_text(self) -> str:
        """The persona prompt: ``soul_file`` when set and readable, else ``soul_prompt``."""
        if self.soul_file is not None:
            try:
                return self.soul_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise SettingsError(
                    f"APPLE_FLOW_SOUL_FILE: cannot read {self.soul_file} ({exc.strerror}); "
                    "fix the path or unset it"
                ) from exc
        return self.soul_prompt.strip()


def _describe(error: dict[str, Any]) -> str:
    field = ".".join(str(part) for part in error.get("loc", ())) or "settings"
    variable = f"APPLE_FLOW_{field.split('.')[0].upper()}"
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    if error.get("type") == "bool_parsing":
        message += "; accepted: true or false"
    got = error.get("input")
    secret = field.split(".")[0] in SECRET_FIELDS
    got_text = f" (got {got!r})" if got is not None and not isinstance(got, dict) and not secret else ""
    return f"{variable}: {message}{got_text}"


def load_settings(env_file: str | Path | None = ".env", **overrides: Any) -> Settings:
    """Builds the settings, turning pydantic's errors into one readable ``SettingsError``."""
    try:
        settings = Settings(_env_file=env_file, **overrides)  # type: ignore[call-arg]
    except ValidationError as exc:
        lines = [_describe(dict(e)) for e in exc.errors()]
        raise SettingsError("Invalid configuration:\n  " + "\n  ".join(lines)) from exc
    if env_file is not None and Path(env_file).is_file():
        settings._env_file_read = Path(env_file).absolute()
    return settings
