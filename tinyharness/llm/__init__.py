"""One door to the model: every chat request of a run goes through this module (with its
dialects, llm/ollama.py, and its connection, llm/keepalive.py). Other HTTP is not the model's
conversation and stays with its owner: the doctor's and the eval's probes of a server, the model
list, an image fetched for --image, and MCP's HTTP and SSE transports.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given) and return
three things: the assistant message, the token usage and the finish_reason. Switching from Ollama to
llama.cpp, vLLM or a cloud API means changing base_url and model, nothing else.

The serving layer hands you structure you must not trust blindly: `content: null` beside tool calls,
arguments as objects or broken JSON, calls without ids, counts as strings - and servers reject those
same shapes when they come back. Every reply, streamed or not, ends in one normaliser
(`canonical_message`): the rest of the harness only ever sees, and sends back, one canonical shape.
What it cannot repair it hands to the loop under the private key `_problems`, never guessing.

With stream=True the server sends its answer as server-sent events (SSE): one `data: {json}` line
per small piece, then `data: [DONE]`. We print text as it arrives (through the on_text callback) and
assemble the pieces into the same raw message a non-streaming call returns, so the loop never knows
the difference. Servers differ in how they cut tool calls into pieces (see llm/stream.py,
Assembler).

Where it lives. This module is the client: the HTTP exchange, its time limits, and every failure
said in words. The normaliser is llm/reply.py, the SSE reader and the stream assembler
llm/stream.py; their names are importable from here.
"""
import json
import re
import socket
import threading
import time
from urllib.parse import urlsplit

import requests

from .keepalive import KeepAlive, drain, proxy_in_the_way
from .reply import canonical_message, clean, clean_usage, parse_json
from .stream import Assembler, sse_items, strip_think

DEFAULT_MODEL = "qwen3:8b"
DEFAULT_BASE_URL = "http://localhost:11434/v1"
# Sent as max_tokens with every request: without a cap one rambling reply can run for minutes, and a
# reply cut here says finish_reason "length", which the loop must never take as a finished answer.
MAX_REPLY_TOKENS = 4096
EXCERPT_LIMIT = 600     # characters of a server's error we show: enough for the cause, never a page


class LLMError(Exception):
    """Talking to the model failed; the message is written for a person, not a stack trace."""


class ContextOverflow(LLMError):
    """The conversation no longer fits the model's context window. The numbers are the server's
    (None when it did not say)."""

    def __init__(self, message, prompt_tokens=None, context_window=None):
        super().__init__(message)
        self.prompt_tokens, self.context_window = prompt_tokens, context_window


class Client(KeepAlive):
    def __init__(self, base_url=DEFAULT_BASE_URL, model=DEFAULT_MODEL, api_key=None, timeout=600,
                 stream=False, on_text=None, on_reasoning=None, max_reply_tokens=MAX_REPLY_TOKENS):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.take_credentials()
        self.model, self.api_key = model, api_key
        self.timeout = timeout  # a cold model can take a minute or more to load
        self.stream = stream
        # defaults for chat(); used when streaming
        self.on_text, self.on_reasoning = on_text, on_reasoning
        self.max_reply_tokens = max_reply_tokens

    def chat(self, messages, tools=None, on_text=None, on_reasoning=None, timeout=None):
        """Send the conversation; return (canonical assistant message, usage, finish_reason).

        When streaming, on_text(piece) and on_reasoning(piece) are called as the answer arrives.
        timeout, when given, bounds this whole reply (streamed: checked between pieces)."""
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_reply_tokens,
                **({"tools": tools} if tools else {})}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        wait = reply_timeout(self.timeout, timeout)
        if self.stream:
            return (self.chat_streaming(body, headers, on_text or self.on_text,
                                        on_reasoning or self.on_reasoning, wait))
        started = time.monotonic()
        try:
            with self.post(self.url, json=body, headers=headers, timeout=wait,
                               stream=True) as response, \
                    HangUp(response, started + wait) as hang:
                raw = read_body(response, started + wait, hang)
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, wait, wait < self.timeout)) from None
        if response.status_code != 200:
            raise status_error(response.status_code, raw, self.url, self.model)
        message, usage, finish_reason = parse_completion(raw, self.url, self.model)
        return strip_think(message), usage, finish_reason

    # --- Streaming ------------------------------------------------------------------------------

    def chat_streaming(self, body, headers, on_text, on_reasoning, wait):
        # include_usage: the token counts come in one last chunk (OpenAI, Ollama, llama.cpp, vLLM);
        # some servers never send it (llama-cpp-python): the usage is then {}.
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        started = time.monotonic()
        try:
            # stream=True: requests returns after the headers and we read the body line by line.
            # The timeout still applies to every read, so a server that goes silent is noticed;
            # HangUp bounds the whole reply, so one that trickles is too.
            with self.post(self.url, json=body, headers=headers, timeout=wait,
                               stream=True) as response, \
                    HangUp(response, started + wait) as hang:
                if response.status_code != 200:
                    body = read_body(response, started + wait, hang)
                    raise status_error(response.status_code, body, self.url, self.model)
                return (self.read_stream(response, Assembler(on_text, on_reasoning), wait,
                                         started + wait, hang))
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, wait, wait < self.timeout)) from None

    def read_stream(self, response, assembler, wait, deadline=None, hang=None):
        """Feed the SSE lines to the assembler; fail clearly on an error event or a cut stream."""
        # iter_lines on bytes, decoded per line: a line never ends inside a UTF-8 character, so a
        # character cut between two network reads is put back together before decoding. Each HTTP
        # chunk is handed over as it arrives (Ollama, llama.cpp and vLLM stream chunked bodies).
        deadline = deadline or time.monotonic() + wait
        too_long = LLMError(f"The model server at {self.url} did not finish its streamed answer "
                            f"within {wait:g} s"
                            + (" (what was left of --max-seconds)" if wait < self.timeout else "") +
                            ". The reply was too long or the server too slow; it was stopped "
                            "there.")
        done, data_seen, stranger = False, False, None
        try:
            lines = lines_until(stream_lines(response), deadline, too_long)
            for kind, value, event in sse_items(lines):
                # the server ignored stream=true and sent a whole completion
                if kind == "whole":
                    message, usage, reason = parse_completion(value, self.url, self.model)
                    return assembler.replay(strip_think(message)), usage, reason
                if kind == "error":         # older llama.cpp: `error: {...}` instead of a data line
                    raise self.stream_error(value)
                done, stranger = kind == "done", stranger or (value if kind == "stranger" else None)
                if kind == "data":
                    data_seen = True
                    chunk = self.parse_chunk(value)
                    if event == "error" or chunk.get("error") not in (None, "", {}):
                        raise self.stream_error(chunk.get("error") or chunk)
                    assembler.add_chunk(chunk)
        except requests.exceptions.RequestException as e:
            stopped = stream_stopped(e, self.url, wait, hang, too_long)
            if stopped:
                raise stopped from None
            # a broken connection is a cut stream, not an empty answer
            done, data_seen = False, True
        if done:
            drain(response)
        return self.stream_end(assembler, done, data_seen, stranger)

    def stream_end(self, assembler, done, data_seen, stranger):
        """The assembled answer of a stream that ended; an LLMError when it was no stream or was
        cut."""
        if not data_seen and stranger is not None:
            raise LLMError(f"The answer from {self.url} is not a stream of server-sent events: "
                           f"{excerpt(stranger)!r}. Does --base-url point at an OpenAI-compatible "
                           "/v1 endpoint?")
        if not data_seen:
            raise self.empty_stream()
        assembler.finish()
        if not done or assembler.finish_reason is None:
            missing = "[DONE]" if assembler.finish_reason else "a finish_reason"
            raise LLMError(f"The streamed answer from {self.url} ended before {missing}: the "
                           "stream broke part-way. The server may have crashed or run out of "
                           "memory; check its log and try again.")
        return (strip_think(canonical_message(assembler.message())), clean_usage(assembler.usage),
                assembler.finish_reason)

    def parse_chunk(self, value):
        chunk = parse_json(value)
        if not isinstance(chunk, dict):
            raise LLMError(f"The stream from {self.url} sent a piece that is not a JSON object: "
                           f"{excerpt(value)!r}. Does --base-url point at an OpenAI-compatible /v1 "
                           "endpoint?")
        return chunk

    def stream_error(self, error):
        """llama.cpp reports e.g. a context overflow as an error event inside a 200 stream."""
        if isinstance(error, str) and isinstance(parse_json(error), (dict, str)):
            error = parse_json(error)
        if isinstance(error, dict) and error.get("error"):
            error = error["error"]
        text = (error if isinstance(error, str)
                else json.dumps(error, ensure_ascii=False, default=str))
        message = error.get("message") if isinstance(error, dict) else None
        detail = (bounded(validation_summary(message if isinstance(message, str) and message
                                             else text)))
        return context_overflow(text, detail, self.url) or LLMError(
            f"The server at {self.url} reported an error in the middle of its streamed answer: "
            f"{detail}. Check the server's log.")

    def empty_stream(self):
        """An HTTP 200 with no data at all: llama-cpp-python's way of saying the prompt did not
        fit."""
        said = (f"The server at {self.url} answered with an empty stream (HTTP 200, no data). That "
                "is most likely a context overflow, the conversation no longer fitting the "
                "model's context window: llama-cpp-python answers so when streaming (--no-stream "
                "shows the server's own error)")
        return ContextOverflow(overflow_message(None, None, said, sure=False))


def reply_timeout(timeout, limit):
    """The client's own timeout, or less when the caller has less time left."""
    return timeout if limit is None else max(0.1, min(timeout, limit))


def stream_lines(response, chunk_size=512):
    """The body's lines as bytes, as response.iter_lines() gives them, in linear time. requests
    joins the unfinished line to each new chunk and splits it all again: one 30 MB line (a huge
    streamed reply) cost minutes. Here each chunk is split once and an unfinished line grows in
    place."""
    pending = bytearray()
    for chunk in response.iter_content(chunk_size):
        *ended, rest = chunk.split(b"\n")
        for line in ended:
            pending += line
            yield bytes(pending).removesuffix(b"\r")
            pending.clear()
        pending += rest
    if pending:
        yield bytes(pending).removesuffix(b"\r")


def lines_until(lines, deadline, too_long):
    """The lines, until the deadline: past it, `too_long` (an LLMError) is raised. Both dialects'
    streams are read through this and stream_stopped."""
    for line in lines:
        if time.monotonic() > deadline:
            raise too_long
        yield line


def stream_stopped(error, url, wait, hang, too_long):
    """A read of a streamed answer failed: `too_long` when HangUp cut it at the deadline, an
    LLMError when the server went silent for `wait` seconds, else None (the connection broke: a cut
    stream, which each dialect reports in its own words)."""
    if hang is not None and hang.fired:
        return too_long
    if "timed out" in str(error):
        return LLMError(f"The model server at {url} stopped sending its streamed answer for "
                        f"{wait:g} s. It may be overloaded or stuck; check its log and try again.")
    return None


def read_body(response, deadline, hang=None):
    """The whole body, read in pieces; a server that trickles forever still meets the deadline
    (HangUp cuts a read that blocks past it). Reading it all here also surfaces a connection
    dropped mid-answer."""
    parts = []
    try:
        for part in response.iter_content(65536):
            parts.append(part)
            if time.monotonic() > deadline:
                raise requests.exceptions.ReadTimeout("the answer took longer than the time left")
    except requests.exceptions.RequestException:
        if hang is not None and hang.fired:
            raise requests.exceptions.ReadTimeout(
                "the answer took longer than the time left") from None
        raise
    return b"".join(parts)


class HangUp:
    """Bounds one reply in time whatever the server does. The socket timeout bounds each read, not
    the reply: a server that sends one byte every 0.2 s never trips it. At the deadline a timer
    shuts the connection's socket, so the read blocked on it returns at once with an error, and
    `fired` tells the reader that this was the deadline, not a broken connection. (A server that
    trickles its *headers* is bounded by the socket timeout only: there is no socket to hold yet.)
    It fires GRACE seconds after the deadline: a server that merely went silent is then reported as
    silent by the socket timeout, which comes first."""

    GRACE = 0.5

    def __init__(self, response, deadline):
        self.response, self.fired = response, False
        self.timer = (threading.Timer(max(0.0, deadline - time.monotonic())
                                      + self.GRACE, self.hang_up))
        self.timer.daemon = True

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()

    def hang_up(self):
        self.fired = True
        sock = connection_socket(self.response)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass                # already closed: the read has ended anyway


def connection_socket(response):
    """The socket under a requests response (urllib3 2.x keeps its connection; 1.x only the
    file)."""
    raw = getattr(response, "raw", None)
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is None and raw is not None:
        try:
            sock = raw._fp.fp.raw._sock
        except AttributeError:
            return None
    return sock


def parse_completion(raw, url, model):
    """A whole chat.completion body -> (message, usage, finish_reason); anything else is an
    LLMError."""
    data = parse_json(raw)
    if isinstance(data, dict) and data.get("error") not in (None, "", {}) and "choices" not in data:
        raise status_error(200, raw, url, model)   # an error reported inside a 200 answer
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(message := choice.get("message"), dict):
        raise LLMError(f"The answer from {url} is not a chat completion (no JSON with "
                       f"choices[0].message): {excerpt(raw)!r}. Does --base-url point at an "
                       "OpenAI-compatible /v1 endpoint?")
    reason = choice.get("finish_reason")
    return (canonical_message(message), clean_usage(data.get("usage")),
            clean(reason) if isinstance(reason, str) else None)


# --- Errors, in words --------------------------------------------------------------------------

def explain_network_error(error, url, timeout, budget=False):
    """budget: the timeout was the time left of the run (--max-seconds), not the client's own."""
    text = str(error)
    if isinstance(error, requests.exceptions.Timeout) and budget:
        return (f"The model server at {url} did not finish its answer within the {timeout:g} s "
                "left of the run's time limit (--max-seconds). Give the run more time, or ask for "
                "less at once.")
    proxy = proxy_in_the_way(url)
    if proxy and isinstance(error, requests.exceptions.ProxyError):
        return (f"Could not reach the model server at {url} through {proxy}: the proxy did not "
                f"answer or refused the connection ({excerpt(text, 160)}). Check the proxy, or "
                f"let requests to this host go direct: NO_PROXY={urlsplit(url).hostname}.")
    if isinstance(error, requests.exceptions.Timeout):
        return (f"The model server at {url} did not answer within {timeout:g} s. "
                "A large model may still be loading; try again, or try a smaller model.")
    if isinstance(error, requests.exceptions.ConnectionError) and "refused" not in text.lower() \
            and any(s in text for s in ("IncompleteRead", "RemoteDisconnected", "aborted")):
        return (f"The model server at {url} closed the connection before its answer was complete. "
                "It may have crashed or run out of memory; check its log and try again.")
    if isinstance(error, (requests.exceptions.ChunkedEncodingError,
                          requests.exceptions.ContentDecodingError)):
        return (f"The connection to {url} broke while the answer was being sent. "
                "The server may have crashed or run out of memory; check its log and try again.")
    if any(s in text for s in ("NameResolutionError", "Name or service not known",
                               "nodename nor servname",
                               "getaddrinfo failed", "Temporary failure in name resolution",
                               "No address associated with hostname", "Failed to resolve")):
        return (f"The host name '{urlsplit(url).hostname}' in {url} could not be resolved (no such "
                "name in DNS). Check the spelling of --base-url (or TINYHARNESS_BASE_URL), e.g. "
                "http://localhost:11434/v1.")
    return (f"Could not connect to the model server at {url}"
            + (f" (the request went through {proxy})" if proxy else "") +
            ". Is it running? For Ollama, start it with `ollama serve`; for another server, pass "
            "--base-url or set TINYHARNESS_BASE_URL.")


def status_error(status, raw, url, model):
    """The LLMError for an HTTP error answer (a ContextOverflow when the prompt was too long)."""
    detail = error_detail(raw)
    overflow = context_overflow(raw, detail, url)
    return overflow or LLMError(explain_status(status, detail, url, model))


def explain_status(status, body, url, model):
    if status == 404 and "model" in body.lower() and "not found" in body.lower():
        return (f"The server at {url} does not have the model '{model}' (HTTP 404: {body}). "
                f"Pull it with `ollama pull {model}`, or choose another with --model.")
    # the server's docs show the whole endpoint
    if status == 404 and url.endswith("/chat/completions" * 2):
        return (f"The server at {url} answered HTTP 404: {body}. --base-url is the part without "
                f"/chat/completions: try --base-url {url[:-2 * len('/chat/completions')]}")
    if status == 404 and "/v1" not in urlsplit(url).path:
        base = url[: -len("/chat/completions")]
        return (f"The server at {url} answered HTTP 404: {body}. OpenAI-compatible servers answer "
                f"under /v1: try --base-url {base}/v1")
    hint = ("Set TINYHARNESS_API_KEY if the server needs a key (OPENAI_API_KEY is sent only to "
            "an endpoint from --base-url or OPENAI_BASE_URL)."
            if status in (401, 403) else "Check the server's log.")
    return f"The server at {url} answered HTTP {status}: {body}. {hint}"


def error_detail(raw):
    """The informative part of an error body: `error.message` (OpenAI, Ollama, llama.cpp), `detail`
    (FastAPI servers), else the text itself; bounded, but never cut before the cause."""
    data = parse_json(raw)
    text = None
    if isinstance(data, dict):
        error = data.get("error")
        text = error.get("message") if isinstance(error, dict) else error
        if not isinstance(text, str) or not text:
            text = data.get("detail") or data.get("message")
        if isinstance(text, list):                 # FastAPI: [{"loc": [...], "msg": "..."}]
            text = "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}"
                             if isinstance(d, dict)
                             else str(d) for d in text)
    if not isinstance(text, str) or not text:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    return bounded(validation_summary(text))


def validation_summary(text):
    """Pydantic's "7 validation errors" (llama-cpp-python) list one error per member of a union of
    message types; the ones about the role ("Input should be 'system'") only say which member did
    not apply. Keep the others: they name the real cause, e.g. `content: Input should be a valid
    string`."""
    errors = (re.findall(r"^(\S+)\n\s+(.+?) \[type=(\w+)(?:, input_value=([^,\]]{0,60}))?", text,
                         re.MULTILINE))
    causes = [e for e in errors if e[2] != "literal_error"] or errors
    if not causes:
        return text
    head = text.splitlines()[0]
    return (head + ": "
            + "; ".join(f"{loc}: {msg} (input {value or '?'})" for loc, msg, _, value in causes))


def bounded(text, limit=EXCERPT_LIMIT):
    text = " ".join(clean(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def excerpt(raw, limit=300):
    text = (raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw).strip()
    return text if len(text) <= limit else text[:limit] + "..."


# The ways servers say "the prompt is longer than the context window".
# llama.cpp server (400, or 500 in older builds)
OVERFLOW_SIGNS = ("exceed_context_size_error",
                  "context_length_exceeded",             # OpenAI, llama-cpp-python
                  "maximum context length",              # vLLM, OpenAI
                  "exceed context window",               # llama-cpp-python's message
                  # llama.cpp's message (also inside Ollama's error)
                  "exceeds the available context size",
                  # Ollama (llm/llama_server.go), with truncate: false
                  "longer than the context length",
                  "input length exceeds the context length")  # Ollama (llm/llama_server.go)
PROMPT_PATTERNS = (r'"n_prompt_tokens"\s*:\s*(\d+)', r"(\d+) in the messages",
                   r"messages resulted in (\d+)",
                   r"request has (\d+) input tokens", r"Requested tokens \((\d+)\)",
                   r"prompt is (\d+) tokens")
WINDOW_PATTERNS = (r'"n_ctx"\s*:\s*(\d+)', r"maximum context length is (\d+)",
                   r"context window of (\d+)")


def context_overflow(raw, detail, url):
    """A ContextOverflow when the error body says the prompt did not fit, else None."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    # the body may hold the server's JSON as an escaped string (Ollama wraps llama.cpp's)
    text += "\n" + detail
    if not any(sign in text.lower() for sign in OVERFLOW_SIGNS):
        return None
    prompt, window = (next((int(m.group(1)) for p in patterns for m in [re.search(p, text)]
                            if m), None)
                      for patterns in (PROMPT_PATTERNS, WINDOW_PATTERNS))
    return (ContextOverflow(overflow_message(prompt, window,
                                             f"The server at {url} said: {detail}"), prompt,
                            window))


def overflow_message(prompt, window, said, sure=True):
    numbers = ([f"{prompt} prompt tokens" if prompt else "", f"the window holds {window}" if window
                else ""])
    shown = f" ({'; '.join(n for n in numbers if n)})" if any(numbers) else ""
    lead = f"The conversation no longer fits the model's context window{shown}. " if sure else ""
    # the server's sentence may end in a full stop of its own
    said = said.rstrip().rstrip(".")
    return (f"{lead}{said}. What to do: give the task in smaller steps; use a model with a longer "
            "context; give the server a bigger window (Ollama: num_ctx or --context-window with "
            "--api ollama; llama.cpp: --ctx-size; llama-cpp-python: --n_ctx; vLLM: "
            "--max-model-len); where the harness has --context-window, set it to the server's "
            "real window so old tool results are cut in time.")
