"""The scripted model server: a real HTTP server on 127.0.0.1 whose "model" is a script.

The problem. A harness is only tested if its requests go over a real socket to something that
answers like a model server: keep-alive, Content-Length, streams that end when the connection
closes, answers cut half-way. A mock of the client library would test the mock.

The mechanism. `ScriptedServer` runs a ThreadingHTTPServer on a thread of its own. Each POST to
`/v1/chat/completions` is recorded (body and headers), checked against the rules of real servers
(testing/rules.py) when strict, measured against the context window when one is set, and answered
with the next reply of the script (or the policy's), shaped by testing/replies.py. Faults of the
serving layer (a status, a delay, a dropped connection, a cut stream) are replies too. `/api/*`
paths are handed to `answer_native`, which a subclass overrides to speak another dialect
(fake_ollama.OllamaServer); here it is a 404, as on llama.cpp or vLLM. The full manual is the
docstring of tinyharness.testing, the public entry.

What it cannot do. It plays the wire, not a model: nothing is generated, tokens are estimated, and
the cache figure is a common-prefix count, not a KV cache.
"""
from __future__ import annotations

import json
import socket
import socketserver
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .images import with_image_stand_ins, without_image_parts
from .replies import (
    build_completion,
    build_stream,
    build_tool_calls,
    build_usage,
    common_prefix_length,
    error_body,
    estimate_tokens,
    json_text,
    normalise_reply,
    reacted,
)
from .rules import request_problems


def prompt_text(body: dict) -> str:
    """The text whose tokens we count: the messages, then the tool schemas, as JSON.
    Image parts count as image tokens, not as base64 text (see "Images" in tinyharness.testing)."""
    return (json.dumps(with_image_stand_ins(body.get("messages")), ensure_ascii=False)
            + json.dumps(body.get("tools"), ensure_ascii=False))



# --- The HTTP layer ---------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    """One connection. Parses the request, asks the ScriptedServer for a reply, writes it."""

    protocol_version = "HTTP/1.1"   # keep-alive like a real server; we always send Content-Length
    server: _HTTPServer             # the one server class that makes handlers
    closing = False                 # this answer ends its connection (a reply's "close")

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
        # bytes: e.g. bad UTF-8
        data = data if isinstance(data, bytes) else data.encode("utf-8", errors="surrogatepass")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.closing:                # {"close": true}: answer in full, then hang up
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if self.refused_key():
            return None
        # a native dialect's routes (testing/fake_ollama.py), if the owner has one
        if path.startswith("/api/"):
            return self.server.owner.answer_native(self, "GET", path, None)
        owner = self.server.owner
        # llama.cpp's server
        if path == "/props" and owner.context_window and owner.announce_window:
            window = {"n_ctx": owner.context_window}
            return self.send_json(200, {"default_generation_settings": window,
                                        "build_info": "scripted"})
        if path.endswith("/models"):
            models = [{"id": name, "object": "model", "owned_by": "tinyharness"}
                      for name in owner.listed or [owner.model]]
            self.send_json(200, {"object": "list", "data": models})
        else:
            self.send_json(404, error_body(f"no route for GET {path}", "invalid_request_error"))

    def do_POST(self):
        # Read the body first, whatever the path, so the connection stays in a sane state.
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0].rstrip("/")
        if self.refused_key():
            return None
        if path.startswith("/api/"):
            return self.server.owner.answer_native(self, "POST", path, data)
        # like Ollama: a base URL without /v1 is a 404
        if not path.endswith("/v1/chat/completions"):
            error = error_body(f"no route for POST {path}", "invalid_request_error")
            return self.send_json(404, error)
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self.send_json(400, error_body("request body must be a JSON object",
                                                  "invalid_request_error"))
        self.answer_chat(body)

    def refused_key(self):
        """api_key set: a request without `Authorization: Bearer KEY` gets OpenAI's 401."""
        key = self.server.owner.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return False
        self.send_json(401, {"error": {"message": "Incorrect API key provided.", "code":
                                       "invalid_api_key", "type": "invalid_request_error"}})
        return True

    def answer_chat(self, body: dict):
        owner = self.server.owner
        rejection = owner._reject(body, self.headers) if owner.strict else None
        if rejection:                               # what a real server answers to this request
            return self.send_rejection(*rejection)
        seen = body
        if owner.context_window and owner.truncate:
            seen = owner._fitted(body)              # Ollama: cut silently, answer 200
        elif owner.context_window and estimate_tokens(prompt_text(body)) >= owner.context_window:
            return self.send_overflow(owner, body)
        reply, prompt, cached_chars = owner._take_reply(body, self.headers, seen)
        if isinstance(reply, str):                  # _take_reply explains why there is no reply
            return self.send_json(500, error_body(reply))
        self.closing = bool(reply.get("close"))
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
        usage = (build_usage(reply, calls, prompt, cached_chars, body.get("max_tokens"))
                 if owner.send_usage
                 else None)
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

    def send_rejection(self, status: int, rule: str, message: str):
        kind = "invalid_request_error" if status == 400 else "internal_server_error"
        self.send_json(status, {"error": {"message": message, "type": kind, "rule": rule}})

    def send_overflow(self, owner, body: dict):
        """The prompt does not fit `context_window`: answer as llama-cpp-python 0.3 does. It checks
        `len(prompt_tokens) >= n_ctx` (llama_cpp/llama.py, _create_completion) and its error handler
        (llama_cpp/server/errors.py, context_length_exceeded) rewrites that into OpenAI's words, a
        400 naming both numbers; streamed, the error is raised inside the generator after the 200
        headers went out, so the client gets an empty event stream. Takes no reply from the
        script."""
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
        completion = cap if isinstance(cap := body.get("max_tokens"), int) else 0
        message = (f"This model's maximum context length is {owner.context_window} tokens. "
                   f"However, you requested {prompt + completion} tokens ({prompt} in the "
                   f"messages, {completion} in the completion). Please reduce the length of the "
                   "messages or completion.")
        self.send_json(400, {"error": {"message": message, "type": "invalid_request_error",
                                       "param": "messages", "code": "context_length_exceeded"}})

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
        """Write server-sent events one by one, in HTTP/1.1 chunks on a connection kept open, as
        Ollama, llama.cpp's server and vLLM do. A stream dropped mid-way has no chunking: it ends
        when we close, about half of it sent and no [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if cut:
            self.send_header("Connection", "close")
            self.close_connection = True
            events = events[: max(1, len(events) // 2)]
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            data = event if isinstance(event, str) else json_text(event)
            self.write_piece(f"data: {data}\n\n".encode(), chunked=not cut)
        if not cut:
            self.wfile.write(b"0\r\n\r\n")      # the last chunk: the answer is whole
            self.wfile.flush()

    def write_piece(self, data: bytes, chunked: bool):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
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
        # (server_address: what TCPServer.server_bind took from getsockname())
        self.server_name, self.server_port = self.socket.getsockname()[:2]

    def track(self, connection, is_open: bool):
        """Remember open connections so stop() can close keep-alive ones too."""
        with self._connections_lock:
            (self._connections.add if is_open else self._connections.discard)(connection)
            # how many the clients opened, for tests of connection reuse
            self.owner.connections_opened = getattr(self.owner, "connections_opened", 0) + is_open

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
                 fragment_size=7, drop_images=False, strict=True, null_content=True,
                 legacy_fields=True, send_usage=True, stream_usage=True, context_window=None,
                 announce_window=False, truncate=False, listed=None, api_key=None):
        if script is not None and policy is not None:
            raise ValueError("give a script or a policy, not both")
        if fragment_size < 1:
            raise ValueError("fragment_size must be at least 1")
        self.script = [normalise_reply(r) for r in (script or [])]   # fail at once on a typo
        self.policy = policy
        self.host, self.port, self.model, self.fragment_size = host, port, model, fragment_size
        self.drop_images = drop_images  # ignore image parts, like Ollama with gemma4 e2b/e4b
        # check every request like real servers do (see request_problems)
        self.strict = strict
        # the shape of tool-call replies
        self.null_content, self.legacy_fields = null_content, legacy_fields
        self.send_usage, self.stream_usage = send_usage, stream_usage
        # tokens: a prompt this long overflows, as on llama-cpp-python
        self.context_window = context_window
        self.overflows = []         # request indexes answered with an overflow
        # past the window, drop the oldest messages and answer 200, as Ollama does (no overflow)
        self.truncate = truncate
        self.truncated = []         # (request index, messages dropped) of each prompt cut so
        # GET /props tells it up front, as llama.cpp's server does
        self.announce_window = announce_window
        # the ids GET /v1/models lists (default: the model); a key every request must bring
        self.listed, self.api_key = listed, api_key
        # (request index, status, rule, message) of each request strict mode refused
        self.rejected = []
        self.requests = []          # parsed bodies of every POST to chat/completions, in order
        self.headers = []           # their HTTP headers, same order (case-insensitive .get())
        self.replies_sent = 0       # replies taken from the script or the policy (faults included)
        self._lock = threading.Lock()
        self._previous_prompt = ""
        self._call_count = 0
        self._completion_count = 0
        # requests that got a reply (a refused one takes none from the script)
        self._answered = 0
        self._httpd = None
        self._thread = None

    @property
    def base_url(self) -> str:
        """Where clients point; still readable after stop(), e.g. in a failure message."""
        if self._thread is None:
            raise RuntimeError("the server has not been started; call start() or use `with`")
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedServer:
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]  # the real port when 0 asked for any free one
        # A short poll interval makes stop() quick: shutdown() waits for the loop to notice.
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.02},
                                        name=f"scripted-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        httpd, self._httpd = self._httpd, None
        if httpd is None or self._thread is None:  # never started (start() sets both)
            return
        httpd.shutdown()            # stop accepting
        httpd.close_connections()   # hang up on idle keep-alive clients
        httpd.server_close()        # free the port
        self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def answer_native(self, handler, method, path, data):
        """An /api/* request. This server speaks the OpenAI dialect only, so it answers 404 there,
        like llama.cpp or vLLM; a subclass that plays another server's own API overrides this."""
        handler.send_json(404, error_body(f"no route for {method} {path}", "invalid_request_error"))

    # Called from handler threads; the lock keeps counters and the request order consistent.
    def _fitted(self, body: dict) -> dict:
        """The body as a server that cuts like Ollama gives it to the model (server/prompt.go,
        chatPrompt): the system messages kept, the oldest others dropped until the prompt fits the
        window, the last message always kept. The cut is noted in `truncated`."""
        messages = body.get("messages") or []
        if estimate_tokens(prompt_text(body)) <= self.context_window or len(messages) < 2:
            return body
        for start in range(1, len(messages)):
            kept = [m for m in messages[:start] if m.get("role") == "system"] + messages[start:]
            fits = estimate_tokens(prompt_text({**body, "messages": kept})) <= self.context_window
            if fits or start == len(messages) - 1:
                break
        with self._lock:
            self.truncated.append((len(self.requests), len(messages) - len(kept)))
        return {**body, "messages": kept}

    def _take_reply(self, body: dict, headers, seen=None):
        """Record the request (as sent) and pick its reply from what the model sees (`seen`: the
        body after a server's cut). Returns (reply, prompt, cached_chars); reply is a str explaining
        the problem when there is no usable reply."""
        seen = body if seen is None else seen
        seen = without_image_parts(seen) if self.drop_images else seen   # what the "model" gets
        prompt = prompt_text(seen)
        with self._lock:
            index, self._answered = self._answered, self._answered + 1
            self.requests.append(body)
            self.headers.append(headers)
            cached_chars = (common_prefix_length(prompt, self._previous_prompt)
                            if self._previous_prompt else 0)
            self._previous_prompt = prompt
            if self.policy is None:
                if index >= len(self.script):
                    return (f"scripted server: the script has no reply left "
                            f"({self.replies_sent} replies already sent)"), prompt, cached_chars
                self.replies_sent += 1
                return reacted(self.script[index], seen), prompt, cached_chars
        return self._ask_policy(seen, index), prompt, cached_chars

    def _reject(self, body: dict, headers):
        """Strict mode: record a request a real server would refuse; return (status, rule,
        message)."""
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
        except Exception as e:  # noqa: BLE001 - a test's policy failing is an answer, not a hang
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


def serve_until_ctrl_c(banner):
    """Say where the server (already started) listens, then keep it serving until Ctrl+C; exit code
    0. The command lines of testing, fake_ollama and the eval's scripted models end here."""
    try:
        # inside: a Ctrl+C that comes while it is written stops it alike
        print(banner, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0

