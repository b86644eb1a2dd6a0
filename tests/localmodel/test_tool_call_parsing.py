"""The served handler's pure parts: the grammar's schema of a call, and the calls a model writes as text."""

from __future__ import annotations

import json

import pytest

from apple_flow.localmodel.tool_calls import (
    _may_become_written_call,
    _partial_open_at,
    call_schema,
    parse_written_call,
    template_has_tool_calls,
    with_argument_objects,
)

READ = {"type": "function", "function": {"name": "readFile", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "startLine": {"type": "integer"}},
    "required": ["path"]}}}
LIST = {"type": "function", "function": {"name": "listDirectory", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}
NAMES = {"readFile", "listDirectory"}


def test_the_schema_allows_one_call_to_an_offered_tool_with_only_its_arguments() -> None:
    schema = call_schema([READ, LIST])
    choices = schema["oneOf"]
    assert [c["properties"]["name"] for c in choices] == [{"const": "readFile"}, {"const": "listDirectory"}]
    assert choices[0]["properties"]["arguments"]["required"] == ["path"]
    assert all(c["properties"]["arguments"]["additionalProperties"] is False for c in choices)
    assert all(c["required"] == ["name", "arguments"] for c in choices)
    # The offered tool's own schema is not changed in place.
    assert "additionalProperties" not in READ["function"]["parameters"]  # type: ignore[operator]
    assert call_schema([READ])["properties"]["name"] == {"const": "readFile"}


@pytest.mark.parametrize(("text", "call"), [
    ('<tool_call>\n{"name": "readFile", "arguments": {"path": "a.txt"}}\n</tool_call>',
     ("readFile", {"path": "a.txt"})),
    ('```json\n{"name": "listDirectory", "arguments": {}}\n```', ("listDirectory", {})),
    ('  {"name": "readFile", "parameters": {"path": "b"}}  ', ("readFile", {"path": "b"})),
    ('{"name": "listDirectory"}', ("listDirectory", {})),
])
def test_a_call_written_as_json_is_read_as_that_call(text: str, call: tuple[str, dict[str, str]]) -> None:
    parsed = parse_written_call(text, NAMES)
    assert parsed is not None
    assert (parsed[0], json.loads(parsed[1])) == call


@pytest.mark.parametrize("text", [
    "The file says hello.",
    '{"name": "deleteEverything", "arguments": {}}',
    '```python\nprint("hi")\n```',
    '{"name": "readFile", "arguments": {"path": ',
])
def test_anything_else_is_not_a_call(text: str) -> None:
    assert parse_written_call(text, NAMES) is None


def test_what_may_still_become_a_call_is_held_and_prose_is_not() -> None:
    assert _may_become_written_call("")
    assert _may_become_written_call("  {")
    assert _may_become_written_call("``")
    assert _may_become_written_call("```json\n{")
    assert not _may_become_written_call("The answer")
    # The start of a tag at the end of streamed text is held back; earlier text may go.
    assert _partial_open_at("Let me read it <tool") == len("Let me read it ")
    assert _partial_open_at("Let me read it.") == len("Let me read it.")


def test_only_templates_that_show_tools_and_expect_tags_get_the_handler() -> None:
    assert template_has_tool_calls("{% if tools %}<tools>{{ tools }}</tools> ... <tool_call>{% endif %}")
    assert not template_has_tool_calls("{% for message in messages %}{{ message.content }}{% endfor %}")
    assert not template_has_tool_calls(None)


def test_allowed_tools_is_taken_off_the_request_and_limits_the_required_call() -> None:
    import contextvars

    from apple_flow.localmodel.serve import AllowedTools
    from apple_flow.localmodel.tool_calls import _forced_tools

    body = {"model": "m", "tools": [READ, LIST], "tool_choice": {
        "type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
            {"type": "function", "function": {"name": "listDirectory"}}]}}}

    def in_a_request() -> tuple[dict[str, object], list[str]]:
        sent = json.loads(AllowedTools._rewritten(json.dumps(body).encode()))
        forced = _forced_tools([READ, LIST], sent["tool_choice"]) or []
        return sent, [tool["function"]["name"] for tool in forced]

    sent, forced = contextvars.copy_context().run(in_a_request)
    # What llama-cpp-python's request model accepts, the prompt's tools untouched, the call limited.
    assert sent["tool_choice"] == "required" and sent["tools"] == [READ, LIST]
    assert forced == ["listDirectory"]
    # Another request (another context) is not limited; "auto" and other bodies pass as they are.
    assert [t["function"]["name"] for t in _forced_tools([READ, LIST], "required") or []] == ["readFile",
                                                                                              "listDirectory"]
    assert _forced_tools([READ, LIST], "auto") is None
    plain = json.dumps({"tool_choice": "auto"}).encode()
    assert AllowedTools._rewritten(plain) == plain
    assert AllowedTools._rewritten(b"not json") == b"not json"
    with pytest.raises(ValueError, match="none of them among the tools offered"):
        _forced_tools([READ], {"type": "function", "function": {"name": "runCommand"}})


# The lines of Qwen2.5's template (as its GGUF carries it) that write an earlier call back into the prompt.
CALL_TEMPLATE = (
    "{%- for message in messages %}{%- if message.tool_calls %}{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}"
    "{%- else %}{{- message.content }}{%- endif %}{%- endfor %}")


def test_an_earlier_call_is_shown_to_the_model_with_its_arguments_as_an_object() -> None:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    history = [{"role": "user", "content": "Read a.py"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "readFile", "arguments": '{"path": "a.py"}'}},
                   {"id": "c2", "type": "function", "function": {"name": "readFile", "arguments": "not json"}}]}]
    formatter = Jinja2ChatFormatter(template=CALL_TEMPLATE, eos_token="", bos_token="")
    as_sent = formatter(messages=history).prompt
    assert '"arguments": "{\\"path\\": \\"a.py\\"}"' in as_sent  # the wire's string, escaped: what models copied
    shown = formatter(messages=with_argument_objects(history)).prompt
    assert '{"name": "readFile", "arguments": {"path": "a.py"}}' in shown
    assert '"arguments": "not json"' in shown  # left as it came
    assert history[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"}'  # the request is not changed
