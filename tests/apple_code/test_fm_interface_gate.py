"""scripts/fm-interface-gate.sh, the compile gate that type-checks AppleCodeFM against Apple's own FoundationModels
declarations (modules built from the interface dumps in apple_code/Interfaces). ./scripts/test.sh runs the gate
itself; these tests show it cannot pass vacuously: a probe with a wrong argument label, or one that uses the
mirror's test-only API, fails it, and each SDK variant is checked against its own dump."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="on a Mac swift build uses the real framework")


def run_gate(project_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(project_root / "scripts" / "fm-interface-gate.sh"), *args],
        capture_output=True, text=True, timeout=300,
    )


def probe(tmp_path: Path, body: str) -> str:
    path = tmp_path / "Probe.swift"
    path.write_text(f"import FoundationModels\nimport AppleCodeCore\n\n{body}\n")
    return str(path)


def test_a_wrong_argument_label_fails_both_variants(project_root: Path, tmp_path: Path) -> None:
    done = run_gate(project_root, probe(tmp_path, "func probe() { _ = GenerationOptions(temprature: 0.2) }"))
    assert done.returncode == 1, done.stderr
    assert "incorrect argument label in call (have 'temprature:', expected 'temperature:')" in done.stderr
    assert "FoundationModels 26.1: FAILED" in done.stderr
    assert "FoundationModels 26.4: FAILED" in done.stderr


def test_the_mirrors_test_only_api_is_not_there(project_root: Path, tmp_path: Path) -> None:
    # Compiles against FoundationModelsMirror (AppleCodeFMTests use it); the gate must not see the mirror.
    body = "func probe() { _ = SystemLanguageModel(mirrorAvailability: .available) }"
    done = run_gate(project_root, "--sdk", "26.1", probe(tmp_path, body))
    assert done.returncode == 1, done.stderr
    assert "mirrorAvailability" in done.stderr and "FoundationModels 26.1: FAILED" in done.stderr


def test_each_variant_checks_the_sources_against_its_own_dump(project_root: Path, tmp_path: Path) -> None:
    # FoundationModelsBackend.modelWindow is the backend's own code: the probe compiles only with the sources.
    # contextSize and tokenCount(for:) exist in the 26.4 dump only, which is checked with FM_SDK_26_4 defined.
    body = """\
#if FM_SDK_26_4
let built26_4 = true
#endif
func probe(_ model: SystemLanguageModel) async throws -> Int {
    let window = FoundationModelsBackend.modelWindow(model) + model.contextSize + (built26_4 ? 0 : 1)
    return try await window + model.tokenCount(for: Prompt("x"))
}"""
    done = run_gate(project_root, probe(tmp_path, body))
    assert done.returncode == 1, done.stderr
    assert "FoundationModels 26.1: FAILED" in done.stderr
    assert "value of type 'SystemLanguageModel' has no member 'contextSize'" in done.stderr
    assert "FoundationModels 26.4: ok" in done.stderr

