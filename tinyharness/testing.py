"""A scripted OpenAI-compatible model server, for tests and for learning.

`ScriptedServer` is a real HTTP server on 127.0.0.1 that speaks the chat-completions format the way
Ollama's `/v1` shim does. Instead of a model, a *script* (a list of replies, used in order) or a
*policy* (a function `policy(request_body, index) -> reply`) decides what the "model" says. Every
request body (`srv.requests`) and its headers (`srv.headers`) are recorded, so a test can check
exactly what a harness sent:

    with ScriptedServer(script=["Hello!"]) as srv:
        run_my_agent(base_url=srv.base_url)          # "http://127.0.0.1:PORT/v1"
        assert srv.requests[0]["messages"][-1]["role"] == "user"
        assert srv.headers[0].get("Authorization") is None

A reply is a string (the assistant's text) or a dict:

    content, reasoning, tool_calls=[{"name", "arguments": dict | str, "id"?}],
    finish_reason, usage (False: none), malformed_arguments   - what the "model" says
    status + body, delay, drop ("before" | "mid-body" | "mid-stream"),
    raw (str or bytes, sent as a 200 body)              - faults of the serving layer
    stream_error, index_zero, whole_tool_calls, no_index,
    repeat_fragments                                    - faults/quirks of streaming only

Realistic by default. Like OpenAI, vLLM and llama.cpp, a reply with tool calls and no text says
`content: null` (not Ollama's ""), and like llama-cpp-python each call carries its `index` and
the message a legacy `function_call` copy of the first call: a harness that stores a reply as it
came and sends it back is caught (`ScriptedServer(null_content=False, legacy_fields=False)` plays
Ollama's politer shape). The server is also **strict**: every request is checked the way real
servers check it (see "Strict mode" below; each rule names its source) and a violation is answered
like the real server answers it, an HTTP 400 or 500 with a JSON error naming the rule, so a test
sees at once that a real server would have broken the run. `srv.rejected` lists them.
`strict=False` turns the checks off; `send_usage=False` plays a server that never reports usage,
`stream_usage=False` one that sends no usage chunk in a stream (llama-cpp-python).
`context_window=N` plays a server with an N-token window that overflows like llama-cpp-python: a
prompt of N tokens or more (the estimate below) is answered with a 400 that names both numbers
(`context_length_exceeded`) when unstreamed, and with an empty 200 event stream when streamed;
`srv.overflows` lists the indexes of those requests (they take no reply from the script). With
`announce_window=True` the server also says its window up front, as llama.cpp's `GET /props` does.

Tool-call ids are written by the server (`call_1`, `call_2`, ... over the server's life), not by
the script: in real deployments the serving layer assigns them, and the model never sees them
until the harness sends them back.

Token counts. Without a tokenizer we estimate tokens as characters/4, rounded up (a common rule
of thumb for English and JSON with BPE tokenizers). The *prompt text* of a request is
`json.dumps(messages) + json.dumps(tools)` (ensure_ascii=False, default separators; a request
without tools appends "null"). `prompt_tokens` is the estimate of that text.

Images. An `image_url` part with a base64 data URI does not count as its base64 text: vision
servers turn a picture into a few hundred tokens, not into thousands of characters/4. In the
prompt text the part is replaced by a stand-in of 4 characters per image token, starting with a
digest of the image (so the cache simulation notices a changed image); an image costs
`image_tokens(width, height)` = 256 + width*height/784 tokens (PNG; other formats 256). Requests
without image parts are counted exactly as before. `ScriptedServer(drop_images=True)` imitates
a server that silently ignores images (Ollama with gemma4 e2b/e4b): the request is recorded as
sent, but tokens and the policy see it without its image parts. `vision_policy()` plays a vision
model that names the colours of the left and right halves of a PNG; `make_png`, `tiny_png` and
`read_png_pixels` make and read the simple PNGs it understands.

Simulated prefix cache. llama.cpp and Ollama keep the KV cache of the previous request and only
recompute the prompt from the first token that changed. We imitate that:
`usage.prompt_tokens_details.cached_tokens` is the length, in characters, of the longest common
prefix between this prompt text and the previous request's, divided by 4 (0 for the first
request). A harness that only appends to its history keeps this high; one that rewrites early
messages (a timestamp in the system prompt, a summary at the top) drops it to near zero. Tests and
benchmarks read it to measure how much a context policy breaks the cache.

Run it from the command line to point a harness at canned replies:

    python -m tinyharness.testing --script replies.json --port 8080
"""
from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import socket
import socketserver
import struct
import sys
import threading
import time
import traceback
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["ScriptedServer", "estimate_tokens", "load_script", "main", "request_problems",
           "image_tokens", "make_png", "tiny_png", "split_png", "read_png_pixels", "colour_name",
           "vision_policy", "example_images"]

REPLY_KEYS = frozenset({
    "content", "reasoning", "tool_calls", "finish_reason", "usage", "malformed_arguments",
    "status", "body", "delay", "drop", "raw",
    "stream_error", "index_zero", "whole_tool_calls", "no_index", "repeat_fragments",
})
DROP_MODES = ("before", "mid-body", "mid-stream")


# --- Pure helpers: tokens, prompt text, replies ---------------------------------------------

def estimate_tokens(text: str) -> int:
    """Rough token count: characters/4, rounded up. Good enough for budgets and tests."""
    return (len(text) + 3) // 4


def prompt_text(body: dict) -> str:
    """The text whose tokens we count: the messages, then the tool schemas, as JSON.
    Image parts count as image tokens, not as base64 text (see the "Images" section below)."""
    return (json.dumps(with_image_stand_ins(body.get("messages")), ensure_ascii=False)
            + json.dumps(body.get("tools"), ensure_ascii=False))


def common_prefix_length(a: str, b: str) -> int:
    """How many leading characters two strings share (what a KV cache could reuse)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def normalise_reply(reply) -> dict:
    """Turn a reply into a dict and check it, so a typo fails loudly instead of being ignored."""
    if isinstance(reply, str):
        return {"content": reply}
    if not isinstance(reply, dict):
        raise ValueError(f"a reply must be a string or an object, not {type(reply).__name__}")
    unknown = sorted(set(reply) - REPLY_KEYS)
    if unknown:
        raise ValueError(f"unknown reply key(s) {unknown}; known keys: {sorted(REPLY_KEYS)}")
    if reply.get("drop") not in (None, *DROP_MODES):
        raise ValueError(f"drop must be one of {list(DROP_MODES)}, not {reply['drop']!r}")
    for call in reply.get("tool_calls") or []:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"each tool call needs a 'name' string: {call!r}")
    return dict(reply)


def load_script(path) -> list:
    """Read a script file: a JSON list of replies. Raises OSError or ValueError with a reason."""
    with open(path, encoding="utf-8") as f:
        try:
            script = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(script, list):
        raise ValueError(f"{path}: a script must be a JSON list of replies")
    for i, reply in enumerate(script):
        try:
            normalise_reply(reply)
        except ValueError as e:
            raise ValueError(f"{path}: reply {i}: {e}") from None
    return script


def error_body(message: str, kind: str = "api_error") -> dict:
    """An OpenAI-style error object, the shape clients look for in a failed answer."""
    return {"error": {"message": message, "type": kind}}


def build_tool_calls(reply: dict, new_call_id) -> list:
    """The OpenAI `tool_calls` list. Arguments always travel as a JSON *string*."""
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):      # a str is sent as-is: that is how tests send bad JSON
            arguments = json.dumps(arguments)
        if reply.get("malformed_arguments"):
            arguments = arguments[: len(arguments) // 2]   # cut in half: never valid JSON
        calls.append({"id": call.get("id") or new_call_id(), "index": i, "type": "function",
                      "function": {"name": call["name"], "arguments": arguments}})
    return calls


def build_usage(reply: dict, calls: list, prompt: str, cached_chars: int) -> dict:
    """The usage block: estimated counts, unless the reply overrides it (False: no usage at all)."""
    if reply.get("usage") is False:
        return None
    if reply.get("usage") is not None:
        return reply["usage"]
    said = (reply.get("content") or "") + (reply.get("reasoning") or "")
    said += "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls)
    p, c = estimate_tokens(prompt), estimate_tokens(said)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": cached_chars // 4}}


def finish_reason(reply: dict, calls: list) -> str:
    return reply.get("finish_reason") or ("tool_calls" if calls else "stop")


def build_completion(reply: dict, calls: list, head: dict, usage, null_content: bool = False,
                     legacy_fields: bool = False) -> dict:
    """A whole (non-streaming) chat.completion answer; no usage key when usage is None."""
    # Beside tool calls OpenAI, vLLM and llama.cpp send `content: null`, Ollama sends "". An
    # explicit None in the script is always passed through.
    content = reply.get("content", "")
    message = {"role": "assistant", "content": None if calls and null_content and not content else content}
    if reply.get("reasoning"):
        message["reasoning"] = reply["reasoning"]          # Ollama /v1 spelling
    if calls:
        message["tool_calls"] = calls
        if legacy_fields:                                  # llama-cpp-python: the deprecated single call too
            message["function_call"] = dict(calls[0]["function"])
    answer = {**head, "object": "chat.completion",
              "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply, calls)}]}
    return answer if usage is None else {**answer, "usage": usage}


def json_text(obj) -> str:
    """JSON with readable non-ASCII, except a string holding a lone surrogate: UTF-8 cannot carry
    it, so that answer is sent with \\u escapes (as a real server's JSON encoder would)."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(obj)


def pieces(text: str, size: int) -> list:
    """Cut text every `size` characters, blind to JSON: clients must cope with any split."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def build_stream(reply: dict, calls: list, head: dict, usage: dict, size: int) -> list:
    """The server-sent events of a streamed answer, as JSON-able objects plus a final "[DONE]"."""
    def chunk(delta, finish=None):
        return {**head, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    role = chunk({"role": "assistant", "content": ""})
    thinking = [chunk({"reasoning": p}) for p in pieces(reply.get("reasoning") or "", size)]
    text = [chunk({"content": p}) for p in pieces(reply.get("content") or "", size)]
    if reply.get("stream_error") is not None:
        # llama.cpp reports e.g. context overflow as an error event inside a 200 stream.
        oops = {"error": {"message": reply["stream_error"], "type": "server_error"}}
        return ([role, text[0]] if text else []) + [oops]
    events = [role, *thinking, *text]
    for call in calls:
        index = 0 if reply.get("index_zero") else call["index"]   # Ollama quirk: all index 0
        if reply.get("whole_tool_calls") or reply.get("no_index"):  # Ollama: one call, one chunk
            whole = {k: v for k, v in call.items() if k != "index"} if reply.get("no_index") else {**call, "index": index}
            events.append(chunk({"tool_calls": [whole]}))
            continue
        opening = {"index": index, "id": call["id"], "type": "function",
                   "function": {"name": call["function"]["name"], "arguments": ""}}
        events.append(chunk({"tool_calls": [opening]}))
        for p in pieces(call["function"]["arguments"], size):     # later fragments carry no id
            fragment = {"index": index, "function": {"arguments": p}}
            if reply.get("repeat_fragments"):   # llama-cpp-python: index, id and name every time, and nulls
                fragment = {"index": index, "id": call["id"], "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": p}}
                events.append(chunk({"role": None, "content": None, "tool_calls": [fragment]}))
                continue
            events.append(chunk({"tool_calls": [fragment]}))
    events.append(chunk({}, finish_reason(reply, calls)))
    if usage is not None:
        events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return events + ["[DONE]"]


# --- Strict mode: check each request the way real servers do ---------------------------------
# Each rule names the server that enforces it and answers like that server does. A harness that
# passes these runs against all of them; one that breaks a rule would fail on that server.
ROLES = ("system", "user", "assistant", "tool")


def pydantic_error(path: str, message: str, kind: str, value) -> str:
    """llama-cpp-python validates the request with pydantic (llama_cpp/server/types.py builds
    CreateChatCompletionRequest from the TypedDicts of llama_cpp/llama_types.py) and answers a
    failure with HTTP 500 and pydantic's text, e.g. "Input should be a valid string"."""
    shown = json.dumps(value)[:40]
    return (f"1 validation error for CreateChatCompletionRequest\n{path}\n  {message} "
            f"[type={kind}, input_value={shown}, input_type={type(value).__name__}]")


def tool_call_problems(i: int, calls) -> list:
    """llama_types.py ChatCompletionMessageToolCall: {id: str, type: "function", function:
    {name: str, arguments: str}} (HTTP 500); Ollama's /v1 then parses each arguments string into an
    object (openai/openai.go, fromChatRequest: HTTP 400 "invalid tool call arguments")."""
    if not isinstance(calls, list):
        return [(500, "llama-cpp-python: tool_calls is a list",
                 pydantic_error(f"messages.{i}.typed-dict.tool_calls", "Input should be a valid list", "list_type", calls))]
    problems = []
    for n, call in enumerate(calls):
        at = f"messages.{i}.typed-dict.tool_calls.{n}"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict):
            problems.append((500, "llama-cpp-python: a tool call is {id, type, function: {name, arguments}}",
                             pydantic_error(at, "Input should be a valid dictionary", "dict_type", call)))
            continue
        for where, value, rule in ((f"{at}.id", call.get("id"), "the call id is a string"),
                                   (f"{at}.function.name", function.get("name"), "the tool name is a string"),
                                   (f"{at}.function.arguments", function.get("arguments"), "arguments are a JSON string")):
            if not isinstance(value, str):
                problems.append((500, f"llama-cpp-python: {rule}",
                                 pydantic_error(where, "Input should be a valid string", "string_type", value)))
        if call.get("type") != "function":
            problems.append((500, "llama-cpp-python: a tool call's type is \"function\"",
                             pydantic_error(f"{at}.type", "Input should be 'function'", "literal_error", call.get("type"))))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                problems.append((400, "ollama: arguments parse to a JSON object", "invalid tool call arguments"))
    return problems


def content_problems(i: int, role: str, content) -> list:
    """llama_types.py: an assistant's content is NotRequired[str] (absent is fine, null is not), a
    system or tool message's Optional[str], a user message's a string, null or a list of text and
    image_url parts. A tool message's content must be a string for OpenAI's API and vLLM too."""
    if isinstance(content, str) or (content is None and role in ("system", "user")):
        return []
    if role == "user" and isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") in ("text", "image_url") for p in content):
        return []
    kind = "a string" if role in ("assistant", "tool") else "a string or null" + (" or parts" if role == "user" else "")
    return [(500, f"llama-cpp-python: {role} content is {kind}",
             pydantic_error(f"messages.{i}.typed-dict.content", "Input should be a valid string", "string_type", content))]


def request_problems(body) -> list:
    """Every rule of a real server this request breaks, as (HTTP status, rule, the server's message)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:      # all servers
        return [(400, "openai: messages is a non-empty list", "'messages' must be a non-empty array")]
    problems, unanswered = [], None     # unanswered: ids of the last assistant's calls without a result
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ROLES:
            problems.append((400, "openai: role is system, user, assistant or tool",
                             f"Invalid value for 'messages[{i}].role': {json.dumps(role)[:40]}"))
            continue
        if role != "tool" and unanswered:
            # OpenAI's API (and the chat templates vLLM applies): every call is answered before the
            # conversation goes on.
            problems.append((400, "openai/vllm: every tool call is answered before the next message",
                             "An assistant message with 'tool_calls' must be followed by tool messages responding "
                             "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                             + ", ".join(sorted(unanswered))))
        if role != "tool":
            unanswered = None
        if role != "assistant" or "content" in m:     # an assistant may leave content out
            problems += content_problems(i, role, m.get("content"))
        if role == "assistant" and m.get("tool_calls") is not None:
            problems += tool_call_problems(i, m["tool_calls"])
            calls = m["tool_calls"] if isinstance(m["tool_calls"], list) else []
            unanswered = {c.get("id") for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)}
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):             # llama_types.py ChatCompletionRequestToolMessage
                problems.append((500, "llama-cpp-python: a tool message has a tool_call_id string",
                                 pydantic_error(f"messages.{i}.typed-dict.tool_call_id", "Input should be a valid string",
                                                "string_type", call_id)))
            elif unanswered is None or call_id not in unanswered:
                # OpenAI's API; vLLM's templates pair results to calls by this id the same way.
                problems.append((400, "openai/vllm: a tool message answers a call of the assistant message before it",
                                 f"Invalid parameter: messages with role 'tool' must be a response to a preceding "
                                 f"message with 'tool_calls' (tool_call_id {json.dumps(call_id)[:60]} matches none)"))
            else:
                unanswered.discard(call_id)
    if unanswered:
        problems.append((400, "openai/vllm: every tool call is answered before the next message",
                         "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                         "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                         + ", ".join(sorted(unanswered))))
    return problems


# --- The HTTP layer ---------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    """One connection. Parses the request, asks the ScriptedServer for a reply, writes it."""

    protocol_version = "HTTP/1.1"   # keep-alive like a real server; we always send Content-Length

    def log_message(self, format, *args):
        pass                        # tests stay quiet: no "GET /v1/models 200" lines on stderr

    def setup(self):
        super().setup()
        self.server.track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def send_json(self, status: int, obj, raw: str | bytes | None = None):
        data = raw if raw is not None else json_text(obj)
        data = data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogatepass")  # bytes: e.g. bad UTF-8
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path.startswith("/api/"):                # Ollama's native routes: fake_ollama.py
            from .fake_ollama import answer_native
            return answer_native(self, "GET", path, None)
        owner = self.server.owner
        if path == "/props" and owner.context_window and owner.announce_window:   # llama.cpp's server
            return self.send_json(200, {"default_generation_settings": {"n_ctx": owner.context_window},
                                        "build_info": "scripted"})
        if path.endswith("/models"):
            model = {"id": self.server.owner.model, "object": "model", "owned_by": "tinyharness"}
            self.send_json(200, {"object": "list", "data": [model]})
        else:
            self.send_json(404, error_body(f"no route for GET {path}", "invalid_request_error"))

    def do_POST(self):
        # Read the body first, whatever the path, so the connection stays in a sane state.
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0].rstrip("/")
        if path.startswith("/api/"):
            from .fake_ollama import answer_native
            return answer_native(self, "POST", path, data)
        if not path.endswith("/v1/chat/completions"):        # like Ollama: a base URL without /v1 is a 404
            return self.send_json(404, error_body(f"no route for POST {path}", "invalid_request_error"))
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self.send_json(400, error_body("request body must be a JSON object",
                                                  "invalid_request_error"))
        self.answer_chat(body)

    def answer_chat(self, body: dict):
        owner = self.server.owner
        rejection = owner._reject(body, self.headers) if owner.strict else None
        if rejection:                               # what a real server answers to this request
            status, rule, message = rejection
            return self.send_json(status, {"error": {"message": message, "type": "invalid_request_error"
                                                     if status == 400 else "internal_server_error", "rule": rule}})
        if owner.context_window and estimate_tokens(prompt_text(body)) >= owner.context_window:
            return self.send_overflow(owner, body)
        reply, prompt, cached_chars = owner._take_reply(body, self.headers)
        if isinstance(reply, str):                  # _take_reply explains why there is no reply
            return self.send_json(500, error_body(reply))
        if reply.get("delay"):
            time.sleep(reply["delay"])
        if reply.get("drop") == "before":
            self.close_connection = True            # close without a single byte of answer
            return
        if reply.get("status") is not None:
            return self.send_fault(reply["status"], reply.get("body"))
        if reply.get("raw") is not None:
            return self.send_json(200, None, raw=reply["raw"])

        calls = build_tool_calls(reply, owner._new_call_id)
        usage = build_usage(reply, calls, prompt, cached_chars) if owner.send_usage else None
        head = {"id": owner._new_completion_id(), "created": int(time.time()),
                "model": body.get("model") or owner.model, "system_fingerprint": "fp_scripted"}
        # Either drop mode cuts whichever kind of answer the client asked for.
        style = {"null_content": owner.null_content, "legacy_fields": owner.legacy_fields}
        if body.get("stream"):
            self.send_stream(build_stream(reply, calls, head, usage if owner.stream_usage else None,
                                          owner.fragment_size), cut=reply.get("drop") is not None)
        elif reply.get("drop") is not None:
            self.send_half(build_completion(reply, calls, head, usage, **style))
        else:
            self.send_json(200, build_completion(reply, calls, head, usage, **style))

    def send_overflow(self, owner, body: dict):
        """The prompt does not fit `context_window`: answer as llama-cpp-python 0.3 does. It checks
        `len(prompt_tokens) >= n_ctx` (llama_cpp/llama.py, _create_completion) and its error handler
        (llama_cpp/server/errors.py, context_length_exceeded) rewrites that into OpenAI's words, a
        400 naming both numbers; streamed, the error is raised inside the generator after the 200
        headers went out, so the client gets an empty event stream. Takes no reply from the script."""
        prompt = estimate_tokens(prompt_text(body))
        with owner._lock:
            owner.overflows.append(len(owner.requests))
            owner.requests.append(body)
            owner.headers.append(self.headers)
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            return
        completion = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 0
        message = (f"This model's maximum context length is {owner.context_window} tokens. However, you requested "
                   f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                   "Please reduce the length of the messages or completion.")
        self.send_json(400, {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                                       "code": "context_length_exceeded"}})

    def send_fault(self, status: int, body):
        """An HTTP error answer, e.g. Ollama's 404 for a model that was never pulled."""
        if body is None:
            body = error_body(f"scripted server: HTTP {status}")
        if isinstance(body, (str, bytes)):
            return self.send_json(status, None, raw=body)
        self.send_json(status, body)

    def send_half(self, answer: dict):
        """Promise the full Content-Length, send half the body, hang up: a broken answer."""
        data = json.dumps(answer).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.close_connection = True

    def send_stream(self, events: list, cut: bool = False):
        """Write server-sent events one by one. No Content-Length: the stream ends when we close."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if cut:                                     # drop mid-stream: about half, and no [DONE]
            events = events[: max(1, len(events) // 2)]
        for event in events:
            data = event if isinstance(event, str) else json_text(event)
            self.wfile.write(f"data: {data}\n\n".encode("utf-8"))
            self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True           # a forgotten server never keeps the test run alive

    def __init__(self, address, owner):
        self.owner = owner
        self._connections = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self):
        # HTTPServer.server_bind calls socket.getfqdn(), a DNS lookup that can take seconds on
        # some machines. We know our name already, so bind without it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def track(self, connection, is_open: bool):
        """Remember open connections so stop() can close keep-alive ones too."""
        with self._connections_lock:
            (self._connections.add if is_open else self._connections.discard)(connection)

    def close_connections(self):
        with self._connections_lock:
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], OSError):
            return                  # the client hung up (or stop() hung up on it): not a bug
        super().handle_error(request, client_address)


# --- The public server object -----------------------------------------------------------------

class ScriptedServer:
    """A fake model server that replays a script (or asks a policy) and records every request."""

    def __init__(self, script=None, policy=None, *, host="127.0.0.1", port=0, model="qwen3:8b",
                 fragment_size=7, drop_images=False, strict=True, null_content=True, legacy_fields=True,
                 send_usage=True, stream_usage=True, context_window=None, announce_window=False):
        if script is not None and policy is not None:
            raise ValueError("give a script or a policy, not both")
        if fragment_size < 1:
            raise ValueError("fragment_size must be at least 1")
        self.script = [normalise_reply(r) for r in (script or [])]   # fail at once on a typo
        self.policy = policy
        self.host, self.port, self.model, self.fragment_size = host, port, model, fragment_size
        self.drop_images = drop_images  # ignore image parts, like Ollama with gemma4 e2b/e4b
        self.strict = strict            # check every request like real servers do (see request_problems)
        self.null_content, self.legacy_fields = null_content, legacy_fields   # the shape of tool-call replies
        self.send_usage, self.stream_usage = send_usage, stream_usage
        self.context_window = context_window   # tokens: a prompt this long overflows, as on llama-cpp-python
        self.overflows = []         # request indexes answered with an overflow
        self.announce_window = announce_window   # GET /props tells it up front, as llama.cpp's server does
        self.rejected = []          # (request index, status, rule, message) of each request strict mode refused
        self.requests = []          # parsed bodies of every POST to chat/completions, in order
        self.headers = []           # their HTTP headers, same order (case-insensitive .get())
        self.replies_sent = 0       # replies taken from the script or the policy (faults included)
        self._lock = threading.Lock()
        self._previous_prompt = ""
        self._call_count = 0
        self._completion_count = 0
        self._answered = 0          # requests that got a reply (a refused one takes none from the script)
        self._httpd = None
        self._thread = None

    @property
    def base_url(self) -> str:
        """Where clients point; still readable after stop(), e.g. in a failure message."""
        if self._thread is None:
            raise RuntimeError("the server has not been started; call start() or use `with`")
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "ScriptedServer":
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]  # the real port when 0 asked for any free one
        # A short poll interval makes stop() quick: shutdown() waits for the loop to notice.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=f"scripted-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()            # stop accepting
        httpd.close_connections()   # hang up on idle keep-alive clients
        httpd.server_close()        # free the port
        self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # Called from handler threads; the lock keeps counters and the request order consistent.
    def _take_reply(self, body: dict, headers):
        """Record the request and pick its reply. Returns (reply, prompt, cached_chars);
        reply is a str explaining the problem when there is no usable reply."""
        seen = without_image_parts(body) if self.drop_images else body   # what the "model" gets
        prompt = prompt_text(seen)
        with self._lock:
            index, self._answered = self._answered, self._answered + 1
            self.requests.append(body)
            self.headers.append(headers)
            cached_chars = common_prefix_length(prompt, self._previous_prompt) if self._previous_prompt else 0
            self._previous_prompt = prompt
            if self.policy is None:
                if index >= len(self.script):
                    return (f"scripted server: the script has no reply left "
                            f"({self.replies_sent} replies already sent)"), prompt, cached_chars
                self.replies_sent += 1
                return self.script[index], prompt, cached_chars
        return self._ask_policy(seen, index), prompt, cached_chars

    def _reject(self, body: dict, headers):
        """Strict mode: record a request a real server would refuse; return (status, rule, message)."""
        problems = request_problems(body)
        if not problems:
            return None
        with self._lock:
            self.rejected.append((len(self.requests), *problems[0]))
            self.requests.append(body)
            self.headers.append(headers)
        return problems[0]

    def _ask_policy(self, body: dict, index: int):
        # Outside the lock: a slow policy must not block other requests.
        try:
            reply = self.policy(body, index)
            if reply is None:
                return (f"scripted server: the policy has no reply for request {index} "
                        f"({self.replies_sent} replies already sent)")
            reply = normalise_reply(reply)
        except Exception as e:
            traceback.print_exc()
            return f"scripted server: the policy failed on request {index}: {type(e).__name__}: {e}"
        with self._lock:
            self.replies_sent += 1
        return reply

    def _new_call_id(self) -> str:
        with self._lock:
            self._call_count += 1
            return f"call_{self._call_count}"

    def _new_completion_id(self) -> str:
        with self._lock:
            self._completion_count += 1
            return f"chatcmpl-{self._completion_count}"


# --- Images: tiny PNGs, image tokens and a scripted "vision model" ---------------------------
# The standard library has no image codec, but a PNG is simple: a signature, then chunks
# (length, type, data, CRC). IHDR says the size and pixel format, IDAT holds the zlib-compressed
# rows, each row prefixed by a filter byte. That is enough for test images we make ourselves.

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMAGE_BASE_TOKENS = 256         # a fixed cost per image, like Gemma 3's 256
IMAGE_TILE = 28                 # plus one token per 28x28 pixels, like Qwen-VL
COLOURS = {"black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128),
           "red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255),
           "yellow": (255, 255, 0), "cyan": (0, 255, 255), "magenta": (255, 0, 255)}


def image_tokens(width: int, height: int) -> int:
    """Prompt tokens we charge for an image: 256 + width*height/784. Real encoders differ (Gemma 3
    a fixed 256, LLaVA 576, Qwen-VL one per 28x28 tile); what matters for tests is the order of
    magnitude: an image that arrives costs hundreds of tokens, one that is dropped costs none."""
    return IMAGE_BASE_TOKENS + (width * height) // (IMAGE_TILE * IMAGE_TILE)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def make_png(rows) -> bytes:
    """A real PNG from rows of (r, g, b) tuples: 8-bit RGB, not interlaced, filter 0 on every row."""
    height, width = len(rows), len(rows[0]) if rows else 0
    if not width or any(len(row) != width for row in rows):
        raise ValueError("make_png needs at least one row, all rows the same non-zero length")
    raw = b"".join(b"\x00" + bytes(value for pixel in row for value in pixel) for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)   # depth 8, colour type 2 = RGB
    return (PNG_SIGNATURE + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(raw, 9))
            + _png_chunk(b"IEND", b""))


def tiny_png(width: int, height: int, pixel) -> bytes:
    """A PNG whose colour at (x, y) is pixel(x, y), an (r, g, b) tuple."""
    return make_png([[pixel(x, y) for x in range(width)] for y in range(height)])


def split_png(left: str, right: str, width: int = 256, height: int = 256) -> bytes:
    """A PNG whose left half is one named colour and right half another (see COLOURS)."""
    return tiny_png(width, height, lambda x, y: COLOURS[left if x < width // 2 else right])


def _unfilter(kind: int, line: bytearray, previous: bytes, bpp: int) -> bytes:
    """Undo one row's PNG filter (0 none, 1 sub, 2 up, 3 average, 4 Paeth), in place."""
    if kind == 0:
        return bytes(line)
    if kind > 4:
        raise ValueError(f"not a PNG filter type: {kind}")
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0            # left
        b = previous[i]                                  # up
        c = previous[i - bpp] if i >= bpp else 0        # up-left
        if kind == 1:
            guess = a
        elif kind == 2:
            guess = b
        elif kind == 3:
            guess = (a + b) // 2
        else:
            p = a + b - c
            guess = min((abs(p - a), 0, a), (abs(p - b), 1, b), (abs(p - c), 2, c))[2]
        line[i] = (line[i] + guess) & 0xFF
    return bytes(line)


def read_png_pixels(data: bytes) -> list:
    """Rows of (r, g, b) tuples from an 8-bit RGB or RGBA, non-interlaced PNG (alpha is dropped).
    Other PNGs raise ValueError: this reads the images we make, not every PNG there is."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG (wrong signature)")
    pos, header, compressed = len(PNG_SIGNATURE), None, b""
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length                              # length, type, data, CRC
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            compressed += chunk
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("not a PNG (no IHDR chunk)")
    width, height, depth, colour_type, _, _, interlace = header
    bpp = {2: 3, 6: 4}.get(colour_type)                 # bytes per pixel: RGB or RGBA
    if depth != 8 or bpp is None or interlace:
        raise ValueError("only 8-bit RGB or RGBA PNGs without interlacing can be read here")
    try:
        raw = zlib.decompress(compressed)
    except zlib.error as e:
        raise ValueError(f"broken PNG data: {e}") from None
    stride = width * bpp
    if len(raw) < height * (stride + 1):
        raise ValueError("broken PNG data: fewer pixels than the header promises")
    rows, previous = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), previous, bpp)
        rows.append(list(zip(line[0::bpp], line[1::bpp], line[2::bpp])))
        previous = line
    return rows


def png_size(data: bytes):
    """(width, height) from a PNG's header, or None when the bytes are not a PNG."""
    if data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    return None


def decode_data_uri(url):
    """(mime, bytes) of a base64 data URI, or None for anything else (an http URL, bad base64)."""
    match = re.fullmatch(r"data:([\w.+-]+/[\w.+-]+);base64,(.*)", url or "", re.S)
    if not match:
        return None
    try:
        return match.group(1), base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_url(part):
    """The URL of an image_url content part, or None when `part` is something else."""
    if isinstance(part, dict) and part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
        url = part["image_url"].get("url")
        return url if isinstance(url, str) else None
    return None


def _contents(messages):
    """The list-shaped contents of a messages list (text-only messages have a plain string)."""
    if not isinstance(messages, list):
        return []
    return [m["content"] for m in messages if isinstance(m, dict) and isinstance(m.get("content"), list)]


def image_stand_in(url):
    """The text an image counts as: 4 characters per image token, starting with a digest of the
    image. None when the URL is not a data URI the server could decode (it then counts as text)."""
    decoded = decode_data_uri(url)
    if decoded is None:
        return None
    size = png_size(decoded[1])
    tokens = image_tokens(*size) if size else IMAGE_BASE_TOKENS
    tag = f"<image {hashlib.sha256(decoded[1]).hexdigest()[:16]}: {tokens} tokens>"
    return tag.ljust(4 * tokens, ".")


def with_image_stand_ins(messages):
    """The messages with each image part replaced by its stand-in; unchanged when there is none,
    so text-only requests are counted exactly as before."""
    if not any(_image_url(p) for content in _contents(messages) for p in content):
        return messages

    def swap(part):
        stand_in = image_stand_in(_image_url(part))
        return part if stand_in is None else stand_in

    return [{**m, "content": [swap(p) for p in m["content"]]}
            if isinstance(m, dict) and isinstance(m.get("content"), list) else m for m in messages]


def without_image_parts(body: dict) -> dict:
    """The request as a server that ignores images sees it: every image part gone."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    stripped = [{**m, "content": [p for p in m["content"] if _image_url(p) is None]}
                if isinstance(m, dict) and isinstance(m.get("content"), list) else m for m in messages]
    return {**body, "messages": stripped}


def colour_name(rgb) -> str:
    """The name in COLOURS nearest to an (r, g, b) colour."""
    return min(COLOURS, key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOURS[name], rgb)))


def _average(pixels) -> tuple:
    return tuple(sum(p[i] for p in pixels) / len(pixels) for i in range(3))


def describe_image(mime: str, data: bytes) -> str:
    """What our scripted vision model "sees": the colours of the left and right halves of a PNG."""
    try:
        rows = read_png_pixels(data)
    except ValueError:
        return f"a {mime} image I cannot read"
    half = max(1, len(rows[0]) // 2)                    # an odd width leaves the middle column out
    left = [p for row in rows for p in row[:half]]
    right = [p for row in rows for p in row[-half:]]
    return f"left: {colour_name(_average(left))}, right: {colour_name(_average(right))}"


def vision_policy(answer_without_image="I cannot see any image.", before=()):
    """A ScriptedServer policy that plays a vision model. The replies in `before` come first (for
    example a view_image call); after that it answers from the pixels of every image part in the
    request ("left: red, right: blue"; several images are numbered), or with
    `answer_without_image` when the request holds none - the honest answer a guessing model skips.
    Only data URIs count: like Ollama's /v1, this "model" cannot fetch an http(s) URL."""
    before = [normalise_reply(r) for r in before]

    def policy(body, index):
        if index < len(before):
            return before[index]
        images = [decode_data_uri(_image_url(part)) for content in _contents(body.get("messages"))
                  for part in content]
        seen = [describe_image(*image) for image in images if image is not None]
        if not seen:
            return answer_without_image
        if len(seen) == 1:
            return seen[0]
        return "; ".join(f"image {i}: {s}" for i, s in enumerate(seen, 1))

    return policy


def example_images() -> dict:
    """The PNGs of examples/images, by file name. blue-red.png is the control: red-left/blue-right
    is the pair a guessing model names by default, so a right answer on it alone proves little."""
    return {"red-blue.png": split_png("red", "blue"),
            "blue-red.png": split_png("blue", "red"),
            "green.png": tiny_png(128, 128, lambda x, y: COLOURS["green"])}


# --- Command line -----------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinyharness.testing",
                                     description="Serve canned model replies over the OpenAI chat API.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--script", help="JSON file: a list of replies")
    source.add_argument("--vision", action="store_true",
                        help="play a vision model that names the colours of the halves of each PNG it is sent")
    parser.add_argument("--drop-images", action="store_true",
                        help="ignore every image, as Ollama does for gemma4 e2b/e4b (tokens count without them)")
    parser.add_argument("--lenient", action="store_true",
                        help="answer every request; by default one a real server would refuse gets its HTTP 400/500")
    parser.add_argument("--no-usage", action="store_true", help="never report token usage, like some servers")
    parser.add_argument("--context-window", type=int, metavar="TOKENS",
                        help="overflow like llama-cpp-python past this many prompt tokens: HTTP 400 with both numbers "
                             "unstreamed, an empty 200 stream streamed")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default="qwen3:8b", help="model name listed by /v1/models")
    args = parser.parse_args(argv)
    if args.vision:
        replies, what = {"policy": vision_policy()}, "playing a vision model"
    else:
        try:
            script = load_script(args.script)
        except (OSError, ValueError) as e:
            print(f"error: cannot load the script: {e}", file=sys.stderr)
            return 2
        replies, what = {"script": script}, f"replaying {len(script)} replies"
    if args.drop_images:
        what += " that never sees images"
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    if args.context_window:
        what += f" with a {args.context_window}-token window"
    with ScriptedServer(**replies, drop_images=args.drop_images, host=args.host, port=args.port,
                        model=args.model, strict=not args.lenient, send_usage=not args.no_usage,
                        context_window=args.context_window) as srv:
        print(f"Scripted model server on {srv.base_url} {what}. Press Ctrl+C to stop.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
