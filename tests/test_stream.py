"""Streaming (tinyharness only): the answer arrives as server-sent events and is put back together.

What a streaming client must survive: tool-call arguments cut anywhere (inside a key, inside a
\\u escape), several calls all at index 0 told apart by their ids (Ollama), whole calls in one
chunk, arguments as an object, an error event inside a 200 stream (llama.cpp), a stream cut
before [DONE], reasoning that must never become the answer, and <think> blocks in the content.
"""
import json
import socket
import threading
import time

import pytest

from tests.ladder import FINAL, ROOT, load_json, run_stage, stats_line
from tinyharness.llm import Client, LLMError
from tinyharness.testing import ScriptedServer

USER = [{"role": "user", "content": "Go."}]
# Quotes, backslashes, newlines, accents, CJK and an emoji (a surrogate pair once escaped): the
# server sends them as \u escapes, so small fragments cut escapes and keys in the middle.
TRICKY = {"path": "notes/caf\u00e9 \"final\".md", "content": "line 1\nline\t2 \\ back \u4e2d\u6587 \U0001f600 </think>"}
OTHER = {"path": "notes"}


def two_calls(**extra):
    return {"content": "", "tool_calls": [{"name": "write_file", "arguments": TRICKY},
                                          {"name": "list_dir", "arguments": OTHER}], **extra}


def streamed_chat(reply_or_script, fragment_size=7, **client_args):
    """One streaming Client.chat against the scripted server; returns (message, usage, seen, server)."""
    script = reply_or_script if isinstance(reply_or_script, list) else [reply_or_script]
    seen = {"text": [], "reasoning": []}
    with ScriptedServer(script=script, fragment_size=fragment_size) as server:
        client = Client(server.base_url, stream=True, **client_args)
        message, usage, _ = client.chat(USER, on_text=seen["text"].append, on_reasoning=seen["reasoning"].append)
    return message, usage, seen, server


def chat_error(reply, **client_args):
    with ScriptedServer(script=[reply]) as server:
        with pytest.raises(LLMError) as caught:
            Client(server.base_url, stream=True, **client_args).chat(USER)
    return str(caught.value), server


def arguments(message):
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


def sse(*events):
    """A hand-written SSE body, for wire shapes the scripted server does not produce itself."""
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)


def chunk(delta, finish=None):
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# --- Client.chat, function level ------------------------------------------------------------------

@pytest.mark.parametrize("fragment_size", [1, 2, 3])
def test_fragments_cut_anywhere_are_put_back_together(fragment_size):
    message, _, seen, server = streamed_chat(two_calls(content="I will write it."), fragment_size)
    assert arguments(message) == [("call_1", "write_file", TRICKY), ("call_2", "list_dir", OTHER)]
    assert message["content"] == "I will write it." == "".join(seen["text"])
    assert len(seen["text"]) > 3                          # it really arrived in pieces
    assert message["role"] == "assistant" and all(c["type"] == "function" for c in message["tool_calls"])
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


def test_non_streaming_client_sends_no_stream_flag():
    with ScriptedServer(script=[two_calls()]) as server:
        message, _, _ = Client(server.base_url).chat(USER)
    assert "stream" not in server.requests[0] and "stream_options" not in server.requests[0]
    assert arguments(message)[0][2] == TRICKY


def test_index_zero_calls_are_told_apart_by_their_ids():
    reply = two_calls(index_zero=True)
    reply["tool_calls"].append({"name": "read_file", "arguments": {"path": "a.md"}})
    message, _, _, _ = streamed_chat(reply, fragment_size=2)
    assert arguments(message) == [("call_1", "write_file", TRICKY), ("call_2", "list_dir", OTHER),
                                  ("call_3", "read_file", {"path": "a.md"})]


@pytest.mark.parametrize("index_zero", [False, True])
def test_whole_tool_calls_in_one_chunk_each(index_zero):
    message, _, _, _ = streamed_chat(two_calls(whole_tool_calls=True, index_zero=index_zero))
    assert arguments(message) == [("call_1", "write_file", TRICKY), ("call_2", "list_dir", OTHER)]


def test_arguments_as_an_object_and_id_less_fragments():
    body = sse(chunk({"role": "assistant", "content": ""}),
               chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "list_dir", "arguments": {"path": "."}}}]}),
               chunk({"tool_calls": [{"index": 0, "id": "b", "type": "function",
                                      "function": {"name": "read_file", "arguments": '{"pa'}}]}),
               chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "x.md"}'}}]}),
               chunk({"tool_calls": [{"index": 1, "id": "c", "function": {"name": "list_dir"}}]}),
               chunk({}, "tool_calls"), "[DONE]")
    message, _, _, _ = streamed_chat({"raw": body})
    assert arguments(message) == [("a", "list_dir", {"path": "."}), ("b", "read_file", {"path": "x.md"}),
                                  ("c", "list_dir", {})]


def test_error_event_inside_a_200_stream_is_an_llm_error():
    text = []
    with ScriptedServer(script=[{"content": "Partial answer", "stream_error": "the request exceeds the "
                                 "available context size"}]) as server:
        with pytest.raises(LLMError) as caught:
            Client(server.base_url, stream=True).chat(USER, on_text=text.append)
    assert "the request exceeds the available context size" in str(caught.value)
    assert "[DONE]" not in str(caught.value) and server.base_url in str(caught.value)
    assert "".join(text) == "Partial"                    # what came before the error was shown


@pytest.mark.parametrize("body", [
    'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\n\n'
    'error: {"code": 400, "message": "context size exceeded (old llama.cpp)", "type": "invalid_request_error"}\n\n'
    'data: [DONE]\n\n',
    'event: error\ndata: {"message": "context size exceeded (event: error)"}\n\n',
], ids=["error-field", "event-error"])
def test_other_spellings_of_a_stream_error(body):
    message, _ = chat_error({"raw": body})
    assert "context size exceeded" in message


@pytest.mark.parametrize("reply", [
    {"content": "word " * 20, "drop": "mid-stream"},
    {"content": "Hello", "drop": "mid-body"},
    {"raw": sse(chunk({"content": "Hello"}), chunk({}, "stop"))},                 # no [DONE]
    {"raw": sse(chunk({"content": "Hello"}), "[DONE]")},                         # no finish_reason
], ids=["drop-mid-stream", "drop-mid-body", "no-done", "no-finish-reason"])
def test_a_stream_cut_short_is_an_llm_error(reply):
    message, _ = chat_error(reply)
    assert "the stream broke" in message


def test_reasoning_is_shown_apart_and_kept_on_the_message():
    reply = {"content": "The budget is 300 KM.", "reasoning": "The user wants the budget. \u00e9"}
    message, _, seen, _ = streamed_chat(reply, fragment_size=3)
    assert message["content"] == "The budget is 300 KM." == "".join(seen["text"])
    assert message["reasoning"] == "The user wants the budget. \u00e9" == "".join(seen["reasoning"])
    assert "wants" not in message["content"]


@pytest.mark.parametrize("field", ["reasoning_content", "thinking"])
def test_reasoning_keeps_the_field_name_the_server_used(field):
    body = sse(chunk({field: "Let me think."}), chunk({field: " Done."}), chunk({"content": "Answer."}),
               chunk({}, "stop"), "[DONE]")
    message, _, seen, _ = streamed_chat({"raw": body})
    assert message == {"role": "assistant", "content": "Answer.", field: "Let me think. Done."}
    assert seen["text"] == ["Answer."]


def test_reasoning_sent_under_two_names_counts_once():
    """Recent vLLM writes the same reasoning as both `reasoning` and `reasoning_content`."""
    body = sse(chunk({"reasoning": "Hmm.", "reasoning_content": "Hmm."}), chunk({"content": "Ok."}),
               chunk({}, "stop"), "[DONE]")
    message, _, _, _ = streamed_chat({"raw": body})
    assert message == {"role": "assistant", "content": "Ok.", "reasoning": "Hmm."}


@pytest.mark.parametrize("fragment_size", [1, 4, 100])
def test_think_blocks_are_taken_out_of_streamed_content(fragment_size):
    reply = {"content": "<think>Is it 300? Yes.</think>\n\nIt is 300 KM. <b>bold</b> a<thin"}
    message, _, seen, _ = streamed_chat(reply, fragment_size)
    assert message["content"] == "It is 300 KM. <b>bold</b> a<thin" == "".join(seen["text"])
    assert message["reasoning"] == "Is it 300? Yes." == "".join(seen["reasoning"])


def test_an_unclosed_think_block_is_all_reasoning():
    message, _, seen, _ = streamed_chat({"content": "<think>cut off by the length limit", "finish_reason": "length"})
    assert message["content"] == "" and seen["text"] == []
    assert message["reasoning"] == "cut off by the length limit"


def test_think_blocks_are_taken_out_without_streaming_too():
    with ScriptedServer(script=[{"content": "<think>hidden</think>\nShown.", "reasoning": "Field."}]) as server:
        message, _, _ = Client(server.base_url).chat(USER)
    assert message["content"] == "Shown."
    assert message["reasoning"] == "Field.\nhidden"


def test_usage_comes_from_the_last_chunk():
    usage = {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168}
    _, got, _, _ = streamed_chat({"content": "hi", "usage": usage})
    assert got == usage


def test_a_server_that_ignores_stream_true_still_works():
    whole = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Whole answer."},
                          "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    message, usage, seen, _ = streamed_chat({"raw": json.dumps(whole)})
    assert message["content"] == "Whole answer." and seen["text"] == ["Whole answer."]
    assert usage["prompt_tokens"] == 3


def test_http_errors_read_the_same_when_streaming():
    message, server = chat_error({"status": 404, "body": {"error": {"message": 'model "qwen9:1b" not found'}}},
                                 model="qwen9:1b")
    assert "ollama pull qwen9:1b" in message and "HTTP 404" in message


def test_a_silent_server_still_times_out():
    message, _ = chat_error({"content": "late", "delay": 0.6}, timeout=0.2)
    assert "did not answer within 0.2 s" in message


def test_a_server_that_goes_silent_mid_stream_times_out():
    """The read timeout applies to every read of the stream, not only to the wait for the headers."""
    listener, release = socket.create_server(("127.0.0.1", 0)), threading.Event()

    def answer_then_hang():                     # a chunked stream, as Ollama and llama.cpp send it
        conn, _ = listener.accept()
        conn.recv(65536)
        data = json.dumps(chunk({"content": "Hel"})).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + b"%x\r\ndata: %s\n\n\r\n" % (len(data) + 8, data))
        release.wait(5)                         # silent, until the test is over
        conn.close()

    thread = threading.Thread(target=answer_then_hang, daemon=True)
    thread.start()
    text = []
    with pytest.raises(LLMError) as caught:
        Client(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", stream=True, timeout=0.3).chat(USER, on_text=text.append)
    assert "stopped sending its streamed answer for 0.3 s" in str(caught.value)
    assert text == ["Hel"]                       # the first piece was shown before the server went quiet
    release.set()
    thread.join()
    listener.close()


def test_garbage_in_the_stream_is_an_llm_error():
    message, _ = chat_error({"raw": "data: {not json\n\n"})
    assert "not a JSON object" in message


# --- The real CLI -------------------------------------------------------------------------------

def run(workspace, server, *args):
    return run_stage(FINAL, workspace, "--base-url", server.base_url, *args, approve=True)


def test_notes_task_streams_end_to_end(notes_workspace):
    script = load_json(ROOT / "examples" / "notes.script.json")
    with ScriptedServer(script=script, fragment_size=2) as server:
        result = run(notes_workspace, server, "--stream", "Find the testing budget in my notes and save it to budget.md.")
    assert result.returncode == 0, result.stderr
    assert "300 KM" in (notes_workspace / "budget.md").read_text(encoding="utf-8")
    assert [r["stream"] for r in server.requests] == [True] * 5
    lines = result.stdout.splitlines()
    assert sum(line.startswith("  [tool] ") for line in lines) == 4
    answer = script[-1]["content"]
    assert lines[-1] == answer and result.stdout.count(answer) == 1   # streamed once, not printed again
    assert stats_line(result.stderr)["turns"] == "5" and stats_line(result.stderr)["tool_calls"] == "4"


def test_without_a_terminal_the_default_is_not_to_stream(workspace):
    with ScriptedServer(script=["one", "two"]) as server:
        default = run(workspace, server, "x")
        no_stream = run(workspace, server, "--no-stream", "x")
    assert default.returncode == no_stream.returncode == 0
    assert default.stdout.strip() == "one" and no_stream.stdout.strip() == "two"
    assert all("stream" not in r for r in server.requests)


def test_streamed_reasoning_is_hidden_in_a_pipe_and_sent_back(workspace):
    script = [{"reasoning": "SECRET-PLAN: list first.", "content": "<think>THINK-TAG</think>Looking.",
               "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
              {"reasoning": "SECRET-DONE", "content": "Nothing here."}]
    with ScriptedServer(script=script, fragment_size=3) as server:
        result = run(workspace, server, "--stream", "x")
    assert result.returncode == 0, result.stderr
    assert "SECRET" not in result.stdout and "THINK-TAG" not in result.stdout
    assert result.stdout.splitlines()[-1] == "Nothing here." and result.stdout.count("Nothing here.") == 1
    assert "Looking." in result.stdout
    sent_back = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert sent_back[0]["reasoning"] == "SECRET-PLAN: list first.THINK-TAG"
    assert sent_back[0]["content"] == "Looking."


def test_streamed_usage_is_summed(workspace):
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
               "usage": {"prompt_tokens": 100, "completion_tokens": 10}},
              {"content": "done", "usage": {"prompt_tokens": 150, "completion_tokens": 5}}]
    with ScriptedServer(script=script) as server:
        result = run(workspace, server, "--stream", "x")
    stats = stats_line(result.stderr)
    assert (stats["prompt_tokens"], stats["completion_tokens"]) == ("250", "15")


@pytest.mark.parametrize("reply, needle", [
    ({"content": "Partial", "stream_error": "the request exceeds the available context size"},
     "the request exceeds the available context size"),
    ({"content": "word " * 20, "drop": "mid-stream"}, "the stream broke"),
], ids=["error-event", "drop-mid-stream"])
def test_stream_failures_exit_1_with_a_clear_message(workspace, reply, needle):
    with ScriptedServer(script=[reply]) as server:
        result = run(workspace, server, "--stream", "x")
    assert result.returncode == 1, result
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert "[stats] turns=0" in result.stderr


# --- Wire shapes of real servers (each seen in the field) ----------------------------------------

def test_whole_calls_without_an_index_ollama():
    message, _, _, _ = streamed_chat(two_calls(no_index=True))
    assert arguments(message) == [("call_1", "write_file", TRICKY), ("call_2", "list_dir", OTHER)]


def test_whole_calls_without_index_or_id_are_still_two_calls():
    body = sse(chunk({"tool_calls": [{"function": {"name": "list_dir", "arguments": '{"path": "a"}'}}]}),
               chunk({"tool_calls": [{"function": {"name": "list_dir", "arguments": '{"path": "b"}'}}]}),
               chunk({}, "tool_calls"), "[DONE]")
    message, _, _, _ = streamed_chat({"raw": body})
    assert arguments(message) == [("call_1", "list_dir", {"path": "a"}), ("call_2", "list_dir", {"path": "b"})]


def test_repeated_index_id_and_name_in_every_fragment_llama_cpp_python():
    message, _, _, _ = streamed_chat(two_calls(repeat_fragments=True), fragment_size=3)
    assert arguments(message) == [("call_1", "write_file", TRICKY), ("call_2", "list_dir", OTHER)]


def test_calls_only_in_the_final_chunk_and_finish_reason_stop():
    final = {"choices": [{"index": 0, "finish_reason": "stop", "delta": {"tool_calls": [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}]}}]}
    message, _, _, _ = streamed_chat({"raw": sse(chunk({"content": "Looking."}), final, "[DONE]")})
    assert arguments(message) == [("a", "list_dir", {"path": "."})]
    assert message["content"] == "Looking."


def test_the_finish_reason_is_returned_as_sent():
    with ScriptedServer(script=[two_calls(finish_reason="stop")]) as server:
        message, _, reason = Client(server.base_url, stream=True).chat(USER)
    assert reason == "stop" and len(message["tool_calls"]) == 2   # the calls count, whatever the reason says


def test_explicit_nulls_in_every_field_of_a_fragment():
    body = sse(chunk({"role": "assistant", "content": None, "reasoning": None, "tool_calls": None}),
               chunk({"content": None, "tool_calls": [{"index": None, "id": "a", "type": None,
                                                       "function": {"name": "read_file", "arguments": None}}]}),
               chunk({"content": None, "tool_calls": [{"index": None, "id": None,
                                                       "function": {"name": None, "arguments": '{"path": "x"}'}}]}),
               {"choices": [{"index": None, "delta": None, "finish_reason": None}]},
               chunk({}, "tool_calls"), {"choices": [], "usage": None}, "[DONE]")
    message, usage, _, _ = streamed_chat({"raw": body})
    assert arguments(message) == [("a", "read_file", {"path": "x"})]
    assert message["content"] == "" and usage == {}


def test_odd_fragments_become_problems_not_exceptions():
    body = sse(chunk({"tool_calls": {"index": 0, "id": "a", "function": {"name": "list_dir", "arguments": {"path": "."}}}}),
               chunk({"tool_calls": ["not a call"]}),
               chunk({"tool_calls": [{"index": 2, "id": "c", "function": "list_dir"}]}),
               chunk({"tool_calls": [{"index": 3, "id": "d", "function": {"name": 7, "arguments": 5}}]}),
               chunk({"content": 12}), chunk({}, "tool_calls"), "[DONE]")
    message, _, _, _ = streamed_chat({"raw": body})
    problems = message.pop("_problems")
    assert [c["id"] for c in message["tool_calls"]] == ["a", "call_2", "c", "d"]
    assert arguments(message)[0] == ("a", "list_dir", {"path": "."})
    assert set(problems) == {"call_2", "c", "d"} and message["content"] == "12"


def test_no_usage_chunk_means_no_usage():
    with ScriptedServer(script=["hi"], stream_usage=False) as server:
        message, usage, reason = Client(server.base_url, stream=True).chat(USER)
    assert message["content"] == "hi" and usage == {} and reason == "stop"


@pytest.mark.parametrize("body", ["", "\n\n", ": keep-alive\n\n", "data: [DONE]\n\n"],
                         ids=["nothing", "blank-lines", "only-a-comment", "only-done"])
def test_an_empty_200_stream_is_a_context_overflow(body):
    from tinyharness.llm import ContextOverflow
    with ScriptedServer(script=[{"raw": body}]) as server:
        with pytest.raises(ContextOverflow) as caught:
            Client(server.base_url, stream=True).chat(USER)
    assert "empty stream" in str(caught.value) and "most likely a context overflow" in str(caught.value)
    assert "--context-window" in str(caught.value) and "num_ctx" in str(caught.value)


@pytest.mark.parametrize("body", ["not json", "<!doctype html>\n<html><body>Open WebUI</body></html>\n"])
def test_a_200_body_that_is_no_event_stream_says_so_and_is_no_overflow(body):
    # A web page where the API should be (a wrong --base-url) is not "most likely a context overflow".
    from tinyharness.llm import ContextOverflow
    with ScriptedServer(script=[{"raw": body}]) as server:
        with pytest.raises(LLMError) as caught:
            Client(server.base_url, stream=True).chat(USER)
    assert not isinstance(caught.value, ContextOverflow)
    assert "not a stream of server-sent events" in str(caught.value) and body.splitlines()[0] in str(caught.value)
    assert "--base-url" in str(caught.value)


def test_an_overflow_error_event_is_a_context_overflow():
    from tinyharness.llm import ContextOverflow
    error = {"error": {"code": 400, "message": "the request exceeds the available context size",
                       "type": "exceed_context_size_error", "n_prompt_tokens": 9100, "n_ctx": 8192}}
    with ScriptedServer(script=[{"raw": sse(chunk({"content": "Hi"}), error)}]) as server:
        with pytest.raises(ContextOverflow) as caught:
            Client(server.base_url, stream=True).chat(USER)
    assert (caught.value.prompt_tokens, caught.value.context_window) == (9100, 8192)


@pytest.mark.parametrize("stream", [False, True])
def test_a_llama_cpp_python_overflow_is_named_in_both_modes(stream):
    from tinyharness.llm import ContextOverflow
    with ScriptedServer(script=[], context_window=100) as server:
        with pytest.raises(ContextOverflow) as caught:
            Client(server.base_url, stream=stream).chat([{"role": "user", "content": "x" * 1000}])
    said = str(caught.value)
    assert "llama-cpp-python: --n_ctx" in said and ".." not in said     # not "completion.. What to do"
    # Unstreamed the server names both numbers; streamed it sends an empty stream, and nothing is made up.
    numbers = (caught.value.prompt_tokens, caught.value.context_window)
    assert numbers == ((260, 100) if not stream else (None, None)) and server.overflows == [0]


def read_request(conn):
    """The whole request (headers, then Content-Length bytes): closing with unread bytes resets the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next((line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0))
    while len(rest) < length:
        rest += conn.recv(65536)


def test_a_stream_that_runs_past_the_time_left_is_given_up():
    body = sse(*[chunk({"content": "word "}) for _ in range(3)], chunk({}, "stop"), "[DONE]")
    listener = socket.create_server(("127.0.0.1", 0))

    def slow_stream():                          # one piece every 0.2 s: no single read times out
        conn, _ = listener.accept()
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for event in body.split("\n\n"):
            try:
                conn.sendall(event.encode() + b"\n\n")
            except OSError:
                break
            time.sleep(0.2)
        conn.close()

    thread = threading.Thread(target=slow_stream, daemon=True)
    thread.start()
    with pytest.raises(LLMError) as caught:
        Client(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", stream=True).chat(USER, timeout=0.3)
    thread.join()
    listener.close()
    assert "did not finish its streamed answer within 0.3 s" in str(caught.value)


class Chunks:
    """A response whose body arrives in 512-byte pieces, as requests hands a chunked stream over."""

    def __init__(self, body):
        self.body = body

    def iter_content(self, size):
        return (self.body[i:i + size] for i in range(0, len(self.body), size))


def test_lines_are_cut_as_requests_cuts_them_and_a_30_mb_line_in_linear_time():
    from tinyharness.llm import stream_lines
    for body, lines in [(b"a\nb\r\n\r\nc", [b"a", b"b", b"", b"c"]), (b"data: x\n\n", [b"data: x", b""]), (b"", [])]:
        assert list(stream_lines(Chunks(body))) == lines
    huge = b'data: {"choices": [{"delta": {"content": "' + b"x" * 30_000_000 + b'"}}]}\n\n'
    started = time.monotonic()
    lines = list(stream_lines(Chunks(huge)))
    assert [len(line) for line in lines] == [len(huge) - 2, 0]
    assert time.monotonic() - started < 10  # requests' iter_lines re-joins the pending line per piece: minutes

