"""Files through the daemon (real store, real files, the in-process connector): a message of files alone reaches
the agent, its files in the workspace's inbox and the prompt saying where they are."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.base import Attachment
from apple_flow.config import Settings
from apple_flow.daemon.arrivals import INBOX
from apple_flow.daemon.orchestrator import FILES_ONLY_REQUEST
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, Harness


@pytest.fixture
def harness(daemon_settings: Callable[..., Settings]) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(connector: FakeConnector | None = None, **overrides: Any) -> Harness:
        h = Harness(daemon_settings(**overrides), connector)
        made.append(h)
        return h

    yield make
    for h in made:
        h.daemon.request_stop()


def test_a_message_of_files_alone_reaches_the_agent_with_its_files_in_the_inbox(
    harness: Callable[..., Harness], tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "Attachments" / "crash.log"
    log.parent.mkdir()
    log.write_text("Traceback: boom\n")
    h = harness().start()
    h.ingress.add(ANA, "", attachments=(
        Attachment("crash.log", "text/plain", 16, log),
        Attachment("voice.caf", "audio/x-caf", 900, None, "still downloading after 15 s"),
    ))
    assert h.finish() == 0

    [call] = h.connector.calls
    assert call.request.message == FILES_ONLY_REQUEST
    assert f"{INBOX}/1-1-crash.log (16 bytes, text)" in call.request.files_note
    assert "voice.caf: not received (still downloading after 15 s)" in call.request.files_note
    assert (workspace / INBOX / "1-1-crash.log").read_text() == "Traceback: boom\n"
    assert h.egress.to(ANA) == [f"echo: {FILES_ONLY_REQUEST}"]


def test_files_with_a_task_go_to_its_planning_turn(harness: Callable[..., Harness], tmp_path: Path,
                                                   workspace: Path) -> None:
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a\n+++ b\n")
    h = harness().start()
    h.ingress.add(ANA, "task: apply this patch", attachments=(Attachment("fix.patch", "", 12, patch),))
    h.finish()
    [call] = h.connector.calls
    assert call.request.read_only and "apply this patch" in call.request.message
    assert f"{INBOX}/1-1-fix.patch" in call.request.files_note
