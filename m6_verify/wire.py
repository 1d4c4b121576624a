"""Armour for the door: what real servers send, and how llm.py survives it. Read it after the lesson,
when a real server surprises you.

llm.py teaches the door in a few lines: POST the conversation, get back a message. Real servers make
it harder, and each function here answers one thing they were seen to do:
- Replies of odd shapes (`completion`, `rebuilt`, `canonical_message`): `content: null`, arguments as an
  object, as broken JSON or encoded twice, calls without ids, a call as a JSON string, counts as
  strings. Servers then *reject* those shapes when they come back (llama-cpp-python: HTTP 500 to
  `content: null`; Ollama: 400 to arguments that are not a JSON object). So every reply is rebuilt
  into one canonical message, the only shape the harness keeps and sends back. What cannot be repaired
  is not guessed at: the call gets `{}` and the loop gets the problem under the private key `_problems`
  ({call id: what was wrong}), so the model can be told and try again.
- Usage counts that are missing, strings or floats (`clean_usage`): only real counts are kept, so a
  `[stats]` line never shows a figure nobody measured.
- Errors (`explain_network_error`, `status_error`, `error_detail`): a refused connection, a DNS typo,
  a 404 for a model not pulled, a FastAPI validation list: each becomes one paragraph that says what
  happened and what to do.
- The prompt that no longer fits (`context_overflow`): each server words it differently; the numbers
  are read out so the user can act on them.
- A server that trickles (`read_body`): the body is read in pieces, so the run's deadline still holds.
- Server text printed on a terminal (`printable`): an error body can carry escape sequences that
  retitle the terminal, fill the clipboard or clear the screen; they are shown as text, never run.
"""
import json
import re
import time
from urllib.parse import urlsplit

import requests

# Where servers put a model's reasoning (Ollama /v1; llama.cpp, DeepSeek; Ollama's native API).
REASONING_FIELDS = ("reasoning", "reasoning_content", "thinking")


class LLMError(Exception):
    """Talking to the model failed; the message is written for a person, not a stack trace."""


class ContextOverflow(LLMError):
    """The conversation no longer fits the context window (the server's numbers, or None)."""

    def __init__(self, message, prompt_tokens=None, context_window=None):
        super().__init__(message)
        self.prompt_tokens, self.context_window = prompt_tokens, context_window


def read_body(response, deadline):
    """The whole body, read in pieces so a server that trickles forever still meets the deadline."""
    parts = []
    for part in response.iter_content(65536):
        parts.append(part)
        if time.monotonic() > deadline:
            raise requests.exceptions.ReadTimeout("the answer took longer than the time left")
    return b"".join(parts)


def completion(raw, url, model):
    """A chat.completion body -> its JSON, checked to hold `choices[0].message` as an object, so the
    lesson can read `data["choices"][0]["message"]` plainly; anything else is an LLMError."""
    data = parse_json(raw)
    data = data if isinstance(data, dict) else {}
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        if data.get("error"):                       # an error reported inside a 200 answer
            raise status_error(200, raw, url, model)
        raise LLMError(f"The answer from {url} is not a chat completion (no JSON with choices[0].message): "
                       f"{bounded(raw, 300)!r}. Does --base-url point at an OpenAI-compatible /v1 endpoint?")
    return data


def rebuilt(message, usage, finish_reason):
    """What the server sent, rebuilt: the canonical message, the real counts of usage, and the
    finish_reason as clean text (or None)."""
    reason = clean(finish_reason) if isinstance(finish_reason, str) else None
    return canonical_message(message), clean_usage(usage), reason


def parse_json(raw):
    """The JSON value of a body, or None (deep nesting, a RecursionError, counts as not JSON)."""
    try:
        return json.loads(as_str(raw))
    except (ValueError, RecursionError):
        return None


def as_str(raw):
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)


# --- The canonical message -------------------------------------------------------------------

def canonical_message(raw):
    """Any message-shaped dict -> {"role": "assistant", "content": str, "tool_calls": [{id, type,
    function: {name, arguments}}]} (tool_calls only when there are some) plus the reasoning under the
    server's own field name. Everything else (`index`, the legacy `function_call`, ...) is left behind."""
    message = {"role": "assistant", "content": as_text(raw.get("content"))}
    for field in [f for f in REASONING_FIELDS if isinstance(raw.get(f), str) and raw[f]][:1]:
        message[field] = clean(raw[field])
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
    """One call -> ({id, type, function: {name, arguments}}, the first thing wrong with it, or None)."""
    if isinstance(item, str) and isinstance(parsed := parse_json(item), dict):
        item = parsed                               # a call written as a JSON string
    wrong = [] if isinstance(item, dict) else [f"tool call {number} is not an object but {describe(item)}"]
    item = item if isinstance(item, dict) else {}
    function = item.get("function")
    if function is None and ("name" in item or "arguments" in item):
        function = item                             # a flattened call: {"name", "arguments"}
    if not isinstance(function, dict):
        wrong.append(f"the call has no function object (got {describe(function)})")
        function = {}
    name = function.get("name")
    if not isinstance(name, str):
        wrong.append(f"the tool name must be a string, not {describe(name)}")
    elif not name.strip():
        wrong.append("the call names no tool")
    arguments, problem = canonical_arguments(function.get("arguments"))
    call_id, extra = item.get("id"), 0
    while not isinstance(call_id, str) or not call_id or call_id in used_ids:   # ours: a result must pair
        call_id, extra = f"call_{number}" + (f"_{extra}" if extra else ""), extra + 1
    name = clean(name) if isinstance(name, str) else ""
    call = {"id": clean(call_id), "type": "function", "function": {"name": name, "arguments": arguments}}
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
    # The model's own spelling; a lone surrogate can only sit in a JSON string: write it as its \u escape.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", arguments), None


def strict_json(text):
    """json.loads without Python's extensions (NaN, Infinity, 1e999), which other servers refuse."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    def finite(token):
        if abs(float(token)) == float("inf"):
            raise ValueError(f"{token} is too large a number")
        return float(token)
    return json.loads(text, parse_constant=refuse, parse_float=finite)


def describe(value):
    """A wrong value, short, for the model to read: `null`, `a number 3`, `a list [1, "a"]`."""
    if value is None:
        return "null"
    kinds = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return f"{kinds.get(type(value), 'a value')} {bounded(json.dumps(value, ensure_ascii=False), 80)}"


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


# --- Errors, in words: what happened, and what to do ---------------------------------------------

CRASHED = "It may have crashed or run out of memory; check its log and try again."
NOT_RUNNING = ("Could not connect to the model server at {url}. Is it running? For Ollama, start it with "
               "`ollama serve`; for another server, pass --base-url or set TINYHARNESS_BASE_URL.")
# What a network failure says (its type's name and its text) -> the advice; the first match wins.
NETWORK_ADVICE = [
    (("refused",), NOT_RUNNING),
    (("Timeout", "timed out"), "The model server at {url} did not answer within {limit}. A large model may still "
                               "be loading; try again (with more time), or try a smaller model."),
    (("ChunkedEncodingError", "ContentDecodingError"), "The connection to {url} broke while the answer was "
                                                       "being sent. " + CRASHED),
    (("IncompleteRead", "RemoteDisconnected", "aborted"), "The model server at {url} closed the connection "
                                                          "before its answer was complete. " + CRASHED),
    (("NameResolution", "name resolution", "Name or service not known", "nodename nor servname", "getaddrinfo failed",
      "No address associated", "Failed to resolve"), "The host name '{host}' in {url} could not be resolved (no such "
     "name in DNS). Check the spelling of --base-url (or TINYHARNESS_BASE_URL), e.g. http://localhost:11434/v1."),
]


def explain_network_error(error, url, wait, out_of_time=False):
    """out_of_time: the timeout was what was left of the run's --max-seconds, not the client's own."""
    said = f"{type(error).__name__}: {error}"
    advice = next((advice for signs, advice in NETWORK_ADVICE if any(s in said for s in signs)), NOT_RUNNING)
    limit = f"the {wait:g} s left of the run's time limit (--max-seconds)" if out_of_time else f"{wait:g} s"
    return advice.format(url=url, limit=limit, host=urlsplit(url).hostname)


def status_error(status, raw, url, model):
    """The LLMError for an HTTP error answer: a ContextOverflow when the prompt did not fit."""
    detail, hint = error_detail(raw), "Check the server's log."
    if any(sign in as_str(raw).lower() for sign in OVERFLOW_SIGNS):
        return context_overflow(as_str(raw), f"The server at {url} said: {detail}")
    if status == 404 and "model" in detail.lower() and "not found" in detail.lower():
        hint = f"Pull the model with `ollama pull {model}`, or choose another with --model."
    elif status == 404 and url.endswith("/chat/completions" * 2):  # the docs' whole endpoint pasted in
        hint = f"--base-url is the part without /chat/completions: try --base-url {url[:-34]}"
    elif status == 404 and "/v1" not in urlsplit(url).path:
        hint = f"OpenAI-compatible servers answer under /v1: try --base-url {url[:-len('/chat/completions')]}/v1"
    elif status in (401, 403):
        hint = "Set TINYHARNESS_API_KEY if the server needs a key."
    return LLMError(f"The server at {url} answered HTTP {status}: {detail}. {hint}")


def error_detail(raw):
    """The informative part of an error body: `error.message` (OpenAI, Ollama, llama.cpp), `error`,
    `detail` (FastAPI) or `message` (vLLM), else the body itself; one line, never cut before the cause."""
    data = parse_json(raw)
    data = data if isinstance(data, dict) else {}
    error = data.get("error")
    found = [error.get("message") if isinstance(error, dict) else error, data.get("detail"), data.get("message")]
    text = next((t for t in found if t), None) or as_str(raw)
    if isinstance(text, list):      # FastAPI: [{"loc": [...], "msg": "...", "input": <can be huge>}]: where and what
        text = [{"loc": d.get("loc"), "msg": d.get("msg")} if isinstance(d, dict) else d for d in text]
    return bounded(validation_summary(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)))


def validation_summary(text):
    """Pydantic's "7 validation errors" (llama-cpp-python) list one error per member of a union of
    message types; the ones about the role ("Input should be 'system'") only say which member did not
    apply. Keep the others: they name the real cause, e.g. `content: Input should be a valid string`."""
    errors = re.findall(r"^(\S+)\n\s+(.+?) \[type=(\w+)(?:, input_value=([^,\]]{0,60}))?", text, re.M)
    causes = [e for e in errors if e[2] != "literal_error"] or errors
    if not causes:
        return text
    summary = "; ".join(f"{loc}: {msg} (input {value or '?'})" for loc, msg, _, value in causes)
    return f"{text.splitlines()[0]}: {summary}"


def bounded(raw, limit=600):
    """One line of at most `limit` characters: enough for the cause, never a page."""
    text = " ".join(clean(as_str(raw)).split())
    return text if len(text) <= limit else text[:limit] + "..."


# How servers say "the prompt is longer than the context window" (llama.cpp's error type and message;
# OpenAI's and llama-cpp-python's code; vLLM's and OpenAI's message; llama-cpp-python's), and the numbers.
OVERFLOW_SIGNS = ("exceed_context_size_error", "exceeds the available context size", "context_length_exceeded",
                  "maximum context length", "exceed context window")
PROMPT = (r'"n_prompt_tokens"\s*:\s*(\d+)|(\d+) in the messages|messages resulted in (\d+)|'
          r"request has (\d+) input tokens|Requested tokens \((\d+)\)|prompt is (\d+) tokens")
WINDOW = r'"n_ctx"\s*:\s*(\d+)|maximum context length is (\d+)|context window of (\d+)'


def context_overflow(text, said):
    """The ContextOverflow for an error body that says the prompt did not fit: the numbers, and what to do."""
    prompt, window = (int(m.group(m.lastindex)) if m else None for m in (re.search(p, text) for p in (PROMPT, WINDOW)))
    numbers = "; ".join(n for n in (prompt and f"{prompt} prompt tokens", window and f"the window holds {window}") if n)
    return ContextOverflow(
        f"The conversation no longer fits the model's context window{f' ({numbers})' if numbers else ''}. {said}. "
        "What to do: give the task in smaller steps; use a model with a longer context; give the server a bigger "
        "window (Ollama: num_ctx; llama.cpp: --ctx-size); where the harness has --context-window, set it to the "
        "server's real window so old tool results are cut in time.", prompt, window)


# --- Text for the terminal -------------------------------------------------------------------------

# Bidi overrides and isolates: they reorder what the reader sees (U+202E shows "exe.txt" for "txt.exe").
BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def printable(text, keep="\n\t"):
    """Text from a server or a model, safe to print: control characters (ESC, BEL, C1 codes such as
    U+009B, which a terminal obeys as commands) are shown as `\\x1b`, bidi overrides and other invisible
    characters as `<U+202E>`; a lone surrogate (half an emoji) becomes '?'. New lines and tabs stay."""
    text = "" if text is None else str(text)
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    return "".join(c if c in keep or (c.isprintable() and ord(c) not in BIDI) else
                   f"\\x{ord(c):02x}" if ord(c) < 0xA0 else f"<U+{ord(c):04X}>" for c in text)
