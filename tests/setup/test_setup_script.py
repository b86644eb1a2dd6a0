"""scripts/setup.sh stops with a message that names what is missing, and leaves nothing half-done behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apple_flow.paths import PROJECT_ROOT


def copy_project(tmp_path: Path) -> Path:
    """A minimal copy of the checkout: what setup.sh needs before it builds Swift."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copytree(PROJECT_ROOT / "scripts", root / "scripts")
    shutil.copytree(PROJECT_ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    return root


def path_without_swift(tmp_path: Path) -> str:
    """PATH with this Python and the system tools, but no Swift toolchain."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])


def test_missing_swift_is_named_with_how_to_get_it(tmp_path: Path) -> None:
    if Path("/usr/bin/swift").exists():
        pytest.skip("swift is installed system-wide; cannot hide it from PATH")
    root = copy_project(tmp_path)
    env = {**os.environ, "PATH": path_without_swift(tmp_path)}
    done = subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh")], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode != 0
    assert "Swift toolchain is needed" in done.stderr
    assert "xcode-select --install" in done.stderr
    assert not (root / ".venv").exists(), "nothing should be created before the toolchains are checked"


@pytest.mark.slow
def test_unreachable_package_index_fails_clearly_and_resumes(tmp_path: Path) -> None:
    root = copy_project(tmp_path)
    env = {
        **os.environ,
        # A closed port on loopback stands in for "no network to PyPI"; no cache so nothing is found offline.
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "2",
    }
    done = subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode != 0
    assert "pip could not install the Python packages" in done.stderr
    assert "PyPI is reachable" in done.stderr
    # The environment is not marked as installed, so the next run installs again instead of tripping over it.
    assert (root / ".venv" / "bin" / "python").exists()
    assert not (root / ".venv" / ".apple-flow-installed").exists()


def fake_tool(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def test_homebrews_python_is_found_without_brew_shellenv_and_named(tmp_path: Path) -> None:
    # A Mac whose shell profile lacks `brew shellenv`: PATH has only the system's old python3 (3.9 on macOS).
    root = copy_project(tmp_path)
    (root / "apple_code").mkdir()
    shutil.copy(PROJECT_ROOT / "apple_code" / "Package.swift", root / "apple_code" / "Package.swift")
    system = tmp_path / "system-bin"
    fake_tool(system, "python3", 'echo "Python 3.9.6"; exit 1\n')  # too old: its version check fails
    brew = tmp_path / "opt-homebrew-bin"
    brew.mkdir()
    (brew / "python3.12").symlink_to(sys.executable)
    fake_tool(system, "swift", 'echo "Apple Swift version 5.10 (swiftlang-5.10.0.13)"\n')  # stops before the venv
    env = {**os.environ, "PATH": os.pathsep.join([str(system), "/usr/bin", "/bin"]),
           "SETUP_BREW_BINS": f"{tmp_path / 'nowhere'} {brew}"}
    done = subprocess.run(["bash", str(root / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                          timeout=60)
    version = ".".join(map(str, sys.version_info[:3]))
    assert f"Using Python {version} ({brew / 'python3.12'})" in done.stderr
    assert done.returncode != 0 and "needs Swift 6.2" in done.stderr


def test_a_swift_too_old_for_the_package_says_which_is_needed_and_how_to_update(tmp_path: Path) -> None:
    root = copy_project(tmp_path)
    (root / "apple_code").mkdir()
    shutil.copy(PROJECT_ROOT / "apple_code" / "Package.swift", root / "apple_code" / "Package.swift")
    bin_dir = tmp_path / "bin"
    (bin_dir).mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    fake_tool(bin_dir, "swift", 'echo "Apple Swift version 5.10 (swiftlang-5.10.0.13 clang-1500.3.9.4)"\n'
                                'echo "Target: arm64-apple-macosx14.0"\n')
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"]), "SETUP_BREW_BINS": ""}
    done = subprocess.run(["bash", str(root / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode != 0
    text = " ".join(done.stderr.split())
    assert f"apple-code needs Swift 6.2 or newer; {bin_dir / 'swift'} is Swift 5.10" in text
    assert "update the Command Line Tools" in text and "softwareupdate --list" in text
    assert "xcode-select --install" in text
    assert not (root / ".venv").exists(), "nothing should be created before the toolchains are checked"
