"""A scripted Ollama: the native dialect (/api/chat, /api/show, /api/tags, /api/version), strictly.

The problem. A harness that speaks Ollama's own API is only tested if something answers the way
Ollama does, including how Ollama *refuses*: a request that real Ollama rejects must be rejected
here too, or a test passes on a shape that breaks on the first real run.

The mechanism. `OllamaServer` is a ScriptedServer (same script or policy, same recorded `requests`,
and the same /v1 route, as real Ollama has both) that also answers the native routes. Every
/api/chat body is checked before a reply is taken (the shape rules live in testing/rules.py, beside
the /v1 ones), each rule with the Ollama source it comes from (ollama/ollama: api/types.go,
server/routes.go, server/prompt.go, llm/llama_server.go):

- `messages[].content` must be a string (api/types.go: Message.Content is a Go string, a list is
  "cannot unmarshal array"); images travel in `images`, a list of bare base64 strings (a Go
  []ImageData: a `data:` URI is "illegal base64 data").
- `tool_calls[].function.arguments` must be an object (api/types.go: ToolCallFunctionArguments is a
  map: a JSON string is rejected, ollama#6155).
- Roles are lowercased and not validated (api/types.go, Message.UnmarshalJSON): "USER" is "user",
  an unknown role reaches the template as it is.
- Stricter than Ollama, because a template sees nothing else: every `tool` message names a call of
  the preceding assistant message, by `tool_call_id` (api/types.go Message.ToolCallID, 0.12.10+) or
  by `tool_name` (Ollama accepts neither, and the model then reads a result without its call).
- Options are typed (api/types.go, Options.FromMap): an integer option may be any JSON number, a
  string or a boolean there is HTTP 500 `option "num_ctx" must be of type integer` (the error comes
  out of server/routes.go scheduleRunner -> handleScheduleError, whose default is 500).
- `think` is a boolean or "high" | "medium" | "low" | "max" (api/types.go, ThinkValue.UnmarshalJSON;
  anything else is a 400 from binding the request); omitted, it is ON for a model with the
  `thinking` capability (server/routes.go ChatHandler). `think: true` without the capability is 400
  "does not support thinking", checked before the tools capability (which scheduleRunner checks:
  400 "<model> does not support tools", e.g. gemma3).
- An unknown model: 404 "model \"x\" not found, try pulling it first". An empty `messages` list
  loads the model and answers `done_reason: "load"` (server/routes.go ChatHandler).
- The window: `options.num_ctx`, else the model's `loaded_context` (Ollama's default, 4096 below 24
  GiB of video memory). A longer prompt is cut the way server/prompt.go (chatPrompt) cuts it - the
  system messages kept, the oldest others dropped until it fits, the last message always kept -
  unless the request says `truncate: false`: then it is the HTTP 400 llama.cpp's server answers,
  passed on by Ollama as the error text (llm/llama_server.go): `exceed_context_size_error` with
  `n_prompt_tokens` and `n_ctx`. `srv.truncated` lists (request index, messages dropped).
- `stream` defaults to true, as in Ollama: a client that wants one JSON answer must say false.

Answers: `message.content` (always a string), `message.thinking` (only when thinking is on),
`message.tool_calls` as `{id, function: {index, name, arguments: object}}` with ids `call_` + 8
characters, as Ollama 0.12.10+ writes them (server/routes.go toolCallId; `call_ids=False` plays an
older Ollama without ids), `done_reason` ("length" when the script says so), and the counts
`prompt_eval_count` / `eval_count` (estimated like the /v1 route, an image counted as image tokens
as there, or from the reply's `usage`). Streaming is NDJSON: thinking and text pieces, then each
tool call whole in its own line (or, with calls_in_last_frame=True, only in the final `done: true`
line), then the final line. A reply's `stream_error` sends an `{"error": ...}` line instead of the
rest; `drop` stops half-way. `/api/show` reports the model's shape (layers, heads, head size) as
real Ollama does, so the KV cache's size can be worked out.

Personalities (`PERSONALITIES`, `tinyharness fake-server --ollama NAME`): healthy (qwen3:8b with
tools and thinking), no-model (nothing pulled: every model is a 404), no-tools (gemma3:4b, which
has no tool support), no-usage (answers carry no counts). Without a script or policy the model is
obliging: offered tools, it calls the first one with every required argument set to "ok"; given
tool results, it answers "Done."

What it cannot do: it plays the wire, not a model; tokens are estimated (characters/4), not counted
by the model's tokenizer, so the point where a prompt stops fitting is near, not at, the real one.
"""
from __future__ import annotations

import hashlib
import json
import time

from .images import IMAGE_BASE_TOKENS, image_stand_in
from .replies import error_body, estimate_tokens
from .rules import check_request, option_problem, rule_of
from .server import ScriptedServer, serve_until_ctrl_c

VERSION = "0.12.10"     # the first with tool-call ids; truncate/shift came in 0.12.6
THINK_LEVELS = ("high", "medium", "low", "max")
QWEN3_8B_SHAPE = {"block_count": 36, "embedding_length": 4096, "attention.head_count": 32,
                  "attention.head_count_kv": 8, "attention.key_length": 128,
                  "attention.value_length": 128}
HEALTHY_MODEL = {"capabilities": ["completion", "tools", "thinking"], "context_length": 40960,
                 "family": "qwen3", "parameter_size": "8.2B", "loaded_context": 4096,
                 "shape": QWEN3_8B_SHAPE}
PERSONALITIES: dict[str, dict] = {
    "healthy": {"models": {"qwen3:8b": HEALTHY_MODEL}},
    "no-model": {"models": {}},
    "no-tools": {"models": {"gemma3:4b": {"capabilities": ["completion", "vision"],
                                          "context_length": 131072,
                                          "family": "gemma3", "parameter_size": "4.3B",
                                          "loaded_context": 4096}}},
    "no-usage": {"models": {"qwen3:8b": HEALTHY_MODEL}, "usage": False},
}


class OllamaServer(ScriptedServer):
    """ScriptedServer plus Ollama's native routes. `models`: name -> {capabilities, context_length,
    family, parameter_size, loaded_context}; the first one is the default model."""

    def __init__(self, script=None, policy=None, *, models=None, usage=True, call_ids=True,
                 calls_in_last_frame=False, personality=None, **kwargs):
        chosen = dict(PERSONALITIES[personality]) if personality else {}
        models = (chosen.get("models", models if models is not None
                             else PERSONALITIES["healthy"]["models"]))
        usage = chosen.get("usage", usage)
        if script is None and policy is None:
            policy = obliging_policy
        kwargs.setdefault("model", next(iter(models), "qwen3:8b"))
        kwargs.setdefault("send_usage", usage)      # the /v1 route plays the same personality
        super().__init__(script, policy, **kwargs)
        self.models, self.call_ids = dict(models), call_ids
        self.calls_in_last_frame = calls_in_last_frame
        # (request index, messages dropped) of each prompt cut as Ollama cuts it
        self.truncated = []
        # Refused requests land in self.rejected as (request index, status, rule, message), like
        # /v1's.

    @property
    def usage(self):
        return self.send_usage

    @usage.setter
    def usage(self, value):
        self.send_usage = value

    def _take_reply(self, body, headers, seen=None):
        """The /v1 route shares the personality: an unknown model is a 404, tools for a model
        without them a 400, and no-usage sends an empty usage block. (/api/chat checks first.)"""
        model = self.models.get(body.get("model"))
        fault = None
        if model is None:
            fault = (404, "ollama: model not pulled",
                     f"model \"{body.get('model')}\" not found, try pulling it first")
        elif body.get("tools") and "tools" not in model.get("capabilities", []):
            fault = (400, "ollama: no tools capability",
                     f"registry.ollama.ai/library/{body['model']} does not support tools")
        if fault:
            self.record_rejection(body, headers, *fault)
            return {"status": fault[0], "body": error_body(fault[2])}, "", 0
        return super()._take_reply(body, headers, seen)

    def record_rejection(self, body, headers, status, rule, message):
        with self._lock:
            self.rejected.append((len(self.requests), status, rule, message))
            self.requests.append(body)
            self.headers.append(headers)

    def answer_native(self, handler, method, path, data):
        return answer_native(handler, method, path, data)

    @property
    def root_url(self):
        """http://127.0.0.1:PORT, where the native API lives (base_url is the /v1 one)."""
        return self.base_url[: -len("/v1")]


def obliging_policy(body, index):
    """A healthy model in one rule: call the first tool offered (required args = "ok"), then
    finish."""
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    if tools and messages and messages[-1].get("role") == "user":
        function = tools[0].get("function") or {}
        required = (function.get("parameters") or {}).get("required") or []
        arguments = {k: "ok" for k in required}
        return {"tool_calls": [{"name": function.get("name", ""), "arguments": arguments}]}
    return "Done."


# --- Routing (OllamaServer.answer_native: the scripted server's handler hands it every /api/* path)
# -

def answer_native(handler, method, path, data):
    """Answer one /api/* request on a ScriptedServer's connection. A plain ScriptedServer is an
    OpenAI-style server only, so it answers 404 there, like llama.cpp or vLLM."""
    owner = handler.server.owner
    if not isinstance(owner, OllamaServer):
        error = error_body(f"no route for {method} {path}", "invalid_request_error")
        return handler.send_json(404, error)
    route = {("GET", "/api/version"): lambda: (200, {"version": VERSION}),
             ("GET", "/api/tags"): lambda: (200, tags(owner)),
             ("GET", "/api/ps"): lambda: (200, running(owner)),
             ("POST", "/api/show"): lambda: show(owner, parse_body(data))}
    if (method, path) == ("POST", "/api/chat"):
        return chat(handler, owner, parse_body(data))
    if (method, path) not in route:
        return handler.send_json(404, {"error": "404 page not found"}, raw="404 page not found")
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
                        "details": {"family": m.get("family", ""),
                                    "parameter_size": m.get("parameter_size", "")}}
                       for name, m in owner.models.items()]}


def running(owner):
    """/api/ps: the loaded models and the context length they were loaded with (Ollama's default
    for requests that set no num_ctx, e.g. everything over /v1)."""
    return {"models": [{"name": name, "model": name,
                        "context_length": m.get("loaded_context", 4096)}
                       for name, m in owner.models.items()]}


def show(owner, body):
    name = (body or {}).get("model") or (body or {}).get("name")
    model = owner.models.get(name)
    if model is None:
        return 404, {"error": f"model '{name}' not found"}
    family = model.get("family", "")
    info = {"general.architecture": family, f"{family}.context_length": model.get("context_length")}
    info.update({f"{family}.{key}": value for key, value in (model.get("shape") or {}).items()})
    return 200, {"details": {"family": family, "parameter_size": model.get("parameter_size", "")},
                 "model_info": info,
                 "capabilities": list(model.get("capabilities", [])),
                 "parameters": "temperature 0.6\ntop_p 0.95"}


# --- /api/chat ------------------------------------------------------------------------------------

def chat(handler, owner, body):
    """POST /api/chat: the checks Ollama makes, in its order, then the scripted reply."""
    if body is None:
        return handler.send_json(400, {"error": "invalid request body"})
    if refusal(handler, owner, body):
        return None
    # routes.go: load the model
    if not body["messages"]:
        with owner._lock:
            owner.requests.append(body)
            owner.headers.append(handler.headers)
        return handler.send_json(200, {"model": body.get("model"), "created_at": now(),
                                       "done": True,
                                       "message": {"role": "assistant", "content": ""},
                                       "done_reason": "load"})
    return answer(handler, owner, body, owner.models[body["model"]])


def refusal(handler, owner, body):
    """True when Ollama refuses the request (the refusal is sent here), False when it takes it."""
    think = body.get("think")
    if think is not None and not isinstance(think, bool) and think not in THINK_LEVELS:
        # api/types.go ThinkValue
        return reject(handler, owner, body, 400, "ollama: think is a bool or a level",
                      f"invalid think value: {json.dumps(think)} (must be \"high\", \"medium\", "
                      "\"low\", \"max\", true, or false)")
    model = owner.models.get(body.get("model"))
    if model is None:
        return reject(handler, owner, body, 404, "ollama: model not pulled",
                      f"model \"{body.get('model')}\" not found, try pulling it first")
    capabilities = model.get("capabilities", [])
    # routes.go: before the tools check
    if think not in (None, False, "") and "thinking" not in capabilities:
        return reject(handler, owner, body, 400, "ollama: no thinking capability",
                      f"\"{body['model']}\" does not support thinking")
    # routes.go scheduleRunner
    if body.get("tools") and "tools" not in capabilities:
        return reject(handler, owner, body, 400, "ollama: no tools capability",
                      f"registry.ollama.ai/library/{body['model']} does not support tools")
    option = option_problem(body.get("options"))
    # api/types.go FromMap -> HTTP 500
    if option:
        return reject(handler, owner, body, 500, "ollama: options are typed", option)
    problem = check_request(body)
    if problem:
        return reject(handler, owner, body, 400, rule_of(problem), problem)
    return False


def answer(handler, owner, body, model):
    """The scripted reply to a request Ollama takes, on the prompt its window leaves (NDJSON or one
    object)."""
    window = window_of(body, model)
    seen, dropped = fitted(body, window)
    if dropped is None:  # truncate: false, and it does not fit
        tokens = native_prompt_tokens(body["messages"], body.get("tools"))
        inner = {"error": {"code": 400, "message": "the request exceeds the available context "
                                                   "size, try increasing it",
                           "type": "exceed_context_size_error", "n_prompt_tokens": tokens,
                           "n_ctx": window}}
        return reject(handler, owner, body, 400,
                      "ollama: truncate false and the prompt is past num_ctx", json.dumps(inner))
    if dropped:
        with owner._lock:
            owner.truncated.append((len(owner.requests), dropped))
    reply, _, _ = owner._take_reply(seen, handler.headers)
    # recorded as sent; the "model" saw the cut version
    if dropped:
        with owner._lock:
            owner.requests[-1] = body
    if isinstance(reply, str):
        return handler.send_json(500, {"error": reply})
    if reply.get("delay"):
        time.sleep(reply["delay"])
    if reply.get("status") is not None:
        return (handler.send_fault(reply["status"], reply.get("body")
                                   or {"error": f"scripted: HTTP {reply['status']}"}))
    frames = native_frames(owner, seen, reply)   # the counts are of the prompt the model saw
    # e.g. the runner died: an error line, no done line
    if reply.get("stream_error") is not None:
        frames = frames[:1] + [{"error": reply["stream_error"]}]
    # the connection breaks: about half, no done line
    elif reply.get("drop") is not None:
        frames = frames[: max(1, len(frames) // 2)]
    if body.get("stream", True):
        return send_ndjson(handler, frames)
    whole = dict(frames[-1])
    whole["message"] = merged_message(frames)
    handler.send_json(200, whole)


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def window_of(body, model):
    """num_ctx of the request, else what the model is loaded with (Ollama's default)."""
    num_ctx = (body.get("options") or {}).get("num_ctx")
    if isinstance(num_ctx, (int, float)) and not isinstance(num_ctx, bool) and num_ctx >= 1:
        return int(num_ctx)
    return model.get("loaded_context", 4096)


def native_prompt_tokens(messages, tools):
    """The prompt's tokens as the /v1 route counts them: characters/4 of the messages and tools as
    JSON, each image as its image tokens (scripted_images.image_stand_in), not as its base64
    text."""
    plain, images = [], 0
    for message in messages:
        if isinstance(message, dict) and message.get("images"):
            plain.append({k: v for k, v in message.items() if k != "images"})
            for image in message["images"] if isinstance(message["images"], list) else []:
                stand_in = (image_stand_in(f"data:image/png;base64,{image}")
                            if isinstance(image, str) else None)
                images += len(stand_in) if stand_in else 4 * IMAGE_BASE_TOKENS
        else:
            plain.append(message)
    text = json.dumps(plain, ensure_ascii=False) + json.dumps(tools, ensure_ascii=False)
    return estimate_tokens(text) + images // 4


def fitted(body, window):
    """(the body as the model sees it, messages dropped): server/prompt.go chatPrompt. With truncate
    (the default) drop the oldest messages, keeping every system message before the cut and always
    the last message, until the prompt fits the window. With truncate: false nothing is dropped, and
    a prompt past the window gives (body, None)."""
    messages, tools = body["messages"], body.get("tools")
    if native_prompt_tokens(messages, tools) <= window:
        return body, 0
    if body.get("truncate") is False:
        return body, None
    for start in range(1, len(messages)):
        kept = [m for m in messages[:start] if m.get("role") == "system"] + messages[start:]
        if native_prompt_tokens(kept, tools) <= window or start == len(messages) - 1:
            return {**body, "messages": kept}, len(messages) - len(kept)
    return body, 0


def reject(handler, owner, body, status, rule, message):
    """Send an Ollama-shaped error, noting which rule the request broke; True (it was refused)."""
    owner.record_rejection(body, handler.headers, status, rule, message)
    handler.send_json(status, {"error": message})
    return True


def native_frames(owner, body, reply):
    """The answer as NDJSON frames (the last one has done: true, the reason and the counts)."""
    created = now()

    def frame(message, done=False):
        return {"model": body.get("model"), "created_at": created,
                "message": {"role": "assistant", "content": "", **message}, "done": done}

    size = owner.fragment_size
    model = owner.models.get(body.get("model")) or {}
    think = body.get("think")
    # omitted: on (routes.go)
    thinking = think not in (False, "") and "thinking" in model.get("capabilities", [])
    frames = [frame({"content": "", "thinking": p})
              for p in pieces(reply.get("reasoning") or "", size)] if thinking else []
    frames += [frame({"content": p}) for p in pieces(reply.get("content") or "", size)]
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        native = {"function": {"index": i, "name": call["name"], "arguments": arguments}}
        if owner.call_ids or call.get("id"):
            native = {"id": call.get("id") or ollama_call_id(owner), **native}
        calls.append(native)
    if calls and not owner.calls_in_last_frame:
        frames += [frame({"tool_calls": [c]}) for c in calls]
    last = frame({"tool_calls": calls} if calls and owner.calls_in_last_frame else {}, done=True)
    last["done_reason"] = "length" if reply.get("finish_reason") == "length" else "stop"
    last.update(counts(owner, body, reply, calls))
    return frames + [last]


def ollama_call_id(owner):
    """"call_" + 8 characters of [a-z0-9], as server/routes.go toolCallId writes them (deterministic
    here)."""
    number = owner._new_call_id()
    return "call_" + hashlib.sha256(number.encode()).hexdigest()[:8]


def counts(owner, body, reply, calls):
    if not owner.usage:
        return {}
    usage = reply.get("usage")
    if isinstance(usage, dict):
        return {k: usage[o] for k, o in (("prompt_eval_count", "prompt_tokens"),
                                         ("eval_count", "completion_tokens"))
                if o in usage}
    said = (reply.get("content") or "") + (reply.get("reasoning") or "") + json.dumps(calls)
    options = body.get("options")
    cap = options.get("num_predict") if isinstance(options, dict) else None
    cut = (reply.get("finish_reason") == "length" and isinstance(cap, int)
           and not isinstance(cap, bool) and cap > 0)
    return {"prompt_eval_count": native_prompt_tokens(body.get("messages")
                                                      or [], body.get("tools")),
            # a cut ran to the cap
            "eval_count": cap if cut else estimate_tokens(said), "total_duration": 1_000_000}


def pieces(text, size):
    return [text[i:i + size] for i in range(0, len(text), size)]


def merged_message(frames):
    """A non-streamed answer: the frames' message parts put together, as Ollama sends it."""
    message: dict = {"role": "assistant",
                     "content": "".join(f["message"].get("content", "") for f in frames)}
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
        return serve_until_ctrl_c(f"Scripted Ollama ({personality}: {models}) on {srv.root_url} "
                                  f"(native /api/* and {srv.base_url}). Press Ctrl+C to stop.")
