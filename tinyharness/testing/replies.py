"""What a scripted model says, in the OpenAI chat-completions shape: the replies of the scripted
server.

The problem. A test of a harness needs a "model" whose every answer is known in advance, down to the
bytes: the text, the tool calls and their argument strings, the usage counts, the finish reason, and
the way a stream cuts all of that into pieces. Writing those JSON objects by hand in every test is
long and easy to get subtly wrong (arguments as an object instead of a string, a missing `index`).

The mechanism. A reply in a script is a short string or a dict of a few known keys (REPLY_KEYS; an
unknown key is an error at once, not a silently ignored typo). The builders here turn one into what
the wire carries: `build_completion` a whole `chat.completion`, `build_stream` the server-sent
events of a streamed one (cut every `size` characters, blind to JSON), `build_usage` the counts,
estimated as characters/4 of the prompt text unless the reply gives its own. These are pure
functions: no socket, no thread; testing/server.py puts them on the wire.

What it cannot do. The token counts are estimates, not a tokenizer's; the shapes are those of the
servers named in the comments (OpenAI, vLLM, llama.cpp, llama-cpp-python, Ollama's /v1), not of
every server there is.
"""
from __future__ import annotations

import json

REPLY_KEYS = frozenset({
    "content", "reasoning", "tool_calls", "finish_reason", "usage", "malformed_arguments",
    "status", "body", "delay", "drop", "raw", "close",
    "stream_error", "index_zero", "whole_tool_calls", "no_index", "repeat_fragments",
})
DROP_MODES = ("before", "mid-body", "mid-stream")


# --- Pure helpers: tokens, prompt text, replies ---------------------------------------------

def estimate_tokens(text: str) -> int:
    """Rough token count: characters/4, rounded up. Good enough for budgets and tests."""
    return (len(text) + 3) // 4



def common_prefix_length(a: str, b: str) -> int:
    """How many leading characters two strings share (what a KV cache could reuse)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def normalise_reply(reply) -> dict:
    """Turn a reply into a dict and check it, so a typo fails loudly instead of being ignored."""
    if isinstance(reply, str):
        return {"content": reply}
    if not isinstance(reply, dict):  # a ValueError, as every bad script: load_script catches that
        raise ValueError(  # noqa: TRY004
            f"a reply must be a string or an object, not {type(reply).__name__}")
    if "react" in reply:
        return normalise_reaction(reply)
    unknown = sorted(set(reply) - REPLY_KEYS)
    if unknown:
        raise ValueError(f"unknown reply key(s) {unknown}; known keys: {sorted(REPLY_KEYS)}")
    if reply.get("drop") not in (None, *DROP_MODES):
        raise ValueError(f"drop must be one of {list(DROP_MODES)}, not {reply['drop']!r}")
    for call in reply.get("tool_calls") or []:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):  # as above
            raise ValueError(f"each tool call needs a 'name' string: {call!r}")  # noqa: TRY004
    return dict(reply)


CONDITIONS = ("if_result_contains", "if_prompt_contains")


def normalise_reaction(reply: dict) -> dict:
    """A reply that depends on what the model reads: {"react": [{"if_result_contains": TEXT,
    "reply": R}, ..., {"reply": R}]}. The first choice whose conditions all hold (or that names
    none) is the reply: `if_result_contains`, TEXT is in the last tool result; `if_prompt_contains`,
    TEXT is anywhere in the messages the model is given (after a server's cut: a model remembers
    only what its window still holds)."""
    choices = reply["react"]
    if set(reply) != {"react"} or not isinstance(choices, list) or not choices:
        raise ValueError('a reactive reply is {"react": [{"if_result_contains": TEXT, "reply": '
                         'REPLY}, ...]}')
    checked = []
    for choice in choices:
        if not isinstance(choice, dict) or "reply" not in choice \
                or set(choice) - {*CONDITIONS, "reply"} \
                or not all(isinstance(choice.get(c, ""), str) for c in CONDITIONS) \
                or "react" in choice["reply"]:
            raise ValueError(f'each reaction is {{"if_result_contains" or "if_prompt_contains": '
                             f'TEXT, "reply": REPLY}}: {choice!r}')
        checked.append({**choice, "reply": normalise_reply(choice["reply"])})
    return {"react": checked}


def reacted(reply: dict, body: dict) -> dict | str:
    """A reactive reply resolved against the request: the stand-in model decides from the last tool
    result it reads, as a real one does (so two harnesses whose results differ get different
    replies). Any other reply as it is; a str when no choice matches."""
    if "react" not in reply:
        return reply
    messages = body.get("messages") or []
    results = ([m.get("content") for m in messages if isinstance(m, dict)
                and m.get("role") == "tool"])
    last = results[-1] if results and isinstance(results[-1], str) else ""
    prompt = json.dumps(messages, ensure_ascii=False)
    for choice in reply["react"]:
        if (choice.get("if_result_contains", "") in last
                and choice.get("if_prompt_contains", "") in prompt):
            return choice["reply"]
    return f"scripted server: no reaction of the script matches the last tool result {last[:80]!r}"


def load_script(path) -> list:
    """Read a script file: a JSON list of replies. Raises OSError or ValueError with a reason."""
    with open(path, encoding="utf-8") as f:
        try:
            script = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(script, list):  # the ValueError its docstring promises
        raise ValueError(f"{path}: a script must be a JSON list of replies")  # noqa: TRY004
    for i, reply in enumerate(script):
        try:
            normalise_reply(reply)
        except ValueError as e:
            raise ValueError(f"{path}: reply {i}: {e}") from None
    return script


def error_body(message: str, kind: str = "api_error") -> dict:
    """An OpenAI-style error object, the shape clients look for in a failed answer."""
    return {"error": {"message": message, "type": kind}}


def build_tool_calls(reply: dict, new_call_id) -> list:
    """The OpenAI `tool_calls` list. Arguments always travel as a JSON *string*."""
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        # a str is sent as-is: that is how tests send bad JSON
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        if reply.get("malformed_arguments"):
            arguments = arguments[: len(arguments) // 2]   # cut in half: never valid JSON
        calls.append({"id": call.get("id") or new_call_id(), "index": i, "type": "function",
                      "function": {"name": call["name"], "arguments": arguments}})
    return calls


def build_usage(reply: dict, calls: list, prompt: str, cached_chars: int,
                cap=None) -> dict | None:
    """The usage block: estimated counts, unless the reply overrides it (False: no usage at all). A
    reply scripted as cut at the length limit ran to the request's cap (`max_tokens`), as a real
    server's does."""
    if reply.get("usage") is False:
        return None
    if reply.get("usage") is not None:
        return reply["usage"]
    said = (reply.get("content") or "") + (reply.get("reasoning") or "")
    said += "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls)
    p, c = estimate_tokens(prompt), estimate_tokens(said)
    if (reply.get("finish_reason") == "length" and isinstance(cap, int)
        and not isinstance(cap, bool) and cap > 0):
        c = cap
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": cached_chars // 4}}


def finish_reason(reply: dict, calls: list) -> str:
    return reply.get("finish_reason") or ("tool_calls" if calls else "stop")


def build_completion(reply: dict, calls: list, head: dict, usage, null_content: bool = False,
                     legacy_fields: bool = False) -> dict:
    """A whole (non-streaming) chat.completion answer; no usage key when usage is None."""
    # Beside tool calls OpenAI, vLLM and llama.cpp send `content: null`, Ollama sends "". An
    # explicit None in the script is always passed through.
    content = reply.get("content", "")
    message = ({"role": "assistant", "content": None if calls and null_content and not content
                else content})
    if reply.get("reasoning"):
        message["reasoning"] = reply["reasoning"]          # Ollama /v1 spelling
    if calls:
        message["tool_calls"] = calls
        # llama-cpp-python: the deprecated single call too
        if legacy_fields:
            message["function_call"] = dict(calls[0]["function"])
    answer = {**head, "object": "chat.completion",
              "choices": [{"index": 0, "message": message,
                           "finish_reason": finish_reason(reply, calls)}]}
    return answer if usage is None else {**answer, "usage": usage}


def json_text(obj) -> str:
    """JSON with readable non-ASCII, except a string holding a lone surrogate: UTF-8 cannot carry
    it, so that answer is sent with \\u escapes (as a real server's JSON encoder would)."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(obj)


def pieces(text: str, size: int) -> list:
    """Cut text every `size` characters, blind to JSON: clients must cope with any split."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def build_stream(reply: dict, calls: list, head: dict, usage: dict | None, size: int) -> list:
    """The server-sent events of a streamed answer, as JSON-able objects plus a final "[DONE]"."""
    def chunk(delta, finish=None):
        return {**head, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    role = chunk({"role": "assistant", "content": ""})
    thinking = [chunk({"reasoning": p}) for p in pieces(reply.get("reasoning") or "", size)]
    text = [chunk({"content": p}) for p in pieces(reply.get("content") or "", size)]
    if reply.get("stream_error") is not None:
        # llama.cpp reports e.g. context overflow as an error event inside a 200 stream.
        oops = {"error": {"message": reply["stream_error"], "type": "server_error"}}
        return ([role, text[0]] if text else []) + [oops]
    events = [role, *thinking, *text]
    for call in calls:
        index = 0 if reply.get("index_zero") else call["index"]   # Ollama quirk: all index 0
        if reply.get("whole_tool_calls") or reply.get("no_index"):  # Ollama: one call, one chunk
            whole = ({k: v for k, v in call.items() if k != "index"} if reply.get("no_index")
                     else {**call, "index": index})
            events.append(chunk({"tool_calls": [whole]}))
            continue
        opening = {"index": index, "id": call["id"], "type": "function",
                   "function": {"name": call["function"]["name"], "arguments": ""}}
        events.append(chunk({"tool_calls": [opening]}))
        for p in pieces(call["function"]["arguments"], size):     # later fragments carry no id
            fragment = {"index": index, "function": {"arguments": p}}
            # llama-cpp-python: index, id and name every time, and nulls
            if reply.get("repeat_fragments"):
                fragment = {"index": index, "id": call["id"], "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": p}}
                events.append(chunk({"role": None, "content": None, "tool_calls": [fragment]}))
                continue
            events.append(chunk({"tool_calls": [fragment]}))
    events.append(chunk({}, finish_reason(reply, calls)))
    if usage is not None:
        events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return events + ["[DONE]"]
