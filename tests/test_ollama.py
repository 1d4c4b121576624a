"""Ollama's native dialect (tinyharness only): what goes on the wire to /api/chat, what comes back,
how --api auto picks it, and the scripted Ollama's strict checks.

Most tests call OllamaClient in-process against one shared scripted Ollama; a few drive
`tinyharness run` for the flags (--api, --think, the default --context-window)."""
import base64
import json
import os
import re
import subprocess
import sys

import pytest
import requests

from tests.ladder import FINAL, ROOT, calls, run_stage, stats_line, tool_call
from tinyharness.testing import fake_ollama
from tinyharness.testing.fake_ollama import OllamaServer
from tinyharness.llm import LLMError
from tinyharness.llm.ollama import (OLLAMA_WINDOW_CAP, OllamaClient, could_be_ollama, default_window,
                                    host_root, pick_api, to_native)
from tinyharness.testing import ScriptedServer
from tinyharness.testing.images import split_png, tiny_png

READ = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
PNG = tiny_png(4, 4, lambda x, y: (255, 0, 0))
PNG_B64 = base64.b64encode(PNG).decode()
# A canonical history as the loop keeps it: a user message with an image, two calls (arguments as
# JSON strings, ids from the server), both results paired by id, reasoning kept as `thinking`.
HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "look"},
                                 {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]},
    {"role": "assistant", "content": "", "thinking": "two files",
     "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.md"}'}},
                    {"id": "call_b", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "text of a"},
    {"role": "tool", "tool_call_id": "call_b", "content": "a.md"},
]


@pytest.fixture
def ollama():
    """A scripted Ollama (in-process, starts in milliseconds); a test gives its replies with scripted()."""
    with OllamaServer(script=[]) as server:
        yield server


def scripted(server, *replies, **settings):
    server.script = [dict(r) if isinstance(r, dict) else {"content": r} for r in replies]
    server.calls_in_last_frame = settings.get("calls_in_last_frame", False)
    server.call_ids = settings.get("call_ids", False)
    server.send_usage = settings.get("usage", True)
    return server


def client(server, **settings):
    return OllamaClient(server.base_url, "qwen3:8b", **{"context_window": 5000, **settings})


# --- canonical -> native --------------------------------------------------------------------------

def test_history_is_translated_to_the_native_shape():
    native = to_native(HISTORY)
    assert native[1] == {"role": "user", "content": "look", "images": [PNG_B64]}      # bare base64, no data: prefix
    assert native[2] == {"role": "assistant", "content": "", "thinking": "two files", "tool_calls": [
        {"id": "call_a", "function": {"name": "read_file", "arguments": {"path": "a.md"}}},   # objects, the ids kept
        {"id": "call_b", "function": {"name": "list_dir", "arguments": {"path": "."}}}]}
    # paired by id (Ollama 0.12.10+, api.Message.ToolCallID) and by name (older Ollama, name-based templates)
    assert native[3] == {"role": "tool", "content": "text of a", "tool_name": "read_file", "tool_call_id": "call_a"}
    assert native[4] == {"role": "tool", "content": "a.md", "tool_name": "list_dir", "tool_call_id": "call_b"}
    assert HISTORY[2]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.md"}'  # the input is untouched


@pytest.mark.parametrize("stream", [False, True])
def test_the_request_carries_num_ctx_num_predict_think_and_the_native_history(ollama, stream):
    scripted(ollama, "fine")
    message, usage, finish = client(ollama, stream=stream, think=False, max_reply_tokens=333).chat(HISTORY, tools=[READ])
    sent = ollama.requests[0]
    assert sent["options"] == {"num_ctx": 5000, "num_predict": 333}
    assert sent["truncate"] is False and sent["shift"] is False    # an error past num_ctx, never a silent cut
    assert sent["stream"] is stream and sent["think"] is False and sent["tools"] == [READ]
    assert sent["messages"] == to_native(HISTORY)
    assert ollama.rejected == []                         # the strict checks found nothing to refuse
    assert (message, finish) == ({"role": "assistant", "content": "fine"}, "stop")
    assert set(usage) == {"prompt_tokens", "completion_tokens"}


def test_think_is_not_sent_unless_asked(ollama):
    scripted(ollama, "hi")
    client(ollama).chat([{"role": "user", "content": "hi"}])
    assert "think" not in ollama.requests[0]


# --- native -> canonical --------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("last_frame", [False, True])
def test_tool_calls_come_back_canonical_with_our_ids(ollama, stream, last_frame):
    reply = {"reasoning": "let me look", "content": "", "tool_calls": [tool_call("read_file", path="a.md"),
                                                                        tool_call("list_dir", path=".")]}
    scripted(ollama, reply, calls_in_last_frame=last_frame)
    seen = []
    message, usage, finish = client(ollama, stream=stream).chat(HISTORY[:2], tools=[READ], on_reasoning=seen.append)
    assert message == {"role": "assistant", "content": "", "thinking": "let me look", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.md"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}]}
    assert ("".join(seen) == "let me look") is stream     # shown as it arrives only when streaming


def test_server_ids_are_kept_and_a_string_or_broken_argument_is_reported(ollama):
    scripted(ollama, calls(tool_call("read_file", path="a"), {"name": "list_dir", "arguments": [1, 2]}), call_ids=True)
    message, _, _ = client(ollama, stream=True).chat(HISTORY[:2], tools=[READ])
    first, second = message["tool_calls"]
    assert first["id"].startswith("call_") and first["function"]["arguments"] == '{"path": "a"}'
    assert second["function"]["arguments"] == "{}"
    assert "must be a JSON object" in message["_problems"][second["id"]]


@pytest.mark.parametrize("stream", [False, True])
def test_counts_and_the_length_limit_map_to_usage_and_finish_reason(ollama, stream):
    scripted(ollama, {"content": "cut he", "finish_reason": "length", "usage": {"prompt_tokens": 70, "completion_tokens": 9}})
    message, usage, finish = client(ollama, stream=stream).chat([{"role": "user", "content": "go"}])
    assert (message["content"], usage, finish) == ("cut he", {"prompt_tokens": 70, "completion_tokens": 9}, "length")


def test_no_counts_means_empty_usage(ollama):
    scripted(ollama, "hi", usage=False)
    assert client(ollama, stream=True).chat([{"role": "user", "content": "go"}])[1] == {}


def test_think_tags_in_the_content_are_not_the_answer(ollama):
    scripted(ollama, "<think>hmm</think>\n\nThe answer.")
    message, _, _ = client(ollama, stream=True).chat([{"role": "user", "content": "go"}])
    assert message == {"role": "assistant", "content": "The answer.", "thinking": "hmm"}


# --- native replies are input: any shape, no traceback -----------------------------------------------

@pytest.mark.parametrize("tool_calls, problem", [
    (True, "the tool call is not an object but a boolean true"),
    (5, "the tool call is not an object but a number 5"),
    (["read_file"], 'the tool call is not an object but a string "read_file"'),
    ([{"function": {"name": 7, "arguments": {}}}], "the call has no tool name (got a number 7)"),
    ([{"function": {"name": "read_file", "arguments": [1]}}], "the arguments must be a JSON object, not a list [1]"),
    ([{"function": {"name": "read_file", "arguments": {"path": float("nan")}}}], "cannot be sent back as JSON"),
])
def test_a_native_reply_of_any_shape_becomes_a_call_the_model_is_told_about(tool_calls, problem):
    frames = [{"message": {"role": "assistant", "content": "", "tool_calls": tool_calls}, "done": True}]
    message, _, _ = OllamaClient("http://127.0.0.1:9/v1", "m").assemble(frames, None, None)
    [call] = message["tool_calls"]
    assert call["function"]["arguments"] == "{}" and problem in message["_problems"][call["id"]]
    json.dumps(to_native([message]), allow_nan=False)      # the next request can be encoded


def test_no_tool_calls_in_any_spelling_is_no_call():
    for nothing in (None, False, "", [], {}):
        frames = [{"message": {"role": "assistant", "content": "hi", "tool_calls": nothing}, "done": True}]
        assert OllamaClient("http://127.0.0.1:9/v1", "m").assemble(frames, None, None)[0] == \
            {"role": "assistant", "content": "hi"}


def test_deep_nesting_is_not_a_traceback():
    client = OllamaClient("http://127.0.0.1:9/v1", "m")
    with pytest.raises(LLMError, match="is not Ollama's JSON"):
        client.parse_frame(b'{"message": ' + b"[" * 100000 + b"]" * 100000 + b"}")
    deep = {}
    for _ in range(5000):
        deep = {"a": deep}
    message, _, _ = client.assemble([{"message": {"content": "", "tool_calls": [
        {"function": {"name": "read_file", "arguments": deep}}]}, "done": True}], None, None)
    assert "cannot be sent back as JSON" in next(iter(message["_problems"].values()))
    with pytest.raises(LLMError):
        client.parse_frame(json.dumps({"error": "x"}).encode())


def test_nan_arguments_from_ollama_are_refused_at_the_door_and_the_run_goes_on(tmp_path):
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": float("nan")}}]}, "I could not read it."]
    with OllamaServer(script=script) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "read it")
    assert "Traceback" not in result.stderr and result.returncode == 0, result.stderr
    assert server.rejected == [] and len(server.requests) == 2
    answer = server.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and answer["content"].startswith("ERROR: the arguments cannot be sent back as JSON")
    assert server.requests[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"] == {}


# --- errors, in words -----------------------------------------------------------------------------

def test_a_missing_model_names_the_pull_command(ollama):
    scripted(ollama, "never sent")
    with pytest.raises(LLMError, match=r"`ollama pull llama9:1b`"):
        OllamaClient(ollama.base_url, "llama9:1b").chat([{"role": "user", "content": "hi"}])


def test_a_model_without_tools_is_explained():
    with OllamaServer(personality="no-tools") as server:
        with pytest.raises(LLMError, match="cannot call tools.*qwen3:8b"):
            OllamaClient(server.base_url, "gemma3:4b").chat([{"role": "user", "content": "hi"}], tools=[READ])


@pytest.mark.parametrize("reply, words", [({"content": "abcdefghijklmnopqrstuvwxyz", "drop": "mid-stream"},
                                            "ended before its last line"),
                                           ({"content": "abc", "stream_error": "runner crashed"}, "runner crashed")])
def test_a_broken_stream_is_reported(ollama, reply, words):
    scripted(ollama, reply)
    with pytest.raises(LLMError, match=words):
        client(ollama, stream=True).chat([{"role": "user", "content": "hi"}])


def test_a_link_instead_of_image_data_is_refused_before_sending(ollama):
    scripted(ollama)
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}
    with pytest.raises(LLMError, match="base64 data, not as a link"):
        client(ollama).chat([message])
    assert ollama.requests == []


# --- the scripted Ollama is strict like the real one ---------------------------------------------

@pytest.mark.parametrize("message, words", [
    ({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": '{"path": "a"}'}}]},
     "cannot unmarshal string"),
    ({"role": "user", "content": [{"type": "text", "text": "hi"}]}, "cannot unmarshal array"),
    ({"role": "user", "content": "hi", "images": [f"data:image/png;base64,{PNG_B64}"]}, "illegal base64"),
    ({"role": "tool", "content": "result"}, "tool_name"),
])
def test_the_scripted_ollama_rejects_what_ollama_rejects(ollama, message, words):
    scripted(ollama, "never sent")
    answer = requests.post(ollama.root_url + "/api/chat", json={"model": "qwen3:8b", "messages": [message], "stream": False})
    assert answer.status_code == 400 and words in answer.json()["error"]
    assert [r[1] for r in ollama.rejected] == [400] and ollama.replies_sent == 0


def chat_status(ollama, **body):
    answer = requests.post(ollama.root_url + "/api/chat", json={"model": "qwen3:8b", "stream": False, **body})
    return answer.status_code, answer.json()


@pytest.mark.parametrize("body, status, words", [
    # api/types.go Options.FromMap: a wrong option type is a 500 (handleScheduleError's default)
    ({"options": {"num_ctx": "8192"}}, 500, 'option "num_ctx" must be of type integer'),
    ({"options": {"num_predict": True}}, 500, 'option "num_predict" must be of type integer'),
    # api/types.go ThinkValue: a bool or a level, nothing else (a 400 from binding the request)
    ({"think": "extreme"}, 400, "invalid think value"),
    # routes.go: the thinking capability is checked before the tools capability
    ({"model": "gemma3:4b", "think": True, "tools": [READ]}, 400, "does not support thinking"),
])
def test_the_scripted_ollama_answers_option_and_think_errors_as_ollama_does(body, status, words):
    with OllamaServer(script=["never sent"], models={"qwen3:8b": fake_ollama.HEALTHY_MODEL,
                                                     **fake_ollama.PERSONALITIES["no-tools"]["models"]}) as ollama:
        got, answer = chat_status(ollama, messages=[{"role": "user", "content": "hi"}], **body)
    assert got == status and words in answer["error"] and ollama.replies_sent == 0


def test_the_scripted_ollama_takes_what_ollama_takes(ollama):
    scripted(ollama, "one", "two")
    # Roles are lowercased, not validated (api/types.go Message.UnmarshalJSON); a float num_ctx is an int.
    assert chat_status(ollama, messages=[{"role": "USER", "content": "hi"}], options={"num_ctx": 4096.0})[0] == 200
    assert chat_status(ollama, messages=[{"role": "user", "content": "hi"}], think="medium")[0] == 200
    # An empty messages list loads the model (routes.go ChatHandler) and takes no reply.
    status, loaded = chat_status(ollama, messages=[])
    assert status == 200 and loaded["done"] is True and loaded["done_reason"] == "load"
    assert ollama.replies_sent == 2 and ollama.rejected == []


def test_thinking_is_on_by_default_for_a_thinking_model_and_off_when_asked(ollama):
    scripted(ollama, {"reasoning": "hmm", "content": "a"}, {"reasoning": "hmm", "content": "b"})
    assert chat_status(ollama, messages=[{"role": "user", "content": "hi"}])[1]["message"]["thinking"] == "hmm"
    assert "thinking" not in chat_status(ollama, messages=[{"role": "user", "content": "hi"}], think=False)[1]["message"]


def test_the_native_route_counts_an_image_as_the_v1_route_does(ollama):
    picture = split_png("red", "blue")                       # 256 x 256: 256 + 65536/784 = 339 image tokens
    encoded = base64.b64encode(picture).decode()
    scripted(ollama, "red and blue", "red and blue")
    _, native = chat_status(ollama, messages=[{"role": "user", "content": "look", "images": [encoded]}])
    text = [{"role": "user", "content": [{"type": "text", "text": "look"},
                                         {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}]}]
    v1 = requests.post(ollama.base_url + "/chat/completions", json={"model": "qwen3:8b", "messages": text}).json()
    assert abs(native["prompt_eval_count"] - v1["usage"]["prompt_tokens"]) < 30      # not 87,000 (base64 / 4)
    assert native["prompt_eval_count"] < 500


def test_the_scripted_ollama_cuts_the_oldest_messages_unless_told_truncate_false(ollama):
    scripted(ollama, "seen", "never sent")
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "the task " * 400},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and now?"}]
    status, answer = chat_status(ollama, messages=messages, options={"num_ctx": 200})
    assert status == 200 and ollama.truncated == [(0, 1)]                # prompt.go: the task dropped, system kept
    assert answer["prompt_eval_count"] <= 200
    status, answer = chat_status(ollama, messages=messages, options={"num_ctx": 200}, truncate=False)
    assert status == 400 and "exceed_context_size_error" in answer["error"] and '"n_ctx": 200' in answer["error"]


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_run_cuts_and_retries_when_ollama_says_the_prompt_is_past_num_ctx(tmp_path, stream):
    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text(str(i) * 3000)
    script = [calls(tool_call("read_file", path=f"f{i}.txt")) for i in range(4)] + ["done"]
    with OllamaServer(script=script) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--context-window", "3000", "--no-scissors",
                           stream, "go")
    assert result.returncode == 0, result.stderr
    overflows = [r for r in server.rejected if "truncate false" in r[2]]
    assert overflows and server.truncated == []                           # an error, never a silent cut
    assert not {index + 1 for index, *_ in overflows} & {index for index, *_ in overflows}   # each retry fitted
    retry = server.requests[overflows[0][0] + 1]["messages"]
    assert retry[3]["content"].startswith('[cut by the harness: read_file("f0.txt")')
    assert "[context] the server says the prompt does not fit its context; cut" in result.stderr


def test_the_scripted_ollama_describes_its_models(ollama):
    shown = requests.post(ollama.root_url + "/api/show", json={"model": "qwen3:8b"}).json()
    assert shown["capabilities"] == ["completion", "tools", "thinking"]
    assert shown["model_info"]["qwen3.context_length"] == 40960
    assert shown["model_info"]["qwen3.attention.head_count_kv"] == 8      # the shape: KV cache arithmetic
    assert [m["name"] for m in requests.get(ollama.root_url + "/api/tags").json()["models"]] == ["qwen3:8b"]
    assert requests.post(ollama.root_url + "/api/show", json={"model": "nope"}).status_code == 404


# --- choosing the dialect and the window ------------------------------------------------------------

def test_auto_asks_the_host_once_and_only_a_plain_host_or_v1(ollama):
    assert pick_api("auto", ollama.base_url) == "ollama"
    assert pick_api("auto", ollama.root_url) == "ollama"
    assert pick_api("openai", ollama.base_url) == "openai"
    with ScriptedServer(script=[]) as other:                      # an OpenAI-style server: /api/version is a 404
        assert pick_api("auto", other.base_url) == "openai"
    assert pick_api("auto", "http://127.0.0.1:9/v1") == "openai"  # nothing listening: the door will say so
    assert not could_be_ollama("https://example.com/openai/v1") and not could_be_ollama("ftp://h/v1")
    assert host_root("http://h:11434/v1/") == "http://h:11434"


def test_the_default_window_is_the_models_own_length_capped(ollama):
    assert default_window(ollama.base_url, "qwen3:8b", 8192) == min(40960, OLLAMA_WINDOW_CAP)
    assert default_window(ollama.base_url, "nope", 8192) == 8192


# --- tinyharness run ----------------------------------------------------------------------------

def test_run_speaks_native_to_ollama_with_the_models_window(tmp_path):
    (tmp_path / "a.md").write_text("alpha\n")
    with OllamaServer(script=[calls(tool_call("read_file", path="a.md")), "It says alpha."]) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--think", "read a.md")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "It says alpha."
    first, second = server.requests
    # The default num_ctx is the model's length capped at 8192 (the user's OLLAMA_CONTEXT_LENGTH-sized
    # default, not a 32k KV cache), and past it Ollama must say so: truncate false.
    assert first["options"]["num_ctx"] == 8192 == min(40960, OLLAMA_WINDOW_CAP) and first["think"] is True
    assert first["truncate"] is False and first["shift"] is False
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"] == {"name": "read_file", "arguments": {"path": "a.md"}}
    assert re.fullmatch(r"call_[a-z0-9]{8}", call["id"])              # Ollama's own id, kept and sent back
    assert second["messages"][-1] == {"role": "tool", "content": second["messages"][-1]["content"],
                                      "tool_name": "read_file", "tool_call_id": call["id"]}
    assert "alpha" in second["messages"][-1]["content"] and server.rejected == []
    assert stats_line(result.stderr)["tool_calls"] == "1"


def test_run_with_a_window_and_streaming_sends_that_num_ctx(tmp_path):
    with OllamaServer(script=[calls(tool_call("list_dir", path=".")), "Empty."]) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--context-window", "6000", "--stream", "list")
    assert result.returncode == 0, result.stderr
    assert [r["options"]["num_ctx"] for r in server.requests] == [6000, 6000]
    assert all(r["stream"] is True for r in server.requests) and server.rejected == []


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_a_reply_ollama_cut_at_num_predict_is_named_as_our_cap(tmp_path, stream):
    """Ollama's done_reason "length" with eval_count at num_predict: our --max-reply-tokens cut it."""
    cut = {"content": "I will wr", "finish_reason": "length"}
    with OllamaServer(script=[cut, "Done."]) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--max-reply-tokens", "300", stream, "go")
    assert result.returncode == 0, result.stderr
    assert [r["options"]["num_predict"] for r in server.requests] == [300, 300]
    assert "  [harness] the reply was cut at max_tokens=300: none of it was used" in result.stdout.splitlines()
    assert server.requests[1]["messages"][-1]["content"].startswith(
        "[harness] Your last reply was cut off at the length limit (max_tokens=300)")


def test_run_with_api_openai_keeps_talking_v1_to_ollama(tmp_path):
    with OllamaServer(script=["Hello."]) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--api", "openai", "--think", "hi")
    assert result.returncode == 0, result.stderr
    assert "options" not in server.requests[0] and "messages" in server.requests[0]
    assert "--think/--no-think only work with Ollama's native API" in result.stderr


def test_api_ollama_against_another_server_says_so(tmp_path):
    with ScriptedServer(script=[]) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--api", "ollama", "hi")
    assert result.returncode == 1 and "Is it an Ollama server?" in result.stderr and "--api openai" in result.stderr
    assert stats_line(result.stderr)["prompt_tokens"] == "?"     # no answer, so no count: not a measured 0


def test_run_names_the_pull_command_for_a_missing_model(tmp_path):
    with OllamaServer(personality="no-model") as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--model", "qwen3:8b", "hi")
    assert result.returncode == 1
    assert "`ollama pull qwen3:8b`" in result.stderr and "Traceback" not in result.stderr


def test_fake_server_plays_ollama_from_the_command_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tinyharness", "fake-server", "--ollama", "no-tools"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("Scripted Ollama (no-tools: gemma3:4b) on http://127.0.0.1:"), line
        root = line.split(" on ", 1)[1].split()[0]
        assert requests.get(root + "/api/version", timeout=10).json() == {"version": "0.12.10"}
        answer = requests.post(root + "/api/chat", json={"model": "gemma3:4b", "messages": [], "tools": [READ]}, timeout=10)
        assert answer.status_code == 400 and "does not support tools" in answer.json()["error"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_wrong_api_in_the_environment_is_a_usage_error(tmp_path):
    result = run_stage(FINAL, tmp_path, "hi", env={"TINYHARNESS_API": "ollamaa"})
    assert result.returncode == 2 and "must be one of auto, openai, ollama" in result.stderr


def test_run_sends_an_attached_image_as_bare_base64(tmp_path):
    (tmp_path / "red.png").write_bytes(PNG)
    with OllamaServer(script=["Red."]) as server:
        result = run_stage(FINAL, tmp_path, "--base-url", server.base_url, "--image", "red.png", "What colour?")
    assert result.returncode == 0, result.stderr
    user = server.requests[0]["messages"][1]
    assert user["images"] == [PNG_B64] and user["content"].startswith("What colour?")
    assert server.rejected == []
