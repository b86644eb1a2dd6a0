"""The real apple-code binary with `--backend fm` where FoundationModels does not exist (Linux): it must say so
plainly and exit 3, in --check and in a run, without touching the workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="on a Mac the framework exists")


def test_check_reports_the_missing_framework(apple_code_bin: Path) -> None:
    done = subprocess.run([str(apple_code_bin), "--check", "--backend", "fm"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 3
    check = json.loads(done.stdout)
    assert check["backend"] == "fm" and check["available"] is False
    assert "macOS 26" in check["reason"] and "--backend openai" in check["reason"]


def test_a_run_exits_3_with_error_model_unavailable(apple_code_bin: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(apple_code_bin), "--backend", "fm", "--cwd", str(tmp_path), "--output-format", "json", "write a.txt"],
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 3
    result = json.loads(done.stdout)
    assert result["subtype"] == "error_model_unavailable" and result["is_error"] is True
    assert "macOS 26" in result["result"]
    assert list(tmp_path.iterdir()) == []
