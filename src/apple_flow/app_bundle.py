"""``Apple Flow.app``: the small app the launchd job runs, so that macOS asks about "Apple Flow" and keeps its grants.

macOS charges file access (Full Disk Access, for chat.db) and Apple events (Automation, for Messages) to the
*responsible* app: for a launchd job, the job's executable, and for the processes it spawns, still that executable.
Run directly, that was the virtualenv's resolved Python: a versioned Homebrew Cellar path with an ad-hoc signature,
so the next ``brew upgrade`` silently dropped the grants, and System Settings showed "python3.12". The job now runs
``Apple Flow.app/Contents/MacOS/Apple Flow`` (``apple-flow-launcher``, built from Swift in ``apple_code/``), which
starts the daemon's Python as its child and stays its parent (see its source).

An ad-hoc signature is checked by its code hash: the grants last as long as the bundle's bytes do. So the bundle is
installed into ``~/Library/Application Support/Apple Flow/`` and replaced only when what it is built from (the
launcher binary, the Info.plist) changes; a reinstall, a rebuilt ``.venv``, a moved clone or a ``brew upgrade``
leave it, and its grants, alone. The launcher is built reproducibly (``scripts/build-launcher.sh``), so a clean
rebuild or another folder gives the same bytes. When the bytes do change (a new launcher, a new toolchain), macOS no
longer applies the old grants while System Settings still shows "Apple Flow" switched on: the install records the
code hash it replaced, says so with the steps (``full_disk_access_regrant``, ``reset_automation``), and the service
texts the owner the same. ``NSAppleEventsUsageDescription`` is in the Info.plist because an app built with a
current SDK that lacks it is refused Apple events (-1743) without a prompt.
"""

from __future__ import annotations

import hashlib
import json
import os
import plistlib
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "Apple Flow"
BUNDLE_ID = "com.apple-flow.launcher"
LAUNCHER_VARIABLE = "APPLE_FLOW_LAUNCHER"  # set by the launcher in its child's environment: its own path
BUNDLE_VERSION = "1"
CODESIGN_TIMEOUT = 60
_RECORD = "installed.json"  # beside the bundle: the digest it was built from (inside, it would break the seal)


class AppBundleError(RuntimeError):
    """The app could not be assembled or signed; the message says what to do."""


@dataclass(frozen=True)
class InstalledApp:
    path: Path  # .../Apple Flow.app
    executable: Path  # .../Apple Flow.app/Contents/MacOS/Apple Flow
    changed: bool  # built anew rather than left as it was
    code_hash: str = ""  # sha256 of the signed executable: the bytes macOS keys an ad-hoc app's grants on
    replaced_hash: str = ""  # the code hash of the app this install replaced: grants given to it no longer apply


def app_folder(home: Path) -> Path:
    return home / "Library" / "Application Support" / APP_NAME


def app_path(home: Path) -> Path:
    return app_folder(home) / f"{APP_NAME}.app"


def executable_in(app: Path) -> Path:
    return app / "Contents" / "MacOS" / APP_NAME


def app_of_executable(executable: str) -> Path | None:
    """The ``.app`` folder whose ``Contents/MacOS`` holds ``executable``; None for a bare binary."""
    path = Path(executable)
    if len(path.parents) >= 3 and path.parent.name == "MacOS" and path.parents[1].name == "Contents":
        bundle = path.parents[2]
        return bundle if bundle.suffix == ".app" else None
    return None


def running_app(environ: Mapping[str, str] | None = None) -> Path | None:
    """The app whose launcher started this process (the service), from ``APPLE_FLOW_LAUNCHER``; else None."""
    launcher = (os.environ if environ is None else environ).get(LAUNCHER_VARIABLE, "")
    return app_of_executable(launcher) if launcher else None


def info_plist() -> bytes:
    return plistlib.dumps({
        "CFBundleIdentifier": BUNDLE_ID,
        "CFBundleName": APP_NAME,
        "CFBundleDisplayName": APP_NAME,
        "CFBundleExecutable": APP_NAME,
        "CFBundlePackageType": "APPL",
        "CFBundleInfoDictionaryVersion": "6.0",
        "CFBundleVersion": BUNDLE_VERSION,
        "CFBundleShortVersionString": BUNDLE_VERSION,
        "LSUIElement": True,  # no Dock icon, no menu bar: it only runs the daemon
        "NSAppleEventsUsageDescription": "Apple Flow sends the answers to your messages through Messages.",
    })


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install_app(launcher: Path, home: Path, codesign: str = "codesign") -> InstalledApp:
    """Installs the app built from ``launcher`` under ``home``, signed ad hoc with a stable identifier; leaves an
    installed app whose sources are unchanged exactly as it is."""
    try:
        binary = launcher.read_bytes()
    except OSError as exc:
        raise AppBundleError(
            f"the launcher {launcher} cannot be read ({exc.strerror}): run ./scripts/setup.sh (it builds it), "
            "then `apple-flow service install` again"
        ) from exc
    plist = info_plist()
    source = _sha256(binary + b"\0" + plist + b"\0" + BUNDLE_ID.encode())
    folder = app_folder(home)
    app = app_path(home)
    executable = executable_in(app)
    previous = _record(folder / _RECORD)
    if _unchanged(previous, executable, source):
        return InstalledApp(app, executable, changed=False, code_hash=str(previous.get("executable", "")))
    old_hash = _sha256_of(executable) if app.exists() else ""

    staging = folder / ".staging"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        built = staging / app.name
        (built / "Contents" / "MacOS").mkdir(parents=True)
        (built / "Contents" / "Info.plist").write_bytes(plist)
        (built / "Contents" / "PkgInfo").write_bytes(b"APPL????")
        staged = executable_in(built)
        staged.write_bytes(binary)
        staged.chmod(0o755)
        _sign(codesign, built)
        # Replaced in two renames, so a failure leaves either the old app or the new one, never half of one.
        old = staging / "old.app"
        if app.exists():
            app.rename(old)
        built.rename(app)
        code_hash = _sha256(executable.read_bytes())
        record = {"source": source, "executable": code_hash}
        if old_hash and old_hash != code_hash:
            record["replaced"] = old_hash  # the service tells the owner (``replaced_by``)
        (folder / _RECORD).write_text(json.dumps(record) + "\n", encoding="utf-8")
    except OSError as exc:
        raise AppBundleError(f"cannot write {APP_NAME}.app in {folder}: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # Put back with the very bytes it had (e.g. its record was lost): the grants still apply.
    same = old_hash == code_hash
    return InstalledApp(app, executable, changed=not same, code_hash=code_hash, replaced_hash="" if same else old_hash)


def _sha256_of(path: Path) -> str:
    try:
        return _sha256(path.read_bytes())
    except OSError:
        return ""


def _record(path: Path) -> dict[str, object]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _unchanged(record: dict[str, object], executable: Path, source: str) -> bool:
    """Whether the installed app was built from ``source`` and its executable is still what was signed."""
    current = _sha256_of(executable)
    return bool(current) and record.get("source") == source and record.get("executable") == current


@dataclass(frozen=True)
class Replaced:
    """An install that replaced an app of other bytes: the grants given to the old one no longer apply."""

    old_hash: str
    new_hash: str


def replaced_by(app: Path) -> Replaced | None:
    """What the last install of ``app`` replaced, from the record beside it; None when it replaced nothing."""
    record = _record(app.parent / _RECORD)
    old, new = record.get("replaced"), record.get("executable")
    return Replaced(old, new) if isinstance(old, str) and isinstance(new, str) and old else None


def full_disk_access_regrant(app: Path) -> str:
    """How to give Full Disk Access again to a new build of ``app``: System Settings keeps showing the old entry
    switched on, and only removing it and adding the app again makes macOS record the new code hash."""
    return (
        f"remove {APP_NAME} from System Settings > Privacy & Security > Full Disk Access (select it, then the - "
        f"button) and add it again (the + button, then Cmd+Shift+G and {shown(app)})"
    )


AUTOMATION_RESET = ["tccutil", "reset", "AppleEvents", BUNDLE_ID]


def reset_automation(tccutil: str = "tccutil") -> str | None:
    """Forgets Messages' Automation answer for the app (given to its old build), so that macOS asks again; returns
    why it could not, or None."""
    try:
        done = subprocess.run(
            [tccutil, *AUTOMATION_RESET[1:]], capture_output=True, text=True, stdin=subprocess.DEVNULL,
            timeout=CODESIGN_TIMEOUT, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip() or f"exit {done.returncode}"


def _sign(codesign: str, app: Path) -> None:
    command = [codesign, "--force", "--sign", "-", "--identifier", BUNDLE_ID, str(app)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=CODESIGN_TIMEOUT, check=False,
        )
    except FileNotFoundError as exc:
        raise AppBundleError(
            f"{codesign} not found: it comes with the Command Line Tools (xcode-select --install)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise AppBundleError(f"codesign did not finish in {CODESIGN_TIMEOUT} s; run the command again") from exc
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()
        raise AppBundleError(f"codesign could not sign {app} (exit {done.returncode}): {output}")


def shown(path: Path, home: Path | None = None) -> str:
    """``~/…`` for a path in the home folder, as System Settings' file picker takes it (Cmd+Shift+G)."""
    home = home or Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)
