"""`apple-flow doctor`, `inbox`, `send` and `config`: checking and trying the set-up. The checks themselves are
in ``apple_flow.health``; this module renders them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from apple_flow import host
from apple_flow.channels.base import InboundMessage, SendError, Skipped
from apple_flow.channels.imessage import build_imessage_egress
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError
from apple_flow.channels.imessage.classify import ReadRules, classify
from apple_flow.channels.imessage.echo import Copies
from apple_flow.check_result import CheckResult, CheckStatus
from apple_flow.cli.common import err, print_error, settings_or_exit
from apple_flow.config import Settings
from apple_flow.handles import normalize_handle
from apple_flow.health.doctor import SERVICE_CHECKS_ITSELF, run_doctor

out = Console()

# A name that ends in one of these words (web_token, an api_key); not afm_context_tokens, a number of tokens.
_SECRET_NAME = re.compile(r"(^|_)(key|token|secret|password)$", re.IGNORECASE)


_STYLE = {CheckStatus.OK: "green", CheckStatus.FAIL: "bold red", CheckStatus.WARN: "yellow", CheckStatus.NA: "dim"}


def print_checks(checks: list[CheckResult]) -> None:
    table = Table(title="apple-flow doctor", show_lines=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for check in checks:
        style = _STYLE[check.status]
        detail = escape(check.detail) + (f"\n[bold]fix:[/bold] {escape(check.fix)}" if check.fix else "")
        table.add_row(check.name, f"[{style}]{check.status.value}[/{style}]", detail)
    out.print(table)


# --- inbox --------------------------------------------------------------------------------------------------


def inbox_rows(db: Path, limit: int, settings: Settings) -> list[dict[str, Any]]:
    allowed = {normalize_handle(s, settings.default_region) for s in settings.allowed_senders}
    rows = ChatDB(db).newest_rows(limit)
    imessage = settings.imessage
    rules = ReadRules(settings.default_region, imessage.max_message_age_seconds, imessage.group_replies,
                      imessage.catch_up_hours * 3600, settings.allow_sms)
    copies = Copies()  # a second copy of a listed message shows as such
    listing: list[dict[str, Any]] = []
    for row in rows:
        item = classify(row, rules, None, copies)
        skipped = item.reason if isinstance(item, Skipped) else None
        sender = item.sender
        listing.append(
            {
                "rowid": row.rowid,
                "date": row.date.isoformat(),
                "sender": sender,
                "chat": row.chat_identifier,
                "text": item.text,
                "files": [name for name in row.attachment_names],  # what came with it (transfer names)
                "skipped": skipped,
                "allowed": sender in allowed if sender else False,
                "reply_to": item.reply_target if isinstance(item, InboundMessage) else None,
                "late": isinstance(item, InboundMessage) and item.late,
                "tapback": isinstance(item, InboundMessage) and item.tapback is not None,
            }
        )
    return listing


def print_inbox(listing: list[dict[str, Any]]) -> None:
    table = Table(title="newest messages, as the daemon sees them")
    for column in ("rowid", "date", "sender", "text", "daemon"):
        table.add_column(column, overflow="fold")
    for entry in listing:
        text = entry["text"].replace("\n", " ⏎ ")
        text = " ".join([text, *(f"📎 {name}" for name in entry["files"])]).strip()
        text = text if len(text) <= 80 else text[:79] + "…"
        if entry["skipped"]:
            verdict = f"[dim]skipped: {escape(entry['skipped'])}[/dim]"
        elif entry["allowed"] and entry["late"]:
            verdict = "[yellow]late: listed to the sender, run on `run`[/yellow]"
        elif entry["allowed"] and entry["tapback"]:
            verdict = "[green]tapback: decides the plan it is on[/green]"
        elif entry["allowed"]:
            verdict = "[green]handled[/green]"
        else:
            verdict = "[yellow]not on the allowlist[/yellow]"
        table.add_row(str(entry["rowid"]), entry["date"][:19], escape(entry["sender"] or "?"), escape(text), verdict)
    out.print(table)


# --- config -------------------------------------------------------------------------------------------------


def masked_settings(settings: Settings) -> dict[str, Any]:
    """Every setting by its variable (the names users set), secrets and URL passwords masked."""
    values = settings.variables()
    for name, value in values.items():
        if value in (None, "", [], {}):
            continue
        if _SECRET_NAME.search(name):
            values[name] = "********"
        elif isinstance(value, str) and "://" in value:
            values[name] = _mask_url(value)
    return values


def _mask_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:********@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


# --- commands -----------------------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""

    @app.command()
    def doctor(
        db: Path = typer.Option(None, "--db", help="Check this chat.db instead of APPLE_FLOW_MESSAGES_DB_PATH."),  # noqa: B008
        sandbox: bool = typer.Option(
            True, "--sandbox-check/--no-sandbox-check",
            help="Test apple-code's command sandbox (apple-code --sandbox-check; a minute: it builds a tiny package).",
        ),
    ) -> None:
        """Check everything the daemon needs and say how to fix what is missing (exit 1 when something fails). With
        the service installed, chat.db and Messages are its business: its own report is shown, and nothing here
        makes macOS ask about this terminal."""
        with err.status("Checking the set-up (the command sandbox takes a minute) ..."):
            checks = run_doctor(db, sandbox=sandbox)
        print_checks(checks)
        failed = [c.name for c in checks if c.status is CheckStatus.FAIL]
        if failed:
            err.print(f"[red]{len(failed)} check(s) failed:[/red] {', '.join(failed)}")
            raise typer.Exit(1)
        why = (
            "the service's business, or not needed here"
            if any(c.detail == SERVICE_CHECKS_ITSELF for c in checks)
            else "not needed on this system"
        )
        err.print(f"[green]All checks passed[/green] (n/a: {why}).")

    @app.command()
    def inbox(
        db: Path = typer.Option(None, "--db", help="Read this chat.db instead of APPLE_FLOW_MESSAGES_DB_PATH."),  # noqa: B008
        limit: int = typer.Option(20, "--limit", "-n", min=1, max=10000, help="How many of the newest rows."),
        as_json: bool = typer.Option(False, "--json", help="One JSON array on stdout, full texts."),
    ) -> None:
        """List the newest messages as the daemon would see them: sender, text, rowid, and why one is skipped."""
        settings = settings_or_exit()
        path = (db or settings.imessage.messages_db_path).expanduser()
        try:
            listing = inbox_rows(path, limit, settings)
        except ChatDBError as exc:
            print_error(exc)
            raise typer.Exit(1) from exc
        if as_json:
            typer.echo(json.dumps(listing, ensure_ascii=False, indent=2))
        else:
            print_inbox(listing)

    @app.command()
    def send(
        handle: str = typer.Argument(
            ..., help="Phone number or email to send to; SMS;-;<number> goes through the SMS account, a group chat's "
            "guid into the group (the reply_to that `apple-flow inbox --json` shows).",
        ),
        text: str = typer.Argument(..., help="The message."),
    ) -> None:
        """Send one message through the iMessage egress (tests Automation permission and delivery)."""
        settings = settings_or_exit()
        for name, value in (("HANDLE", handle), ("TEXT", text)):
            if not value.strip():
                err.print(f"[red]{name} is empty: nothing was sent.[/red] Example: apple-flow send +15551234567 hello")
                raise typer.Exit(2)
        egress = build_imessage_egress(settings)
        try:
            with err.status(f"Sending to {handle} ..."):
                delivery = egress.deliver(handle, text)
        except SendError as exc:
            prefix = "" if host.is_macos() else "not applicable on this system: "
            err.print(f"[red]{prefix}Not delivered: {escape(str(exc))}[/red]")
            raise typer.Exit(1) from exc
        if delivery.confirmed:
            err.print(f"[green]Sent[/green] to {escape(delivery.recipient)}: {escape(delivery.note)}.")
        else:
            err.print(f"[yellow]Handed to Messages[/yellow] for {escape(delivery.recipient)}; {escape(delivery.note)}.")

    @app.command("config")
    def show_config(as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
        """Print the effective settings (defaults, .env, APPLE_FLOW_* variables), secrets masked."""
        values = masked_settings(settings_or_exit())
        if as_json:
            typer.echo(json.dumps(values, ensure_ascii=False, indent=2))
            return
        table = Table(title="effective settings")
        table.add_column("variable")
        table.add_column("value", overflow="fold")
        for name, value in values.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            table.add_row(f"APPLE_FLOW_{name.upper()}", escape(shown))
        out.print(table)
