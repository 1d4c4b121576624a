"""Ollama's own dialect: the same door, spoken the way Ollama speaks natively.

The problem. Ollama answers the OpenAI-style `/v1/chat/completions`, but through that shim the
context length cannot be set: `options.num_ctx` is ignored there, and recent Ollama gives a model
4096 tokens on a machine with less than 24 GiB of video memory. Past that it keeps the system
messages and the tool schemas and drops the *oldest other messages* - the user's task first - and
still answers HTTP 200 (server/prompt.go, chatPrompt). A harness that believes it has 8192 tokens is
then talking to a model that no longer sees what it was asked to do.

The mechanism. Ollama's native `POST /api/chat` takes `options.num_ctx` with every request, so we
send the window the harness plans with, and what we assume is what is in force. We also send
`truncate: false` (Ollama 0.12.6+): a prompt past the window is then an HTTP 400 instead of a silent
cut, and that error takes the loop's cut-and-retry path like any server's overflow; and
`shift: false`, so a reply that reaches the end of the window stops instead of silently shifting the
oldest tokens out. The native format differs from /v1 in small ways, and this module translates both
ways so the loop never knows:

    canonical (what the loop keeps)                 native (what /api/chat takes)
    arguments: '{"path": "a"}'  (a JSON string)     arguments: {"path": "a"}      (an object)
    tool result: tool_call_id                       tool result: tool_name and tool_call_id
                                                    (0.12.10+)
    content: [text part, image_url data URI]        content: "text", images: ["<bare base64>"]
    tool call: {id, type, function}                 tool call: {id, function: {name, arguments}}
    max_tokens                                      options.num_predict
    usage.prompt_tokens / completion_tokens         prompt_eval_count / eval_count
    finish_reason "length"                          done_reason "length"
    reasoning (/v1) or thinking                     thinking, switched with `think: true/false`

A streamed answer is NDJSON: one JSON object per line, the last with `done: true`, the reason and
the counts. Tool calls come whole (never as fragments), without `index`, maybe only in that last
line; thinking arrives under `thinking`.

`--api auto` (the default) asks the host once: if `GET /api/version` answers with a version, the
host is Ollama and the native dialect is used, unless the base URL clearly points somewhere else (a
path other than nothing or `/v1`, e.g. `https://example.com/openai/v1`). `/api/show` then tells the
model's own context length; the default `--context-window` is that, at most OLLAMA_WINDOW_CAP
(8192).

What it cannot do. It cannot make a model with a 4k context remember more than 4k tokens; it only
makes the harness and the server agree on the number. A bigger num_ctx costs memory (the KV cache
grows with it: about 144 KiB a token for an 8B model with grouped-query attention, 1.1 GiB at 8192,
4.5 GiB at 32768 - arithmetic from the model's shape, see kv_cache_bytes), a request's num_ctx
overrides the user's own OLLAMA_CONTEXT_LENGTH and switches off Ollama's shrink-on-out-of-memory
fallback, and a different size reloads the model. Hence the cap, the size the context policies were
measured at; ask for more with --context-window. Images must already be data URIs (the harness
fetches URLs itself): native Ollama takes bare base64 only.

Where it lives. This module finds Ollama, chooses the dialect and holds the client; the translation
of messages both ways is llm/ollama_native.py (its names are importable from here).
"""
import json
import time
from urllib.parse import urlsplit

import requests

from ..console import warn
from . import (
    MAX_REPLY_TOKENS,
    ContextOverflow,
    HangUp,
    KeepAlive,
    LLMError,
    bounded,
    clean,
    context_overflow,
    drain,
    error_detail,
    excerpt,
    explain_network_error,
    lines_until,
    overflow_message,
    read_body,
    stream_lines,
    stream_stopped,
)
from .ollama_native import (
    REASONING_FIELDS,
    calls_of,
    canonical_call,
    finish_reason_of,
    to_native,
    usage_of,
)
from .reply import with_calls
from .stream import ThinkSplitter

API_CHOICES = ("auto", "openai", "ollama")
# seconds for the one /api/version question: a local server answers at once
PROBE_TIMEOUT = 3
# default num_ctx at most this: the policies' size, 1.1 GiB of KV cache for an 8B model
OLLAMA_WINDOW_CAP = 8192


# --- Where Ollama lives ---------------------------------------------------------------------------

def host_root(base_url):
    """http://host:11434/v1 -> http://host:11434 (the native API lives beside /v1, not under it)."""
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")


def could_be_ollama(base_url):
    """The auto rule's first half: only a bare host, or a host followed by /v1, may be Ollama.
    A longer path (a cloud API, a proxy's route) is never asked."""
    parts = urlsplit(base_url)
    return (parts.scheme in ("http", "https") and bool(parts.hostname)
            and parts.path.rstrip("/") in ("", "/v1"))


def ollama_version(base_url, timeout=PROBE_TIMEOUT, http=requests):
    """Ollama's version string when the host answers GET /api/version like Ollama, else None.
    `http`: what sends the probe (a client's kept connection, llm.KeepAlive; else a new one)."""
    try:
        response = http.get(host_root(base_url) + "/api/version", timeout=timeout)
        version = response.json().get("version") if response.status_code == 200 else None
    except (requests.exceptions.RequestException, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


def show_model(base_url, model, timeout=PROBE_TIMEOUT, http=requests):
    """The /api/show answer for a model (capabilities, model_info, parameters), or None."""
    try:
        response = (http.post(host_root(base_url) + "/api/show", json={"model": model},
                              timeout=timeout))
        shown = response.json() if response.status_code == 200 else None
    except (requests.exceptions.RequestException, ValueError):
        return None
    return shown if isinstance(shown, dict) else None


def model_context_length(shown):
    """The model's own context length from /api/show:
    model_info["<architecture>.context_length"]."""
    info = (shown or {}).get("model_info")
    if not isinstance(info, dict):
        return None
    lengths = ([v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)
                and v > 0])
    return lengths[0] if lengths else None


def props_window(base_url, timeout=PROBE_TIMEOUT, http=requests):
    """The context size a llama.cpp server runs with (GET /props,
    default_generation_settings.n_ctx), or None: other servers have no /props."""
    try:
        response = http.get(host_root(base_url) + "/props", timeout=timeout)
        props = response.json() if response.status_code == 200 else None
    except (requests.exceptions.RequestException, ValueError):
        return None
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
    return n_ctx if type(n_ctx) is int and n_ctx > 0 else None


def kv_cache_bytes(shown, tokens):
    """What a window of `tokens` costs in KV cache for this model, by arithmetic from /api/show's
    model_info (keys and values, every layer, 16-bit): 2 x layers x KV heads x head size x 2 bytes
    x tokens. An estimate, not a measurement (a quantised cache, flash attention or a sliding window
    change it); None when the model's shape is not reported."""
    info = (shown or {}).get("model_info")
    if not isinstance(info, dict):
        return None

    def number(suffix):
        found = [v for k, v in info.items() if k.endswith(suffix) and type(v) is int and v > 0]
        return found[0] if found else None
    layers, kv_heads, heads = (number(".block_count"), number(".attention.head_count_kv"),
                               number(".attention.head_count"))
    key, value, width = (number(".attention.key_length"), number(".attention.value_length"),
                         number(".embedding_length"))
    head = key or (width // heads if width and heads else None)
    if not (layers and head and (kv_heads or heads)):
        return None
    return layers * (kv_heads or heads) * (head + (value or head)) * 2 * tokens


def capabilities(shown):
    """What /api/show says the model can do: completion, tools, vision, thinking, ..."""
    found = (shown or {}).get("capabilities")
    return [c for c in found if isinstance(c, str)] if isinstance(found, list) else None


# --- Choosing the dialect -------------------------------------------------------------------------

def pick_api(api, base_url, http=requests):
    """'openai' or 'ollama' for --api auto|openai|ollama (auto asks the host once)."""
    if api != "auto":
        return api
    native = could_be_ollama(base_url) and ollama_version(base_url, http=http)
    return "ollama" if native else "openai"


def default_window(base_url, model, fallback, http=requests):
    """The model's own context length (capped), from /api/show; `fallback` when it does not say."""
    length = model_context_length(show_model(base_url, model, http=http))
    return min(length, OLLAMA_WINDOW_CAP) if length else fallback


def choose_dialect(args, client, fallback_window):
    """The client `tinyharness run` should use, and the context window to plan with.

    `client` is the OpenAI-style client already built from the flags; when the dialect is Ollama's
    native one, an OllamaClient takes over its settings (model, key, streaming, callbacks). Never
    raises: a server that does not answer here fails at the first model call with the door's
    clear message."""
    api = pick_api(getattr(args, "api", "auto") or "auto", args.base_url, http=client)
    window = getattr(args, "context_window", None)
    if api == "openai":
        if getattr(args, "think", None) is not None:
            warn("[harness] --think/--no-think only work with Ollama's native API (--api ollama); "
                 "ignored.")
        said = props_window(args.base_url, http=client) if could_be_ollama(args.base_url) else None
        if said and window and said < window:
            warn(f"[context] the server holds {said} tokens (llama.cpp /props n_ctx), less than "
                 f"--context-window {window}: planning with {said}.")
        if said:
            # the window in force from the first call (overflow.window_in_force)
            client.server_window = said
        return client, window or said or fallback_window
    window = window or default_window(args.base_url, args.model, fallback_window, http=client)
    native = OllamaClient(args.base_url, args.model, api_key=client.api_key, timeout=client.timeout,
                          stream=client.stream, on_text=client.on_text,
                          on_reasoning=client.on_reasoning,
                          max_reply_tokens=getattr(client, "max_reply_tokens", MAX_REPLY_TOKENS),
                          context_window=window, think=getattr(args, "think", None))
    return client.hand_over(native), window


# --- The client -----------------------------------------------------------------------------------

class OllamaClient(KeepAlive):
    """Same interface as llm.Client: chat() returns (canonical message, usage, finish_reason)."""

    dialect = "ollama"

    def __init__(self, base_url, model, api_key=None, timeout=600, stream=False, on_text=None,
                 on_reasoning=None,
                 max_reply_tokens=MAX_REPLY_TOKENS, context_window=None, think=None):
        self.url = host_root(base_url) + "/api/chat"
        self.take_credentials()
        self.model, self.api_key, self.timeout, self.stream = model, api_key, timeout, stream
        self.on_text, self.on_reasoning = on_text, on_reasoning
        self.max_reply_tokens, self.context_window = max_reply_tokens, context_window
        self.think = think
        self.calls_made = 0     # for our own call ids when the server gives none

    def chat(self, messages, tools=None, on_text=None, on_reasoning=None, timeout=None):
        body = self.request_body(messages, tools)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        on_text, on_reasoning = on_text or self.on_text, on_reasoning or self.on_reasoning
        limit = self.timeout if timeout is None else max(0.001, min(self.timeout, timeout))
        # the whole reply, checked per line and enforced by HangUp
        deadline = time.monotonic() + limit
        try:
            with self.post(self.url, json=body, headers=headers, timeout=limit,
                               stream=True) as response, \
                    HangUp(response, deadline) as hang:
                if response.status_code != 200:
                    body = read_body(response, deadline, hang)
                    raise self.explain_status(response.status_code, body)
                if self.stream:
                    frames = self.read_frames(response, deadline, hang)
                else:
                    frames = [self.parse_frame(read_body(response, deadline, hang))]
                return self.assemble(frames, on_text, on_reasoning)
        except requests.exceptions.RequestException as e:
            raise LLMError(explain_network_error(e, self.url, limit,
                                                 limit < self.timeout)) from None

    # --- canonical -> native --------------------------------------------------------------------

    def request_body(self, messages, tools):
        options = {"num_predict": self.max_reply_tokens}
        if self.context_window:
            options["num_ctx"] = self.context_window     # the whole point: the window we plan with
        body = {"model": self.model, "messages": to_native(messages), "stream": bool(self.stream),
                "options": options,                      # stream: Ollama streams unless told not to
                # past num_ctx: an error, not the task silently dropped
                "truncate": False,
                # nor the oldest tokens shifted out mid-reply
                "shift": False}
        if tools:
            body["tools"] = tools                        # the same JSON-schema list as /v1
        if self.think is not None:
            body["think"] = bool(self.think)
        return body

    # --- native -> canonical --------------------------------------------------------------------

    def parse_frame(self, raw):
        """One JSON object: a whole answer, or one NDJSON line of a streamed one."""
        try:
            frame = (json.loads(raw.decode("utf-8", errors="replace") if isinstance(raw, bytes)
                                else raw))
            assert isinstance(frame, dict)
        # deep nesting is not an answer either
        except (ValueError, AssertionError, RecursionError):
            raise LLMError(f"The answer from {self.url} is not Ollama's JSON: "
                           f"{excerpt(as_bytes(raw))!r}. Is this an Ollama server? Try --api "
                           "openai for other servers.") from None
        if frame.get("error") is not None:
            raise self.explain_error_text(error_text(frame["error"]), streamed=True)
        return frame

    def read_frames(self, response, deadline, hang=None):
        """NDJSON: one frame per line, until `done: true`. A stream that stops early is an error."""
        too_long = LLMError(f"The model's reply from {self.url} took longer than the time left "
                            "(--max-seconds, or the client's timeout); it was stopped part-way.")
        try:
            # linear in a huge line
            for line in lines_until(stream_lines(response), deadline, too_long):
                if not line.strip():
                    continue
                frame = self.parse_frame(line)
                if frame.get("done"):
                    drain(response)
                yield frame
                if frame.get("done"):
                    return
        except requests.exceptions.RequestException as e:
            stopped = stream_stopped(e, self.url, self.timeout, hang, too_long)
            if stopped:
                raise stopped from None
        raise LLMError(f"The streamed answer from {self.url} ended before its last line (done: "
                       "true): the stream broke part-way. The server may have crashed or run out "
                       "of memory; check its log.")

    def assemble(self, frames, on_text, on_reasoning):
        """Frames -> (canonical message, usage, finish_reason); text and thinking shown as they
        come."""
        text: list[str] = []
        thinking: list[str] = []
        native_calls, last, think = [], {}, ThinkSplitter()

        def emit(is_reasoning, piece):
            if not piece:
                return
            (thinking if is_reasoning else text).append(piece)
            callback = on_reasoning if is_reasoning else on_text
            if callback and self.stream:
                callback(piece)

        for frame in frames:
            message = frame.get("message") if isinstance(frame.get("message"), dict) else {}
            field = (next((f for f in REASONING_FIELDS if isinstance(message.get(f), str)
                           and message[f]), None))
            if field:
                emit(True, message[field])
            if isinstance(message.get("content"), str):
                # stray <think> tags are not the answer
                for is_reasoning, piece in think.feed(message["content"]):
                    emit(is_reasoning, piece)
            native_calls += calls_of(message.get("tool_calls"))
            last = frame
        for is_reasoning, piece in think.flush():
            emit(is_reasoning, piece)
        if not last.get("done", not self.stream):
            raise LLMError(f"The answer from {self.url} never said it was done. The server may "
                           "have crashed; check its log.")
        content = "".join(text).lstrip() if think.seen else "".join(text)
        message = self.canonical(content, "".join(thinking), native_calls)
        return message, usage_of(last), finish_reason_of(last)

    def canonical(self, content, thinking, native_calls):
        # a lone surrogate cannot go back: '?'
        message = {"role": "assistant", "content": clean(content)}
        if thinking:
            message["thinking"] = clean(thinking)   # the name Ollama uses; it is sent back under it
        # ids go on across replies
        made, self.calls_made = self.calls_made, self.calls_made + len(native_calls)
        return with_calls(message, native_calls,
                          lambda native, number, _: canonical_call(native, f"call_{made + number}"))

    # --- errors, in words -----------------------------------------------------------------------

    def explain_status(self, status, raw):
        # Ollama: {"error": "..."}
        return self.explain_error_text(error_detail(raw), status=status)

    def explain_error_text(self, text, status=None, streamed=False):
        where = f"The Ollama server at {self.url}"
        said = f"HTTP {status}: {text}" if status else text
        lowered = text.lower()
        if "not found" in lowered and "model" in lowered:
            return LLMError(f"{where} does not have the model '{self.model}' ({said}). Pull it "
                            f"with `ollama pull {self.model}`, or choose another with --model.")
        if "does not support tools" in lowered:
            return LLMError(f"{where} says the model '{self.model}' cannot call tools ({said}). "
                            "The harness needs tool calls: choose a model with the tools "
                            "capability (e.g. qwen3:8b); `ollama show MODEL` lists what a model "
                            "can do.")
        if "does not support thinking" in lowered:
            return (LLMError(f"{where} says the model '{self.model}' cannot think ({said}). Drop "
                             "--think."))
        # llama.cpp's error, wrapped by Ollama
        overflow = context_overflow(text, bounded(text), self.url)
        if (overflow
            or ("context" in lowered
                and any(w in lowered for w in ("exceed", "too long", "length")))):
            prompt = overflow.prompt_tokens if overflow else None
            window = (overflow.context_window if overflow else None) or self.context_window
            return (ContextOverflow(overflow_message(prompt, window,
                                                     f"{where} said: {bounded(said)}"), prompt,
                                    window))
        if status == 404:
            return LLMError(f"{where} has no native chat route ({said}). Is it an Ollama server? "
                            "For other servers use --api openai.")
        hint = ("Set TINYHARNESS_API_KEY if the server needs a key (OPENAI_API_KEY is sent only "
                "to an endpoint from --base-url or OPENAI_BASE_URL)."
                if status in (401, 403) else "Check the server's log.")
        verb = "reported an error in the middle of its streamed answer" if streamed else "answered"
        return LLMError(f"{where} {verb} {said}. {hint}")


def error_text(error):
    """An error field as text, whatever its type (a string, an object, something deeply nested)."""
    if isinstance(error, str):
        return error
    try:
        return json.dumps(error, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "(an error the harness cannot show)"


def as_bytes(raw):
    return raw if isinstance(raw, bytes) else str(raw).encode("utf-8", errors="replace")
