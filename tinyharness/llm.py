"""One door to the model: the only file that speaks HTTP.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given) and return
three things: the assistant message, the token usage and the finish_reason. Switching from Ollama to
llama.cpp, vLLM or a cloud API means changing base_url and model, nothing else.

The serving layer hands you structure you must not trust blindly: `content: null` beside tool calls,
arguments as objects or broken JSON, calls without ids, counts as strings - and servers reject those
same shapes when they come back. Every reply, streamed or not, ends in one normaliser
(`canonical_message`): the rest of the harness only ever sees, and sends back, one canonical shape.
What it cannot repair it hands to the loop under the private key `_problems`, never guessing.

With stream=True the server sends its answer as server-sent events (SSE): one `data: {json}` line
per small piece, then `data: [DONE]`. We print text as it arrives (through the on_text callback)
and assemble the pieces into the same raw message a non-streaming call returns, so the loop never
knows the difference. Servers differ in how they cut tool calls into pieces (see Assembler).
"""
import json
import re
import socket
import threading
import time
from urllib.parse import urlsplit

import requests

DEFAULT_MODEL = "qwen3:8b"
DEFAULT_BASE_URL = "http://localhost:11434/v1"
# Sent as max_tokens with every request: without a cap one rambling reply can run for minutes, and a
# reply cut here says finish_reason "length", which the loop must never take as a finished answer.
MAX_REPLY_TOKENS = 4096
# Where servers put a model's reasoning: Ollama /v1 says `reasoning`, llama.cpp and DeepSeek-style
# APIs `reasoning_content`, Ollama's native API `thinking` (recent vLLM sends both of the first two).
REASONING_FIELDS = ("reasoning", "reasoning_content", "thinking")
# Reasoning sent back with tool results stays on the assistant message under the name the server
# used, because each server reads back the name it writes: Ollama's /v1 maps an incoming
# `reasoning` to the model's thinking (openai/openai.go, FromChatRequest); llama.cpp reads
# `reasoning_content` (common/chat.cpp, common_chat_msgs_parse_oaicompat); recent vLLM writes both
# names and reads `reasoning` (vllm#38488). Chat templates use it: Qwen3 keeps the reasoning of the
# assistant turns after the last user message (the tool-call chain), gpt-oss needs it between tool
# calls. Reasoning found only in <think> tags is stored as `reasoning` (Ollama first; unknown
# fields are ignored by the others).
DEFAULT_REASONING_FIELD = "reasoning"
EXCERPT_LIMIT = 600     # characters of a server's error we show: enough for the cause, never a page


class LLMError(Exception):
    """Talking to the model failed; the message is written for a person, not a stack trace."""


class ContextOverflow(LLMError):
    """The conversation no longer fits the model's context window. The numbers are the server's
    (None when it did not say)."""

    def __init__(self, message, prompt_tokens=None, context_window=None):
        super().__init__(message)
        self.prompt_tokens, self.context_window = prompt_tokens, context_window


class Client:
    def __init__(self, base_url=DEFAULT_BASE_URL, model=DEFAULT_MODEL, api_key=None, timeout=600,
                 stream=False, on_text=None, on_reasoning=None, max_reply_tokens=MAX_REPLY_TOKENS):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout = timeout  # a cold model can take a minute or more to load
        self.stream = stream
        self.on_text, self.on_reasoning = on_text, on_reasoning  # defaults for chat(); used when streaming
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
            return self.chat_streaming(body, headers, on_text or self.on_text, on_reasoning or self.on_reasoning, wait)
        started = time.monotonic()
        try:
            with requests.post(self.url, json=body, headers=headers, timeout=wait, stream=True) as response, \
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
            with requests.post(self.url, json=body, headers=headers, timeout=wait, stream=True) as response, \
                    HangUp(response, started + wait) as hang:
                if response.status_code != 200:
                    raise status_error(response.status_code, read_body(response, started + wait, hang),
                                       self.url, self.model)
                return self.read_stream(response, Assembler(on_text, on_reasoning), wait, started + wait, hang)
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, wait, wait < self.timeout)) from None

    def read_stream(self, response, assembler, wait, deadline=None, hang=None):
        """Feed the SSE lines to the assembler; fail clearly on an error event or a cut stream."""
        # iter_lines on bytes, decoded per line: a line never ends inside a UTF-8 character, so a
        # character cut between two network reads is put back together before decoding. Each HTTP
        # chunk is handed over as it arrives (Ollama, llama.cpp and vLLM stream chunked bodies).
        lines, deadline = response.iter_lines(), deadline or time.monotonic() + wait
        too_long = LLMError(f"The model server at {self.url} did not finish its streamed answer within {wait:g} s"
                            + (" (what was left of --max-seconds)" if wait < self.timeout else "") +
                            ". The reply was too long or the server too slow; it was stopped there.")
        event, done, first, data_seen, stranger = None, False, True, False, None
        try:
            for raw_line in lines:
                if time.monotonic() > deadline:
                    raise too_long
                line = raw_line.decode("utf-8", errors="replace")
                if not line.strip():
                    event = None            # a blank line ends one event
                    continue
                if first and line.lstrip().startswith("{"):
                    # The server ignored stream=true and sent a whole completion: take it as it is.
                    message, usage, reason = parse_completion(b"\n".join([raw_line, *lines]), self.url, self.model)
                    return assembler.replay(strip_think(message)), usage, reason
                first = False
                field, _, value = line.partition(":")
                value = value.strip()
                if field == "event":
                    event = value
                elif field == "error":      # older llama.cpp: `error: {...}` instead of a data line
                    raise self.stream_error(value)
                elif field == "data" and value == "[DONE]":
                    done = True
                    break
                elif field not in ("data", "id", "retry") and not line.startswith(":"):
                    stranger = stranger or line   # not SSE at all, e.g. a web page where the API should be
                elif field == "data":
                    data_seen = True
                    chunk = self.parse_chunk(value)
                    if event == "error" or chunk.get("error") not in (None, "", {}):
                        raise self.stream_error(chunk.get("error") or chunk)
                    assembler.add_chunk(chunk)
                # other lines (": keep-alive" comments, id:, retry:) carry nothing for us
        except requests.exceptions.RequestException as e:
            if hang is not None and hang.fired:
                raise too_long from None
            if "timed out" in str(e):
                raise LLMError(f"The model server at {self.url} stopped sending its streamed answer for "
                               f"{wait:g} s. It may be overloaded or stuck; check its log and try again.") from None
            done, data_seen = False, True   # a broken connection is a cut stream, not an empty answer
        if not data_seen and stranger is not None:
            raise LLMError(f"The answer from {self.url} is not a stream of server-sent events: {excerpt(stranger)!r}. "
                           "Does --base-url point at an OpenAI-compatible /v1 endpoint?")
        if not data_seen:
            raise self.empty_stream()
        assembler.finish()
        if not done or assembler.finish_reason is None:
            missing = "[DONE]" if assembler.finish_reason else "a finish_reason"
            raise LLMError(f"The streamed answer from {self.url} ended before {missing}: the stream broke part-way. "
                           "The server may have crashed or run out of memory; check its log and try again.")
        return strip_think(canonical_message(assembler.message())), clean_usage(assembler.usage), assembler.finish_reason

    def parse_chunk(self, value):
        chunk = parse_json(value)
        if not isinstance(chunk, dict):
            raise LLMError(f"The stream from {self.url} sent a piece that is not a JSON object: "
                           f"{excerpt(value)!r}. Does --base-url point at an OpenAI-compatible /v1 endpoint?")
        return chunk

    def stream_error(self, error):
        """llama.cpp reports e.g. a context overflow as an error event inside a 200 stream."""
        if isinstance(error, str) and isinstance(parse_json(error), (dict, str)):
            error = parse_json(error)
        if isinstance(error, dict) and error.get("error"):
            error = error["error"]
        text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False, default=str)
        message = error.get("message") if isinstance(error, dict) else None
        detail = bounded(validation_summary(message if isinstance(message, str) and message else text))
        return context_overflow(text, detail, self.url) or LLMError(
            f"The server at {self.url} reported an error in the middle of its streamed answer: {detail}. "
            "Check the server's log.")

    def empty_stream(self):
        """An HTTP 200 with no data at all: llama-cpp-python's way of saying the prompt did not fit."""
        said = (f"The server at {self.url} answered with an empty stream (HTTP 200, no data). That is most likely "
                "a context overflow, the conversation no longer fitting the model's context window: llama-cpp-python "
                "answers so when streaming (--no-stream shows the server's own error)")
        return ContextOverflow(overflow_message(None, None, said, sure=False))


def reply_timeout(timeout, limit):
    """The client's own timeout, or less when the caller has less time left."""
    return timeout if limit is None else max(0.1, min(timeout, limit))


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
            raise requests.exceptions.ReadTimeout("the answer took longer than the time left") from None
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
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()) + self.GRACE, self.hang_up)
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
    """The socket under a requests response (urllib3 2.x keeps its connection; 1.x only the file)."""
    raw = getattr(response, "raw", None)
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is None:
        try:
            sock = raw._fp.fp.raw._sock
        except AttributeError:
            return None
    return sock


def parse_completion(raw, url, model):
    """A whole chat.completion body -> (message, usage, finish_reason); anything else is an LLMError."""
    data = parse_json(raw)
    if isinstance(data, dict) and data.get("error") not in (None, "", {}) and "choices" not in data:
        raise status_error(200, raw, url, model)   # an error reported inside a 200 answer
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise LLMError(f"The answer from {url} is not a chat completion (no JSON with choices[0].message): "
                       f"{excerpt(raw)!r}. Does --base-url point at an OpenAI-compatible /v1 endpoint?")
    reason = choice.get("finish_reason")
    return canonical_message(message), clean_usage(data.get("usage")), clean(reason) if isinstance(reason, str) else None


def parse_json(raw):
    """The JSON value of a body, or None. Deep nesting (a RecursionError) counts as not JSON."""
    try:
        return json.loads(raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw)
    except (ValueError, RecursionError):
        return None


# --- The canonical message -------------------------------------------------------------------

def canonical_message(raw):
    """Any message-shaped object from a server -> the one shape the harness keeps and sends back:
    {"role": "assistant", "content": str, "tool_calls": [{id, type, function: {name, arguments}}]}
    (tool_calls only when there are some), plus the reasoning under the server's own field name.
    Everything else the server added (`index`, the legacy `function_call`, ...) is left behind."""
    message = {"role": "assistant", "content": as_text(raw.get("content"))}
    field = next((f for f in REASONING_FIELDS if isinstance(raw.get(f), str) and raw[f]), None)
    if field:
        message[field] = clean(raw[field])
    calls, problems = [], {}
    for number, item in enumerate(as_list_of_calls(raw.get("tool_calls")), 1):
        call, problem = canonical_call(item, number, {c["id"] for c in calls})
        calls.append(call)
        if problem:
            problems[call["id"]] = problem
    if calls:
        message["tool_calls"] = calls
    if problems:
        message["_problems"] = problems   # private: the loop pops it before the message is kept
    return message


def clean(text):
    """A lone surrogate (half an emoji, escaped alone in JSON) cannot be encoded, and servers reject it
    when it comes back: it becomes '?'."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def as_text(content):
    """The content as a string: null is "", text parts are joined, anything else is shown as JSON."""
    if isinstance(content, str):
        return clean(content)
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(as_text(p.get("text")) if isinstance(p, dict) else as_text(p) for p in content)
    return clean(json.dumps(content, ensure_ascii=False))


def as_list_of_calls(tool_calls):
    """tool_calls should be a list; a single call object, or a list written as a JSON string, is
    taken as meant. Anything else becomes one item that canonical_call reports."""
    if isinstance(tool_calls, str) and tool_calls.strip():
        parsed = parse_json(tool_calls)
        tool_calls = parsed if isinstance(parsed, (list, dict)) else tool_calls
    if not tool_calls:
        return []
    return tool_calls if isinstance(tool_calls, list) else [tool_calls]


def canonical_call(item, number, used_ids):
    """One call -> ({id, type, function: {name, arguments}}, what was wrong or None)."""
    if isinstance(item, str):
        item = parse_json(item) if isinstance(parse_json(item), dict) else item
    if not isinstance(item, dict):
        return blank_call(new_id(number, used_ids)), f"tool call {number} is not an object but {describe(item)}"
    function, problem = item.get("function"), None
    if not isinstance(function, dict):
        if function is None and ("name" in item or "arguments" in item):
            function = item                      # a flattened call: {"name", "arguments"}
        else:
            function, problem = {}, f"the call has no function object (got {describe(function)})"
    name = function.get("name")
    if not isinstance(name, str):
        problem = problem or f"the tool name must be a string, not {describe(name)}"
        name = ""
    elif not name.strip():
        problem = problem or "the call names no tool"
    arguments, wrong_arguments = canonical_arguments(function.get("arguments"))
    call_id = item.get("id")
    if not isinstance(call_id, str) or not call_id or call_id in used_ids:
        call_id = new_id(number, used_ids)       # the result must still be paired to its call
    call = {"id": clean(call_id), "type": "function", "function": {"name": clean(name), "arguments": arguments}}
    return call, problem or wrong_arguments


def blank_call(call_id):
    return {"id": call_id, "type": "function", "function": {"name": "", "arguments": "{}"}}


def new_id(number, used_ids):
    call_id, extra = f"call_{number}", 1
    while call_id in used_ids:
        call_id, extra = f"call_{number}_{extra}", extra + 1
    return call_id


def canonical_arguments(arguments):
    """(a string holding a JSON object, what was wrong or None). Broken arguments become "{}": a
    server rejects the whole conversation once a past call carries them (Ollama: HTTP 400)."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return "{}", None                        # no arguments at all: a call that needs none
    if isinstance(arguments, dict):               # Ollama's native API and some /v1 servers send objects
        return dump_object(arguments)
    if not isinstance(arguments, str):
        return "{}", f"the arguments must be a JSON object, not {describe(arguments)}"
    try:
        value = strict_json(arguments)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = strict_json(value)             # an object encoded twice: still what the model meant
    except (ValueError, RecursionError) as e:
        return "{}", f"the arguments are not valid JSON ({e}): {arguments[:200]!r}"
    if not isinstance(value, dict):
        return "{}", f"the arguments must be a JSON object, not {arguments[:200]!r}"
    if isinstance(strict_json(arguments), str):
        return dump_object(value)
    return escape_surrogates(arguments), None   # the model's own spelling, byte for byte


def strict_json(text):
    """json.loads without Python's extensions (NaN, Infinity, 1e999): other servers reject them."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    def finite(token):
        value = float(token)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{token} is too large a number")
        return value
    return json.loads(text, parse_constant=refuse, parse_float=finite)


def dump_object(value):
    try:
        return escape_surrogates(json.dumps(value, ensure_ascii=False, allow_nan=False)), None
    except (ValueError, TypeError, RecursionError) as e:
        return "{}", f"the arguments cannot be sent back as JSON ({e})"


def escape_surrogates(json_text):
    """A lone surrogate can only sit inside a JSON string: write it as its \\u escape, which every
    server reads back, and the tool still sees (and refuses) exactly what the model sent."""
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", json_text)


def describe(value):
    """A short description of a value, for a problem the model will read."""
    if value is None:
        return "null"
    kind = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        shown = "..."
    return f"{kind} {clean(shown[:80])}{'...' if len(shown) > 80 else ''}"


def clean_usage(usage):
    """Only the counts a server really reported as whole numbers; {} when there are none."""
    if not isinstance(usage, dict):
        return {}
    counts = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens") if is_count(usage.get(k))}
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and is_count(details.get("cached_tokens")):
        counts["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    return counts


def is_count(value):
    return type(value) is int and value >= 0   # not a bool, not "12", not 12.5


# --- Errors, in words --------------------------------------------------------------------------

def explain_network_error(error, url, timeout, budget=False):
    """budget: the timeout was the time left of the run (--max-seconds), not the client's own."""
    text = str(error)
    if isinstance(error, requests.exceptions.Timeout) and budget:
        return (f"The model server at {url} did not finish its answer within the {timeout:g} s left of the "
                "run's time limit (--max-seconds). Give the run more time, or ask for less at once.")
    if isinstance(error, requests.exceptions.Timeout):
        return (f"The model server at {url} did not answer within {timeout:g} s. "
                "A large model may still be loading; try again, or try a smaller model.")
    if isinstance(error, requests.exceptions.ConnectionError) and "refused" not in text.lower() \
            and any(s in text for s in ("IncompleteRead", "RemoteDisconnected", "aborted")):
        return (f"The model server at {url} closed the connection before its answer was complete. "
                "It may have crashed or run out of memory; check its log and try again.")
    if isinstance(error, (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError)):
        return (f"The connection to {url} broke while the answer was being sent. "
                "The server may have crashed or run out of memory; check its log and try again.")
    if any(s in text for s in ("NameResolutionError", "Name or service not known", "nodename nor servname",
                               "getaddrinfo failed", "Temporary failure in name resolution",
                               "No address associated with hostname", "Failed to resolve")):
        return (f"The host name '{urlsplit(url).hostname}' in {url} could not be resolved (no such name in DNS). "
                "Check the spelling of --base-url (or TINYHARNESS_BASE_URL), e.g. http://localhost:11434/v1.")
    return (f"Could not connect to the model server at {url}. Is it running? For Ollama, start it with "
            "`ollama serve`; for another server, pass --base-url or set TINYHARNESS_BASE_URL.")


def status_error(status, raw, url, model):
    """The LLMError for an HTTP error answer (a ContextOverflow when the prompt was too long)."""
    detail = error_detail(raw)
    overflow = context_overflow(raw, detail, url)
    return overflow or LLMError(explain_status(status, detail, url, model))


def explain_status(status, body, url, model):
    if status == 404 and "model" in body.lower() and "not found" in body.lower():
        return (f"The server at {url} does not have the model '{model}' (HTTP 404: {body}). "
                f"Pull it with `ollama pull {model}`, or choose another with --model.")
    if status == 404 and url.endswith("/chat/completions" * 2):  # the server's docs show the whole endpoint
        return (f"The server at {url} answered HTTP 404: {body}. --base-url is the part without /chat/completions: "
                f"try --base-url {url[:-2 * len('/chat/completions')]}")
    if status == 404 and "/v1" not in urlsplit(url).path:
        base = url[: -len("/chat/completions")]
        return (f"The server at {url} answered HTTP 404: {body}. OpenAI-compatible servers answer under /v1: "
                f"try --base-url {base}/v1")
    hint = "Set TINYHARNESS_API_KEY if the server needs a key." if status in (401, 403) else "Check the server's log."
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
            text = "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" if isinstance(d, dict)
                             else str(d) for d in text)
    if not isinstance(text, str) or not text:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    return bounded(validation_summary(text))


def validation_summary(text):
    """Pydantic's "7 validation errors" (llama-cpp-python) list one error per member of a union of
    message types; the ones about the role ("Input should be 'system'") only say which member did not
    apply. Keep the others: they name the real cause, e.g. `content: Input should be a valid string`."""
    errors = re.findall(r"^(\S+)\n\s+(.+?) \[type=(\w+)(?:, input_value=([^,\]]{0,60}))?", text, re.M)
    causes = [e for e in errors if e[2] != "literal_error"] or errors
    if not causes:
        return text
    head = text.splitlines()[0]
    return head + ": " + "; ".join(f"{loc}: {msg} (input {value or '?'})" for loc, msg, _, value in causes)


def bounded(text, limit=EXCERPT_LIMIT):
    text = " ".join(clean(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def excerpt(raw, limit=300):
    text = (raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw).strip()
    return text if len(text) <= limit else text[:limit] + "..."


# The ways servers say "the prompt is longer than the context window".
OVERFLOW_SIGNS = ("exceed_context_size_error",           # llama.cpp server (400, or 500 in older builds)
                  "context_length_exceeded",             # OpenAI, llama-cpp-python
                  "maximum context length",              # vLLM, OpenAI
                  "exceed context window",               # llama-cpp-python's message
                  "exceeds the available context size",  # llama.cpp's message (also inside Ollama's error)
                  "longer than the context length",      # Ollama (llm/llama_server.go), with truncate: false
                  "input length exceeds the context length")  # Ollama (llm/llama_server.go)
PROMPT_PATTERNS = (r'"n_prompt_tokens"\s*:\s*(\d+)', r"(\d+) in the messages", r"messages resulted in (\d+)",
                   r"request has (\d+) input tokens", r"Requested tokens \((\d+)\)", r"prompt is (\d+) tokens")
WINDOW_PATTERNS = (r'"n_ctx"\s*:\s*(\d+)', r"maximum context length is (\d+)", r"context window of (\d+)")


def context_overflow(raw, detail, url):
    """A ContextOverflow when the error body says the prompt did not fit, else None."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    text += "\n" + detail      # the body may hold the server's JSON as an escaped string (Ollama wraps llama.cpp's)
    if not any(sign in text.lower() for sign in OVERFLOW_SIGNS):
        return None
    prompt, window = (next((int(m.group(1)) for p in patterns for m in [re.search(p, text)] if m), None)
                      for patterns in (PROMPT_PATTERNS, WINDOW_PATTERNS))
    return ContextOverflow(overflow_message(prompt, window, f"The server at {url} said: {detail}"), prompt, window)


def overflow_message(prompt, window, said, sure=True):
    numbers = [f"{prompt} prompt tokens" if prompt else "", f"the window holds {window}" if window else ""]
    numbers = f" ({'; '.join(n for n in numbers if n)})" if any(numbers) else ""
    lead = f"The conversation no longer fits the model's context window{numbers}. " if sure else ""
    said = said.rstrip().rstrip(".")        # the server's sentence may end in a full stop of its own
    return (f"{lead}{said}. What to do: give the task in smaller steps; use a model with a longer context; give "
            "the server a bigger window (Ollama: num_ctx or --context-window with --api ollama; llama.cpp: "
            "--ctx-size; llama-cpp-python: --n_ctx; vLLM: --max-model-len); where the harness has "
            "--context-window, set it to the server's real window so old tool results are cut in time.")


# --- Putting a stream back together ------------------------------------------------------------

class Assembler:
    """Puts a streamed answer back together: text, reasoning, tool calls, finish_reason, usage.

    Tool-call fragments differ by server. OpenAI and vLLM: the first fragment of a call has its index,
    id and name, later ones only the index and a piece of the arguments. llama-cpp-python repeats
    index, id and name in every fragment and sends explicit nulls. Ollama sends each call whole, in
    one fragment, sometimes without an index or with every call at index 0 (each with its own id).
    Some servers send all calls only in the last chunk. So a fragment continues the call being built
    at its index (or the latest call, without an index) unless its id, or a second name, says a new
    call begins. What comes out is a raw message; canonical_message makes it well-formed."""

    def __init__(self, on_text=None, on_reasoning=None):
        self.on_text, self.on_reasoning = on_text, on_reasoning
        self.text, self.reasoning, self.reasoning_field = [], [], None
        self.calls, self.at_index, self.latest = [], {}, None   # at_index: index -> the call built there
        self.think = ThinkSplitter()
        self.finish_reason, self.usage = None, {}

    def add_chunk(self, chunk):
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]          # with include_usage it comes last, once
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else [choices] if isinstance(choices, dict) else []:
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                continue
            delta = next((d for d in (choice.get("delta"), choice.get("message")) if isinstance(d, dict)), {})
            self.add_reasoning(delta)
            if delta.get("content") is not None:
                self.add_content(as_text(delta["content"]))
            for fragment in as_list_of_calls(delta.get("tool_calls")):
                self.add_tool_call(fragment)
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                self.finish_reason = clean(choice["finish_reason"])

    def add_content(self, text):
        for is_reasoning, piece in self.think.feed(text):
            self.emit(is_reasoning, piece)

    def add_reasoning(self, delta):
        # One field per chunk: a server that sends the same text under two names is counted once.
        field = next((f for f in REASONING_FIELDS if isinstance(delta.get(f), str) and delta[f]), None)
        if field:
            self.reasoning_field = self.reasoning_field or field
            self.emit(True, clean(delta[field]))

    def emit(self, is_reasoning, piece):
        if is_reasoning:
            self.reasoning.append(piece)
            callback = self.on_reasoning
        else:
            if not self.text and self.think.seen:
                piece = piece.lstrip()      # the blank lines after </think> are not the answer
            if not piece:
                return
            self.text.append(piece)
            callback = self.on_text
        if callback:
            callback(piece)

    def add_tool_call(self, fragment):
        if not isinstance(fragment, dict):
            self.calls.append({"raw": fragment})     # canonical_message will say what was wrong
            return
        index = fragment.get("index") if type(fragment.get("index")) is int else None
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) and fragment["id"] else None
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {} if function is None else {"bad": function}
        name = function.get("name")
        call = self.call_for(index, call_id, name)
        call["id"] = call["id"] or call_id
        if call["name"] in (None, "") and name is not None:
            call["name"] = name
        if "bad" in function:
            call["bad"] = function["bad"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and isinstance(call["arguments"], list):
            call["arguments"].append(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            call["arguments"] = arguments        # a whole object at once: it is all the arguments

    def call_for(self, index, call_id, name):
        """The call this fragment belongs to, started if it begins a new one."""
        call = self.at_index.get(index) if index is not None else self.latest
        if call is None or self.starts_new_call(call, call_id, name):
            call = {"id": None, "name": None, "arguments": []}
            self.calls.append(call)
        if index is not None:
            self.at_index[index] = call
        self.latest = call
        return call

    @staticmethod
    def starts_new_call(call, call_id, name):
        if call_id:                               # an id decides: the same id continues (llama-cpp-python)
            return bool(call["id"]) and call_id != call["id"]
        if not isinstance(name, str) or not name or not call["name"]:
            return False                          # a piece of arguments continues the call
        # A name again without an id: a new call when it differs or the arguments so far are complete
        # (Ollama-style whole calls without ids); a repeated name while arguments are open continues.
        text = "".join(call["arguments"]) if isinstance(call["arguments"], list) else None
        return name != call["name"] or text is None or isinstance(parse_json(text or "null"), dict)

    def finish(self):
        for is_reasoning, piece in self.think.flush():
            self.emit(is_reasoning, piece)

    def replay(self, message):
        """A whole message (a server that did not stream): show it through the same callbacks."""
        field = next((f for f in REASONING_FIELDS if isinstance(message.get(f), str) and message[f]), None)
        if field and self.on_reasoning:
            self.on_reasoning(message[field])
        if message["content"] and self.on_text:
            self.on_text(message["content"])
        return message

    def message(self):
        """The assembled answer as a raw message, shaped like a non-streaming one."""
        message = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message[self.reasoning_field or DEFAULT_REASONING_FIELD] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.raw_call(c) for c in self.calls]
        return message

    @staticmethod
    def raw_call(call):
        if "raw" in call:
            return call["raw"]
        arguments = "".join(call["arguments"]) if isinstance(call["arguments"], list) else call["arguments"]
        function = call["bad"] if "bad" in call else {"name": call["name"], "arguments": arguments}
        return {"id": call["id"], "type": "function", "function": function}


class ThinkSplitter:
    """Separates <think>...</think> blocks from the text, even when a tag is cut between chunks.

    Some models write their reasoning into the content inside these tags when the server does not
    parse it out; it must never be taken (or printed) as the answer."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self):
        self.inside, self.seen, self.pending = False, False, ""

    def feed(self, text):
        """Return [(is_reasoning, piece), ...] for all that can be decided now."""
        text, self.pending, out = self.pending + text, "", []
        while text:
            tag = self.CLOSE if self.inside else self.OPEN
            at = text.find(tag)
            if at < 0:
                keep = next((n for n in range(min(len(tag) - 1, len(text)), 0, -1) if tag.startswith(text[-n:])), 0)
                out.append((self.inside, text[:len(text) - keep]))
                self.pending = text[len(text) - keep:]   # maybe the start of a tag: wait for more
                break
            out.append((self.inside, text[:at]))
            text = text[at + len(tag):]
            self.inside = not self.inside
            self.seen = True
        return [(r, p) for r, p in out if p]

    def flush(self):
        """The end of the answer: whatever was held back is what it looked like."""
        rest, self.pending = self.pending, ""
        return [(self.inside, rest)] if rest else []


def strip_think(message):
    """A canonical message with <think> blocks in its content: move them to the reasoning field."""
    if ThinkSplitter.OPEN not in message["content"]:
        return message
    assembler = Assembler()             # the same rules as when streaming, fed the whole text at once
    assembler.add_content(message["content"])
    assembler.finish()
    field = next((f for f in REASONING_FIELDS if message.get(f)), DEFAULT_REASONING_FIELD)
    reasoning = "\n".join(filter(None, [message.get(field) or "", "".join(assembler.reasoning)]))
    return {**message, "content": "".join(assembler.text), field: reasoning}
