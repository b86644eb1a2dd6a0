"""`apple-flow setup`: the first run in a few questions. Who may text the daemon, where the agent works, which
agent answers (checked on the spot), then ``.env`` written (0600, every other line kept), the doctor's checks, and
on macOS the service.

Every answer is checked before anything is written: a bad one gets one clear sentence and the question again (with
``--yes``, exit 2). Nothing is written until every answer is in, in one atomic step, so Ctrl-C leaves the old
``.env`` as it was. Running it again edits the same file, offering its values as the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import typer
from rich.markup import escape

from apple_flow import host
from apple_flow.check_result import CheckStatus
from apple_flow.cli import common
from apple_flow.cli.common import err
from apple_flow.cli.diagnostics import print_checks
from apple_flow.cli.mac_places import checkout_note, local_network_note, workspace_note
from apple_flow.config import Settings, SettingsError, load_settings
from apple_flow.connectors.registry import REGISTRY
from apple_flow.envfile import EnvEdit, EnvFileError
from apple_flow.handles import HandleError, parse_handle
from apple_flow.health.doctor import AgentProbe, install_hint, probe_agent, run_doctor
from apple_flow.paths import PROJECT_ROOT
from apple_flow.sections import OllamaSettings
from apple_flow.web.auth import new_token

T = TypeVar("T")

SENDERS = "APPLE_FLOW_ALLOWED_SENDERS"
WORKSPACE = "APPLE_FLOW_DEFAULT_WORKSPACE"
CONNECTOR = "APPLE_FLOW_CONNECTOR"
BACKEND = "APPLE_FLOW_AFM_BACKEND"
BASE_URL = "APPLE_FLOW_AFM_BASE_URL"
MODEL = "APPLE_FLOW_AFM_MODEL"
WEB_TOKEN = "APPLE_FLOW_WEB_TOKEN"
EXAMPLE = PROJECT_ROOT / ".env.example"
WORKSPACE_CANDIDATES = ("Developer", "code", "src", "Projects")  # the first that exists is the default
OPENAI_DEFAULT_URL = "http://127.0.0.1:11434/v1"  # Ollama


@dataclass(frozen=True)
class ServerChoice:
    """An agent on an OpenAI-compatible server: which settings hold its URL and model, and how to check them."""

    url_var: str
    model_var: str
    backend_var: str | None  # afm: also APPLE_FLOW_AFM_BACKEND=openai; the ollama preset has it built in
    default_model: str  # "": the first model the server lists

    def overrides(self, url: str | None, model: str | None) -> dict[str, Any]:
        """Settings for a check of this URL and model (None: the setting's default)."""
        if self.backend_var is None:
            values = {"ollama_base_url": url, "ollama_model": model}
            return {"connector": "ollama", **{k: v for k, v in values.items() if v}}
        return {"connector": "afm", "afm_backend": "openai", "afm_base_url": url, "afm_model": model}


SERVERS = {
    "afm": ServerChoice(BASE_URL, MODEL, BACKEND, ""),
    "ollama": ServerChoice(
        "APPLE_FLOW_OLLAMA_BASE_URL", "APPLE_FLOW_OLLAMA_MODEL", None,
        OllamaSettings().model,
    ),
}


class BadAnswer(ValueError):
    """An answer that cannot be used; the message is the one sentence the user sees."""


class Questions:
    """Asks (or, with ``--yes``, takes the flag, the current value or the default) and checks each answer."""

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive

    def ask(
        self, question: str, default: str | None, check: Callable[[str], T], given: str | None = None,
        flag: str = "",
    ) -> T:
        """``given`` (the value of ``flag``) is checked first; a bad answer is explained and asked again, or with
        ``--yes`` ends the setup (exit 2)."""
        answer = given
        while True:
            if answer is None:
                if not self.interactive:
                    if default is None:
                        raise BadAnswer(f"{flag} is needed with --yes: {question[0].lower()}{question[1:]}.")
                    answer = default
                else:
                    # An empty default is a real one (Enter accepts it); None makes an answer required.
                    answer = typer.prompt(question, default=default, show_default=bool(default))
            try:
                return check(answer.strip())
            except BadAnswer as exc:
                if not self.interactive:
                    raise
                err.print(f"[red]{escape(str(exc))}[/red]")
                answer = None

    def confirm(self, question: str, default: bool) -> bool:
        return typer.confirm(question, default=default) if self.interactive else default


# --- the answers --------------------------------------------------------------------------------------------


def check_senders(text: str, region: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise BadAnswer("Give your phone number or Apple ID email: the daemon answers nobody else.")
    try:
        return list(dict.fromkeys(parse_handle(item, region) for item in items))
    except HandleError as exc:
        raise BadAnswer(str(exc)) from None


def shown_path(path: Path) -> str:
    """``~/…`` for a folder in the home folder (as the docs write them), else the absolute path."""
    home = Path.home()
    return "~" if path == home else f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def default_workspace(current: str | None) -> str:
    if current:
        return current
    home = Path.home()
    for name in WORKSPACE_CANDIDATES:
        if (home / name).is_dir():
            return f"~/{name}"
    return f"~/{WORKSPACE_CANDIDATES[0]}"


def workspace_checker(questions: Questions) -> Callable[[str], Path]:
    def check(text: str) -> Path:
        if not text:
            raise BadAnswer("Give the folder the agent should work in, e.g. ~/Developer.")
        path = Path(os.path.abspath(Path(text).expanduser()))
        if path.exists() and not path.is_dir():
            raise BadAnswer(f"{path} is a file, not a folder. Give a folder (a missing one can be created).")
        if not path.exists():
            if not questions.confirm(f"{path} does not exist. Create it?", default=True):
                raise BadAnswer(f"{path} does not exist. Give a folder that does, or let setup create it.")
            try:
                path.mkdir(parents=True)
            except OSError as exc:
                raise BadAnswer(f"Cannot create {path}: {exc.strerror}. Give another folder.") from None
            err.print(f"Created {path}.")
        home = Path.home()
        if home.is_relative_to(path):
            err.print(
                f"[yellow]{path} holds your whole home folder: the agent could change any file in it (your shell's "
                "start-up files, ~/Library/LaunchAgents). A project folder is safer.[/yellow]"
            )
            if not questions.confirm("Use it anyway?", default=not questions.interactive):
                raise BadAnswer("Give a project folder, e.g. ~/Developer.")
        return path

    return check


def check_agent_now(settings: Settings) -> AgentProbe:
    with err.status(f"Checking the {settings.connector} agent ..."):
        return probe_agent(settings)


def current_settings(env_file: Path, **overrides: Any) -> Settings:
    """The settings ``env_file`` gives with ``overrides``; without the file's values when they are invalid (setup
    is how they get fixed)."""
    try:
        return load_settings(env_file, **overrides)
    except SettingsError:
        return load_settings(None, **overrides)


# --- the command --------------------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    """Adds this module's command to ``app``."""

    @app.command()
    def setup(
        env_file: Path = typer.Option(  # noqa: B008
            Path(".env"), "--env-file", help="The .env to write (its values are the defaults)."
        ),
        sender: str | None = typer.Option(None, "--sender", help="Your phone number or Apple ID email (several: a,b)."),
        workspace: str | None = typer.Option(None, "--workspace", help="The agent's folder (created if missing)."),
        connector: str | None = typer.Option(None, "--connector", help=f"The agent: {', '.join(REGISTRY)}."),
        base_url: str | None = typer.Option(None, "--base-url", help="afm on an OpenAI-compatible server: its URL."),
        model: str | None = typer.Option(None, "--model", help="afm on an OpenAI-compatible server: the model."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Ask nothing: flags, else .env's values, else defaults."),
        service: bool = typer.Option(
            True, "--service/--no-service", help="macOS: offer `apple-flow service install` (with --yes: run it)."
        ),
    ) -> None:
        """Set up apple-flow in a few questions: writes .env (mode 0600, other lines kept), checks everything, and
        on macOS offers to install the service. Ctrl-C leaves .env as it was."""
        questions = Questions(interactive=not yes)
        try:
            edit = EnvEdit(env_file, template=EXAMPLE.read_text(encoding="utf-8") if EXAMPLE.is_file() else "")
        except EnvFileError as exc:
            common.print_error(exc)
            raise typer.Exit(1) from exc
        err.print(
            f"[bold]apple-flow setup[/bold] writes {escape(str(env_file.absolute()))}. Enter keeps the value in "
            "\\[brackets]; Ctrl-C stops without changing anything."
        )
        try:
            _ask_everything(questions, edit, env_file, sender, workspace, connector, base_url, model)
        except typer.Abort:
            err.print(f"\nStopped: {escape(str(env_file))} was not changed.")
            raise typer.Exit(1) from None
        except BadAnswer as exc:
            common.print_error(f"{exc} Nothing was written.")
            raise typer.Exit(2) from None
        try:
            edit.save()
        except EnvFileError as exc:
            common.print_error(exc)
            raise typer.Exit(1) from exc
        changed = ", ".join(edit.changed) or "nothing (it already said all this)"
        err.print(f"[green]Wrote {escape(str(env_file))}[/green] (mode 0600): {changed}; every other line kept.")
        if not host.is_macos():
            _doctor(env_file, terminal_permissions=True)
            err.print(
                "Run the daemon with ./scripts/run.sh (or apple-flow run); the service that starts it at login is "
                "macOS-only (launchd)."
            )
            return
        _places(env_file)
        wanted = service and questions.confirm(
            "Install the service now (the daemon runs now and at every login, as Apple Flow)?", default=True
        )
        # With a service, the terminal never reads messages: its own permissions are not checked (macOS would ask
        # about Terminal for nothing); the service checks its own.
        _doctor(env_file, terminal_permissions=not (wanted or _service_installed(env_file)))
        if not wanted:
            err.print("Later: apple-flow service install (or ./scripts/run.sh to run it in this terminal).")
            return
        code = _service(env_file)
        if code and not questions.interactive:
            raise typer.Exit(code)


def _current(edit: EnvEdit, name: str) -> str | None:
    """What this ``.env`` already says (a new file's template values are only documentation, not answers)."""
    value = edit.get(name) if edit.existed else None
    return value or None


def _ask_everything(
    questions: Questions, edit: EnvEdit, env_file: Path, sender: str | None, workspace: str | None,
    connector: str | None, base_url: str | None, model: str | None,
) -> None:
    region = current_settings(env_file).default_region
    senders = questions.ask(
        "Your phone number (with its country code) or Apple ID email; the daemon answers only these (several: a,b)",
        _current(edit, SENDERS), lambda text: check_senders(text, region), sender, "--sender",
    )
    err.print(f"The daemon will answer [bold]{escape(', '.join(senders))}[/bold] (the form it compares senders in).")
    edit.set(SENDERS, ",".join(senders))

    folder = questions.ask(
        "The folder the agent works in", default_workspace(_current(edit, WORKSPACE)), workspace_checker(questions),
        workspace, "--workspace",
    )
    edit.set(WORKSPACE, shown_path(folder))

    name, agent = questions.ask(
        f"The agent that answers ({', '.join(REGISTRY)})", _current(edit, CONNECTOR) or "afm",
        connector_checker(env_file, base_url, model), connector, "--connector",
    )
    edit.set(CONNECTOR, name)
    if name == "afm" and (base_url or model or (not agent.ok and _wants_server(questions, agent))):
        _openai_server(questions, edit, env_file, base_url, model, SERVERS["afm"])
    elif name == "ollama" and (base_url or model or (not agent.ok and questions.interactive)):
        _openai_server(questions, edit, env_file, base_url, model, SERVERS["ollama"])
    elif agent.ok:
        err.print(f"[green]{name} is ready[/green] ({escape(agent.detail)}).")
    else:
        err.print(
            f"[yellow]Keeping {name}: {escape(agent.detail)}[/yellow] Until that is fixed each reply says so; "
            "`apple-flow doctor` checks again."
        )
    edit.secret(WEB_TOKEN, new_token)  # the web page's login, kept with the other secrets


def connector_checker(
    env_file: Path, base_url: str | None, model: str | None
) -> Callable[[str], tuple[str, AgentProbe]]:
    def check(name: str) -> tuple[str, AgentProbe]:
        name = name.lower()
        if name not in REGISTRY:
            raise BadAnswer(f"'{name}' is not an agent apple-flow knows; choose one of: {', '.join(REGISTRY)}.")
        overrides: dict[str, Any] = {"connector": name}
        if name in SERVERS and (base_url or model):
            overrides = SERVERS[name].overrides(base_url, model)
        agent = check_agent_now(current_settings(env_file, **overrides))
        if agent.missing:
            raise BadAnswer(f"{agent.detail} To use {name}, {install_hint(name)}; or choose another agent.")
        return name, agent

    return check


def _wants_server(questions: Questions, agent: AgentProbe) -> bool:
    err.print(f"[yellow]Apple's on-device model is not available: {escape(agent.detail)}[/yellow]")
    return questions.confirm(
        "Use an OpenAI-compatible server instead (Ollama, LM Studio, llama.cpp)? No keeps Apple's model",
        default=False,
    )


def check_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadAnswer(f"'{text}' is not a server URL; e.g. {OPENAI_DEFAULT_URL} (Ollama).")
    return text.rstrip("/")


def _openai_server(
    questions: Questions, edit: EnvEdit, env_file: Path, base_url: str | None, model: str | None,
    server: ServerChoice,
) -> None:
    """apple-code on an OpenAI-compatible server (afm with the openai backend, or the ollama preset): the URL and
    model are probed (``apple-code --check``) before they are kept; a server that does not answer gets the question
    again."""
    url_default = base_url or _current(edit, server.url_var) or OPENAI_DEFAULT_URL
    model_default = model or _current(edit, server.model_var) or server.default_model
    first = " (Enter: the first one the server lists)" if not server.default_model else ""
    while True:
        url = questions.ask("The server's URL", url_default, check_url, base_url, "--base-url")
        name = questions.ask(f"The model{first}", model_default, str.strip, model, "--model")
        agent = check_agent_now(current_settings(env_file, **server.overrides(url, name or None)))
        if agent.ok:
            break
        problem = f"{url} did not answer as an OpenAI-compatible server with that model: {agent.detail}"
        if not questions.interactive:
            raise BadAnswer(problem)
        err.print(f"[red]{escape(problem)}[/red]")
        base_url = model = None
        url_default, model_default = url, name
    err.print(f"[green]The server answers[/green] ({escape(agent.detail)}).")
    if server.backend_var is not None:
        edit.set(server.backend_var, "openai")
    edit.set(server.url_var, url)
    if name or _current(edit, server.model_var):
        edit.set(server.model_var, name)


def _doctor(env_file: Path, terminal_permissions: bool) -> None:
    with err.status("Checking the set-up (apple-flow doctor) ..."):
        checks = run_doctor(None, env_file, terminal_permissions, sandbox=False)  # `apple-flow doctor` runs it
    print_checks(checks)
    failed = [check.name for check in checks if check.status is CheckStatus.FAIL]
    if failed:
        err.print(f"[yellow]{len(failed)} check(s) need attention: {', '.join(failed)}; each says how above.[/yellow]")
    else:
        why = "not needed on this system" if terminal_permissions else "the service's business, or not needed here"
        err.print(f"[green]All checks passed[/green] (n/a: {why}).")


def _service_installed(env_file: Path) -> bool:
    from apple_flow.login_service import service_files

    return service_files(current_settings(env_file)).plist.is_file()


def _places(env_file: Path) -> None:
    """Notes on where the checkout, the workspace and the model server are, and what that means for a service."""
    settings = current_settings(env_file)
    home = Path.home()
    urls = [settings.ollama.base_url] if settings.connector == "ollama" else []
    if settings.connector == "afm" and settings.afm.base_url:
        urls.append(settings.afm.base_url)
    notes = [
        checkout_note(PROJECT_ROOT, home),
        workspace_note(settings.workspaces.default.expanduser(), home),
        *(local_network_note(url) for url in urls),
    ]
    for note in notes:
        if note is not None:
            err.print(f"[yellow]Note:[/yellow] {escape(note)}", soft_wrap=True)


def _service(env_file: Path) -> int:
    """Installs the service and ends with what its own report says: 0 ready, 3 not ready yet, 1 not installed."""
    from apple_flow.cli import service

    try:
        report = service.install_service(env_file, service.REPORT_WAIT_SECONDS)
    except typer.Exit as exc:
        if exc.exit_code:
            err.print("[red]The service was not installed[/red] (see above); run `apple-flow service install` again.")
            return 1
        report = None
    return 0 if service.print_readiness(report) else service.EXIT_MISSING_PERMISSION
