"""The ``apple_foundation_models`` tool's actions: the daemon's model (Apple's on-device model, else the configured
OpenAI-compatible server or the local model) as a plain text generator for other agents.

Every answer comes from one ``apple-code --no-tools`` run on the same backend flags as the daemon's turns
(``AfmConnector.backend_flags``), in an empty temporary folder, with the connector's environment allowlist.
A backend that cannot answer raises ``ModelUnavailable`` with apple-code's reason and the fix; nothing is ever made
up in its place.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apple_flow.config import Settings
from apple_flow.connectors.afm import EXIT_MODEL_UNAVAILABLE, AfmConnector, last_json_object
from apple_flow.connectors.cli import format_seconds
from apple_flow.connectors.runner import ProcessRunner, SpawnError

# apple-code's own default window (CONTRACT.md, --context-tokens) when the settings leave it open.
DEFAULT_CONTEXT_TOKENS = 4096
CHECK_TIMEOUT_SECONDS = 15.0
MODELS_TIMEOUT_SECONDS = 3.0  # as apple-code's own probe of GET /models


class ModelUnavailable(RuntimeError):
    """No backend of the chain can answer; the message says why and what to do."""


class ModelFailed(RuntimeError):
    """The backend was there but the run failed (timeout, guardrail, server error); the message is apple-code's."""


@dataclass(frozen=True)
class Sampling:
    """generate and respond's ``temperature`` and ``max_tokens``: apple-code's ``--temperature``, ``--max-tokens``."""

    temperature: float | None = None
    max_tokens: int | None = None

    def flags(self) -> list[str]:
        flags: list[str] = []
        if self.temperature is not None:
            if not 0 <= self.temperature <= 2:
                raise ValueError(f"temperature must be from 0 to 2, got {self.temperature:g}")
            flags += ["--temperature", f"{self.temperature:g}"]
        if self.max_tokens is not None:
            if self.max_tokens < 1:
                raise ValueError(f"max_tokens must be 1 or more, got {self.max_tokens}")
            flags += ["--max-tokens", str(self.max_tokens)]
        return flags


@dataclass(frozen=True)
class PlainAnswer:
    text: str
    backend: str
    model: str

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "backend": self.backend, "model": self.model}


class FoundationModels:
    """The actions, each a method; ``settings`` are the daemon's own (``.env`` and ``APPLE_FLOW_*``)."""

    def __init__(self, settings: Settings, runner: ProcessRunner | None = None) -> None:
        self.settings = settings
        self.connector = AfmConnector(settings, runner)

    # --- status, hardware, models ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Which backend answers (apple-code ``--check`` with the daemon's flags), Apple's model and why not, the
        window."""
        configured = self._check(self.connector.backend_flags())
        apple = configured if configured.get("backend") == "fm" else self._check(["--backend", "fm"])
        return {
            "backend": configured.get("backend", self.connector.backend().name),
            "available": bool(configured.get("available")),
            "reason": configured.get("reason", ""),
            "apple_intelligence": {"available": bool(apple.get("available")), "reason": apple.get("reason", "")},
            "context_tokens": self.settings.afm.context_tokens or DEFAULT_CONTEXT_TOKENS,
            "sandbox": configured.get("sandbox", ""),
        }

    def models(self) -> dict[str, Any]:
        """Apple's on-device model (``system``) when it is available, and the models the configured server lists."""
        apple = self._check(["--backend", "fm"])
        found: list[dict[str, Any]] = []
        if apple.get("available"):
            found.append({"backend": "fm", "id": "system"})
        backend = self.connector.backend()
        server: dict[str, Any] = {"configured": bool(backend.base_url or backend.model)}
        if backend.base_url:
            server["base_url"] = backend.base_url
            try:
                ids = _server_models(backend.base_url)
            except OSError as exc:
                server["error"] = f"GET {backend.base_url}/models failed: {exc}"
            else:
                found += [{"backend": "openai", "id": name} for name in ids]
        return {"models": found, "apple_intelligence_reason": apple.get("reason", ""), "server": server}

    @staticmethod
    def hardware() -> dict[str, Any]:
        """The chip, the memory and the operating system this Mac (or machine) runs."""
        return {
            "chip": _chip(),
            "machine": platform.machine(),
            "memory_bytes": _memory_bytes(),
            "os": _os_version(),
            "cpu_count": os.cpu_count(),
        }

    # --- plain answers ---------------------------------------------------------------------------------------

    def generate(self, prompt: str, sampling: Sampling | None = None) -> PlainAnswer:
        return self.answer(_required(prompt, "prompt"), sampling=sampling)

    def respond(self, prompt: str, system: str | None, sampling: Sampling | None = None) -> PlainAnswer:
        return self.answer(_required(prompt, "prompt"), system=system, sampling=sampling)

    def summarize(self, text: str) -> PlainAnswer:
        body = _required(text, "text")
        return self.answer(f"Summarize the following text in a few sentences. Answer with the summary only.\n\n{body}")

    def classify(self, text: str, labels: list[str]) -> PlainAnswer:
        """One of ``labels``, as the model chose it; an answer that names none of them (or several) is an error,
        never a guess."""
        choices = [label.strip() for label in labels if label.strip()]
        if len(choices) < 2:
            raise ValueError("classify needs at least two labels")
        listed = ", ".join(choices)
        said = self.answer(
            f"Classify the text below into exactly one of these labels: {listed}. Answer with the label only.\n\n"
            f"Text:\n{_required(text, 'text')}"
        )
        label = match_label(said.text, choices)
        if label is None:
            raise ModelFailed(f"the model answered {said.text.strip()[:200]!r}, which is not one of the labels "
                              f"({listed})")
        return PlainAnswer(label, said.backend, said.model)

    def answer(self, prompt: str, system: str | None = None, sampling: Sampling | None = None) -> PlainAnswer:
        """One ``apple-code --no-tools`` run: its answer, or ``ModelUnavailable`` / ``ModelFailed`` saying why."""
        s = self.settings
        with tempfile.TemporaryDirectory(prefix="apple-flow-mcp-") as folder:
            argv = [self.connector.executable(), "--cwd", folder, "--read-only", "--no-tools",
                    "--output-format", "json", "--timeout", format_seconds(s.afm.timeout_seconds)]
            if system and system.strip():
                argv += ["--system", system]
            argv += (sampling or Sampling()).flags()
            argv += [*self.connector.backend_flags(), *self.connector.reach_flags(), "-"]
            result = self._run(argv, prompt, s.afm.timeout_seconds + self.connector.kill_margin_seconds, folder)
        report = last_json_object(result.stdout)
        said = str(report.get("result") or "")
        if result.exit_code == EXIT_MODEL_UNAVAILABLE:
            raise ModelUnavailable(self._unavailable(said or result.last_stderr_line))
        if result.exit_code != 0 or report.get("is_error"):
            code = "killed" if result.exit_code is None else result.exit_code
            raise ModelFailed(f"apple-code failed (exit code {code}): {said or result.last_stderr_line or 'no output'}")
        return PlainAnswer(said, str(report.get("backend") or ""), str(report.get("model") or ""))

    # --- helpers -------------------------------------------------------------------------------------------

    def _unavailable(self, reason: str) -> str:
        return f"no model available: {reason.rstrip().rstrip('.') or 'no reason given'}. {self.connector._model_hint()}"

    def _check(self, flags: list[str]) -> dict[str, Any]:
        result = self._run([self.connector.executable(), "--check", *flags], "", CHECK_TIMEOUT_SECONDS, None)
        found = last_json_object(result.stdout)
        if not found:
            raise ModelFailed(f"apple-code --check failed (exit code {result.exit_code}): "
                              f"{result.last_stderr_line or 'no output'}")
        return found

    def _run(self, argv: list[str], stdin: str, timeout: float, cwd: str | None) -> Any:
        try:
            return self.connector.runner.run(argv, stdin, cwd=cwd, timeout=timeout, env=self.connector.environment())
        except SpawnError as exc:
            raise ModelUnavailable(self.connector.spawn_outcome(exc).detail) from exc


def match_label(answer: str, labels: list[str]) -> str | None:
    """The label ``answer`` names: the whole answer (case, quotes and a full stop aside), else the one label it
    contains as a word; None when it names none or several."""
    said = answer.strip().strip("\"'`*.").strip().lower()
    for label in labels:
        if said == label.lower():
            return label
    named = [label for label in labels if re.search(rf"(?<!\w){re.escape(label.lower())}(?!\w)", said)]
    return named[0] if len(named) == 1 else None


def _required(text: str, name: str) -> str:
    if not text or not text.strip():
        raise ValueError(f"{name} must not be empty")
    return text


def _server_models(base_url: str) -> list[str]:
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=MODELS_TIMEOUT_SECONDS) as response:
        body = json.load(response)
    data = body.get("data") if isinstance(body, dict) else None
    return [str(item["id"]) for item in data or [] if isinstance(item, dict) and "id" in item]


def _sysctl(name: str) -> str:
    try:
        done = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _chip() -> str:
    if platform.system() == "Darwin":
        return _sysctl("machdep.cpu.brand_string") or platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    if platform.system() == "Darwin":
        value = _sysctl("hw.memsize")
        return int(value) if value.isdigit() else None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _os_version() -> str:
    if platform.system() == "Darwin":
        return f"macOS {platform.mac_ver()[0]}"
    return f"{platform.system()} {platform.release()}"

