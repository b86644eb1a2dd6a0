"""What more than one benchmark needs, kept once. Imported by the bench_* scripts; not a benchmark itself."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from rich.console import Console


def free_port() -> int:
    """A free port on 127.0.0.1, for a server a benchmark starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def counting_options(tokenizer: str) -> dict[str, Any]:
    """How the scripted server counts: in the local model's tokens (its tokenizer over the prompt llama-cpp-python's
    chatml-function-calling handler renders, refused at 4,096 tokens as its server refuses it), or with its own
    deterministic tokenizer."""
    if tokenizer == "scripted":
        return {}
    from apple_flow.localmodel import LocalModelError, model_file, server_available
    if not server_available():
        raise SystemExit("the local model is not installed: run scripts/local-model.sh install (or pass "
                         "--tokenizer scripted)")
    try:
        return {"count_model": str(model_file("smollm2-135m")), "count_context": 4096}
    except LocalModelError as error:
        raise SystemExit(str(error)) from error


def write_report(path: Path, text: str, console: Console) -> None:
    """Writes a benchmark's report (making its folder), prints it, and says where it went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(text)
    console.print(f"report written to {path}")
