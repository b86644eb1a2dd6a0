"""All settings: one class, with a section per connector, channel and part (``sections``). Read from the environment
(prefix ``apple_flow_``) and ``.env``.

Every other module takes a ``Settings`` instance (or its section); nothing else reads the environment for
configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from apple_flow.sections import (
    AfmSettings,
    ClaudeSettings,
    ClineSettings,
    CodexSettings,
    GeminiSettings,
    ImessageSettings,
    KiloSettings,
    LimitsSettings,
    LocalModelSettings,
    OllamaSettings,
    Section,
    ServiceSettings,
    VerifySettings,
    WebSettings,
    WorkspacesSettings,
    split_list,
)

# The connectors: apple_flow.connectors.registry maps each name to its class (a test keeps the two alike).
ConnectorName = Literal["afm", "ollama", "codex-cli", "claude-cli", "gemini-cli", "cline", "kilo-cli"]
ChannelName = Literal["auto", "imessage", "console"]
ProfileName = Literal["standard", "demo"]

# The demo profile: limits that fit the small local model (Qwen2.5-Coder-0.5B on llama.cpp, on a laptop's CPU): a few
# model turns, a reply stopped within 110 s (room for a check and one repair round of an approved task: one cold
# 2,048-token request and its answer take about 40 s on two cores), and requests of 2,048 tokens, whose
# answer reserve (an eighth: 256 tokens) bounds answers it would otherwise ramble on. Only the settings not set
# explicitly take these values; scripts/run.sh picks the profile where it starts that model, so an Apple-model or
# real-server setup keeps the standard limits. Its chat turns only read: a model this small calls writeFile with
# made-up paths and contents when asked a question (measured in scripts/bench_demo), and a read-only turn offers
# four tool definitions instead of seven, fewer tokens to process per request; `task:` still changes files, after
# the user approves its plan. An approved task runs without --plan: on both local models the plan arm of
# scripts/bench_tasks solved nothing, where --verify alone solved the most (reports/bench_tasks.md). No earlier
# exchange goes with a prompt: the 0.5B copied the last reply into the next one's answer and calls (bench_demo).
DEMO_PROFILE: dict[str, Any] = {
    "afm_max_turns": 4,
    "afm_timeout_seconds": 110,
    "turn_timeout_seconds": 140,
    "afm_context_tokens": 2048,
    "chat_read_only": True,
    "afm_plan_tasks": False,
    "afm_context_window": 0,
}


# Where the daemon reads its settings, relative to the folder it runs in (and where a new web token is written).
ENV_FILE = ".env"
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SECRET_VARIABLES = frozenset({"web_token"})  # never echoed in an error


def _connector_name(value: Any) -> Any:
    # Before the Literal's own check, whose message would not say "unknown connector".
    names = get_args(ConnectorName)
    if isinstance(value, str) and value not in names:
        raise ValueError(f"unknown connector; accepted: {', '.join(names)}")
    return value


class SettingsError(ValueError):
    """Invalid configuration; the message names the variable and what it accepts."""


class _WithSectionVariables(PydanticBaseSettingsSource):
    """One of pydantic-settings' sources (the environment, or .env) giving the sections' flat variables too, which
    it does not read by itself: a section's options are not fields of ``Settings``."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        # A section under its own name (APPLE_FLOW_AFM=...) is no setting: sections come only from their options.
        data = {key: value for key, value in self._source().items() if key not in SECTIONS}
        found: Mapping[str, str | None] = getattr(self._source, "env_vars", {})
        prefix = str(self.config.get("env_prefix", "")).lower()
        for variable in section_variables():
            value = found.get(prefix + variable)
            if value is not None:
                data[variable] = value
        return data


class Settings(BaseSettings):
    """The daemon's settings: the few that concern it as a whole, and a section per connector, channel and part.

    Every option keeps its flat variable (``APPLE_FLOW_AFM_COMMAND`` is ``settings.afm.command``): the sources below
    read each section's variables, and ``_gather`` folds them (and the same names given as keyword arguments) into
    their sections.
    """

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

    # Each connector's options (NoDecode: a section is never read from one JSON variable, only from its own).
    afm: Annotated[AfmSettings, NoDecode] = Field(default_factory=AfmSettings)
    ollama: Annotated[OllamaSettings, NoDecode] = Field(default_factory=OllamaSettings)
    codex: Annotated[CodexSettings, NoDecode] = Field(default_factory=CodexSettings)
    claude: Annotated[ClaudeSettings, NoDecode] = Field(default_factory=ClaudeSettings)
    gemini: Annotated[GeminiSettings, NoDecode] = Field(default_factory=GeminiSettings)
    cline: Annotated[ClineSettings, NoDecode] = Field(default_factory=ClineSettings)
    kilo: Annotated[KiloSettings, NoDecode] = Field(default_factory=KiloSettings)

    # --- Checking approved work, and escalating a stuck task ---------------------------------------------
    verify: Annotated[VerifySettings, NoDecode] = Field(default_factory=VerifySettings)
    # Another connector an approved task whose apple-code run failed may be run on again, when the owner says
    # `escalate <run>`; unset: nothing is offered.
    escalate_connector: ConnectorName | None = None

    # More variables of the daemon's environment passed to the agent (a proxy, a CA file); APPLE_FLOW_* never are.
    agent_environment: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # --- Agent persona -----------------------------------------------------------------------------------
    soul_prompt: str = ""
    soul_file: Path | None = None

    workspaces: Annotated[WorkspacesSettings, NoDecode] = Field(default_factory=WorkspacesSettings)

    # --- Channel and senders -----------------------------------------------------------------------------
    channel: ChannelName = "auto"
    allowed_senders: Annotated[list[str], NoDecode] = Field(default_factory=list)
    default_region: str = "US"
    reply_to_unknown_senders: bool = False
    # SMS and RCS sender IDs can be forged: such messages are not acted on unless this is true, and then they can
    # never approve, deny or cancel, and their turns only read.
    allow_sms: bool = False
    imessage: Annotated[ImessageSettings, NoDecode] = Field(default_factory=ImessageSettings)

    # --- Daemon ----------------------------------------------------------------------------------------------
    db_path: Path = Path("~/.apple-flow/relay.db")
    limits: Annotated[LimitsSettings, NoDecode] = Field(default_factory=LimitsSettings)
    service: Annotated[ServiceSettings, NoDecode] = Field(default_factory=ServiceSettings)
    localmodel: Annotated[LocalModelSettings, NoDecode] = Field(default_factory=LocalModelSettings)
    web: Annotated[WebSettings, NoDecode] = Field(default_factory=WebSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment over .env, as pydantic-settings orders them, each also giving the sections' variables.
        return (init_settings, _WithSectionVariables(settings_cls, env_settings),
                _WithSectionVariables(settings_cls, dotenv_settings), file_secret_settings)

    @model_validator(mode="before")
    @classmethod
    def _gather(cls, data: Any) -> Any:
        """Moves each section's variables (``afm_command``) into its section (``afm.command``)."""
        if not isinstance(data, dict):
            return data
        gathered: dict[str, Any] = {}
        for key, value in data.items():
            place = section_variables().get(key.lower()) if isinstance(key, str) else None
            if place is None:
                continue
            section, name = place
            gathered.setdefault(section, {})[name] = value
        if not gathered:
            return data
        data = {key: value for key, value in data.items()
                if not (isinstance(key, str) and key.lower() in section_variables())}
        for section, values in gathered.items():
            given = data.get(section)
            if isinstance(given, BaseModel):
                given = given.model_dump(exclude_unset=True)
            # A section given whole (Settings(web=WebSettings(...))) wins over its variables.
            data[section] = {**values, **given} if isinstance(given, dict) else values
        return data

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

    @field_validator("allowed_senders", "agent_environment", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("agent_environment", mode="after")
    @classmethod
    def _variable_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _VARIABLE.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name; accepted: names such as HTTPS_PROXY,NO_PROXY")
            if name.upper().startswith("APPLE_FLOW_"):
                raise ValueError(f"{name} is one of the daemon's own settings, which never reach the agent")
        return value

    @field_validator("db_path", "soul_file", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @model_validator(mode="after")
    def _profile_limits(self) -> Settings:
        if self.profile == "demo":
            for variable, value in DEMO_PROFILE.items():
                section, name = section_variables().get(variable, (None, variable))
                part: BaseModel = getattr(self, section) if section else self
                if name not in part.model_fields_set:
                    setattr(part, name, value)
        return self

    # Not settings but what this process read and serves, which the agent must not reach (connectors/afm.py):
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

    def variables(self) -> dict[str, Any]:
        """Every setting by its variable (lower case, without ``APPLE_FLOW_``), as JSON values, in the order of
        the fields: what users set and ``apple-flow config`` shows."""
        dumped: dict[str, Any] = json.loads(self.model_dump_json())
        values: dict[str, Any] = {}
        for field, value in dumped.items():
            section = SECTIONS.get(field)
            if section is None:
                values[field] = value
            else:
                values.update({variable: value[name] for variable, name in section.variables().items()})
        return values

    def profile_line(self) -> str | None:
        """The demo profile's limits in one line, shown when the daemon starts; None for the standard profile."""
        if self.profile != "demo":
            return None
        afm = self.afm
        turns = f"at most {afm.max_turns} model turns" if afm.max_turns else "apple-code's model turns"
        window = f", {afm.context_tokens}-token requests" if afm.context_tokens else ""
        chat = "; chat only reads files (task: changes them, after approval)" if self.chat_read_only else ""
        return (f"Demo profile (APPLE_FLOW_PROFILE=demo, limits for the small local model): {turns} and "
                f"{afm.timeout_seconds:g} s per reply{window}{chat} (APPLE_FLOW_AFM_MAX_TURNS, "
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


# Settings field -> its section's model; variable -> (section, field) for every section's option.
SECTIONS: dict[str, type[Section]] = {
    name: info.annotation for name, info in Settings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
}
_SECTION_VARIABLES: dict[str, tuple[str, str]] = {
    variable: (section, name) for section, model in SECTIONS.items() for variable, name in model.variables().items()
}


def section_variables() -> dict[str, tuple[str, str]]:
    """Variable (lower case, without ``APPLE_FLOW_``) -> (section, field), for every option in a section."""
    return _SECTION_VARIABLES


def setting_variables() -> list[str]:
    """Every setting's variable (lower case, without ``APPLE_FLOW_``): the plain fields and the sections' options."""
    names: list[str] = []
    for field in Settings.model_fields:
        section = SECTIONS.get(field)
        names += list(section.variables()) if section is not None else [field]
    return names


def _variable(loc: tuple[Any, ...]) -> str:
    """The variable an error's location points at: ``("afm", "max_turns")`` is ``afm_max_turns``."""
    if not loc:
        return "settings"
    section = SECTIONS.get(str(loc[0]))
    if section is not None and len(loc) > 1:
        name = str(loc[1])
        return section.renamed.get(name, section.prefix + name)
    return str(loc[0])


def _describe(error: dict[str, Any]) -> str:
    name = _variable(tuple(error.get("loc", ())))
    variable = f"APPLE_FLOW_{name.upper()}"
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    if error.get("type") == "bool_parsing":
        message += "; accepted: true or false"
    got = error.get("input")
    secret = name in SECRET_VARIABLES
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
