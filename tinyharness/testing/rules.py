"""Strict mode: what real model servers refuse, checked the way they check it, each rule with its
source.

The problem. A harness can send a request that a lenient test server answers and a real server
refuses: `content: null` beside tool calls, arguments as an object where a JSON string belongs, a
tool result that answers no call. Such a harness passes every test and breaks on its first real run,
on one server and not another.

The mechanism. Each function here reads a request body and returns the rules it breaks, in the words
the real server would answer with and with the HTTP status it would use, so the scripted servers can
refuse the request as that server does. The rules come from four servers, each cited beside its
rule: OpenAI's API reference (roles; every tool call answered, each result answering a call), vLLM
(whose chat templates pair results to calls the same way), llama-cpp-python (pydantic types in
llama_cpp/llama_types.py and llama_cpp/server/types.py: HTTP 500 with pydantic's text) for the
OpenAI-style `/v1/chat/completions`, and Ollama (ollama/ollama: api/types.go, openai/openai.go) for
its /v1 shim's argument parsing and for its native `/api/chat` (`check_request`, `option_problem`).

What it cannot do. These are the rules a harness is known to break, not a server's whole validation;
a server's newer or older release may accept more or refuse more than its rule here says.
"""
from __future__ import annotations

import base64
import binascii
import json

# --- The OpenAI-style /v1/chat/completions: OpenAI, vLLM, llama-cpp-python, Ollama's /v1
# ------------ Each rule names the server that enforces it and answers like that server does. A
# harness that passes these runs against all of them; one that breaks a rule would fail on that
# server.
ROLES = ("system", "user", "assistant", "tool")


def pydantic_error(path: str, message: str, kind: str, value) -> str:
    """llama-cpp-python validates the request with pydantic (llama_cpp/server/types.py builds
    CreateChatCompletionRequest from the TypedDicts of llama_cpp/llama_types.py) and answers a
    failure with HTTP 500 and pydantic's text, e.g. "Input should be a valid string"."""
    shown = json.dumps(value)[:40]
    return (f"1 validation error for CreateChatCompletionRequest\n{path}\n  {message} "
            f"[type={kind}, input_value={shown}, input_type={type(value).__name__}]")


def tool_call_problems(i: int, calls) -> list:
    """llama_types.py ChatCompletionMessageToolCall: {id: str, type: "function", function:
    {name: str, arguments: str}} (HTTP 500); Ollama's /v1 then parses each arguments string into an
    object (openai/openai.go, fromChatRequest: HTTP 400 "invalid tool call arguments")."""
    if not isinstance(calls, list):
        return [(500, "llama-cpp-python: tool_calls is a list",
                 pydantic_error(f"messages.{i}.typed-dict.tool_calls",
                                "Input should be a valid list", "list_type", calls))]
    problems = []
    for n, call in enumerate(calls):
        at = f"messages.{i}.typed-dict.tool_calls.{n}"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict):
            shape = "llama-cpp-python: a tool call is {id, type, function: {name, arguments}}"
            problems.append((500, shape, pydantic_error(at, "Input should be a valid dictionary",
                                                        "dict_type", call)))
            continue
        for where, value, rule in ((f"{at}.id", call.get("id"), "the call id is a string"),
                                   (f"{at}.function.name", function.get("name"),
                                    "the tool name is a string"),
                                   (f"{at}.function.arguments", function.get("arguments"),
                                    "arguments are a JSON string")):
            if not isinstance(value, str):
                problems.append((500, f"llama-cpp-python: {rule}",
                                 pydantic_error(where, "Input should be a valid string",
                                                "string_type", value)))
        if call.get("type") != "function":
            problems.append((500, "llama-cpp-python: a tool call's type is \"function\"",
                             pydantic_error(f"{at}.type", "Input should be 'function'",
                                            "literal_error", call.get("type"))))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                problems.append((400, "ollama: arguments parse to a JSON object",
                                 "invalid tool call arguments"))
    return problems


def content_problems(i: int, role: str, content) -> list:
    """llama_types.py: an assistant's content is NotRequired[str] (absent is fine, null is not), a
    system or tool message's Optional[str], a user message's a string, null or a list of text and
    image_url parts. A tool message's content must be a string for OpenAI's API and vLLM too."""
    if isinstance(content, str) or (content is None and role in ("system", "user")):
        return []
    if role == "user" and isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") in ("text", "image_url") for p in content):
        return []
    kind = ("a string" if role in ("assistant", "tool") else "a string or null"
            + (" or parts" if role == "user" else ""))
    return [(500, f"llama-cpp-python: {role} content is {kind}",
             pydantic_error(f"messages.{i}.typed-dict.content", "Input should be a valid string",
                            "string_type", content))]


def request_problems(body) -> list:
    """Every rule of a real server this request breaks, as (HTTP status, rule, the server's
    message)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:      # all servers
        return ([(400, "openai: messages is a non-empty list",
                  "'messages' must be a non-empty array")])
    # unanswered: ids of the last assistant's calls without a result
    problems, unanswered = [], None
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ROLES:
            problems.append((400, "openai: role is system, user, assistant or tool",
                             f"Invalid value for 'messages[{i}].role': {json.dumps(role)[:40]}"))
            continue
        if role != "tool" and unanswered:
            # OpenAI's API (and the chat templates vLLM applies): every call is answered before the
            # conversation goes on.
            problems.append(unanswered_problem(unanswered))
        if role != "tool":
            unanswered = None
        if role != "assistant" or "content" in m:     # an assistant may leave content out
            problems += content_problems(i, role, m.get("content"))
        if role == "assistant" and m.get("tool_calls") is not None:
            problems += tool_call_problems(i, m["tool_calls"])
            calls = m["tool_calls"] if isinstance(m["tool_calls"], list) else []
            unanswered = ({c.get("id") for c in calls if isinstance(c, dict)
                           and isinstance(c.get("id"), str)})
        if role == "tool":
            problems += tool_result_problems(i, m.get("tool_call_id"), unanswered)
    if unanswered:
        problems.append(unanswered_problem(unanswered))
    return problems


def unanswered_problem(unanswered):
    return (400, "openai/vllm: every tool call is answered before the next message",
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(sorted(unanswered)))


def tool_result_problems(i, call_id, unanswered):
    """A tool message answers one call of the assistant message before it (taken off
    `unanswered`)."""
    if not isinstance(call_id, str):             # llama_types.py ChatCompletionRequestToolMessage
        return [(500, "llama-cpp-python: a tool message has a tool_call_id string",
                 pydantic_error(f"messages.{i}.typed-dict.tool_call_id",
                                "Input should be a valid string", "string_type", call_id))]
    if unanswered is None or call_id not in unanswered:
        # OpenAI's API; vLLM's templates pair results to calls by this id the same way.
        return [(400, ("openai/vllm: a tool message answers a call of the assistant message "
                       "before it"),
                 ("Invalid parameter: messages with role 'tool' must be a response to a preceding "
                  f"message with 'tool_calls' (tool_call_id {json.dumps(call_id)[:60]} matches "
                  "none)"))]
    unanswered.discard(call_id)
    return []


# --- Ollama's native /api/chat (ollama/ollama: api/types.go)
# ---------------------------------------- Ollama binds the body into Go structs: a wrong type is a
# JSON unmarshal error, answered HTTP 400 with Go's own words (ollama_problem), and options are
# typed when the runner is scheduled (HTTP 500).

INTEGER_OPTIONS = ("num_ctx", "num_predict", "num_keep", "seed", "top_k", "num_batch", "num_gpu",
                   "num_thread")


def option_problem(options):
    """api/types.go Options.FromMap: an integer option takes any JSON number (a float is truncated),
    nothing else."""
    for key in INTEGER_OPTIONS:
        value = (options or {}).get(key) if isinstance(options, dict) else None
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"option \"{key}\" must be of type integer"
    return None



def check_request(body):
    """What real Ollama (or a template) would refuse in this body, in its words, or None. Types:
    api/types.go (ChatRequest, Message: content a string, images []ImageData, role a string that
    Message.UnmarshalJSON lowercases; ToolCallFunctionArguments a map, ollama#6155). Stricter than
    Ollama, because a template sees nothing else: each tool result names a call of the assistant
    message before it, by tool_call_id (Message.ToolCallID, 0.12.10+) or by tool_name."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages must be a list"
    calls_so_far, ids_so_far = [], []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            return (f"json: cannot unmarshal {type(message).__name__} into Go struct field "
                    "ChatRequest.messages of type api.Message")
        if not isinstance(message.get("role", ""), str):
            return (f"json: cannot unmarshal {json_type(message['role'])} into Go struct field "
                    "Message.messages.role of type string")
        # api/types.go Message.UnmarshalJSON: lowercased
        role = message.get("role", "").lower()
        if not isinstance(message.get("content", ""), str):
            return (f"json: cannot unmarshal {json_type(message['content'])} into Go struct field "
                    "Message.messages.content of type string")
        problem = (check_images(message.get("images"), where)
                   or check_calls(message.get("tool_calls"), where))
        if problem:
            return problem
        if role == "assistant":
            calls_so_far = [c["function"]["name"] for c in message.get("tool_calls") or []]
            ids_so_far = [c.get("id") for c in message.get("tool_calls") or [] if c.get("id")]
        elif role == "tool":
            name, call_id = message.get("tool_name"), message.get("tool_call_id")
            if call_id is not None and call_id not in ids_so_far:
                return (f"{where}: a tool result's tool_call_id must be one of the calls before it "
                        f"({ids_so_far}), got {call_id!r}")
            if call_id is None and (not isinstance(name, str) or name not in calls_so_far):
                return (f"{where}: a tool result must name the call it answers with tool_call_id "
                        f"or tool_name (one of {calls_so_far}), got {name!r}")
    return None


RULES = (("arguments", "ollama: arguments are an object"),
         ("images", "ollama: images are bare base64"),
         ("content", "ollama: content is a string"),
         ("tool result", "ollama: a tool result names its call"),
         ("role", "ollama: role is a string"))


def rule_of(problem):
    """A short name for the rule a refused request broke (recorded in `rejected`, like /v1's
    rules)."""
    return next((rule for word, rule in RULES if word in problem), "ollama: request shape")


def check_images(images, where):
    if images is None:
        return None
    if not isinstance(images, list):
        return (f"json: cannot unmarshal {json_type(images)} into Go struct field "
                "Message.messages.images of type []api.ImageData")
    for image in images:
        if not isinstance(image, str):
            return (f"json: cannot unmarshal {json_type(image)} into Go struct field "
                    "Message.messages.images of type []byte")
        try:
            base64.b64decode(image, validate=True)
        except (binascii.Error, ValueError):
            return f"{where}: illegal base64 data in images (send bare base64, not a data: URI)"
    return None


def check_calls(calls, where):
    if calls is None:
        return None
    if not isinstance(calls, list):
        return f"{where}: tool_calls must be a list"
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return f"{where}: each tool call needs function.name"
        if not isinstance(function.get("arguments", {}), dict):
            return (f"json: cannot unmarshal {json_type(function['arguments'])} into Go struct "
                    "field ToolCallFunction.messages.tool_calls.function.arguments of type "
                    "api.ToolCallFunctionArguments")
    return None


def json_type(value):
    return ({str: "string", list: "array", dict: "object", bool: "bool",
             type(None): "null"}.get(type(value), "number"))
