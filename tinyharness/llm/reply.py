"""The canonical message: whatever a server sends as the assistant's message, made into one shape.

The problem. Servers hand back structure a harness must not trust blindly: `content: null` beside
tool calls, arguments as objects or as broken JSON, calls without ids or with the same id twice,
counts as strings, a lone surrogate from half an emoji - and they reject those same shapes when
the harness sends them back with the next request.

The mechanism. `canonical_message` turns any message-shaped object into
{"role": "assistant", "content": str, "tool_calls": [{id, type, function: {name, arguments}}]}, with
the reasoning kept under the field name the server used (each server reads back its own). Arguments
become a string holding a JSON object, byte for byte the model's own when they were valid; a call it
cannot repair gets "{}" and a note under the private key `_problems`, which the loop turns into an
error the model reads. `clean_usage` keeps only the counts reported as whole numbers.

What it cannot do. It repairs shapes, never meaning: it does not guess a tool name or invent an
argument, and arguments that were broken are reported, not fixed.
"""
import json
import re

# Where servers put a model's reasoning: Ollama /v1 says `reasoning`, llama.cpp and DeepSeek-style
# APIs `reasoning_content`, Ollama's native API `thinking` (recent vLLM sends both of the first
# two).
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
    return with_calls(message, as_list_of_calls(raw.get("tool_calls")), canonical_call)


def with_calls(message, items, canonicalise):
    """The message with its tool calls, each item made canonical by canonicalise(item, number from
    1, the ids given so far) -> (call, what was wrong or None). What was wrong goes under the
    private key `_problems` (by call id): the loop pops it before the message is kept and tells the
    model. Both dialects' replies end here (ollama.py passes its native calls)."""
    calls: list[dict] = []
    problems = {}
    for number, item in enumerate(items, 1):
        call, problem = canonicalise(item, number, {c["id"] for c in calls})
        calls.append(call)
        if problem:
            problems[call["id"]] = problem
    if calls:
        message["tool_calls"] = calls
    if problems:
        message["_problems"] = problems
    return message


def clean(text):
    """A lone surrogate (half an emoji, escaped alone in JSON) cannot be encoded, and servers reject
    it when it comes back: it becomes '?'."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def as_text(content):
    """The content as a string: null is "", text parts are joined, anything else is shown as
    JSON."""
    if isinstance(content, str):
        return clean(content)
    if content is None:
        return ""
    if isinstance(content, list):
        return ("".join(as_text(p.get("text")) if isinstance(p, dict)
                        else as_text(p) for p in content))
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
        return (blank_call(new_id(number, used_ids)), (f"tool call {number} is not an object but "
                                                       f"{describe(item)}"))
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
    call = ({"id": clean(call_id), "type": "function",
             "function": {"name": clean(name), "arguments": arguments}})
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
    # Ollama's native API and some /v1 servers send objects
    if isinstance(arguments, dict):
        return dump_object(arguments)
    if not isinstance(arguments, str):
        return "{}", f"the arguments must be a JSON object, not {describe(arguments)}"
    try:
        value = strict_json(arguments)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            # an object encoded twice: still what the model meant
            value = strict_json(value)
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
    counts = ({k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")
               if is_count(usage.get(k))})
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and is_count(details.get("cached_tokens")):
        counts["prompt_tokens_details"] = {"cached_tokens": details["cached_tokens"]}
    return counts


def is_count(value):
    return type(value) is int and value >= 0   # not a bool, not "12", not 12.5
