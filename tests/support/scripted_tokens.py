"""How the scripted server counts tokens, playing three kinds of server: its own deterministic tokenizer
(``count_tokens`` over the prompt a ChatML template makes of a request, ``render_prompt``), a llama-cpp-python server
that counts for it (``ServerCounter``), and a model file's own tokenizer in this process (``ModelCounter``)."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from typing import Any, Protocol

SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>")


def count_tokens(text: str) -> int:
    """A quarter token per ASCII byte, half a token per ASCII digit, one token per byte of other characters, rounded
    up (the FoundationModels mirror's scripted tokenizer), and one token for each ChatML marker (a special token in
    real tokenizers). Denser than TokenEstimator on code and text, as real tokenizers are, so a client that budgets
    with it fits more than the estimator lets it; CJK it counts denser than the estimator."""
    specials = sum(text.count(marker) for marker in SPECIAL_TOKENS)
    for marker in SPECIAL_TOKENS:
        text = text.replace(marker, "")
    quarters = 4 * specials
    for byte in text.encode():
        quarters += 4 if byte >= 0x80 else (2 if 0x30 <= byte <= 0x39 else 1)
    return (quarters + 3) // 4


TOOLS_PREAMBLE = "\n\nYou have access to the following functions:\n"
TOOLS_USAGE = ("\n\nTo respond with a function call begin the message with 'functions.<function_name>:', followed by "
               "its arguments as JSON; to respond with a message begin it with 'message:'.")


def render_prompt(body: dict[str, Any]) -> str:
    """The prompt a ChatML chat template makes of a request (as llama.cpp's chatml-function-calling does: the tools'
    names and parameters, without descriptions, in the system message; calls as ``functions.NAME:`` lines)."""
    tools = body.get("tools") or []
    parts = []
    for message in body.get("messages") or []:
        role = message.get("role", "")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content is not None else ""
        if role == "system" and tools:
            listed = "".join(f"\nfunctions.{tool['function']['name']}:\n"
                             f"{json.dumps(tool['function'].get('parameters'))}\n" for tool in tools)
            text += TOOLS_PREAMBLE + listed + TOOLS_USAGE
        for call in message.get("tool_calls") or []:
            text += f"functions.{call['function']['name']}:\n{call['function']['arguments']}"
        parts.append(f"<|im_start|>{role}\n{text}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def prompt_tokens(body: dict[str, Any]) -> int:
    """The request's prompt as the tokenizing scripted server counts it (its ``usage.prompt_tokens``)."""
    return count_tokens(render_prompt(body))


class Counter(Protocol):
    def count(self, text: str) -> int: ...

    def count_prompt(self, body: dict[str, Any]) -> tuple[int | None, str | None]:
        """The prompt's tokens, or None and the counting server's error (a prompt over its context)."""
        ...


class ScriptedCounter:
    """The deterministic tokenizer over the ChatML prompt."""

    def count(self, text: str) -> int:
        return count_tokens(text)

    def count_prompt(self, body: dict[str, Any]) -> tuple[int | None, str | None]:
        return prompt_tokens(body), None


class ServerCounter:
    """A llama-cpp-python server running chatml-function-calling at ``root``: its ``/extras/tokenize/count`` for
    texts; for a chat request, the request itself sent there without streaming, with ``max_tokens`` 1 and, when it
    offers tools, a named ``tool_choice`` (the server renders the prompt with its own template and tools): its
    ``usage.prompt_tokens``, or the server's refusal."""

    def __init__(self, root: str) -> None:
        self.root = root

    def count(self, text: str) -> int:
        return int(_post_json(f"{self.root}/extras/tokenize/count", {"input": text})[1]["count"])

    def count_prompt(self, body: dict[str, Any]) -> tuple[int | None, str | None]:
        probe = {key: value for key, value in body.items() if key not in ("model", "stream", "stream_options")}
        probe.update(stream=False, max_tokens=1, temperature=0)
        if probe.get("tools"):
            probe["tool_choice"] = {"type": "function", "function": {"name": probe["tools"][0]["function"]["name"]}}
        status, answer = _post_json(f"{self.root}/v1/chat/completions", probe)
        if status != 200:
            return None, json.dumps(answer)
        return int(answer["usage"]["prompt_tokens"]), None


class ModelCounter:
    """llama-cpp-python's counts without its server: the model's tokenizer, and the prompt its chatml-function-calling
    handler renders for a request (the handler runs until it would generate, then is stopped)."""

    class _Rendered(Exception):
        pass

    def __init__(self, model: str, context: int) -> None:
        from llama_cpp import Llama

        self.llama = Llama(model_path=model, vocab_only=True, verbose=False)
        self.context = context

    def count(self, text: str) -> int:
        # As the server's /extras/tokenize/count does.
        return len(self.llama.tokenize(text.encode(), special=True))

    def render(self, body: dict[str, Any]) -> str:
        from llama_cpp import llama_chat_format

        prompts: list[str] = []
        rendered = self._Rendered

        class Capture:
            verbose = False

            def create_completion(self, prompt: str, **_: Any) -> Any:
                prompts.append(prompt)
                raise rendered

        with contextlib.suppress(rendered):
            llama_chat_format.chatml_function_calling(llama=Capture(), messages=body.get("messages") or [],
                                                      tools=body.get("tools"), tool_choice=body.get("tool_choice"))
        return prompts[0]

    def count_prompt(self, body: dict[str, Any]) -> tuple[int | None, str | None]:
        tokens = self.count(self.render(body))
        if tokens >= self.context:  # llama.cpp refuses a prompt that fills its context
            return None, f"Requested tokens ({tokens}) exceed context window of {self.context}"
        return tokens, None


def _post_json(url: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read().decode("utf-8", "replace")
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"error": text}
