"""Message text -> command."""

from __future__ import annotations

import pytest

from apple_flow.daemon.deciding.commands import FAST, Command, Kind, parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("help", Command(Kind.HELP)),
        ("  Help ", Command(Kind.HELP)),
        ("status", Command(Kind.STATUS)),
        ("status run_abc123", Command(Kind.STATUS, target="run_abc123")),
        ("health", Command(Kind.HEALTH)),
        ("clear context", Command(Kind.CLEAR)),
        ("New chat", Command(Kind.CLEAR)),
        ("reset   context", Command(Kind.CLEAR)),
        ("approve req_12345678", Command(Kind.APPROVE, target="req_12345678")),
        ("approve req_12345678 but skip the docs", Command(Kind.APPROVE, "but skip the docs", "req_12345678")),
        ("approve", Command(Kind.APPROVE)),
        ("deny req_1", Command(Kind.DENY, target="req_1")),
        ("deny all", Command(Kind.DENY_ALL)),
        ("deny", Command(Kind.DENY)),
        ("cancel", Command(Kind.CANCEL)),
        ("cancel run_a1b2c3", Command(Kind.CANCEL, target="run_a1b2c3")),
        ("Cancel A1B2C3", Command(Kind.CANCEL, target="run_a1b2c3")),
        ("cancel the build", Command(Kind.CHAT, "cancel the build")),
        ("cancel that", Command(Kind.CHAT, "cancel that")),
        ("history", Command(Kind.HISTORY)),
        ("History  lexer   bug", Command(Kind.HISTORY, "lexer bug")),
        ("history: why did the deploy fail last night", Command(Kind.HISTORY, "why did the deploy fail last night")),
        ("history of rome in three short sentences", Command(Kind.CHAT, "history of rome in three short sentences")),
        ("usage", Command(Kind.USAGE)),
        ("escalate", Command(Kind.ESCALATE)),
        ("Escalate run_a1b2c3", Command(Kind.ESCALATE, target="run_a1b2c3")),
        ("escalate req_12345678", Command(Kind.ESCALATE, target="req_12345678")),
        ("escalate this to the cloud please", Command(Kind.CHAT, "escalate this to the cloud please")),
        ("@site status", Command(Kind.STATUS, alias="site")),
        ("Web", Command(Kind.WEB)),
        ("web page looks broken on my phone", Command(Kind.CHAT, "web page looks broken on my phone")),
        ("run", Command(Kind.RUN)),
        (" Run 2 ", Command(Kind.RUN, target="2")),
        ("run the tests", Command(Kind.CHAT, "run the tests")),
        ("run tests", Command(Kind.CHAT, "run tests")),
        ("usage of this api?", Command(Kind.CHAT, "usage of this api?")),
        ("idea: a name for the app", Command(Kind.IDEA, "a name for the app")),
        ("PLAN:migrate the db", Command(Kind.PLAN, "migrate the db")),
        ("task: add a test\nfor parse()", Command(Kind.TASK, "add a test\nfor parse()")),
        ("what does status mean here?", Command(Kind.CHAT, "what does status mean here?")),
        ("deny that I said it", Command(Kind.CHAT, "deny that I said it")),
        ("@site task: fix the tests", Command(Kind.TASK, "fix the tests", alias="site")),
        ("task: @Site fix the tests", Command(Kind.TASK, "fix the tests", alias="site")),
        ("@site what is in here", Command(Kind.CHAT, "what is in here", alias="site")),
    ],
)
def test_parse(text: str, expected: Command) -> None:
    assert parse(text) == expected


def test_only_commands_are_fast() -> None:
    assert Kind.CHAT not in FAST and Kind.TASK not in FAST and Kind.IDEA not in FAST and Kind.PLAN not in FAST
    assert {Kind.STATUS, Kind.CANCEL, Kind.APPROVE, Kind.HELP, Kind.HISTORY, Kind.USAGE, Kind.ESCALATE} <= FAST
