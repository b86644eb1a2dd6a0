"""The afm connector and an approved task's check: `apple-code --verify CMD --verify-rounds N`, and what its
`verify` object, `verify` events and exit 5 (error_verify) become, against the fake apple-code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apple_flow.config import Settings
from apple_flow.connectors import AfmConnector, Status
from apple_flow.connectors.base import CheckReport
from support.turns import outcome, with_progress

Runs = Callable[[], list[dict[str, Any]]]


def test_a_request_with_a_check_passes_it_and_its_rounds(connector_settings: Callable[..., Settings],
                                                          record: Runs) -> None:
    connector = AfmConnector(connector_settings(verify_rounds=3))
    result = outcome(connector, "fix it", verify="make test -k 'not slow'")
    outcome(connector, "just chat")
    checked, plain = record()
    argv = checked["argv"]
    start = argv.index("--verify")
    assert argv[start:start + 4] == ["--verify", "make test -k 'not slow'", "--verify-rounds", "3"]
    assert argv[-1] == "-" and "--verify" not in plain["argv"]
    assert result.status is Status.ANSWERED
    assert result.check == CheckReport("make test -k 'not slow'", True, 0, "exit code 0\n1 passed", runs=1,
                                       exit_code=0)


def test_a_check_that_still_fails_is_check_failed_with_the_partial_answer(
    connector_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPLE_CODE_MODE", "verify-fail")
    monkeypatch.setenv("FAKE_APPLE_CODE_ANSWER", "I changed app.py.")
    result = outcome(AfmConnector(connector_settings()), "fix it", verify="make test")
    assert result.status is Status.CHECK_FAILED and not result.answered
    assert (result.exit_code, result.subtype, result.text) == (5, "error_verify", "I changed app.py.")
    assert result.detail == "the check `make test` still fails after 2 repair rounds, exit code 1: FAILED."
    assert result.files_changed == ("src/app.py",)
    assert result.check is not None and (result.check.passed, result.check.rounds, result.check.runs) == (False, 2, 3)
    assert result.check.failing_line() == "FAILED test_app.py::test_main - assert 1 == 2"
    assert result.as_text() == f"Error: {result.detail}\nPartial answer: I changed app.py."


def test_each_run_of_the_check_is_a_progress_line(connector_settings: Callable[..., Settings],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _, passed = with_progress(AfmConnector(connector_settings()), "fix it", verify="make test")
    assert passed[-1] == "check passed: make test"
    monkeypatch.setenv("FAKE_APPLE_CODE_MODE", "verify-fail")
    _, failed = with_progress(AfmConnector(connector_settings()), "fix it", verify="make test")
    assert failed[-1] == "check failed (repair round 2): make test"
    assert failed[0] == "check fails before the work: make test"  # not read as the final verdict
