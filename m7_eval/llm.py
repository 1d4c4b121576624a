"""One door to the model: the only file that speaks HTTP.

POST {base_url}/chat/completions with the messages (and the tool schemas, when given) and return
three things: the assistant message, the token usage and the finish_reason. Switching from Ollama to
llama.cpp, vLLM or a cloud API means changing base_url and model, nothing else.

The lesson of this file: the serving layer hands you structure you must not trust blindly. Real
servers answer tool calls with `content: null`, arguments as an object or as broken JSON, calls
without ids, token counts as strings - and then *reject* those same shapes when the harness sends
the conversation back (llama-cpp-python answers HTTP 500 to an assistant `content: null`, Ollama
400 to arguments that are not a JSON object). So the door rebuilds every reply into one canonical
message, the only shape the rest of the harness ever sees and sends back. What it cannot repair (a
call without a tool name, arguments that are not a JSON object) it does not guess at: the call gets
`{}` and the problem goes to the loop under the private key `_problems` ({call id: what was wrong}),
so the model can be told and try again.
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
# Where servers put a model's reasoning (Ollama /v1, llama.cpp and DeepSeek, Ollama's native API).
REASONING_FIELDS = ("reasoning", "reasoning_content", "thinking")


class LLMError(Exception):
    """Talking to the model failed; the message is written for a person, not a stack trace."""


class ContextOverflow(LLMError):
    """The conversation no longer fits the model's context window (numbers None when the server did not say)."""

    def __init__(self, message, prompt_tokens=None, context_window=None):
        super().__init__(message)
        self.prompt_tokens, self.context_window = prompt_tokens, context_window


class Client:
    def __init__(self, base_url=DEFAULT_BASE_URL, model=DEFAULT_MODEL, api_key=None, timeout=600,
                 max_reply_tokens=MAX_REPLY_TOKENS):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.max_reply_tokens = model, api_key, max_reply_tokens
        self.timeout = timeout  # a cold model can take a minute or more to load

    # exercise(m0): Write Client.chat: POST the model, the messages, max_tokens (and the tools, when given) to self.url, and return parse_completion's (message, usage, finish_reason), turning every failure into an LLMError that gives advice.
    def chat(self, messages, tools=None, timeout=None):
        """Send the conversation; return (canonical assistant message, usage, finish_reason).
        timeout, when given, bounds this whole reply (the loop passes the time left of the run)."""
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
    """The whole body, read in pieces so a server that trickles forever still meets the deadline."""
    parts = []
    for part in response.iter_content(65536):
        parts.append(part)
        if time.monotonic() > deadline:
            raise requests.exceptions.ReadTimeout("the answer took longer than the time left")
    return b"".join(parts)


def parse_completion(raw, url, model):
    """A chat.completion body -> (message, usage, finish_reason); anything else is an LLMError."""
    data = parse_json(raw)
    data = data if isinstance(data, dict) else {}
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        if data.get("error"):                       # an error reported inside a 200 answer
            raise status_error(200, raw, url, model)
        raise LLMError(f"The answer from {url} is not a chat completion (no JSON with choices[0].message): "
                       f"{bounded(raw, 300)!r}. Does --base-url point at an OpenAI-compatible /v1 endpoint?")
    reason = choice.get("finish_reason")
    return canonical_message(message), clean_usage(data.get("usage")), clean(reason) if isinstance(reason, str) else None


def parse_json(raw):
    """The JSON value of a body, or None (deep nesting, a RecursionError, counts as not JSON)."""
    try:
        return json.loads(as_str(raw))
    except (ValueError, RecursionError):
        return None


# --- The canonical message -------------------------------------------------------------------

def canonical_message(raw):
    """Any message-shaped dict -> {"role": "assistant", "content": str, "tool_calls": [{id, type,
    function: {name, arguments}}]} (tool_calls only when there are some) plus the reasoning under the
    server's own field name. Everything else (`index`, the legacy `function_call`, ...) is left behind."""
    message = {"role": "assistant", "content": as_text(raw.get("content"))}
    for field in REASONING_FIELDS:
        if isinstance(raw.get(field), str) and raw[field]:
            message[field] = clean(raw[field])
            break
    calls, problems = [], {}
    for number, item in enumerate(as_list(raw.get("tool_calls")), 1):
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
    """A lone surrogate (half an emoji) cannot be encoded and servers reject it: it becomes '?'."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def as_text(content):
    """The content as a string: null is "", text parts are joined, anything else is shown as JSON."""
    if isinstance(content, list):
        return "".join(as_text(p.get("text")) if isinstance(p, dict) else as_text(p) for p in content)
    return "" if content is None else clean(content if isinstance(content, str) else json.dumps(content))


def as_list(value):
    """tool_calls as meant: a single call object, or a list written as a JSON string, counts too."""
    if isinstance(value, str) and isinstance(parsed := parse_json(value), (list, dict)):
        value = parsed
    return [] if not value else value if isinstance(value, list) else [value]


def canonical_call(item, number, used_ids):
    """One call -> ({id, type, function: {name, arguments}}, what was wrong or None: the first problem)."""
    if isinstance(item, str) and isinstance(parsed := parse_json(item), dict):
        item = parsed
    wrong = []
    if not isinstance(item, dict):
        wrong.append(f"tool call {number} is not an object but {describe(item)}")
        item = {}
    function = item.get("function")
    if function is None and ("name" in item or "arguments" in item):
        function = item                             # a flattened call: {"name", "arguments"}
    if not isinstance(function, dict):
        wrong.append(f"the call has no function object (got {describe(function)})")
        function = {}
    name = function.get("name")
    if not isinstance(name, str):
        wrong.append(f"the tool name must be a string, not {describe(name)}")
        name = ""
    elif not name.strip():
        wrong.append("the call names no tool")
    arguments, problem = canonical_arguments(function.get("arguments"))
    call_id = item.get("id")
    if not isinstance(call_id, str) or not call_id or call_id in used_ids:
        call_id, extra = f"call_{number}", 1        # ours: the result must still be paired to its call
        while call_id in used_ids:
            call_id, extra = f"call_{number}_{extra}", extra + 1
    call = {"id": clean(call_id), "type": "function", "function": {"name": clean(name), "arguments": arguments}}
    return call, (wrong + [problem])[0]


def canonical_arguments(arguments):
    """(a string holding a JSON object, what was wrong or None). Broken arguments become "{}": a
    server rejects the whole conversation once a past call carries them (Ollama: HTTP 400)."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return "{}", None                           # no arguments: a call that needs none
    if not isinstance(arguments, (str, dict)):
        return "{}", f"the arguments must be a JSON object, not {describe(arguments)}"
    try:
        if isinstance(arguments, dict):             # Ollama's native API and some servers send objects
            arguments = json.dumps(arguments, ensure_ascii=False)
        value = strict_json(arguments)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            arguments, value = value, strict_json(value)   # an object encoded twice: still what was meant
    except (ValueError, RecursionError) as e:
        return "{}", f"the arguments are not valid JSON ({e}): {arguments[:200]!r}"
    if not isinstance(value, dict):
        return "{}", f"the arguments must be a JSON object, not {arguments[:200]!r}"
    # The model's own spelling; a lone surrogate can only sit in a JSON string, so write it as its \u escape.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", arguments), None


def strict_json(text):
    """json.loads without Python's extensions (NaN, Infinity, 1e999): other servers reject them."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    def finite(token):
        if abs(float(token)) == float("inf"):
            raise ValueError(f"{token} is too large a number")
        return float(token)
    return json.loads(text, parse_constant=refuse, parse_float=finite)


KINDS = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}


def describe(value):
    """A short description of a value, for a problem the model will read: `a number 3`, `null`."""
    try:
        shown = clean(json.dumps(value, ensure_ascii=False))
    except (ValueError, TypeError, RecursionError):
        shown = "..."
    shown = shown if len(shown) <= 80 else shown[:80] + "..."
    return "null" if value is None else f"{KINDS.get(type(value), type(value).__name__)} {shown}"


def clean_usage(usage):
    """Only the counts a server really reported as whole numbers; {} when there are none."""
    def is_count(value):
        return type(value) is int and value >= 0   # not a bool, not "12", not 12.5
    usage = usage if isinstance(usage, dict) else {}
    counts = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens") if is_count(usage.get(k))}
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and is_count(details.get("cached_tokens")):
        counts["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    return counts


# --- Errors, in words --------------------------------------------------------------------------

def as_str(raw):
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)


def bounded(raw, limit=600):
    """One line of at most `limit` characters: enough for the cause, never a page."""
    text = " ".join(clean(as_str(raw)).split())
    return text if len(text) <= limit else text[:limit] + "..."


CANNOT_CONNECT = ("Could not connect to the model server at {url}. Is it running? For Ollama, start it with "
                  "`ollama serve`; for another server, pass --base-url or set TINYHARNESS_BASE_URL.")
# What a network failure says (its type's name and its text) -> the advice; the first match wins.
NETWORK_ADVICE = [
    (("refused",), CANNOT_CONNECT),
    (("Timeout",), "The model server at {url} did not answer within {wait:g} s. A large model may still be "
                   "loading; try again, or try a smaller model."),
    (("ChunkedEncodingError", "ContentDecodingError"), "The connection to {url} broke while the answer was being "
     "sent. The server may have crashed or run out of memory; check its log and try again."),
    (("IncompleteRead", "RemoteDisconnected", "aborted"), "The model server at {url} closed the connection before "
     "its answer was complete. It may have crashed or run out of memory; check its log and try again."),
    (("NameResolution", "name resolution", "Name or service not known", "nodename nor servname", "getaddrinfo failed",
      "No address associated", "Failed to resolve"), "The host name '{host}' in {url} could not be resolved (no such "
     "name in DNS). Check the spelling of --base-url (or TINYHARNESS_BASE_URL), e.g. http://localhost:11434/v1."),
]
OUT_OF_TIME = ("The model server at {url} did not finish its answer within the {wait:g} s left of the run's time "
               "limit (--max-seconds). Give the run more time, or ask for less at once.")


def explain_network_error(error, url, wait, budget=False):
    """budget: the timeout was the time left of the run (--max-seconds), not the client's own."""
    said = f"{type(error).__name__}: {error}"
    advice = next((advice for signs, advice in NETWORK_ADVICE if any(s in said for s in signs)), CANNOT_CONNECT)
    advice = OUT_OF_TIME if budget and advice is NETWORK_ADVICE[1][1] else advice
    return advice.format(url=url, wait=wait, host=urlsplit(url).hostname)


def status_error(status, raw, url, model):
    """The LLMError for an HTTP error answer: a ContextOverflow when the prompt did not fit."""
    detail, text = error_detail(raw), as_str(raw)
    if any(sign in text.lower() for sign in OVERFLOW_SIGNS):
        prompt, window = (next((int(m.group(1)) for p in patterns if (m := re.search(p, text))), None)
                          for patterns in (PROMPT_PATTERNS, WINDOW_PATTERNS))
        return ContextOverflow(overflow_message(prompt, window, f"The server at {url} said: {detail}"), prompt, window)
    if status == 404 and "model" in detail.lower() and "not found" in detail.lower():
        return LLMError(f"The server at {url} does not have the model '{model}' (HTTP 404: {detail}). "
                        f"Pull it with `ollama pull {model}`, or choose another with --model.")
    if status == 404 and "/v1" not in urlsplit(url).path:
        return LLMError(f"The server at {url} answered HTTP 404: {detail}. OpenAI-compatible servers answer under "
                        f"/v1: try --base-url {url[:-len('/chat/completions')]}/v1")
    hint = "Set TINYHARNESS_API_KEY if the server needs a key." if status in (401, 403) else "Check the server's log."
    return LLMError(f"The server at {url} answered HTTP {status}: {detail}. {hint}")


def error_detail(raw):
    """The informative part of an error body: `error.message` (OpenAI, Ollama, llama.cpp), `error`,
    `detail` (FastAPI) or `message` (vLLM), else the body itself; bounded, never cut before the cause."""
    data = parse_json(raw)
    data = data if isinstance(data, dict) else {}
    error = data.get("error")
    found = [error.get("message") if isinstance(error, dict) else error, data.get("detail"), data.get("message")]
    text = next((t for t in found if t), None) or as_str(raw)
    return bounded(validation_summary(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)))


def validation_summary(text):
    """Pydantic's "7 validation errors" (llama-cpp-python) list one error per member of a union of
    message types; the ones about the role ("Input should be 'system'") only say which member did not
    apply. Keep the others: they name the real cause, e.g. `content: Input should be a valid string`."""
    errors = re.findall(r"^(\S+)\n\s+(.+?) \[type=(\w+)(?:, input_value=([^,\]]{0,60}))?", text, re.M)
    causes = [e for e in errors if e[2] != "literal_error"] or errors
    if not causes:
        return text
    return text.splitlines()[0] + ": " + "; ".join(f"{loc}: {msg} (input {value or '?'})" for loc, msg, _, value in causes)


# The ways servers say "the prompt is longer than the context window", and where they give the numbers.
OVERFLOW_SIGNS = ("exceed_context_size_error",           # llama.cpp server (400, or 500 in older builds)
                  "context_length_exceeded",             # OpenAI, llama-cpp-python
                  "maximum context length",              # vLLM, OpenAI
                  "exceed context window",               # llama-cpp-python's message
                  "exceeds the available context size")  # llama.cpp's message
PROMPT_PATTERNS = (r'"n_prompt_tokens"\s*:\s*(\d+)', r"(\d+) in the messages", r"messages resulted in (\d+)",
                   r"request has (\d+) input tokens", r"Requested tokens \((\d+)\)", r"prompt is (\d+) tokens")
WINDOW_PATTERNS = (r'"n_ctx"\s*:\s*(\d+)', r"maximum context length is (\d+)", r"context window of (\d+)")


def overflow_message(prompt, window, said):
    numbers = "; ".join(n for n in (prompt and f"{prompt} prompt tokens", window and f"the window holds {window}") if n)
    return (f"The conversation no longer fits the model's context window{f' ({numbers})' if numbers else ''}. "
            f"{said}. What to do: give the task in smaller steps; use a model with a longer context; give the "
            "server a bigger window (Ollama: num_ctx; llama.cpp: --ctx-size); where the harness has "
            "--context-window, set it to the server's real window so old tool results are cut in time.")
