"""The OpenAI ``/v1/chat/completions`` wire format the scripted server speaks: a step as the assistant message,
the completion body, and the chunks of a stream."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

Step = dict[str, Any]
MODEL_ID = "scripted"
EXHAUSTED = "(script exhausted)"  # the answer once the script has run out


def tool_calls(step: Step, ids: itertools.count[int]) -> list[dict[str, Any]]:
    calls = []
    for call in step["calls"]:
        args = call["args"] if isinstance(call["args"], str) else json.dumps(call["args"])
        calls.append({
            "id": call["id"] or f"call_{next(ids)}",
            "type": "function",
            "function": {"name": call["name"], "arguments": args},
        })
    return calls


def assistant_message(step: Step, calls: list[dict[str, Any]]) -> dict[str, Any]:
    if step["kind"] == "answer":
        return {"role": "assistant", "content": step["text"]}
    # Real servers send content null next to tool calls; clients must cope.
    return {"role": "assistant", "content": step.get("content"), "tool_calls": calls}


def completion(message: dict[str, Any], number: int, usage: dict[str, int] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
        }],
    }
    if usage:
        body["usage"] = usage
    return body


def pieces(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def stream_chunks(
    message: dict[str, Any], number: int, usage: dict[str, int] | None, include_usage: bool
) -> list[dict[str, Any]]:
    """The chunks OpenAI streams for ``message``: role, text pieces, each tool call's head then its argument
    pieces, the finish reason, then (when asked for) the usage with no choices."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": MODEL_ID, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in pieces(call["function"]["arguments"], 8):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    if include_usage:
        chunks.append({"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": MODEL_ID, "choices": [], "usage": usage})
    return chunks
