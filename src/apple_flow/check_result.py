"""One check's result, the one type every check reports: the doctor's, set-up's and the web page's health view
(``health/``) and the daemon's own permission checks (``channels/imessage/permissions.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CheckStatus(StrEnum):
    OK = "ok"
    FAIL = "FAIL"
    WARN = "warn"
    NA = "n/a"
    CHECKING = "checking"  # not known yet: a probe still runs, or the process restarts to use a grant
    DENIED = "denied"  # macOS refused a permission: the fix says where to grant it


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: CheckStatus
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status is CheckStatus.OK

    def line(self) -> str:
        text = f"{self.name}: {self.status.value}: {self.detail}"
        return f"{text}. Fix: {self.fix}" if self.fix else text
