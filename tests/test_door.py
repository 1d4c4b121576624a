"""The door (m0's llm.py, copied to every stage, and tinyharness/llm/__init__.py): whatever a server answers,
the harness sees, and sends back, one canonical message; an error reads as its cause.

Replies of every odd shape a fuzzer or a real server produced are run through the real CLI of every
stage against the strict scripted server, which refuses a request the way llama-cpp-python, Ollama
or vLLM would. Function-level tests check the normaliser and the error messages of each door.
"""
import importlib
import json
import time
import types

import pytest

from tests.ladder import FINAL, copies, run_stage, stages_from, stats_line
from tinyharness.testing import ScriptedServer
from tinyharness.testing.rules import request_problems

DOORS = [f"{stage}.llm" for stage in copies("m0", "llm.py", "wire.py", final=False)] + ["tinyharness.llm"]
USER = [{"role": "user", "content": "Go."}]


def door(name):
    """The door's names: a stage's lesson (llm.py) with its armour (wire.py) beside it, or the package's."""
    module = importlib.import_module(name)
    if not name.endswith(".llm") or name.startswith("tinyharness"):
        return module
    armour = importlib.import_module(name.removesuffix(".llm") + ".wire")
    return types.SimpleNamespace(**{**vars(armour), **vars(module)})


def completion(message, usage=None, finish_reason="tool_calls"):
    body = {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}]}
    return {"raw": json.dumps(body if usage is None else {**body, "usage": usage})}


LIST_DIR = {"id": "c1", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}

# Each class of reply that crashed a stage with a traceback (issue: "Replies of an unexpected shape").
ODD_REPLIES = {
    "tool_calls-an-object": completion({"content": None, "tool_calls": LIST_DIR}),
    "tool_calls-holding-a-string-number-list": completion({"content": None, "tool_calls": ["list_dir", 7, [1], LIST_DIR]}),
    "function-null": completion({"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": None}]}),
    "name-not-a-string": completion({"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": {"x": 1}, "arguments": "{}"}}]}),
    "usage-counts-are-strings": completion({"content": None, "tool_calls": [LIST_DIR]},
                                           usage={"prompt_tokens": "12", "completion_tokens": "3"}),
}


def assert_canonical(message):
    assert isinstance(message.get("content"), str), message
    for call in message.get("tool_calls") or []:
        assert set(call) == {"id", "type", "function"} and set(call["function"]) == {"name", "arguments"}, call
        assert isinstance(call["id"], str) and call["id"] and call["type"] == "function"
        assert isinstance(call["function"]["name"], str)
        assert isinstance(json.loads(call["function"]["arguments"]), dict)


# --- The ladder: odd replies never crash and never poison the history -----------------------------

@pytest.mark.parametrize("stage", stages_from("m1"))
@pytest.mark.parametrize("kind", list(ODD_REPLIES))
def test_an_odd_reply_is_survived_and_nothing_odd_is_sent_back(stage, kind, workspace):
    with ScriptedServer(script=[ODD_REPLIES[kind], "All done."]) as server:   # strict: refuses a poisoned request
        result = run_stage(stage, workspace, "--base-url", server.base_url, "x", approve=True)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "All done."
    assert server.rejected == []
    for message in server.requests[1]["messages"]:
        if message["role"] == "assistant":
            assert_canonical(message)
    if kind == "usage-counts-are-strings":
        assert stats_line(result.stderr)["turns"] == "2"


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_content_null_beside_tool_calls_is_sent_back_as_a_string(stage, workspace):
    """llama-cpp-python (and OpenAI, vLLM, llama.cpp) answer a tool call with `content: null` and extra
    fields; sent back as it came, llama-cpp-python's validator answers HTTP 500 at turn 2."""
    with ScriptedServer(script=[{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}, "All done."]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "x", approve=True)
    assert result.returncode == 0, result.stderr
    assert server.rejected == []
    sent_back = server.requests[1]["messages"][2]
    assert sent_back["role"] == "assistant" and sent_back["content"] == ""
    assert "function_call" not in sent_back and "index" not in sent_back["tool_calls"][0]
    assert_canonical(sent_back)


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_every_request_carries_max_tokens(stage, workspace):
    with ScriptedServer(script=["done"]) as server:
        run_stage(stage, workspace, "--base-url", server.base_url, "x", approve=True)
    assert server.requests[0]["max_tokens"] == 4096


# --- The normaliser, function level -----------------------------------------------------------------

@pytest.mark.parametrize("name", DOORS)
@pytest.mark.parametrize("raw, content, calls, problems", [
    ({"content": None}, "", None, {}),
    ({"content": 42}, "42", None, {}),
    ({"content": [{"type": "text", "text": "a"}, "b", {"type": "image_url"}]}, "ab", None, {}),
    ({"content": "hi", "tool_calls": []}, "hi", None, {}),
    ({"tool_calls": {"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}}, "", [("a", "f", '{"x": 1}')], {}),
    ({"tool_calls": '[{"id": "a", "function": {"name": "f", "arguments": "{}"}}]'}, "", [("a", "f", "{}")], {}),
    ({"tool_calls": ["oops"]}, "", [("call_1", "", "{}")], {"call_1": "tool call 1 is not an object but a string"}),
    ({"tool_calls": [3]}, "", [("call_1", "", "{}")], {"call_1": "tool call 1 is not an object but a number 3"}),
    ({"tool_calls": [{"id": "a", "function": None}]}, "", [("a", "", "{}")], {"a": "the call has no function object"}),
    ({"tool_calls": [{"id": "a", "function": {"name": ["f"]}}]}, "", [("a", "", "{}")], {"a": "the tool name must be a string"}),
    ({"tool_calls": [{"id": "a", "function": {"name": "", "arguments": "{}"}}]}, "", [("a", "", "{}")], {"a": "the call names no tool"}),
    ({"tool_calls": [{"function": {"name": "f", "arguments": '{"a": '}}]}, "", [("call_1", "f", "{}")],
     {"call_1": "the arguments are not valid JSON (Expecting value"}),
    ({"tool_calls": [{"id": 5, "function": {"name": "f", "arguments": "[1, 2]"}}]}, "", [("call_1", "f", "{}")],
     {"call_1": "the arguments must be a JSON object, not '[1, 2]'"}),
    ({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": 7}}]}, "", [("a", "f", "{}")],
     {"a": "the arguments must be a JSON object, not a number 7"}),
    ({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"n": NaN}'}}]}, "", [("a", "f", "{}")],
     {"a": "the arguments are not valid JSON (NaN is not JSON)"}),
    ({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '"{\\"p\\": 1}"'}}]}, "", [("a", "f", '{"p": 1}')], {}),
    ({"tool_calls": [{"id": "a", "name": "f", "arguments": {"p": 1}}]}, "", [("a", "f", '{"p": 1}')], {}),
    ({"tool_calls": [{"id": "a", "function": {"name": "f"}}, {"id": "a", "function": {"name": "g"}}]}, "",
     [("a", "f", "{}"), ("call_2", "g", "{}")], {}),
    ({"content": "x\ud800y", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"p": "\ud83d"}'}}]},
     "x?y", [("a", "f", '{"p": "\\ud83d"}')], {}),
], ids=["null", "number", "parts", "empty-calls", "calls-an-object", "calls-a-json-string", "call-a-string",
        "call-a-number", "function-null", "name-a-list", "name-empty", "broken-json", "json-list-and-numeric-id",
        "arguments-a-number", "nan", "double-encoded", "flattened", "duplicate-ids", "lone-surrogates"])
def test_canonical_message(name, raw, content, calls, problems):
    message = door(name).canonical_message({"role": "assistant", "index": 0, "function_call": {}, **raw})
    found = message.pop("_problems", {})
    assert message["content"] == content and message["role"] == "assistant"
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])] \
        == (calls or [])
    assert set(found) == set(problems) and all(found[k].startswith(v) for k, v in problems.items()), found
    assert_canonical(message)
    assert set(message) <= {"role", "content", "tool_calls"}
    json.dumps(message, ensure_ascii=False).encode("utf-8")        # no lone surrogate left to send


@pytest.mark.parametrize("name", DOORS)
def test_reasoning_keeps_its_field_and_odd_fields_go(name):
    message = door(name).canonical_message({"content": "a", "reasoning_content": "why", "reasoning": ["x"],
                                            "refusal": None, "audio": None})
    assert message == {"role": "assistant", "content": "a", "reasoning_content": "why"}


@pytest.mark.parametrize("name", DOORS)
@pytest.mark.parametrize("usage, clean", [
    ({"prompt_tokens": "12", "completion_tokens": 3, "total_tokens": 15.0}, {"completion_tokens": 3}),
    ({"prompt_tokens": True, "completion_tokens": -1}, {}),
    ({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}, "timings": {}},
     {"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}}),
    ({"prompt_tokens_details": {"cached_tokens": "4"}}, {}),
    ([1, 2], {}), (None, {}), ("12", {}),
])
def test_usage_keeps_only_integer_counts(name, usage, clean):
    assert door(name).clean_usage(usage) == clean


@pytest.mark.parametrize("name", DOORS)
@pytest.mark.parametrize("body", [
    {"choices": {"0": {"message": {}}}}, {"choices": ["x"]}, {"choices": [{"message": "hi"}]}, {"choices": None},
    [1, 2], "[" * 100000,
], ids=["choices-object", "choice-string", "message-string", "choices-null", "a-list", "deep-nesting"])
def test_a_body_that_is_no_completion_is_an_llm_error(name, body):
    with ScriptedServer(script=[{"raw": body if isinstance(body, str) else json.dumps(body)}]) as server:
        with pytest.raises(door(name).LLMError) as caught:
            door(name).Client(server.base_url).chat(USER)
    assert "not a chat completion" in str(caught.value)


@pytest.mark.parametrize("name", DOORS)
def test_chat_returns_message_usage_and_finish_reason_and_sends_max_tokens(name):
    reply = {"tool_calls": [{"name": "f", "arguments": {"a": 1}}], "usage": {"prompt_tokens": 5, "completion_tokens": "2"}}
    with ScriptedServer(script=[reply, {"content": "cut", "finish_reason": "length"}]) as server:
        client = door(name).Client(server.base_url, max_reply_tokens=77)
        message, usage, reason = client.chat(USER)
        _, _, cut = client.chat(USER)
    assert message == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    assert usage == {"prompt_tokens": 5} and reason == "tool_calls" and cut == "length"
    assert [r["max_tokens"] for r in server.requests] == [77, 77]


@pytest.mark.parametrize("name", DOORS)
def test_timeout_bounds_one_reply(name):
    """The loop passes the time left of --max-seconds: a reply that takes longer is given up."""
    with ScriptedServer(script=[{"content": "late", "delay": 4}]) as server:
        started = time.monotonic()
        with pytest.raises(door(name).LLMError) as caught:
            door(name).Client(server.base_url, timeout=600).chat(USER, timeout=0.3)
        gave_up_after = time.monotonic() - started
    assert gave_up_after < 3.5  # well before the reply (4 s), with room for a busy machine
    assert "within the 0.3 s left of the run's time limit (--max-seconds)" in str(caught.value)


# --- Errors that read as their cause ------------------------------------------------------------------

LLAMA_CPP_PYTHON_500 = {"error": {"message": (
    "7 validation errors for CreateChatCompletionRequest\n"
    "messages.2.typed-dict.role\n  Input should be 'system' [type=literal_error, input_value='assistant', input_type=str]\n"
    "    For further information visit https://errors.pydantic.dev/2.10/v/literal_error\n"
    "messages.2.typed-dict.role\n  Input should be 'user' [type=literal_error, input_value='assistant', input_type=str]\n"
    "    For further information visit https://errors.pydantic.dev/2.10/v/literal_error\n"
    "messages.2.typed-dict.content\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n"
    "    For further information visit https://errors.pydantic.dev/2.10/v/string_type\n"
    + "messages.2.typed-dict.role\n  Input should be 'tool' [type=literal_error, input_value='assistant', input_type=str]\n"
    * 4), "type": "internal_server_error"}}


@pytest.mark.parametrize("stage", stages_from("m0"))
def test_a_validation_error_shows_its_cause(stage, workspace):
    with ScriptedServer(script=[{"status": 500, "body": LLAMA_CPP_PYTHON_500}]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "x", approve=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "HTTP 500" in result.stderr
    assert "messages.2.typed-dict.content: Input should be a valid string (input None)" in result.stderr


@pytest.mark.parametrize("stage", stages_from("m0"))
def test_a_base_url_without_v1_gets_a_hint(stage, workspace):
    with ScriptedServer(script=[]) as server:
        root = server.base_url[:-len("/v1")]
        result = run_stage(stage, workspace, "--base-url", root, "x", approve=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"try --base-url {root}/v1" in result.stderr


@pytest.mark.parametrize("stage", stages_from("m0"))
def test_a_base_url_with_the_endpoint_pasted_in_gets_a_hint(stage, workspace):
    # The server's docs show the full endpoint; the harness adds /chat/completions itself.
    with ScriptedServer(script=[]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url + "/chat/completions", "x", approve=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"without /chat/completions: try --base-url {server.base_url}\n" in result.stderr


@pytest.mark.parametrize("stage", stages_from("m0"))
def test_a_host_name_that_does_not_resolve_is_named(stage, workspace):
    result = run_stage(stage, workspace, "--base-url", "http://example.invalid/v1", "x", approve=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "host name 'example.invalid'" in result.stderr and "could not be resolved" in result.stderr
    assert "Is it running?" not in result.stderr


@pytest.mark.parametrize("name", DOORS)
@pytest.mark.parametrize("status, body, prompt, window", [
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}}, 9000, 8192),
    (500, {"error": {"code": 500, "message": "the request exceeds the available context size",
                     "type": "exceed_context_size_error"}}, None, None),
    (400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages resulted "
                                "in 5000 tokens. Please reduce the length of the messages.",
                     "type": "invalid_request_error", "code": "context_length_exceeded"}}, 5000, 4096),
    (400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested "
                                         "2600 tokens (2500 in the messages, 100 in the completion).",
           "type": "BadRequestError", "code": 400}, 2500, 2048),
    (400, {"error": {"message": "Requested tokens (4500) exceed context window of 4096",
                     "type": "invalid_request_error", "code": "context_length_exceeded"}}, 4500, 4096),
], ids=["llama.cpp", "llama.cpp-500", "openai", "vllm", "llama-cpp-python"])
def test_context_overflow_is_recognised(name, status, body, prompt, window):
    with ScriptedServer(script=[{"status": status, "body": body}]) as server:
        with pytest.raises(door(name).ContextOverflow) as caught:
            door(name).Client(server.base_url).chat(USER)
    error = caught.value
    assert isinstance(error, door(name).LLMError)
    assert (error.prompt_tokens, error.context_window) == (prompt, window)
    assert "context window" in str(error) and "num_ctx" in str(error) and "--context-window" in str(error)


def test_other_http_errors_are_no_overflow():
    from tinyharness.llm import Client, ContextOverflow, LLMError
    with ScriptedServer(script=[{"status": 400, "body": {"error": {"message": "does not support tools"}}}]) as server:
        with pytest.raises(LLMError) as caught:
            Client(server.base_url).chat(USER)
    assert not isinstance(caught.value, ContextOverflow)


# --- The strict scripted server ------------------------------------------------------------------

def test_strict_mode_refuses_the_old_echo_of_the_servers_message():
    """What the harness sent back before the door: the server's own message, content null and all."""
    import requests
    with ScriptedServer(script=[{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}, "ok", "ok"]) as server:
        url = server.base_url + "/chat/completions"
        first = requests.post(url, json={"model": "m", "messages": USER}, timeout=5).json()["choices"][0]["message"]
        result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "a.txt"}
        old = requests.post(url, json={"model": "m", "messages": USER + [first, result]}, timeout=5)
        from tinyharness.llm import canonical_message
        new = requests.post(url, json={"model": "m", "messages": USER + [canonical_message(first), result]}, timeout=5)
    assert first["content"] is None and "function_call" in first
    assert old.status_code == 500
    assert "Input should be a valid string" in old.json()["error"]["message"]
    assert old.json()["error"]["rule"] == "llama-cpp-python: assistant content is a string"
    assert new.status_code == 200 and len(server.rejected) == 1


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
ASKED = {"role": "assistant", "content": "", "tool_calls": [CALL]}
ANSWER = {"role": "tool", "tool_call_id": "c1", "content": "ok"}


@pytest.mark.parametrize("messages, status, rule", [
    ([], 400, "openai: messages is a non-empty list"),
    (USER + [{"role": "robot", "content": "x"}], 400, "openai: role is system, user, assistant or tool"),
    (USER + [{"role": "assistant", "content": None, "tool_calls": [CALL]}, ANSWER], 500,
     "llama-cpp-python: assistant content is a string"),
    (USER + [{"role": "assistant", "content": "", "tool_calls": [{**CALL, "id": None}]}], 500,
     "llama-cpp-python: the call id is a string"),
    (USER + [{"role": "assistant", "content": "", "tool_calls": [{**CALL, "function": {"name": 1, "arguments": "{}"}}]},
             ANSWER], 500, "llama-cpp-python: the tool name is a string"),
    (USER + [{"role": "assistant", "content": "", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": {}}}]},
             ANSWER], 500, "llama-cpp-python: arguments are a JSON string"),
    (USER + [{"role": "assistant", "content": "", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "[1]"}}]},
             ANSWER], 400, "ollama: arguments parse to a JSON object"),
    (USER + [ASKED, {**ANSWER, "tool_call_id": "zz"}], 400,
     "openai/vllm: a tool message answers a call of the assistant message before it"),
    (USER + [ANSWER], 400, "openai/vllm: a tool message answers a call of the assistant message before it"),
    (USER + [ASKED, {"role": "user", "content": "go on"}], 400, "openai/vllm: every tool call is answered before the next message"),
    (USER + [ASKED, {**ANSWER, "content": ["ok"]}], 500, "llama-cpp-python: tool content is a string"),
    (USER + [ASKED, {**ANSWER, "tool_call_id": None}], 500, "llama-cpp-python: a tool message has a tool_call_id string"),
], ids=["no-messages", "role", "assistant-null", "id", "name", "arguments-object", "arguments-list",
        "unmatched-id", "no-call-before", "unanswered", "tool-content-list", "tool-call-id-null"])
def test_strict_mode_rules(messages, status, rule):
    import requests
    with ScriptedServer(script=["ok"]) as server:
        answer = requests.post(server.base_url + "/chat/completions", json={"model": "m", "messages": messages}, timeout=5)
    assert answer.status_code == status
    assert answer.json()["error"]["rule"] == rule
    assert server.rejected[0][1:3] == (status, rule)
    assert request_problems({"messages": USER + [ASKED, ANSWER, {"role": "assistant", "content": "done"}]}) == []


def test_a_refused_request_takes_no_reply_from_the_script():
    import requests
    with ScriptedServer(script=["first"]) as server:
        url = server.base_url + "/chat/completions"
        refused = requests.post(url, json={"model": "m", "messages": []}, timeout=5)
        answered = requests.post(url, json={"model": "m", "messages": USER}, timeout=5)
    assert refused.status_code == 400 and answered.json()["choices"][0]["message"]["content"] == "first"
    assert len(server.requests) == 2


def test_a_server_without_usage():
    import requests
    with ScriptedServer(script=["a", "b"], send_usage=False) as server:
        url = server.base_url + "/chat/completions"
        whole = requests.post(url, json={"model": "m", "messages": USER}, timeout=5).json()
        streamed = requests.post(url, json={"model": "m", "messages": USER, "stream": True}, timeout=5).text
    assert "usage" not in whole and '"usage"' not in streamed


@pytest.mark.parametrize("stage", [FINAL])
def test_a_stream_without_usage_still_finishes(stage, workspace):
    with ScriptedServer(script=["All done."], stream_usage=False) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--stream", "x", approve=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "All done."
