"""The scripted model server, checked over real HTTP: what it puts on the wire is what we assert."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.ladder import ctrl_c_as_on_a_terminal
from tinyharness.testing import ScriptedServer, load_script, main
from tinyharness.testing.replies import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
USER = {"role": "user", "content": "What is in notes/budget.txt?"}


def chat(srv, messages=(USER,), timeout=5, **extra):
    """POST one chat request; return the requests.Response."""
    body = {"model": "qwen3:8b", "messages": list(messages), **extra}
    return requests.post(srv.base_url + "/chat/completions", json=body, timeout=timeout)


def sse_events(text):
    """The `data:` payloads of an SSE body: dicts, plus the string "[DONE]"."""
    events = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def stream(srv, **extra):
    response = requests.post(srv.base_url + "/chat/completions", timeout=5,
                             json={"model": "qwen3:8b", "messages": [USER], "stream": True, **extra})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return sse_events(response.text)


def reassemble(events):
    """What a careful client does: key tool calls by index *and* id (fragments may lack the id)."""
    content, calls, order, last_id = "", {}, [], {}
    for event in events:
        if event == "[DONE]" or not event.get("choices"):
            continue
        delta = event["choices"][0]["delta"]
        content += delta.get("content") or ""
        for part in delta.get("tool_calls") or []:
            call_id = part.get("id") or last_id[part["index"]]
            last_id[part["index"]] = call_id
            if call_id not in calls:
                calls[call_id] = {"name": "", "arguments": "", "fragments": 0}
                order.append(call_id)
            function = part.get("function") or {}
            calls[call_id]["name"] += function.get("name") or ""
            if function.get("arguments"):
                calls[call_id]["arguments"] += function["arguments"]
                calls[call_id]["fragments"] += 1
    return content, [dict(calls[i], id=i) for i in order]


TWO_CALLS = {"tool_calls": [
    {"name": "read_file", "arguments": {"path": "notes/budget.txt", "note": "caf\u00e9 \u2013 300 KM"}},
    {"name": "list_files", "arguments": {"path": "notes"}},
]}


# --- Plain answers ----------------------------------------------------------------------------

def test_content_reply_has_the_openai_shape():
    with ScriptedServer(script=["Hello there."]) as srv:
        response = chat(srv, model="llama3.2:3b")
    assert response.status_code == 200
    answer = response.json()
    assert answer["id"] == "chatcmpl-1" and answer["object"] == "chat.completion"
    assert answer["model"] == "llama3.2:3b"              # echoes the request's model
    assert isinstance(answer["created"], int) and answer["system_fingerprint"] == "fp_scripted"
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there."}   # no tool_calls key
    assert choice["finish_reason"] == "stop"


def test_tool_calls_get_server_ids_and_json_string_arguments():
    script = [TWO_CALLS, {"tool_calls": [{"name": "x", "arguments": "{\"a\": 1}"},
                                         {"name": "y", "arguments": {}, "id": "mine"}]}]
    with ScriptedServer(script=script) as srv:
        first, second = chat(srv).json(), chat(srv).json()
    message = first["choices"][0]["message"]
    # like OpenAI, vLLM and llama.cpp: content null beside calls; like llama-cpp-python: the legacy copy
    assert message["content"] is None and first["choices"][0]["finish_reason"] == "tool_calls"
    assert message["function_call"] == message["tool_calls"][0]["function"]
    calls = message["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "call_2"]
    assert [c["index"] for c in calls] == [0, 1] and all(c["type"] == "function" for c in calls)
    assert isinstance(calls[0]["function"]["arguments"], str)
    assert json.loads(calls[0]["function"]["arguments"]) == TWO_CALLS["tool_calls"][0]["arguments"]
    calls = second["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_3", "mine"]      # counts across the server's life
    assert calls[0]["function"]["arguments"] == "{\"a\": 1}"   # a string goes out as-is


def test_reasoning_finish_reason_and_usage_overrides():
    usage = {"prompt_tokens": 4096, "completion_tokens": 1, "total_tokens": 4097}
    with ScriptedServer(script=[{"content": "cut", "reasoning": "hmm", "finish_reason": "length",
                                 "usage": usage}]) as srv:
        answer = chat(srv).json()
    assert answer["choices"][0]["message"]["reasoning"] == "hmm"
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"] == usage


def test_usage_estimates_prompt_and_completion_tokens():
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    with ScriptedServer(script=["The budget is 300 KM."]) as srv:
        usage = chat(srv, tools=tools).json()["usage"]
    prompt = json.dumps([USER], ensure_ascii=False) + json.dumps(tools, ensure_ascii=False)
    assert usage["prompt_tokens"] == estimate_tokens(prompt) == -(-len(prompt) // 4)
    assert usage["completion_tokens"] == estimate_tokens("The budget is 300 KM.") == 6
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}     # first request: cold cache


def test_cached_tokens_follow_the_common_prefix():
    system = {"role": "system", "content": "You are a careful agent. " * 20}
    first = [system, USER]
    extended = first + [{"role": "assistant", "content": "Let me look."}, {"role": "user", "content": "ok"}]
    changed = [{"role": "system", "content": "Today is Monday. " + system["content"]}] + extended[1:]
    with ScriptedServer(script=["a", "b", "c"]) as srv:
        cached = [chat(srv, messages)
                  .json()["usage"]["prompt_tokens_details"]["cached_tokens"]
                  for messages in (first, extended, changed)]
    text = json.dumps(first, ensure_ascii=False)
    # The second prompt repeats the first one's messages up to the closing "]" of the list.
    assert cached[0] == 0
    assert cached[1] == (len(text) - 1) // 4
    assert cached[2] < 10                        # an edit at the top throws the cache away


def test_every_request_is_recorded_in_order():
    with ScriptedServer(script=["one", "two"]) as srv:
        chat(srv, temperature=0.2)
        chat(srv, [USER, {"role": "assistant", "content": "one"}])
        assert len(srv.requests) == 2 and srv.replies_sent == 2
        assert srv.requests[0]["temperature"] == 0.2
        assert srv.requests[1]["messages"][-1] == {"role": "assistant", "content": "one"}


def test_headers_are_recorded_alongside_requests():
    with ScriptedServer(script=["ok"]) as srv:
        requests.post(srv.base_url + "/chat/completions", json={"messages": [USER]}, timeout=5,
                      headers={"authorization": "Bearer sekret"})
        assert len(srv.headers) == len(srv.requests) == 1
        assert srv.headers[0].get("Authorization") == "Bearer sekret"   # any spelling of the name


def test_policy_gets_the_body_and_the_index():
    seen = []

    def policy(body, index):
        seen.append((index, body["messages"][-1]["content"]))
        return f"reply {index}"

    with ScriptedServer(policy=policy) as srv:
        answers = [chat(srv).json()["choices"][0]["message"]["content"] for _ in range(3)]
    assert answers == ["reply 0", "reply 1", "reply 2"]
    assert seen == [(0, USER["content"]), (1, USER["content"]), (2, USER["content"])]


def test_models_route_and_unknown_routes():
    with ScriptedServer(model="gemma3:4b") as srv:
        models = requests.get(srv.base_url + "/models", timeout=5).json()
        missing = requests.post(srv.base_url + "/embeddings", json={}, timeout=5)
        broken = requests.post(srv.base_url + "/chat/completions", data="{not json", timeout=5)
        assert srv.requests == []                 # unparseable bodies are not recorded
    assert models == {"object": "list", "data": [{"id": "gemma3:4b", "object": "model",
                                                  "owned_by": "tinyharness"}]}
    assert missing.status_code == 404 and "error" in missing.json()
    assert broken.status_code == 400 and "error" in broken.json()


# --- Faults -----------------------------------------------------------------------------------

def test_exhausted_script_answers_500_with_a_clear_message():
    with ScriptedServer(script=["only one"]) as srv:
        chat(srv)
        response = chat(srv)
    assert response.status_code == 500
    assert response.json() == {"error": {
        "message": "scripted server: the script has no reply left (1 replies already sent)",
        "type": "api_error"}}


def test_status_fault_sends_the_given_body():
    body = {"error": {"message": "model \"x\" not found, try pulling it first", "type": "api_error",
                      "param": None, "code": None}}
    with ScriptedServer(script=[{"status": 404, "body": body}, {"status": 503}]) as srv:
        not_found, busy = chat(srv), chat(srv)
    assert not_found.status_code == 404 and not_found.json() == body
    assert busy.status_code == 503 and "error" in busy.json()


def test_delay_holds_the_answer_back():
    with ScriptedServer(script=[{"content": "slow", "delay": 0.2}]) as srv:
        started = time.monotonic()
        response = chat(srv)
        elapsed = time.monotonic() - started
    assert response.json()["choices"][0]["message"]["content"] == "slow"
    assert elapsed >= 0.2


def test_drop_before_closes_without_an_answer():
    with ScriptedServer(script=[{"drop": "before"}, "after"]) as srv:
        with pytest.raises(requests.ConnectionError):
            chat(srv)
        assert chat(srv).json()["choices"][0]["message"]["content"] == "after"   # server lives on


def test_drop_mid_body_breaks_the_read():
    with ScriptedServer(script=[{"content": "x" * 200, "drop": "mid-body"}]) as srv:
        with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.ConnectionError)):
            chat(srv).content


def test_raw_body_is_sent_verbatim():
    with ScriptedServer(script=[{"raw": "<html>not json"}, {"raw": "{\"foo\": 1}"},
                                {"raw": b"caf\xe9"}]) as srv:
        html, no_choices, latin1 = chat(srv), chat(srv), chat(srv)
    assert html.status_code == 200 and html.text == "<html>not json"
    assert no_choices.json() == {"foo": 1}
    assert latin1.content == b"caf\xe9"                  # bytes go out untouched (not UTF-8 here)


def test_malformed_arguments_are_not_json():
    with ScriptedServer(script=[dict(TWO_CALLS, malformed_arguments=True)]) as srv:
        calls = chat(srv).json()["choices"][0]["message"]["tool_calls"]
    for call in calls:
        with pytest.raises(ValueError):
            json.loads(call["function"]["arguments"])


def test_bad_replies_fail_early():
    with pytest.raises(ValueError, match="tool_call"):
        ScriptedServer(script=[{"tool_call": []}])       # typo for tool_calls
    with pytest.raises(ValueError, match="drop"):
        ScriptedServer(script=[{"drop": "sometimes"}])


def test_stop_hangs_up_on_keep_alive_clients():
    session = requests.Session()
    srv = ScriptedServer(script=["one", "two"]).start()
    url = srv.base_url + "/chat/completions"
    assert session.post(url, json={"messages": [USER]}, timeout=5).status_code == 200
    srv.stop()
    srv.stop()                                            # stopping twice is fine
    assert srv.base_url.endswith("/v1")                   # still there for failure messages
    with pytest.raises(requests.ConnectionError):
        session.post(url, json={"messages": [USER]}, timeout=5)
    session.close()


# --- Streaming --------------------------------------------------------------------------------

def test_stream_reassembles_content_and_tool_calls():
    reply = dict(TWO_CALLS, content="I will read the notes first.", reasoning="The user wants...")
    with ScriptedServer(script=[reply]) as srv:
        events = stream(srv)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == "chatcmpl-1" for e in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    reasoning = "".join(e["choices"][0]["delta"].get("reasoning", "") for e in chunks if e["choices"])
    assert reasoning == "The user wants..."
    content, calls = reassemble(events)
    assert content == "I will read the notes first."
    assert [(c["id"], c["name"]) for c in calls] == [("call_1", "read_file"), ("call_2", "list_files")]
    for call, scripted in zip(calls, TWO_CALLS["tool_calls"]):
        assert json.loads(call["arguments"]) == scripted["arguments"]
        assert call["fragments"] >= 2
    # The last choice chunk says why it stopped; then usage alone, with no choices.
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_stream_fragments_split_anywhere():
    with ScriptedServer(script=[{"tool_calls": [{"name": "w", "arguments": {"text": "\u00e9" * 5}}]}],
                        fragment_size=3) as srv:
        events = stream(srv)
    fragments = [p["function"]["arguments"] for e in events[:-1] if e["choices"]
                 for p in e["choices"][0]["delta"].get("tool_calls", []) if p["function"]["arguments"]]
    assert all(len(f) <= 3 for f in fragments)
    assert any("\\" in f and "\\u00e9" not in f for f in fragments)  # a \u escape cut in two
    assert json.loads("".join(fragments)) == {"text": "\u00e9" * 5}


def test_stream_index_zero_needs_ids_to_tell_calls_apart():
    with ScriptedServer(script=[dict(TWO_CALLS, index_zero=True)]) as srv:
        events = stream(srv)
    parts = [p for e in events[:-1] if e["choices"] for p in e["choices"][0]["delta"].get("tool_calls", [])]
    assert {p["index"] for p in parts} == {0}
    _, calls = reassemble(events)
    assert [c["name"] for c in calls] == ["read_file", "list_files"]
    assert json.loads(calls[1]["arguments"]) == {"path": "notes"}


def test_stream_whole_tool_calls_come_in_one_chunk_each():
    with ScriptedServer(script=[dict(TWO_CALLS, whole_tool_calls=True, index_zero=True)]) as srv:
        events = stream(srv)
    parts = [p for e in events[:-1] if e["choices"] for p in e["choices"][0]["delta"].get("tool_calls", [])]
    assert len(parts) == 2 and [p["id"] for p in parts] == ["call_1", "call_2"]
    assert json.loads(parts[0]["function"]["arguments"]) == TWO_CALLS["tool_calls"][0]["arguments"]
    assert [c["fragments"] for c in reassemble(events)[1]] == [1, 1]


def test_stream_error_event_inside_a_200_stream():
    message = "the request exceeds the available context size"
    with ScriptedServer(script=[{"content": "Partial answer here", "stream_error": message}]) as srv:
        events = stream(srv)
    assert "[DONE]" not in events
    assert events[-1] == {"error": {"message": message, "type": "server_error"}}
    assert reassemble(events)[0] == "Partial"               # one content chunk got out first


def test_stream_dropped_mid_stream_has_no_done():
    with ScriptedServer(script=[{"content": "word " * 20, "drop": "mid-stream"}]) as srv:
        events = stream(srv)
    assert "[DONE]" not in events and 0 < len(events)
    assert len(reassemble(events)[0]) < len("word " * 20)


def test_stream_usage_chunk_is_always_sent():
    with ScriptedServer(script=["hi"]) as srv:
        events = stream(srv)
    usage_chunks = [e for e in events[:-1] if e["choices"] == []]
    assert len(usage_chunks) == 1
    assert usage_chunks[0]["usage"]["prompt_tokens"] == estimate_tokens(
        json.dumps([USER], ensure_ascii=False) + "null")


# --- Script files and the command line --------------------------------------------------------

def test_load_script_reads_a_json_list(tmp_path):
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(["hi", {"content": "bye"}]), encoding="utf-8")
    assert load_script(path) == ["hi", {"content": "bye"}]
    path.write_text("{\"content\": \"not a list\"}", encoding="utf-8")
    with pytest.raises(ValueError, match="list"):
        load_script(path)


def test_cli_with_a_bad_script_returns_2(tmp_path, capsys):
    assert main(["--script", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("[\"unterminated", encoding="utf-8")
    assert main(["--script", str(broken)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_cli_serves_the_script_until_interrupted(tmp_path):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["from the command line"]), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "tinyharness.testing", "--script", str(script),
                             "--port", "0"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=ctrl_c_as_on_a_terminal)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # generous: a loaded machine starts Python slowly
        assert ready, "the server printed nothing within 60 s"
        line = proc.stdout.readline()
        match = re.fullmatch(r"Scripted model server on (http://127\.0\.0\.1:\d+/v1) replaying 1 replies\. "
                             r"Press Ctrl\+C to stop\.\n", line)
        assert match, line
        response = requests.post(match.group(1) + "/chat/completions", timeout=30,
                                 json={"model": "m", "messages": [USER]})
        assert response.json()["choices"][0]["message"]["content"] == "from the command line"
        proc.send_signal(signal.SIGINT)                      # what Ctrl+C does
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


# --- Ollama's silent cut: truncate=True ---------------------------------------------------------

def long_history(turns=6, size=2000):
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Task: the budget."}]
    for i in range(turns):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
                         {"id": f"call_{i + 1}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"call_{i + 1}", "content": f"file {i}: " + "x" * size}]
    return messages


def test_truncate_drops_the_oldest_messages_answers_200_and_reports_the_smaller_count():
    messages = long_history()
    whole = estimate_tokens(json.dumps(messages, ensure_ascii=False) + "null")
    seen = []
    with ScriptedServer(policy=lambda body, i: seen.append(body["messages"]) or "ok", context_window=2000,
                        truncate=True) as srv:
        response = chat(srv, messages)
    assert response.status_code == 200 and whole > 2000
    usage = response.json()["usage"]
    assert usage["prompt_tokens"] <= 2000 < whole                       # the smaller count, no error
    kept = seen[0]
    assert kept[0] == messages[0] and kept[-1] == messages[-1]          # the system prompt and the last message stay
    assert "Task: the budget." not in json.dumps(kept)                  # the task went first
    assert kept == [messages[0]] + messages[len(messages) - len(kept) + 1:]
    assert srv.truncated == [(0, len(messages) - len(kept))] and srv.requests[0]["messages"] == messages


def test_without_truncate_the_window_is_still_the_400_of_llama_cpp_python():
    with ScriptedServer(policy=lambda body, i: "ok", context_window=2000) as srv:
        response = chat(srv, long_history())
    assert response.status_code == 400 and "maximum context length is 2000" in response.text


def test_a_reaction_can_depend_on_what_the_prompt_still_holds():
    remembers = {"react": [{"if_prompt_contains": "Task: the budget.", "reply": "300 KM"},
                           {"reply": "what budget?"}]}
    with ScriptedServer([remembers, remembers], context_window=2000, truncate=True) as srv:
        first = chat(srv, long_history(turns=1)).json()["choices"][0]["message"]["content"]
        second = chat(srv, long_history()).json()["choices"][0]["message"]["content"]
    assert (first, second) == ("300 KM", "what budget?")
    with pytest.raises(ValueError, match="if_prompt_contains"):
        ScriptedServer([{"react": [{"if_prompt_contains": 3, "reply": "x"}]}])


def test_cli_truncate_needs_a_window(capsys):
    with pytest.raises(SystemExit):
        main(["--script", str(ROOT / "examples/notes.script.json"), "--truncate"])
    assert "--truncate needs --context-window" in capsys.readouterr().err
