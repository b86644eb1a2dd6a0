"""The daemon tests' in-process harness: a real daemon and store on a fake connector, stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apple_flow.config import Settings
from support.daemon_fakes import FakeConnector
from support.daemon_harness import Harness


@pytest.fixture
def harness(daemon_settings: Callable[..., Settings]) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    # Positional only: `connector=` is a settings override (the connector setting), not the fake; `escalation` is
    # the fake behind APPLE_FLOW_ESCALATE_CONNECTOR.
    def make(
        fake: FakeConnector | None = None, escalation: FakeConnector | None = None, /, **overrides: Any
    ) -> Harness:
        h = Harness(daemon_settings(**overrides), fake, escalation=escalation)
        made.append(h)
        return h

    yield make
    for h in made:
        h.connector.release.set()
        h.daemon.request_stop()
