"""Access to the local llama.cpp model server for tests that need a real model."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from apple_flow.localmodel import DEFAULT_MODEL, LocalModelError, LocalModelServer, model_file
from support.ports import free_port

# The tiny model loads in a second and answers in one: the tests that need any real model use it; those about
# what the agent gets done use the default coding model.
FAST_MODEL = "smollm2-135m"


def require_local_model(model: str = FAST_MODEL) -> None:
    """Skips when llama-cpp-python or the model is missing, unless the run promised them
    (`APPLE_FLOW_REQUIRE_LOCAL_MODEL=1`, set by scripts/test.sh after installing them): then it fails."""
    missing = "llama-cpp-python" if importlib.util.find_spec("llama_cpp") is None else ""
    if not missing:
        try:
            model_file(model)
        except LocalModelError as exc:
            missing = str(exc)
    if not missing:
        return
    message = f"local model not installed ({missing}): run scripts/local-model.sh install --model {model}"
    if os.environ.get("APPLE_FLOW_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def running_local_model(state_dir: Path, wait_seconds: float = 120, context_tokens: int = 4096,
                        model: str = FAST_MODEL) -> Iterator[LocalModelServer]:
    """The local model server on a free port for a test module (skips when not installed); stopped after.
    ``context_tokens`` is its context window (llama.cpp's n_ctx)."""
    require_local_model(model)
    server = LocalModelServer(port=free_port(), state_dir=state_dir, context_tokens=context_tokens, model=model)
    try:
        server.start(wait_seconds=wait_seconds)
        yield server
    finally:
        server.stop()


__all__ = ["DEFAULT_MODEL", "FAST_MODEL", "free_port", "require_local_model", "running_local_model"]
