"""A scripted Ollama: the native dialect (/api/chat, /api/show, /api/tags, /api/version), strictly.

The problem. A harness that speaks Ollama's own API is only tested if something answers the way
Ollama does, including how Ollama *refuses*: a request that real Ollama rejects must be rejected
here too, or a test passes on a shape that breaks on the first real run.

The mechanism. `OllamaServer` is a ScriptedServer (same script or policy, same recorded
`requests`, and the same /v1 route, as real Ollama has both) that also answers the native routes.
Every /api/chat body is checked before a reply is taken, each rule with its source:

- `messages[].content` must be a string (Ollama's api.Message.Content is a Go string: a list is
  "cannot unmarshal array"); images travel in `images`, a list of bare base64 strings (a Go
  []byte: a `data:` URI is "illegal base64 data").
- `tool_calls[].function.arguments` must be an object (api.ToolCallFunctionArguments is a map:
  a JSON string is rejected, ollama#6155).
- `role` is one of system, user, assistant, tool.
- Stricter than Ollama, because a template sees nothing else: every `tool` message carries a
  `tool_name` that one of the preceding assistant message's calls made (Ollama accepts a missing
  name, and the model then reads a result without knowing which call it answers).
- `options.num_ctx` and `options.num_predict`, when sent, are positive integers.
- `tools` for a model without the `tools` capability: 400 "<model> does not support tools"
  (Ollama, e.g. gemma3). `think: true` without `thinking`: 400 "does not support thinking".
- An unknown model: 404 "model \"x\" not found, try pulling it first".
- `stream` defaults to true, as in Ollama: a client that wants one JSON answer must say false.

Answers: `message.content` (always a string), `message.thinking`, `message.tool_calls` as
`{function: {index, name, arguments: object}}` without ids (ids only with call_ids=True, as newer
Ollama versions add), `done_reason` ("length" when the script says so), and the counts
`prompt_eval_count` / `eval_count` (estimated like the /v1 route, or from the reply's `usage`).
Streaming is NDJSON: thinking and text pieces, then each tool call whole in its own line (or, with
calls_in_last_frame=True, only in the final `done: true` line), then the final line. A reply's
`stream_error` sends an `{"error": ...}` line instead of the rest; `drop` stops half-way.

Personalities (`PERSONALITIES`, `tinyharness fake-server --ollama NAME`): healthy (qwen3:8b with
tools and thinking), no-model (nothing pulled: every model is a 404), no-tools (gemma3:4b, which
has no tool support), no-usage (answers carry no counts). Without a script or policy the model is
obliging: offered tools, it calls the first one with every required argument set to "ok"; given
tool results, it answers "Done."

What it cannot do: it plays the wire, not a model; the context is never really truncated.
"""
from __future__ import annotations

import base64
import binascii
import json
import sys
import time

from .testing import ScriptedServer, error_body, estimate_tokens

VERSION = "0.12.6"
ROLES = ("system", "user", "assistant", "tool")
HEALTHY_MODEL = {"capabilities": ["completion", "tools", "thinking"], "context_length": 40960,
                 "family": "qwen3", "parameter_size": "8.2B", "loaded_context": 4096}
PERSONALITIES = {
    "healthy": {"models": {"qwen3:8b": HEALTHY_MODEL}},
    "no-model": {"models": {}},
    "no-tools": {"models": {"gemma3:4b": {"capabilities": ["completion", "vision"], "context_length": 131072,
                                          "family": "gemma3", "parameter_size": "4.3B", "loaded_context": 4096}}},
    "no-usage": {"models": {"qwen3:8b": HEALTHY_MODEL}, "usage": False},
}


class OllamaServer(ScriptedServer):
    """ScriptedServer plus Ollama's native routes. `models`: name -> {capabilities, context_length,
    family, parameter_size, loaded_context}; the first one is the default model."""

    def __init__(self, script=None, policy=None, *, models=None, usage=True, call_ids=False,
                 calls_in_last_frame=False, personality=None, **kwargs):
        chosen = dict(PERSONALITIES[personality]) if personality else {}
        models = chosen.get("models", models if models is not None else PERSONALITIES["healthy"]["models"])
        usage = chosen.get("usage", usage)
        if script is None and policy is None:
            policy = obliging_policy
        kwargs.setdefault("model", next(iter(models), "qwen3:8b"))
        kwargs.setdefault("send_usage", usage)      # the /v1 route plays the same personality
        super().__init__(script, policy, **kwargs)
        self.models, self.call_ids = dict(models), call_ids
        self.calls_in_last_frame = calls_in_last_frame
        # Refused requests land in self.rejected as (request index, status, rule, message), like /v1's.

    @property
    def usage(self):
        return self.send_usage

    @usage.setter
    def usage(self, value):
        self.send_usage = value

    def _take_reply(self, body, headers):
        """The /v1 route shares the personality: an unknown model is a 404, tools for a model
        without them a 400, and no-usage sends an empty usage block. (/api/chat checks first.)"""
        model = self.models.get(body.get("model"))
        fault = None
        if model is None:
            fault = 404, "ollama: model not pulled", f"model \"{body.get('model')}\" not found, try pulling it first"
        elif body.get("tools") and "tools" not in model.get("capabilities", []):
            fault = 400, "ollama: no tools capability", f"registry.ollama.ai/library/{body['model']} does not support tools"
        if fault:
            self.record_rejection(body, headers, *fault)
            return {"status": fault[0], "body": error_body(fault[2])}, "", 0
        return super()._take_reply(body, headers)

    def record_rejection(self, body, headers, status, rule, message):
        with self._lock:
            self.rejected.append((len(self.requests), status, rule, message))
            self.requests.append(body)
            self.headers.append(headers)

    @property
    def root_url(self):
        """http://127.0.0.1:PORT, where the native API lives (base_url is the /v1 one)."""
        return self.base_url[: -len("/v1")]


def obliging_policy(body, index):
    """A healthy model in one rule: call the first tool offered (required args = "ok"), then finish."""
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    if tools and messages and messages[-1].get("role") == "user":
        function = tools[0].get("function") or {}
        required = (function.get("parameters") or {}).get("required") or []
        return {"tool_calls": [{"name": function.get("name", ""), "arguments": {k: "ok" for k in required}}]}
    return "Done."


# --- Routing (called from testing.py's handler for every /api/* path) ------------------------------

def answer_native(handler, method, path, data):
    """Answer one /api/* request on a ScriptedServer's connection. A plain ScriptedServer is an
    OpenAI-style server only, so it answers 404 there, like llama.cpp or vLLM."""
    owner = handler.server.owner
    if not isinstance(owner, OllamaServer):
        return handler.send_json(404, error_body(f"no route for {method} {path}", "invalid_request_error"))
    route = {("GET", "/api/version"): lambda: (200, {"version": VERSION}),
             ("GET", "/api/tags"): lambda: (200, tags(owner)),
             ("GET", "/api/ps"): lambda: (200, running(owner)),
             ("POST", "/api/show"): lambda: show(owner, parse_body(data)),
             ("POST", "/api/chat"): None}
    if (method, path) not in route:
        return handler.send_json(404, {"error": "404 page not found"}, raw="404 page not found")
    if path == "/api/chat":
        return chat(handler, owner, parse_body(data))
    status, body = route[(method, path)]()
    handler.send_json(status, body)


def parse_body(data):
    try:
        body = json.loads(data or b"")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def tags(owner):
    return {"models": [{"name": name, "model": name, "size": 5_200_000_000,
                        "details": {"family": m.get("family", ""), "parameter_size": m.get("parameter_size", "")}}
                       for name, m in owner.models.items()]}


def running(owner):
    """/api/ps: the loaded models and the context length they were loaded with (Ollama's default
    for requests that set no num_ctx, e.g. everything over /v1)."""
    return {"models": [{"name": name, "model": name, "context_length": m.get("loaded_context", 4096)}
                       for name, m in owner.models.items()]}


def show(owner, body):
    name = (body or {}).get("model") or (body or {}).get("name")
    model = owner.models.get(name)
    if model is None:
        return 404, {"error": f"model '{name}' not found"}
    family = model.get("family", "")
    return 200, {"details": {"family": family, "parameter_size": model.get("parameter_size", "")},
                 "model_info": {"general.architecture": family, f"{family}.context_length": model.get("context_length")},
                 "capabilities": list(model.get("capabilities", [])),
                 "parameters": "temperature 0.6\ntop_p 0.95"}


# --- /api/chat ------------------------------------------------------------------------------------

def chat(handler, owner, body):
    if body is None:
        return handler.send_json(400, {"error": "invalid request body"})
    model = owner.models.get(body.get("model"))
    if model is None:
        return reject(handler, owner, body, 404, "ollama: model not pulled",
                      f"model \"{body.get('model')}\" not found, try pulling it first")
    capabilities = model.get("capabilities", [])
    if body.get("tools") and "tools" not in capabilities:
        return reject(handler, owner, body, 400, "ollama: no tools capability",
                      f"registry.ollama.ai/library/{body['model']} does not support tools")
    if body.get("think") is True and "thinking" not in capabilities:
        return reject(handler, owner, body, 400, "ollama: no thinking capability",
                      f"\"{body['model']}\" does not support thinking")
    problem = check_request(body)
    if problem:
        return reject(handler, owner, body, 400, rule_of(problem), problem)
    reply, _, _ = owner._take_reply(body, handler.headers)
    if isinstance(reply, str):
        return handler.send_json(500, {"error": reply})
    if reply.get("delay"):
        time.sleep(reply["delay"])
    if reply.get("status") is not None:
        return handler.send_fault(reply["status"], reply.get("body") or {"error": f"scripted: HTTP {reply['status']}"})
    frames = native_frames(owner, body, reply)
    if reply.get("stream_error") is not None:        # e.g. the runner died: an error line, no done line
        frames = frames[:1] + [{"error": reply["stream_error"]}]
    elif reply.get("drop") is not None:              # the connection breaks: about half, no done line
        frames = frames[: max(1, len(frames) // 2)]
    if body.get("stream", True):
        return send_ndjson(handler, frames)
    whole = dict(frames[-1])
    whole["message"] = merged_message(frames)
    handler.send_json(200, whole)


def reject(handler, owner, body, status, rule, message):
    owner.record_rejection(body, handler.headers, status, rule, message)
    handler.send_json(status, {"error": message})


def check_request(body):
    """What real Ollama (or a template) would refuse in this body, in its words, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages must be a list"
    calls_so_far = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            return f"json: cannot unmarshal {type(message).__name__} into Go struct field ChatRequest.messages of type api.Message"
        if message.get("role") not in ROLES:
            return f"{where}: invalid role {message.get('role')!r}"
        if not isinstance(message.get("content", ""), str):
            return (f"json: cannot unmarshal {json_type(message['content'])} into Go struct field "
                    "Message.messages.content of type string")
        problem = check_images(message.get("images"), where) or check_calls(message.get("tool_calls"), where)
        if problem:
            return problem
        if message["role"] == "assistant":
            calls_so_far = [c["function"]["name"] for c in message.get("tool_calls") or []]
        elif message["role"] == "tool":
            name = message.get("tool_name")
            if not isinstance(name, str) or name not in calls_so_far:
                return (f"{where}: a tool result must name the call it answers with tool_name (one of "
                        f"{calls_so_far}), got {name!r}")
    for key in ("num_ctx", "num_predict"):
        value = (body.get("options") or {}).get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            return f"json: invalid options.{key} {value!r}: a positive integer is expected"
    return None


RULES = (("arguments", "ollama: arguments are an object"), ("images", "ollama: images are bare base64"),
         ("content", "ollama: content is a string"), ("tool_name", "ollama: a tool result names its call"),
         ("options", "ollama: options are positive integers"), ("role", "ollama: known roles"))


def rule_of(problem):
    """A short name for the rule a refused request broke (recorded in `rejected`, like /v1's rules)."""
    return next((rule for word, rule in RULES if word in problem), "ollama: request shape")


def check_images(images, where):
    if images is None:
        return None
    if not isinstance(images, list):
        return f"json: cannot unmarshal {json_type(images)} into Go struct field Message.messages.images of type []api.ImageData"
    for image in images:
        if not isinstance(image, str):
            return f"json: cannot unmarshal {json_type(image)} into Go struct field Message.messages.images of type []byte"
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
            return (f"json: cannot unmarshal {json_type(function['arguments'])} into Go struct field "
                    "ToolCallFunction.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments")
    return None


def json_type(value):
    return {str: "string", list: "array", dict: "object", bool: "bool", type(None): "null"}.get(type(value), "number")


def native_frames(owner, body, reply):
    """The answer as NDJSON frames (the last one has done: true, the reason and the counts)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def frame(message, done=False):
        return {"model": body.get("model"), "created_at": now,
                "message": {"role": "assistant", "content": "", **message}, "done": done}

    size = owner.fragment_size
    frames = [frame({"content": "", "thinking": p}) for p in pieces(reply.get("reasoning") or "", size)]
    frames += [frame({"content": p}) for p in pieces(reply.get("content") or "", size)]
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        native = {"function": {"index": i, "name": call["name"], "arguments": arguments}}
        if owner.call_ids or call.get("id"):
            native["id"] = call.get("id") or owner._new_call_id()
        calls.append(native)
    if calls and not owner.calls_in_last_frame:
        frames += [frame({"tool_calls": [c]}) for c in calls]
    last = frame({"tool_calls": calls} if calls and owner.calls_in_last_frame else {}, done=True)
    last["done_reason"] = "length" if reply.get("finish_reason") == "length" else "stop"
    last.update(counts(owner, body, reply, calls))
    return frames + [last]


def counts(owner, body, reply, calls):
    if not owner.usage:
        return {}
    usage = reply.get("usage")
    if isinstance(usage, dict):
        return {k: usage[o] for k, o in (("prompt_eval_count", "prompt_tokens"), ("eval_count", "completion_tokens"))
                if o in usage}
    said = (reply.get("content") or "") + (reply.get("reasoning") or "") + json.dumps(calls)
    prompt = json.dumps(body.get("messages"), ensure_ascii=False) + json.dumps(body.get("tools"), ensure_ascii=False)
    return {"prompt_eval_count": estimate_tokens(prompt), "eval_count": estimate_tokens(said),
            "total_duration": 1_000_000}


def pieces(text, size):
    return [text[i:i + size] for i in range(0, len(text), size)]


def merged_message(frames):
    """A non-streamed answer: the frames' message parts put together, as Ollama sends it."""
    message = {"role": "assistant", "content": "".join(f["message"].get("content", "") for f in frames)}
    thinking = "".join(f["message"].get("thinking", "") for f in frames)
    if thinking:
        message["thinking"] = thinking
    calls = [c for f in frames for c in f["message"].get("tool_calls") or []]
    if calls:
        message["tool_calls"] = calls
    return message


def send_ndjson(handler, frames):
    handler.send_response(200)
    handler.send_header("Content-Type", "application/x-ndjson")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True
    for frame in frames:
        handler.wfile.write((json.dumps(frame, ensure_ascii=False) + "\n").encode("utf-8"))
        handler.wfile.flush()


def serve(personality="healthy", port=0):
    """`tinyharness fake-server --ollama NAME`: serve until Ctrl+C."""
    with OllamaServer(personality=personality, port=port) as srv:
        models = ", ".join(srv.models) or "no models"
        print(f"Scripted Ollama ({personality}: {models}) on {srv.root_url} (native /api/* and {srv.base_url}). "
              "Press Ctrl+C to stop.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
    return 0
