"""The first failing line of a check's output, as a task's reply shows it."""

from __future__ import annotations

import pytest

from apple_flow.connectors.base import CheckReport
from apple_flow.connectors.cli import check_report
from apple_flow.connectors.events import parse_event
from apple_flow.connectors.stream_events import Result, VerifyReport

PYTEST = """exit code 1
F.                                                                       [100%]
=================================== FAILURES ===================================
__________________________________ test_add ___________________________________

    def test_add():
>       assert add(2, 3) == 5
E       assert -1 == 5
E        +  where -1 = add(2, 3)

test_calc.py:4: AssertionError
=========================== short test summary info ============================
FAILED test_calc.py::test_add - assert -1 == 5
1 failed, 1 passed in 0.03s"""
UNITTEST = """exit code 1
F.
======================================================================
FAIL: test_add (test_calc.CalcTest.test_add)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "test_calc.py", line 7, in test_add
    self.assertEqual(add(2, 3), 5)
AssertionError: -1 != 5

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)"""
GO = """exit code 1
--- FAIL: TestAdd (0.00s)
    calc_test.go:6: add(2, 3) = -1, want 5
FAIL
FAIL\texample.com/calc\t0.002s"""
CARGO = """exit code 101
running 2 tests
test tests::mul ... ok
test tests::add ... FAILED

failures:

---- tests::add stdout ----
thread 'tests::add' panicked at src/lib.rs:9:9:
assertion `left == right` failed"""
SWIFT = """exit code 1
Building for debugging...
/ws/Sources/Calc/Calc.swift:3:12: error: cannot convert value of type 'String' to expected type 'Int'
error: fatalError"""


@pytest.mark.parametrize(("output", "line"), [
    (PYTEST, "FAILED test_calc.py::test_add - assert -1 == 5"),
    (UNITTEST, "FAIL: test_add (test_calc.CalcTest.test_add)"),
    (GO, "--- FAIL: TestAdd (0.00s)"),
    (CARGO, "test tests::add ... FAILED"),
    (SWIFT, "/ws/Sources/Calc/Calc.swift:3:12: error: cannot convert value of type 'String' to expected type 'Int'"),
    ("exit code 2\nmake: *** No rule to make target 'test'.  Stop.", "make: *** No rule to make target 'test'.  Stop."),
    ("exit code 1", ""),
    ("", ""),
])
def test_the_failing_line_is_the_most_telling_line_of_the_output(output: str, line: str) -> None:
    assert CheckReport("check", False, 1, output).failing_line() == line


def verify_of(verify: object) -> VerifyReport | None:
    event = parse_event({"type": "result", "subtype": "success", "verify": verify})
    assert isinstance(event, Result)
    return event.verify


def test_the_verify_object_is_read_and_bad_fields_are_left_out() -> None:
    passed = {"command": "make test", "passed": True, "rounds": 1, "runs": 2, "exit_code": 0, "output_tail": "ok"}
    assert check_report(verify_of(passed)) == CheckReport("make test", True, 1, "ok", runs=2, exit_code=0)
    assert check_report(verify_of({"command": "make test", "passed": False, "rounds": "2", "runs": True})) == \
        CheckReport("make test", False, 0, "", runs=None, exit_code=None)
    assert check_report(verify_of({"command": "make test"})) is None
    assert check_report(verify_of({"passed": True})) is None
    assert check_report(verify_of("make test")) is None
    assert not CheckReport("x", False, runs=0).ran and CheckReport("x", False).ran
