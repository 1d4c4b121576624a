"""Ollama's native message format, translated both ways: the history out, the reply's calls back in.

The problem. Ollama's /api/chat takes the same conversation as /v1 in a slightly different shape -
arguments as objects, not JSON strings; images as bare base64 beside a plain-text content, not data
URIs inside a list of parts; a tool result naming its tool - and answers with calls, counts and a
finish reason under its own names. The loop must keep one canonical shape whichever door it uses.

The mechanism. `to_native` rewrites the canonical history into what /api/chat takes (each tool
result gets the `tool_name` of the call it answers, looked up by id). On the way back,
`canonical_call` turns a native call into the canonical one (arguments dumped to a JSON string,
refused at the door if no server could take them back), `usage_of` renames the counts and
`finish_reason_of` reads `done_reason`. The table of the differences is in ollama.py's docstring,
beside the client.

What it cannot do. It translates shapes only: an image that is not already a base64 data URI cannot
be sent (native Ollama takes no URLs), and a native call that is no call becomes one with `{}`
arguments and a problem the model is told.
"""
import base64
import binascii
import json
import re

from . import LLMError
from .reply import blank_call, clean, describe, dump_object, strict_json

REASONING_FIELDS = ("thinking", "reasoning", "reasoning_content")

def calls_of(tool_calls):
    """`tool_calls` of a frame as a list: a list as it is, one call object as a list of one, nothing
    (null, false, "", {}) as none; anything else (`true`, a number, a string) becomes one call that
    canonical_call reports to the model as not a call."""
    if not tool_calls:                          # null, false, "", 0, [], {}
        return []
    return tool_calls if isinstance(tool_calls, list) else [tool_calls]


def canonical_call(native, spare_id):
    """A native call ({function: {name, arguments: object}}) -> the canonical one, and what was
    wrong. Whatever came (not an object, a name that is no string, arguments nested too deep or
    holding NaN, which no server takes back) becomes a call with `{}` arguments and a problem the
    model is told."""
    if not isinstance(native, dict):
        return blank_call(spare_id), f"the tool call is not an object but {describe(native)}"
    function = given if isinstance(given := native.get("function"), dict) else {}
    name, arguments, problem = function.get("name"), function.get("arguments"), None
    if not isinstance(name, str):
        name, problem = "", f"the call has no tool name (got {describe(name)})"
    # not Ollama's way, but be kind to a proxy that sends a string
    if isinstance(arguments, str):
        try:
            arguments = strict_json(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            pass
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        problem = problem or f"the arguments must be a JSON object, not {describe(arguments)}"
        arguments = {}
    # NaN, Infinity, deep nesting: refused here, at the door
    text, wrong = dump_object(arguments)
    call_id = (native.get("id") if isinstance(native.get("id"), str) and native.get("id")
               else spare_id)
    return {"id": clean(call_id), "type": "function",
            "function": {"name": clean(name), "arguments": text}}, \
        problem or wrong


def usage_of(frame):
    """prompt_eval_count / eval_count -> prompt_tokens / completion_tokens, only when they are
    ints."""
    usage = {}
    for native, ours in (("prompt_eval_count", "prompt_tokens"),
                         ("eval_count", "completion_tokens")):
        if isinstance(frame.get(native), int) and not isinstance(frame.get(native), bool):
            usage[ours] = frame[native]
    return usage


def finish_reason_of(frame):
    reason = frame.get("done_reason")
    return reason if isinstance(reason, str) and reason else None


# --- The history, translated ----------------------------------------------------------------------

def to_native(messages):
    """Canonical (OpenAI-shaped) messages -> /api/chat messages. The input is never changed."""
    names: dict[str, str] = {}  # tool_call_id -> tool name, from the assistant messages seen so far
    native = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            native.append(native_assistant(message, names))
        elif role == "tool":
            native.append(native_tool_result(message, names))
        else:
            native.append(native_plain(message))
    return native


def native_plain(message):
    """system/user: content as one string, images as a list of bare base64 strings."""
    text, images = split_content(message.get("content"))
    out = {"role": message.get("role"), "content": text}
    if images:
        out["images"] = images
    return out


def native_assistant(message, names):
    out = {"role": "assistant", "content": message.get("content") or ""}
    thinking = (next((message[f] for f in REASONING_FIELDS if isinstance(message.get(f), str)
                      and message[f]), None))
    if thinking:
        out["thinking"] = thinking
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        names[call.get("id")] = function.get("name") or ""
        native_call = ({"function": {"name": function.get("name")
                                     or "",
                                     "arguments": arguments_object(function.get("arguments"))}})
        if isinstance(call.get("id"), str) and call["id"]:
            # api.ToolCall.ID: the server's own id, sent back (0.12.10+)
            native_call["id"] = call["id"]
        calls.append(native_call)
    if calls:
        out["tool_calls"] = calls
    return out


def native_tool_result(message, names):
    text, images = split_content(message.get("content"))
    # Both: older Ollama and some templates pair a result by tool_name (in order), newer renderers
    # by id.
    out = {"role": "tool", "content": text, "tool_name": names.get(message.get("tool_call_id"), "")}
    if isinstance(message.get("tool_call_id"), str) and message["tool_call_id"]:
        out["tool_call_id"] = message["tool_call_id"]
    if images:
        out["images"] = images
    return out


def arguments_object(arguments):
    """A JSON-object string (canonical) -> the object; anything else -> {} (Ollama rejects
    strings)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


DATA_URI = re.compile(r"data:image/[\w.+-]+;base64,(.*)", re.DOTALL)


def split_content(content):
    """(text, [bare base64, ...]) from a string or a list of text and image_url parts."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts, images = [], []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            images.append(bare_base64((part.get("image_url") or {}).get("url")))
    return "\n".join(texts), images


def bare_base64(url):
    match = DATA_URI.fullmatch(url or "")
    if not match:
        raise LLMError("Ollama's native API takes images as base64 data, not as a link "
                       f"({str(url)[:80]!r}). Attach the image as a file, or use --api openai.")
    data = match.group(1).strip()
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise LLMError("An attached image's data is not valid base64; it cannot be sent.") from None
    return data
