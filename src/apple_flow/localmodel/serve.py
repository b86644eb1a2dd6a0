"""The served process: llama-cpp-python's OpenAI-compatible server on one local model, set up for an agent.

    python -m apple_flow.localmodel.serve --model FILE --name NAME --port P [--host H] [--context-tokens N]

What differs from ``python -m llama_cpp.server`` and why:
- a model whose chat template has ``<tool_call>`` gets this project's handler (tool_calls.py), so its calls come
  back as OpenAI ``tool_calls``; other models keep llama.cpp's ``chatml-function-calling`` format;
- generation uses every core (the server's default is half), and no per-token logits are kept (its default keeps
  them for the whole prompt: 1.4 GB more with Qwen's 152k vocabulary, and prompts a third slower);
- ``GET /v1/models`` says which file it serves, its context window, and that tool messages are understood;
- OpenAI's ``allowed_tools`` tool choice is taken (the server's request model refuses it): a call to one of the
  named tools is required while the prompt still shows them all.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

HANDLER_NAME = "apple-flow-tool-calls"
FALLBACK_FORMAT = "chatml-function-calling"
OWNER = "apple-flow"


def _template(model: Path) -> str | None:
    """The GGUF's chat template, read from its metadata without loading the weights."""
    from llama_cpp import Llama

    probe = Llama(model_path=str(model), vocab_only=True, verbose=False)
    try:
        template = probe.metadata.get("tokenizer.chat_template")
        return template if isinstance(template, str) else None
    finally:
        probe.close()


def _register_handler() -> None:
    """Registers the tool-call handler under HANDLER_NAME; it is built from the loaded model's own template."""
    from llama_cpp import llama_chat_format

    from apple_flow.localmodel.tool_calls import ToolCallHandler

    handlers: dict[int, ToolCallHandler] = {}

    def handle(*, llama: Any, **request: Any) -> Any:
        handler = handlers.get(id(llama))
        if handler is None:
            metadata = llama.metadata
            vocab = llama._model  # the tokens' texts, for the template's eos/bos
            eos = vocab.token_get_text(llama.token_eos()) if llama.token_eos() >= 0 else ""
            bos = vocab.token_get_text(llama.token_bos()) if llama.token_bos() >= 0 else ""
            handler = handlers[id(llama)] = ToolCallHandler(metadata["tokenizer.chat_template"], eos, bos)
        return handler(llama=llama, **request)

    llama_chat_format.register_chat_completion_handler(HANDLER_NAME)(handle)


def build_app(model: Path, name: str, context_tokens: int, threads: int) -> Any:
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    from apple_flow.localmodel.tool_calls import template_has_tool_calls

    handled = template_has_tool_calls(_template(model))
    if handled:
        _register_handler()
    settings = ModelSettings(
        model=str(model),
        model_alias=name,
        n_ctx=context_tokens,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=False,
        chat_format=HANDLER_NAME if handled else FALLBACK_FORMAT,
        verbose=True,  # llama.cpp's timings of each request go to the log (scripts/bench_demo reads them)
    )
    # interrupt_requests (on by default) ends a streamed reply as soon as another request waits for the model:
    # apple-code's next request, a /v1/models probe or a second client cut the reply short, and a tool call
    # arrived without its finish chunk, an answer as its first word. Requests wait their turn instead.
    app = create_app(server_settings=ServerSettings(interrupt_requests=False), model_settings=[settings])
    _describe_models(app, name, model, context_tokens, handled)
    return app


def _describe_models(app: Any, name: str, model: Path, context_tokens: int, handled: bool) -> None:
    """Serves ``GET /v1/models`` ahead of the server's own, with what a client needs to know of this one."""
    answer = {"object": "list", "data": [{
        "id": name, "object": "model", "owned_by": OWNER if handled else "me", "permissions": [],
        "file": model.name, "context_window": context_tokens,
        "tool_calls": "parsed" if handled else FALLBACK_FORMAT,
    }]}

    from fastapi import Depends
    from llama_cpp.server.app import get_llama_proxy

    # Through the model's lock, as the server's own route: it answers between generations only, which is how
    # clients (apple-code's probe) tell a busy server from a free one.
    async def models(proxy: Any = Depends(get_llama_proxy)) -> dict[str, Any]:  # noqa: B008
        return answer

    app.add_api_route("/v1/models", models, methods=["GET"])
    routes = app.router.routes
    routes.insert(0, routes.pop())  # first match wins: ours


class AllowedTools:
    """ASGI middleware: a chat request whose ``tool_choice`` is ``{"type": "allowed_tools", "allowed_tools": {"mode":
    "required", "tools": [...]}}`` goes on with ``"required"``, the names left in ``tool_calls.ALLOWED_TOOLS``
    (mode "auto" goes on as "auto"). Other requests pass untouched."""

    def __init__(self, app: ASGI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or not str(
                scope.get("path", "")).endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = self._rewritten(b"".join(chunks))
        scope = {**scope, "headers": [(name, value) for name, value in scope.get("headers", [])
                                      if name.lower() != b"content-length"]
                 + [(b"content-length", str(len(body)).encode())]}
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # a disconnect, later
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    @staticmethod
    def _rewritten(body: bytes) -> bytes:
        from apple_flow.localmodel.tool_calls import ALLOWED_TOOLS

        try:
            request = json.loads(body)
        except ValueError:
            return body
        choice = request.get("tool_choice") if isinstance(request, dict) else None
        if not isinstance(choice, dict) or choice.get("type") != "allowed_tools":
            return body
        allowed = choice.get("allowed_tools") or {}
        names = tuple(str((entry.get("function") or entry).get("name")) for entry in allowed.get("tools") or []
                      if isinstance(entry, dict))
        required = allowed.get("mode") == "required"
        request["tool_choice"] = "required" if required else "auto"
        if required:
            ALLOWED_TOOLS.set(names)
        return json.dumps(request).encode()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m apple_flow.localmodel.serve")
    parser.add_argument("--model", type=Path, required=True, help="the GGUF file")
    parser.add_argument("--name", required=True, help="the model's name in requests and /v1/models")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--context-tokens", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    import uvicorn

    app = build_app(args.model, args.name, args.context_tokens, args.threads)
    uvicorn.run(AllowedTools(app), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
