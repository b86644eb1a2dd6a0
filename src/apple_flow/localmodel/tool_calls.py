"""A llama-cpp-python chat handler that gives OpenAI ``tool_calls`` for models that write Hermes-style calls.

Qwen2.5-Coder (like Hermes and others) is trained to answer a tool request with
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, and its GGUF carries the chat template that shows it
the tools that way. llama-cpp-python 0.3 renders that template but has no parser for the reply, and its own
``chatml-function-calling`` format makes such a model answer ``functions.readFile:`` with no arguments. So here:

1. the prompt is the GGUF's own template, tools and ``role: tool`` results included;
2. the model generates freely; text that is clearly an answer streams out as it comes;
3. once it opens ``<tool_call>``, generation starts again from that point under a grammar that allows only a call
   to one of the offered tools with arguments of its schema (what llama.cpp's own server does with a lazy
   grammar), so the call is well formed and names a real tool;
4. a reply that is only a call written as JSON (bare or in a code fence) is taken as that call too.

Nothing here is specific to one model beyond the tag the template itself defines.
"""

from __future__ import annotations

import contextvars
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# The names of OpenAI's `allowed_tools` tool choice for this request: llama-cpp-python's request model knows only
# "none", "auto", "required" and a named function, so serve.py takes the shape off the request and leaves "required"
# plus these names here (the handler runs in a copy of the request's context).
ALLOWED_TOOLS: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("allowed_tools", default=None)

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def template_has_tool_calls(template: str | None) -> bool:
    """Whether a chat template shows tools and expects ``<tool_call>`` replies."""
    return bool(template) and OPEN in (template or "") and "tools" in (template or "")


def call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of one call to one of ``tools``: its name, then arguments that fit its parameters."""
    choices = []
    for tool in tools:
        function = tool.get("function") or {}
        parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
        if parameters.get("type", "object") == "object":
            parameters.setdefault("properties", {})
            parameters.setdefault("additionalProperties", False)
        choices.append({
            "type": "object",
            "properties": {"name": {"const": function.get("name", "")}, "arguments": parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        })
    return choices[0] if len(choices) == 1 else {"oneOf": choices}


def call_grammar(schema: str) -> str:
    """GBNF for one call: the schema's JSON object, then the line break the template writes before the closing
    tag. Without it a model that wants ``}}\\n`` next is pushed into another (optional) argument instead."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    rules = json_schema_to_gbnf(schema).replace("root ::=", "call ::=", 1)
    return f'root ::= call "\\n"?\n{rules}'


def parse_written_call(text: str, names: set[str]) -> tuple[str, str] | None:
    """A call written as JSON text (``<tool_call>`` body, a fenced or bare object) naming one of ``names``:
    (name, arguments as JSON text); else None."""
    body = text.strip()
    if body.startswith(OPEN):
        body = body[len(OPEN):]
    body = body.split(CLOSE, 1)[0].strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith("{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        return str(value["name"]), arguments
    if arguments is None:
        arguments = {}
    return str(value["name"]), json.dumps(arguments, ensure_ascii=False)


def with_argument_objects(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each earlier call's ``arguments`` as the object its JSON text holds. OpenAI's wire format
    sends them as a string; templates write them with ``| tojson``, which turns a string into a quoted, escaped one
    (``"arguments": "{\\"path\\": ...}"``), and a model shown its own calls that way copies the escapes into its next
    call's values. Arguments that are not a JSON object stay as they came."""
    fixed = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not calls:
            fixed.append(message)
            continue
        fixed.append({**message, "tool_calls": [_with_object_arguments(call) for call in calls]})
    return fixed


def _with_object_arguments(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    try:
        arguments = json.loads(function["arguments"])
    except ValueError:
        return call
    if not isinstance(arguments, dict):
        return call
    return {**call, "function": {**function, "arguments": arguments}}


def _may_become_written_call(text: str) -> bool:
    """While a reply is this far, could it still turn out to be a whole call written as JSON?"""
    start = text.lstrip()
    return start == "" or start.startswith(("{", "```")) or "```".startswith(start)


def _partial_open_at(text: str) -> int:
    """Where a tail of ``text`` that could be the start of ``<tool_call>`` begins (len(text) when none)."""
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return len(text) - size
    return len(text)


@dataclass
class ModelOutput:
    """What one request produced: text shown, at most one call, and the token counts."""

    text: str = ""
    call: tuple[str, str] | None = None
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ToolCallHandler:
    """The chat completion handler (llama-cpp-python's handler protocol: a callable taking the request's fields
    as keywords and returning a completion or an iterator of chunks)."""

    def __init__(self, template: str, eos_token: str, bos_token: str) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        # Any: the request's messages and tools are the server's already-validated JSON, passed on as they are.
        self.formatter: Any = Jinja2ChatFormatter(template=template, eos_token=eos_token, bos_token=bos_token)
        self._grammars: dict[str, Any] = {}

    def __call__(self, *, llama: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: Any = None, functions: list[dict[str, Any]] | None = None, stream: bool = False,
                 max_tokens: int | None = None, stop: str | list[str] | None = None, model: str | None = None,
                 **sampling: Any) -> Any:
        if functions and not tools:
            tools = [{"type": "function", "function": function} for function in functions]
        offered = tools if tools and tool_choice != "none" else None
        formatted = self.formatter(messages=with_argument_objects(messages), tools=offered)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if formatted.stop:
            stops += [formatted.stop] if isinstance(formatted.stop, str) else list(formatted.stop)
        settings = {key: sampling[key] for key in _SAMPLING if sampling.get(key) is not None}
        if sampling.get("logit_bias") is not None:
            settings["logit_bias"] = sampling["logit_bias"]
        forced = _forced_tools(offered or [], tool_choice)
        run = _Generation(llama, formatted.prompt, not formatted.added_special, stops, settings,
                          max_tokens, offered or [], self._grammar, forced)
        name = model or "local"
        if stream:
            return _chunks(run, name)
        return _completion(run, name)

    def _grammar(self, tools: list[dict[str, Any]]) -> Any:
        from llama_cpp.llama_grammar import LlamaGrammar

        schema = json.dumps(call_schema(tools))  # key order is the order the grammar writes them in
        if schema not in self._grammars:
            self._grammars.clear()  # one tool set at a time is the rule: keep one
            self._grammars[schema] = LlamaGrammar.from_string(call_grammar(schema), verbose=False)
        return self._grammars[schema]


def _forced_tools(tools: list[dict[str, Any]], choice: Any) -> list[dict[str, Any]] | None:
    """The tools a call must be made to (``tool_choice`` "required": any offered one; a named function: that one),
    or None when the model may answer in words."""
    if not tools:
        return None
    if choice == "required":
        allowed = ALLOWED_TOOLS.get()
        return tools if allowed is None else _named(tools, list(allowed))
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return _named(tools, [str(name)])
    return None


def _named(tools: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    chosen = [tool for tool in tools if (tool.get("function") or {}).get("name") in names]
    if not chosen:
        raise ValueError(f"tool_choice names {', '.join(names) or 'no tool'}, none of them among the tools offered")
    return chosen


_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "presence_penalty", "frequency_penalty",
             "repeat_penalty", "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta")


class _Generation:
    """One request's generation, as text pieces to pass on, then the finished ModelOutput."""

    def __init__(self, llama: Any, prompt: str, add_bos: bool, stops: list[str], sampling: dict[str, Any],
                 max_tokens: int | None, tools: list[dict[str, Any]], grammar: Any,
                 forced: list[dict[str, Any]] | None = None) -> None:
        self.llama = llama
        self.prompt = prompt
        self.add_bos = add_bos
        self.stops = stops
        self.sampling = sampling
        self.max_tokens = max_tokens if max_tokens and max_tokens > 0 else None
        self.tools = tools
        self.names = {str((tool.get("function") or {}).get("name")) for tool in tools}
        self.grammar = grammar
        self.forced = forced
        self.reply = ModelOutput()

    def _tokens(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=self.add_bos, special=True))

    def pieces(self) -> Iterator[str]:
        """Yields the answer's text as it can be shown; fills ``self.reply``."""
        prompt_tokens = self._tokens(self.prompt)
        self.reply.prompt_tokens = len(prompt_tokens)
        if self.forced:
            self._constrained_call("", self.forced)
            return
        generated = ""
        shown = 0
        hold_all = bool(self.tools)  # the reply may still be a call written as JSON
        stream = self.llama.create_completion(prompt=prompt_tokens, stream=True, max_tokens=self.max_tokens,
                                              stop=self.stops, **self.sampling)
        opened = -1
        finish = "stop"
        try:
            for chunk in stream:
                choice = chunk["choices"][0]
                generated += choice.get("text") or ""
                self.reply.completion_tokens += 1
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
                if self.tools and (opened := generated.find(OPEN)) >= 0:
                    break
                if hold_all and not _may_become_written_call(generated):
                    hold_all = False
                if not hold_all:
                    safe = _partial_open_at(generated) if self.tools else len(generated)
                    if safe > shown:
                        yield generated[shown:safe]
                        shown = safe
        finally:
            close = getattr(stream, "close", None)
            if close:
                close()  # stops llama.cpp generating what nobody will read
        if opened >= 0:
            before = generated[:opened]
            if len(before) > shown:
                yield before[shown:]
            self.reply.text = before
            self._constrained_call(before, self.tools)
            return
        if self.tools and hold_all:
            written = parse_written_call(generated, self.names)
            if written:
                self.reply.call = written
                self.reply.finish_reason = "tool_calls"
                return
        if len(generated) > shown:
            yield generated[shown:]
        self.reply.text = generated
        self.reply.finish_reason = finish

    def _constrained_call(self, before: str, tools: list[dict[str, Any]]) -> None:
        """Generates the call's body from just after ``<tool_call>`` under the grammar of a call to one of
        ``tools``."""
        remaining = None
        if self.max_tokens is not None:
            remaining = max(16, self.max_tokens - self.reply.completion_tokens)
        prompt = self._tokens(self.prompt + before + OPEN + "\n")
        # No repetition penalty here: a call's arguments are made of what the conversation holds (the path the
        # user named, the text to replace), and the server's default of 1.1 pushed the model to invent others.
        sampling = {**self.sampling, "repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
        completion = self.llama.create_completion(prompt=prompt, stream=False, max_tokens=remaining,
                                                  stop=[CLOSE, *self.stops], grammar=self.grammar(tools),
                                                  **sampling)
        body = completion["choices"][0]["text"]
        self.reply.completion_tokens += int(completion.get("usage", {}).get("completion_tokens", 0))
        names = {str((tool.get("function") or {}).get("name")) for tool in tools}
        written = parse_written_call(body, names)
        if written is None:
            # Cut short (max_tokens): the call's raw text, for the caller's usual "malformed arguments" error.
            name = next((n for n in names if f'"{n}"' in body), sorted(names)[0])
            written = (name, body)
        self.reply.call = written
        self.reply.finish_reason = "tool_calls"


def _call_entry(call: tuple[str, str], index: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                             "function": {"name": call[0], "arguments": call[1]}}
    if index is not None:
        entry["index"] = index
    return entry


def _usage(reply: ModelOutput) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens}


def _completion(run: _Generation, model: str) -> dict[str, Any]:
    for _ in run.pieces():
        pass
    reply = run.reply
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.call:
        message["tool_calls"] = [_call_entry(reply.call)]
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                         "finish_reason": reply.finish_reason}],
            "usage": _usage(reply)}


def _chunks(run: _Generation, model: str) -> Iterator[dict[str, Any]]:
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}

    yield chunk({"role": "assistant"})
    for piece in run.pieces():
        if piece:
            yield chunk({"content": piece})
    reply = run.reply
    if reply.call:
        yield chunk({"tool_calls": [_call_entry(reply.call, index=0)]})
    yield chunk({}, reply.finish_reason, usage=_usage(reply))
