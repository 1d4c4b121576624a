"""What an MCP server's replies may hold, checked: a tool's listing, and a tool call's result as
text.

The problem. A tools/list entry and a tools/call result come from a program we did not write. A
schema may be a string, a "required" may name numbers, a result may hold parts of kinds we cannot
show, a picture may be no picture at all, and a result may be far longer than a model's context can
take. Passed on unchecked, any of these ends a run or fills the context.

The mechanism. `tool_problem` says why a listed tool cannot be offered (the caller skips it with a
warning). `result_text` turns a result's content parts into the text the model reads: text and
embedded text resources as they are, a resource link as its URI, a picture into the caller's
`images` list (sniffed, size-checked, sent after the turn's results), anything else as a note that
it was left out; the whole is cut to MAX_RESULT_CHARS, head and tail kept.

What it cannot do. It checks shapes, not meaning: a well-formed result can still say anything.
"""
import base64
import binascii
import json

from ..imageload import MAX_IMAGE_BYTES, SENDABLE, sniff
from ..vision import image_part

MAX_RESULT_CHARS = 6000  # what one result may put into the model's context (head and tail kept)
MAX_SCHEMA_CHARS = 20000


def tool_problem(tool, listed):
    """Why a tools/list entry cannot be offered, or None."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return "a tools/list entry without a string \"name\""
    name = tool["name"][:80]
    if tool["name"] in listed:
        return f"the tool {name!r} is listed twice"
    schema = tool.get("inputSchema", {"type": "object"})
    if not isinstance(schema, dict):
        return f"the tool {name!r} has an inputSchema that is not an object"
    if schema.get("type", "object") != "object":
        return (f"the tool {name!r} takes {json.dumps(schema.get('type'))[:40]}, not an object of "
                "arguments")
    if not isinstance(schema.get("properties", {}), dict):
        return f"the tool {name!r} has \"properties\" that are not an object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(key, str) for key in required):
        return f"the tool {name!r} has \"required\" that is not a list of names"
    try:
        size = len(json.dumps(schema, allow_nan=False))
    except (ValueError, TypeError, RecursionError):
        return f"the tool {name!r} has a schema that cannot be sent as JSON"
    if size > MAX_SCHEMA_CHARS:
        return (f"the tool {name!r} has a schema of {size} characters (the limit is "
                f"{MAX_SCHEMA_CHARS})")
    return None


def result_text(result, content, tool="tool", images=None):
    """The parts of a tools/call result as text for the model; a picture goes into `images` (sent
    after the turn's results), or a note says why it did not."""
    pieces, pictures = [], 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif kind == "image":
            pictures += 1
            pieces.append(picture(part, f"{tool} picture {pictures}", images))
        elif kind == "resource" and isinstance(part.get("resource"), dict) \
                and isinstance(part["resource"].get("text"), str):
            pieces.append(part["resource"]["text"])
        elif kind == "resource_link" and isinstance(part.get("uri"), str):
            pieces.append(f"[a link to a resource: {part['uri'][:500]}]")
        else:
            shown = kind if isinstance(kind, str) else "unreadable"
            pieces.append(f"[a {shown[:40]} part was left out: only text and pictures reach the "
                          "model]")
    if not pieces and result.get("structuredContent") is not None:
        try:
            pieces.append(json.dumps(result["structuredContent"], ensure_ascii=False))
        except (ValueError, TypeError, RecursionError):
            pieces.append("[structured content that cannot be shown]")
    return cap("\n".join(pieces))


def picture(part, name, images):
    """The text for one image part; the picture itself goes into `images` when it can be sent."""
    if images is None:
        return "[a picture was left out: this caller takes text only]"
    try:
        data = (base64.b64decode(part.get("data") if isinstance(part.get("data"), str)
                                 else "", validate=True))
    except (binascii.Error, ValueError):
        data = b""
    mime = sniff(data)
    if not data or mime not in SENDABLE:
        return "[a picture was left out: it is not a PNG, JPEG or WebP image in base64]"
    if len(data) > MAX_IMAGE_BYTES:
        return f"[a picture was left out: {len(data)} bytes, the limit is {MAX_IMAGE_BYTES}]"
    images.append((name, image_part(mime, data)))
    return f"[{name}: {mime}, {len(data)} bytes; it is attached after this turn's tool results]"


def cap(text, limit=MAX_RESULT_CHARS):
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"
