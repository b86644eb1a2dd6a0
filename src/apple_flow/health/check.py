"""One check's result, as the doctor, set-up and the web page's health view show it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CheckStatus(StrEnum):
    OK = "ok"
    FAIL = "FAIL"
    WARN = "warn"
    NA = "n/a"


@dataclass(frozen=True)
class Check:
    name: str
    status: CheckStatus
    detail: str
    fix: str = ""
