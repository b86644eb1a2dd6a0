"""The launcher is built reproducibly (scripts/build-launcher.sh): macOS keys Apple Flow.app's grants on its code
hash, so the same source and toolchain must give the same bytes in any folder and at any time, or a clean rebuild
or a moved clone silently voids Full Disk Access. Two real builds of a copy of the package, in two folders of
different names and depths, one after the other (a few seconds each: one file, release, no debug info)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from apple_flow.paths import APPLE_CODE_PACKAGE, PROJECT_ROOT, built_launcher

BUILD = PROJECT_ROOT / "scripts" / "build-launcher.sh"


def build_copy(folder: Path) -> Path:
    """Copies the package's sources (not its build) to ``folder`` and builds the launcher there."""
    folder.mkdir(parents=True)
    shutil.copy2(APPLE_CODE_PACKAGE / "Package.swift", folder / "Package.swift")
    for tree in ("Sources", "Tests"):  # the manifest names every target's folder
        shutil.copytree(APPLE_CODE_PACKAGE / tree, folder / tree)
    done = subprocess.run([str(BUILD), str(folder)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    binary = Path(done.stdout.strip().splitlines()[-1])
    assert binary.is_file() and binary.is_relative_to(folder / ".build" / "launcher")
    return binary


@pytest.mark.slow
def test_two_builds_in_different_folders_give_the_same_bytes_with_no_path_in_them(tmp_path: Path) -> None:
    first = build_copy(tmp_path / "one" / "apple_code")
    second = build_copy(tmp_path / "elsewhere" / "deeper" / "a-moved-clone")
    assert first.read_bytes() == second.read_bytes()
    data = first.read_bytes()
    for folder in (str(tmp_path), "/one/apple_code", "a-moved-clone", "main.swift"):
        assert folder.encode() not in data  # no source or object path: nothing that names where it was built


def test_service_install_takes_the_reproducible_build() -> None:
    assert built_launcher() == APPLE_CODE_PACKAGE / ".build" / "launcher" / "release" / "apple-flow-launcher"
