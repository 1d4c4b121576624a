"""A session file read as hostile input: every field of the header and of each event checked.

The problem. A session file may be hand-edited, come from another tool or another version, or be
cut short. A replay that trusts it can crash on `"id": 5`, send the model a list where a text
belongs, or recurse past Python's limit on a nesting too deep.

The mechanism. Each function says why a piece cannot be used (a short text) or None: the header
(`header_problem`: the format name, the version, its texts), a message (`message_problem`: role,
content as text or parts, tool calls with ids and names), an event (`event_problem`: its type and
the fields that type carries). sessions/__init__.py treats an event with a problem as a damaged
line: the replay stops there, with a warning.

What it cannot do. It checks shape, not truth: a well-formed file can still hold a conversation
that never happened.
"""
from ..console import printable
from .writer import FORMAT, MESSAGE_TYPES, VERSION

HEADER_TEXTS = ("id", "folder", "started", "model")


def header_problem(header):
    """Why a header cannot be used, or None."""
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return "its first line is not a session header"
    if header.get("version") != VERSION:
        return (f"it is of format version {printable(str(header.get('version'))[:20])}; this "
                f"tinyharness reads version {VERSION}")
    for key in HEADER_TEXTS:
        if not isinstance(header.get(key), str):
            return f"its header's {key!r} is not a text"
    if not header["id"] or "/" in header["id"] or "\0" in header["id"]:
        return "its header's 'id' is not a session id"
    return None


def is_text(value, optional=False):
    return isinstance(value, str) or (optional and value is None)


def content_problem(content, optional, parts=False):
    """What servers take (the strict scripted server's rules, testing/rules.py): a text; null only
    where OPTIONAL; a list of text and image parts only where PARTS (a user message)."""
    if is_text(content, optional):
        return None
    if not (parts and isinstance(content, list)):
        return "a content that is not a text" + (" nor a list of parts" if parts else "")
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in ("text", "image_url"):
            return "a content part that is not a text or an image"
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            return "a text part without a text"
        if part["type"] == "image_url" and not (isinstance(part.get("image_url"), dict)
                                                and isinstance(part["image_url"].get("url"), str)):
            return "an image part without a URL"
    return None


def call_problem(call):
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return "a tool call without an id"
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
            or not isinstance(function.get("arguments"), str):
        return "a tool call without a function name and arguments text"
    return None


def message_problem(message, role=None):
    """Why a message cannot be replayed or shown, or None."""
    if not isinstance(message, dict) or message.get("role") not in MESSAGE_TYPES:
        return "a message without a known role"
    if role and message["role"] != role:
        return f"a {role} event holding a {printable(message['role'])} message"
    kind = message["role"]
    problem = (content_problem(message.get("content"), optional=kind == "assistant",
                               parts=kind == "user"))
    if problem:
        return problem
    if kind == "assistant":
        for key in ("reasoning", "reasoning_content", "thinking"):
            if not is_text(message.get(key), optional=True):
                return f"a {key} that is not a text"
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                return "tool_calls that are not a list"
            for call in calls:
                if problem := call_problem(call):
                    return problem
    if kind == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "a tool result without a tool_call_id"
    return None


def messages_problem(messages):
    if not isinstance(messages, list):
        return "messages that are not a list"
    for message in messages:
        if problem := message_problem(message):
            return problem
    return None


def event_problem(event):
    """Why an event cannot be used, or None: its type, its time and each field its type has."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return "not an event object with a type"
    kind = event["type"]
    if not is_text(event.get("time"), optional=True):
        return "a time that is not a text"
    if kind in MESSAGE_TYPES:
        usage = event.get("usage")
        if usage is not None and not (isinstance(usage, dict) and all(
                isinstance(v, (int, float, dict, type(None)))
                and not isinstance(v, bool) for v in usage.values())):
            return "a usage that is not an object of counts"
        return message_problem(event.get("message"), kind)
    if kind == "notice":
        return None if isinstance(event.get("text"), str) else "a notice without a text"
    if kind == "compaction":
        return message_problem(event.get("summary")) or messages_problem(event.get("replaced"))
    if kind == "subagent":
        return messages_problem(event.get("messages"))
    if kind == "end":
        return (None if is_text(event.get("reason"), optional=True)
                else "an end reason that is not a text")
    if kind == "clear":
        return None
    return f"an event of unknown type {printable(kind[:40])!r}"
