"""A scripted OpenAI-compatible model server, for tests and for learning.

`ScriptedServer` is a real HTTP server on 127.0.0.1 that speaks the chat-completions format the way
Ollama's `/v1` shim does. Instead of a model, a *script* (a list of replies, used in order) or a
*policy* (a function `policy(request_body, index) -> reply`) decides what the "model" says. Every
request body (`srv.requests`) and its headers (`srv.headers`) are recorded, so a test can check
exactly what a harness sent:

    with ScriptedServer(script=["Hello!"]) as srv:
        run_my_agent(base_url=srv.base_url)          # "http://127.0.0.1:PORT/v1"
        assert srv.requests[0]["messages"][-1]["role"] == "user"
        assert srv.headers[0].get("Authorization") is None

A reply is a string (the assistant's text) or a dict:

    content, reasoning, tool_calls=[{"name", "arguments": dict | str, "id"?}],
    finish_reason, usage (False: none), malformed_arguments   - what the "model" says
    status + body, delay, drop ("before" | "mid-body" | "mid-stream"),
    raw (str or bytes, sent as a 200 body),
    close (answer, then close the connection)          - faults of the serving layer
    stream_error, index_zero, whole_tool_calls, no_index,
    repeat_fragments                                    - faults/quirks of streaming only

Streams come in HTTP/1.1 chunks on a kept connection, as real servers send them;
`srv.connections_opened` counts the connections clients opened.

Realistic by default. Like OpenAI, vLLM and llama.cpp, a reply with tool calls and no text says
`content: null` (not Ollama's ""), and like llama-cpp-python each call carries its `index` and
the message a legacy `function_call` copy of the first call: a harness that stores a reply as it
came and sends it back is caught (`ScriptedServer(null_content=False, legacy_fields=False)` plays
Ollama's politer shape). The server is also **strict**: every request is checked the way real
servers check it (testing/rules.py; each rule names its source) and a violation is answered
like the real server answers it, an HTTP 400 or 500 with a JSON error naming the rule, so a test
sees at once that a real server would have broken the run. `srv.rejected` lists them.
`strict=False` turns the checks off; `send_usage=False` plays a server that never reports usage,
`stream_usage=False` one that sends no usage chunk in a stream (llama-cpp-python).
`context_window=N` plays a server with an N-token window that overflows like llama-cpp-python: a
prompt of N tokens or more (the estimate below) is answered with a 400 that names both numbers
(`context_length_exceeded`) when unstreamed, and with an empty 200 event stream when streamed;
`srv.overflows` lists the indexes of those requests (they take no reply from the script). With
`announce_window=True` the server also says its window up front, as llama.cpp's `GET /props` does.
`truncate=True` plays Ollama instead, whose /v1 cannot be told its window and never refuses: past
it the oldest messages are dropped (the system prompt kept, the last message always kept: the task
goes first), the "model" sees only what is left, the answer is a 200 and `prompt_tokens` the smaller
count; `srv.truncated` lists (request index, messages dropped). A reactive reply's
`if_prompt_contains` then tells whether a fact is still in what the model sees.
`listed=[...]` names the models `GET /v1/models` lists (by default the one `model`);
`api_key="sk-..."` plays a server that wants a key: a request without `Authorization: Bearer
sk-...` gets OpenAI's 401.

Tool-call ids are written by the server (`call_1`, `call_2`, ... over the server's life), not by
the script: in real deployments the serving layer assigns them, and the model never sees them
until the harness sends them back.

Token counts. Without a tokenizer we estimate tokens as characters/4, rounded up (a common rule
of thumb for English and JSON with BPE tokenizers). The *prompt text* of a request is
`json.dumps(messages) + json.dumps(tools)` (ensure_ascii=False, default separators; a request
without tools appends "null"). `prompt_tokens` is the estimate of that text.

Images. An `image_url` part with a base64 data URI does not count as its base64 text: vision
servers turn a picture into a few hundred tokens, not into thousands of characters/4. In the
prompt text the part is replaced by a stand-in of 4 characters per image token, starting with a
digest of the image (so the cache simulation notices a changed image); an image costs
`image_tokens(width, height)` = 256 + width*height/784 tokens (PNG; other formats 256). Requests
without image parts are counted exactly as before. `ScriptedServer(drop_images=True)` imitates
a server that silently ignores images (Ollama with gemma4 e2b/e4b): the request is recorded as
sent, but tokens and the policy see it without its image parts. `vision_policy()` plays a vision
model that names the colours of the left and right halves of a PNG (with `look=True` it first calls
view_image for an image file the task names; with `guess=True`, given no picture, it guesses right
from a file name like blue-red.png, or names red and blue, as a model that never got the image
did in the source article); `make_png`, `tiny_png` and `read_png_pixels` make and read the simple
PNGs it understands.

Simulated prefix cache. llama.cpp and Ollama keep the KV cache of the previous request and only
recompute the prompt from the first token that changed. We imitate that:
`usage.prompt_tokens_details.cached_tokens` is the length, in characters, of the longest common
prefix between this prompt text and the previous request's, divided by 4 (0 for the first
request). A harness that only appends to its history keeps this high; one that rewrites early
messages (a timestamp in the system prompt, a summary at the top) drops it to near zero. Tests and
benchmarks read it to measure how much a context policy breaks the cache.

Where it lives. This module is the public entry: import everything above from here. The parts sit
in modules of their own, one job each: testing/server.py (the HTTP server and its handler),
testing/replies.py (a reply's wire shape and the token estimate), testing/rules.py (strict mode's
rules, each citing its source) and testing/images.py (the PNG codec, image tokens, the vision
policy); testing/fake_ollama.py builds Ollama's native dialect on the same server.

Run it from the command line to point a harness at canned replies:

    python -m tinyharness.testing --script replies.json --port 8080
"""
from __future__ import annotations

import argparse
import sys

# The public entry: tests and learners import the scripted server and its helpers from here
# (`from tinyharness.testing import ScriptedServer`); the modules below hold them.
from .images import vision_policy
from .replies import load_script
from .server import ScriptedServer, serve_until_ctrl_c

__all__ = ["ScriptedServer", "colour_name", "estimate_tokens", "example_images", "image_tokens",
           "load_script", "main", "make_png", "read_png_pixels", "request_problems", "split_png",
           "tiny_png", "vision_policy"]


# --- Command line -----------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(prog="python -m tinyharness.testing",
                                     description="Serve canned model replies over the OpenAI chat "
                                                 "API.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--script", help="JSON file: a list of replies")
    source.add_argument("--vision", action="store_true",
                        help="play a vision model that names the colours of the halves of each PNG "
                             "it is sent")
    parser.add_argument("--drop-images", action="store_true",
                        help="ignore every image, as Ollama does for gemma4 e2b/e4b (tokens count "
                             "without them)")
    parser.add_argument("--lenient", action="store_true",
                        help="answer every request; by default one a real server would refuse gets "
                             "its HTTP 400/500")
    parser.add_argument("--no-usage", action="store_true",
                        help="never report token usage, like some servers")
    parser.add_argument("--context-window", type=int, metavar="TOKENS",
                        help="overflow like llama-cpp-python past this many prompt tokens: HTTP "
                             "400 with both numbers unstreamed, an empty 200 stream streamed")
    parser.add_argument("--truncate", action="store_true",
                        help="with --context-window: cut like Ollama instead, silently: drop the "
                             "oldest messages (the system prompt kept) and answer 200 with the "
                             "smaller prompt count")
    parser.add_argument("--guess", action="store_true",
                        help="with --vision: a model that, without a picture, names the colours "
                             "of a file name in the request (else red and blue) instead of saying "
                             "it sees none")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default="qwen3:8b", help="model name listed by /v1/models")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.truncate and not args.context_window:
        parser.error("--truncate needs --context-window TOKENS: the window it cuts to")
    if args.guess and not args.vision:
        parser.error("--guess plays a vision model: give --vision too")
    if args.vision:
        replies = {"policy": vision_policy(guess=args.guess, look=True)}
        what = "playing a vision model"
    else:
        try:
            script = load_script(args.script)
        except (OSError, ValueError) as e:
            print(f"error: cannot load the script: {e}", file=sys.stderr)
            return 2
        replies, what = {"script": script}, f"replaying {len(script)} replies"
    if args.drop_images:
        what += " that never sees images"
    if args.guess:
        what += ", and says what it guesses when no picture arrives"
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    if args.context_window:
        what += (f" with a window of {args.context_window} tokens"
                 + " that cuts the oldest messages silently" * args.truncate)
    with ScriptedServer(**replies, drop_images=args.drop_images, host=args.host, port=args.port,
                        model=args.model, strict=not args.lenient, send_usage=not args.no_usage,
                        context_window=args.context_window, truncate=args.truncate) as srv:
        return (serve_until_ctrl_c(f"Scripted model server on {srv.base_url} {what}. Press Ctrl+C "
                                   "to stop."))
