"""One door to the model: the only file that speaks HTTP.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given) and return
three things: the assistant message, the token usage and the finish_reason. Switching from Ollama to
llama.cpp, vLLM or a cloud API means changing base_url and model, nothing else.

The lesson of this file: the serving layer hands you structure you must not trust blindly. Real
servers answer tool calls with `content: null`, arguments as an object or as broken JSON, calls
without ids, token counts as strings - and then *reject* those same shapes when the harness sends
the conversation back (llama-cpp-python answers HTTP 500 to an assistant `content: null`, Ollama
400 to arguments that are not a JSON object). So the door rebuilds every reply into one canonical
message, the only shape the rest of the harness ever sees and the only shape that goes back on the
wire. What it cannot repair (a call without a tool name, arguments that are not a JSON object) it
does not guess at: the call gets `{}` and the problem is handed to the loop under the private key
`_problems` ({call id: what was wrong}), so the model can be told and try again.
"""
import json
import re
import time
from urllib.parse import urlsplit

import requests

DEFAULT_MODEL = "qwen3:8b"
DEFAULT_BASE_URL = "http://localhost:11434/v1"
# Sent as max_tokens with every request: without a cap one rambling reply can run for minutes, and a
# reply cut here says finish_reason "length", which the loop must never take as a finished answer.
MAX_REPLY_TOKENS = 4096
# Where servers put a model's reasoning: Ollama /v1 says `reasoning`, llama.cpp and DeepSeek-style
# APIs `reasoning_content`, Ollama's native API `thinking`. It stays under the name the server used.
REASONING_FIELDS = ("reasoning", "reasoning_content", "thinking")
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
                 max_reply_tokens=MAX_REPLY_TOKENS):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout = timeout  # a cold model can take a minute or more to load
        self.max_reply_tokens = max_reply_tokens

    # exercise(m0): Write Client.chat: POST the model, the messages, max_tokens (and the tools, when given) to self.url, and return parse_completion's (message, usage, finish_reason), turning every failure into an LLMError that gives advice.
    def chat(self, messages, tools=None, timeout=None):
        """Send the conversation; return (canonical assistant message, usage, finish_reason).

        timeout, when given, bounds this whole reply (not only each read of it)."""
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_reply_tokens,
                **({"tools": tools} if tools else {})}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        wait = reply_timeout(self.timeout, timeout)
        try:
            with requests.post(self.url, json=body, headers=headers, timeout=wait, stream=True) as response:
                raw = read_body(response, time.monotonic() + wait)
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, wait, wait < self.timeout)) from None
        if response.status_code != 200:
            raise status_error(response.status_code, raw, self.url, self.model)
        return parse_completion(raw, self.url, self.model)


def reply_timeout(timeout, limit):
    """The client's own timeout, or less when the caller has less time left."""
    return timeout if limit is None else max(0.1, min(timeout, limit))


def read_body(response, deadline):
    """The whole body, read in pieces so a server that trickles forever still meets the deadline.
    Reading it all here also surfaces a connection dropped mid-answer."""
    parts = []
    for part in response.iter_content(65536):
        parts.append(part)
        if time.monotonic() > deadline:
            raise requests.exceptions.ReadTimeout("the answer took longer than the time left")
    return b"".join(parts)


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
                  "exceeds the available context size")  # llama.cpp's message
PROMPT_PATTERNS = (r'"n_prompt_tokens"\s*:\s*(\d+)', r"(\d+) in the messages", r"messages resulted in (\d+)",
                   r"request has (\d+) input tokens", r"Requested tokens \((\d+)\)", r"prompt is (\d+) tokens")
WINDOW_PATTERNS = (r'"n_ctx"\s*:\s*(\d+)', r"maximum context length is (\d+)", r"context window of (\d+)")


def context_overflow(raw, detail, url):
    """A ContextOverflow when the error body says the prompt did not fit, else None."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    if not any(sign in text.lower() for sign in OVERFLOW_SIGNS):
        return None
    prompt, window = (next((int(m.group(1)) for p in patterns for m in [re.search(p, text)] if m), None)
                      for patterns in (PROMPT_PATTERNS, WINDOW_PATTERNS))
    return ContextOverflow(overflow_message(prompt, window, f"The server at {url} said: {detail}"), prompt, window)


def overflow_message(prompt, window, said, sure=True):
    numbers = [f"{prompt} prompt tokens" if prompt else "", f"the window holds {window}" if window else ""]
    numbers = f" ({'; '.join(n for n in numbers if n)})" if any(numbers) else ""
    lead = f"The conversation no longer fits the model's context window{numbers}. " if sure else ""
    return (f"{lead}{said}. What to do: give the task in smaller steps; use a model with a longer context; give "
            "the server a bigger window (Ollama: num_ctx; llama.cpp: --ctx-size); where the harness has "
            "--context-window, set it to the server's real window so old tool results are cut in time.")
