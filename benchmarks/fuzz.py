"""A reply fuzzer: does a stage survive any reply a server can send?

    python -m benchmarks.fuzz --stage m4_guards --runs 1000 [--seed 1] [--show 3]
    python -m benchmarks.fuzz --stage tinyharness --runs 1000     # streamed and not, half each
    python -m benchmarks.fuzz --surface terminal|sessions|mcp|ollama|hooks|viewer|all --runs 200
                                               # other inputs than replies: benchmarks/fuzz_surfaces.py

Each run starts the stage's command line in a fresh workspace against the scripted server, whose
"model" answers one turn with an odd reply picked (seeded) from more than 60 kinds: wrong types at
every level of the chat-completion JSON, missing fields, huge strings, odd Unicode, invalid UTF-8,
HTTP errors, dropped connections, bodies that are not JSON, and, for the package, odd server-sent
event streams. The turns around it are ordinary (a tool call, then a final answer), so the history
with the odd reply in it is sent back at least once. Then it prints

    fuzz S: R runs, C crashes, H hangs, P poisoned

- crash: an exit code outside the contract's 0/1/2/3, or a traceback (an exception that escaped);
- hang: the run took longer than --limit seconds;
- poisoned: a request the harness sent breaks a rule a real server enforces (an assistant content
  that is not a string, arguments that are not a JSON-object string, a call without a string id or
  name, a tool result not paired to its call): `tinyharness.testing.request_problems`, the rules of
  the strict scripted server, which is run lenient here so the harness goes on and shows more.

The stage runs in this process (its `main(argv)`, the entry the CLI uses, with stdout, stderr and
stdin swapped and the working folder changed), so a thousand runs take seconds, not minutes.
"""
import argparse
import importlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fuzz_common import run_main  # noqa: E402
from tinyharness.testing import ScriptedServer
from tinyharness.testing.rules import request_problems  # noqa: E402

STAGES = sorted(p.name for p in ROOT.glob("m[0-9]_*") if (p / "__main__.py").is_file())
FINAL = "tinyharness"
TASK = "Read notes.txt and tell me what it says."

# --- Odd replies -------------------------------------------------------------------------------------


def call(name="list_dir", arguments='{"path": "."}', call_id="call_x", **extra):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


def body(message=None, *, finish="tool_calls", usage=None, **top):
    """A whole chat.completion body (bytes, ASCII: lone surrogates stay escapes) from a message."""
    message = {"role": "assistant", "content": None, "tool_calls": [call()]} if message is None else message
    data = {"id": "chatcmpl-f", "object": "chat.completion", "model": "fuzz",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2} if usage is None else usage}
    data.update(top)
    return {"raw": json.dumps(data).encode("ascii")}


def with_message(**fields):
    return body({"role": "assistant", "content": None, "tool_calls": [call()], **fields})


def with_call(**fields):
    return with_message(tool_calls=[{**call(), **fields}])


def with_function(**fields):
    return with_message(tool_calls=[{**call(), "function": {**call()["function"], **fields}}])


def odd_value(rng):
    """A value of some type, often the wrong one."""
    return rng.choice([None, 0, -1, 1.5, True, False, "", "x", "12", [], [1, "a"], {}, {"a": None},
                       "\ud800", "\x00", "null", "{}", "[]", float("1e308"), 2 ** 70])


ODD_TEXT = ["caf\u00e9 \u4e2d\u6587 \U0001f600", "\u202eRTL\u202c", "e\u0301\u0301\u0301", "nul\x00byte",
            "lone \ud800 surrogate", "\ufeffbom", "\u2028line\u2029sep", "tab\tbell\x07", "<think>open",
            "</think>close", "\\u0000", "\"quoted\"", "{\"json\": 1}"]

BODY_KINDS = {
    # content
    "content-null": lambda rng: body({"role": "assistant", "content": None}, finish="stop"),
    "content-number": lambda rng: body({"role": "assistant", "content": rng.choice([0, 42, -1.5, 1e300])}, finish="stop"),
    "content-bool": lambda rng: body({"role": "assistant", "content": rng.choice([True, False])}, finish="stop"),
    "content-parts": lambda rng: body({"role": "assistant", "content": [{"type": "text", "text": "a"}, "b", 3, None,
                                                                       {"type": "image_url"}, {"text": ["x"]}]}, finish="stop"),
    "content-object": lambda rng: body({"role": "assistant", "content": {"text": "hi"}}, finish="stop"),
    "content-odd-text": lambda rng: body({"role": "assistant", "content": "".join(rng.sample(ODD_TEXT, 4))}, finish="stop"),
    "content-huge": lambda rng: body({"role": "assistant", "content": "x" * rng.choice([10 ** 5, 10 ** 6])}, finish="stop"),
    "content-beside-calls": lambda rng: with_message(content=rng.choice(ODD_TEXT)),
    "content-missing": lambda rng: body({"role": "assistant"}, finish="stop"),
    "role-odd": lambda rng: body({"role": odd_value(rng), "content": "hi"}, finish="stop"),
    # choices and message
    "no-message": lambda rng: body(None, choices=[{"index": 0, "finish_reason": "stop"}]),
    "message-a-string": lambda rng: body(None, choices=[{"index": 0, "message": "hello"}]),
    "message-null": lambda rng: body(None, choices=[{"index": 0, "message": None}]),
    "choices-empty": lambda rng: body(None, choices=[]),
    "choices-an-object": lambda rng: body(None, choices={"index": 0, "message": {"content": "hi"}}),
    "choices-odd": lambda rng: body(None, choices=odd_value(rng)),
    "choice-odd": lambda rng: body(None, choices=[odd_value(rng), {"message": {"content": "hi"}}]),
    "body-a-list": lambda rng: {"raw": json.dumps([{"choices": []}])},
    "body-a-number": lambda rng: {"raw": rng.choice(["42", "null", "true", '"text"'])},
    "body-not-json": lambda rng: {"raw": rng.choice(["<html>502 Bad Gateway</html>", "ok", "{", "data: [DONE]"])},
    "body-empty": lambda rng: {"raw": ""},
    "body-invalid-utf8": lambda rng: {"raw": b'{"choices": [{"message": {"role": "assistant", "content": "caf\xe9 \xff\xfe"}}]}'},
    "body-deeply-nested": lambda rng: {"raw": "[" * rng.choice([1000, 100000])},
    "body-bom-and-spaces": lambda rng: {"raw": b"\xef\xbb\xbf  " + body({"role": "assistant", "content": "hi"})["raw"]},
    "error-in-a-200": lambda rng: body(None, choices=None, error={"message": "overloaded", "type": "server_error"}),
    # tool_calls
    "calls-an-object": lambda rng: with_message(tool_calls=call()),
    "calls-holding-strings": lambda rng: with_message(tool_calls=["list_dir", json.dumps(call()), ""]),
    "calls-holding-numbers": lambda rng: with_message(tool_calls=[1, 2.5, call()]),
    "calls-holding-lists": lambda rng: with_message(tool_calls=[[call()], []]),
    "calls-holding-nulls": lambda rng: with_message(tool_calls=[None, call(), None]),
    "calls-a-json-string": lambda rng: with_message(tool_calls=json.dumps([call()])),
    "calls-odd": lambda rng: with_message(tool_calls=odd_value(rng)),
    "calls-many": lambda rng: with_message(tool_calls=[call(call_id=f"c{i}") for i in range(rng.choice([20, 60]))]),
    "calls-duplicate-ids": lambda rng: with_message(tool_calls=[call(), call()]),
    "calls-without-ids": lambda rng: with_message(tool_calls=[{k: v for k, v in call().items() if k != "id"}] * 2),
    "call-id-odd": lambda rng: with_call(id=odd_value(rng)),
    "call-type-odd": lambda rng: with_call(type=odd_value(rng)),
    "call-flattened": lambda rng: with_message(tool_calls=[{"id": "f1", "name": "list_dir", "arguments": {"path": "."}}]),
    "call-extra-fields": lambda rng: with_call(index=0, extra={"x": 1}, function_call={"name": "x"}),
    "function-null": lambda rng: with_call(function=None),
    "function-odd": lambda rng: with_call(function=odd_value(rng)),
    "name-odd": lambda rng: with_function(name=odd_value(rng)),
    "name-missing": lambda rng: with_call(function={"arguments": "{}"}),
    "name-unknown": lambda rng: with_function(name=rng.choice(["rm_rf", "read-file", "READ_FILE", " list_dir", "a" * 5000])),
    "name-odd-text": lambda rng: with_function(name=rng.choice(ODD_TEXT)),
    "arguments-an-object": lambda rng: with_function(arguments={"path": rng.choice([".", "notes.txt"])}),
    "arguments-broken": lambda rng: with_function(arguments=rng.choice(['{"path": ', "{path: '.'}", "{'path': '.'}",
                                                                        '{"path": "."}}', "```json\n{}\n```", "{" * 3000])),
    "arguments-not-an-object": lambda rng: with_function(arguments=rng.choice(["[1, 2]", "42", '"text"', "null", "true"])),
    "arguments-double-encoded": lambda rng: with_function(arguments=json.dumps(json.dumps({"path": "."}))),
    "arguments-odd-type": lambda rng: with_function(arguments=odd_value(rng)),
    "arguments-nan": lambda rng: with_function(arguments=rng.choice(['{"path": NaN}', '{"n": Infinity}', '{"n": 1e999}'])),
    "arguments-huge": lambda rng: with_function(name="read_file", arguments=json.dumps({"path": "a" * rng.choice([10 ** 4, 10 ** 6])})),
    "arguments-odd-text": lambda rng: with_function(name="read_file", arguments=json.dumps({"path": rng.choice(ODD_TEXT)})),
    "arguments-wrong-keys": lambda rng: with_function(name="read_file", arguments=json.dumps({"file": 1, "path": ["x"]})),
    # usage and finish_reason
    "usage-strings": lambda rng: body(usage={"prompt_tokens": "12", "completion_tokens": "3", "total_tokens": "15"}),
    "usage-odd": lambda rng: body(usage=odd_value(rng)),
    "usage-odd-counts": lambda rng: body(usage={"prompt_tokens": odd_value(rng), "completion_tokens": odd_value(rng),
                                               "prompt_tokens_details": odd_value(rng)}),
    "usage-missing": lambda rng: {"raw": json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                                                "finish_reason": "stop"}]})},
    "finish-length": lambda rng: body({"role": "assistant", "content": "cut mid-sent", "tool_calls": [call()]}
                                      if rng.random() < 0.5 else {"role": "assistant", "content": "cut mid-sent"}, finish="length"),
    "finish-odd": lambda rng: body(finish=odd_value(rng)),
    "reasoning-odd": lambda rng: with_message(reasoning=odd_value(rng), reasoning_content=rng.choice(ODD_TEXT),
                                              thinking=["x"]),
    # the serving layer
    "http-error": lambda rng: {"status": rng.choice([400, 401, 403, 404, 413, 422, 429, 500, 502, 503]),
                               "body": rng.choice([None, "", "<html>oops</html>", {"error": "plain"}, {"detail": [{"loc": ["body", 1], "msg": "bad"}]},
                                                   {"error": {"message": None}}, {"error": {"message": "x" * 5000}},
                                                   {"error": [1, 2]}, {"message": "\ud800"}])},
    "context-overflow": lambda rng: {"status": rng.choice([400, 500]), "body": rng.choice([
        {"error": {"message": "the request exceeds the available context size", "type": "exceed_context_size_error",
                   "n_prompt_tokens": 9000, "n_ctx": 8192}},
        {"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.",
                   "code": "context_length_exceeded"}},
        {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": "many"}}])},
    "drop-before": lambda rng: {"drop": "before"},
    "drop-mid-body": lambda rng: {"content": "x" * 200, "drop": "mid-body"},
}


def sse(*events):
    return {"raw": "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events).encode("ascii")}


def chunk(delta, finish=None, **top):
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **top}


def fragment(index=0, call_id="s1", name="list_dir", arguments='{"path": "."}'):
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


USAGE = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
STREAM_KINDS = {
    "stream-no-index": lambda rng: sse(chunk({"tool_calls": [{k: v for k, v in fragment().items() if k != "index"}]}),
                                       chunk({"tool_calls": [{k: v for k, v in fragment(call_id="s2").items() if k != "index"}]}),
                                       chunk({}, "tool_calls"), USAGE, "[DONE]"),
    "stream-index-zero-ids": lambda rng: sse(chunk({"tool_calls": [fragment(0, "a")]}), chunk({"tool_calls": [fragment(0, "b")]}),
                                             chunk({}, "tool_calls"), "[DONE]"),
    "stream-calls-in-final-chunk": lambda rng: sse(chunk({"content": "hm"}), chunk({"tool_calls": [fragment()]}, "tool_calls"),
                                                   "[DONE]"),
    "stream-stop-with-calls": lambda rng: sse(chunk({"tool_calls": [fragment()]}), chunk({}, "stop"), "[DONE]"),
    "stream-explicit-nulls": lambda rng: sse(chunk({"role": None, "content": None, "tool_calls": None}),
                                             chunk({"content": None, "tool_calls": [{"index": None, "id": None, "function": None}]}),
                                             chunk({"tool_calls": [{"index": 0, "id": "n", "function": {"name": None, "arguments": None}}]}),
                                             chunk({}, "tool_calls"), {"choices": None, "usage": None}, "[DONE]"),
    "stream-repeated-ids": lambda rng: sse(*[chunk({"tool_calls": [fragment(arguments=p)]}) for p in ['{"pa', 'th": ', '"."}']],
                                           chunk({}, "tool_calls"), "[DONE]"),
    "stream-error-event": lambda rng: sse(chunk({"content": "Hi"}), rng.choice([
        {"error": {"message": "the request exceeds the available context size", "type": "exceed_context_size_error"}},
        {"error": "boom"}, {"error": {"message": None}}, {"error": [1]}])),
    "stream-error-line": lambda rng: {"raw": 'data: {"choices": []}\n\nerror: {"message": "old llama.cpp"}\n\n'},
    "stream-empty": lambda rng: {"raw": rng.choice(["", "\n\n", ": ping\n\n", "data: [DONE]\n\n"])},
    "stream-no-usage": lambda rng: sse(chunk({"content": "All done."}), chunk({}, "stop"), "[DONE]"),
    # one 30 MB line, as a model that writes a whole file in one chunk sends it: read in linear time or never
    "stream-one-30-mb-line": lambda rng: sse(chunk({"content": "x" * 30_000_000}), chunk({}, "stop"), "[DONE]"),
    "stream-garbage-line": lambda rng: {"raw": rng.choice(["data: {not json\n\n", "data: 42\n\n", "data: [1]\n\n",
                                                           "data: \xff\n\n".encode("latin-1"), "garbage\n\ndata: [DONE]\n\n"])},
    "stream-no-done": lambda rng: sse(chunk({"content": "Hi"}), chunk({}, "stop")),
    "stream-no-finish": lambda rng: sse(chunk({"content": "Hi"}), "[DONE]"),
    "stream-odd-fragments": lambda rng: sse(chunk({"tool_calls": [odd_value(rng), {"index": odd_value(rng), "id": odd_value(rng),
                                                                                   "function": odd_value(rng)}]}),
                                            chunk({"tool_calls": {"index": 0, "function": {"name": odd_value(rng),
                                                                                           "arguments": odd_value(rng)}}}),
                                            chunk({}, "tool_calls"), "[DONE]"),
    "stream-odd-choices": lambda rng: sse({"choices": odd_value(rng)}, {"choices": [odd_value(rng)]},
                                          {"choices": [{"index": odd_value(rng), "delta": odd_value(rng)}]},
                                          chunk({"content": "ok"}, "stop"), "[DONE]"),
    "stream-odd-delta": lambda rng: sse(chunk({"content": odd_value(rng), "reasoning": odd_value(rng)}),
                                        chunk({}, odd_value(rng)), chunk({}, "stop"), "[DONE]"),
    "stream-usage-strings": lambda rng: sse(chunk({"content": "ok"}, "stop"), {"choices": [], "usage": {"prompt_tokens": "9"}},
                                            "[DONE]"),
    "stream-drop": lambda rng: {"content": "word " * 40, "drop": "mid-stream"},
    "stream-huge-piece": lambda rng: sse(chunk({"content": "y" * 10 ** 6}), chunk({}, "stop"), "[DONE]"),
    "stream-odd-unicode": lambda rng: sse(*[chunk({"content": t}) for t in rng.sample(ODD_TEXT, 5)], chunk({}, "stop"), "[DONE]"),
    "stream-arguments-broken": lambda rng: sse(chunk({"tool_calls": [fragment(arguments='{"path": ')]}), chunk({}, "tool_calls"),
                                               "[DONE]"),
}


# --- Running a stage in this process ----------------------------------------------------------------

def stage_name(name):
    """m4 or m4_guards -> m4_guards; tinyharness stays."""
    if name == FINAL:
        return FINAL
    found = [s for s in STAGES[1:] if s == name or s.split("_")[0] == name]   # m0 runs no loop
    if not found:
        raise ValueError(f"unknown stage {name!r}; choose one of {', '.join(STAGES[1:] + [FINAL])}")
    return found[0]


def entry_and_flags(stage):
    """The function the CLI runs, and the flags every run gets."""
    if stage == FINAL:
        return importlib.import_module("tinyharness.cli").main, ["run", "--yes"]
    level = int(stage[1:].split("_")[0])
    return importlib.import_module(f"{stage}.__main__").main, ["--yes"] if level >= 3 else []


def run_once(stage, argv, workspace, limit):
    """(outcome, exit code, stdout, stderr); outcome is "ok", "crash" or "hang"."""
    main, flags = entry_and_flags(stage)
    outcome, code, out, err = run_main(main, flags + argv, workspace, limit)
    stdout, stderr = out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace")
    if outcome == "ok" and "Traceback" in stderr:
        outcome = "crash"
    return outcome, code, stdout, stderr


# --- The fuzzer ----------------------------------------------------------------------------------------

def plan_run(rng, streamed):
    """(kind, the replies of this run): ordinary turns around one odd reply."""
    kinds = list(BODY_KINDS) + (list(STREAM_KINDS) if streamed else [])
    kind = rng.choice(kinds)
    odd = (STREAM_KINDS.get(kind) or BODY_KINDS[kind])(rng)
    before = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}] if rng.random() < 0.4 else []
    after = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}] if rng.random() < 0.3 else []
    return kind, before + [odd] + after + ["All done."] * 4


def fuzz(stage, runs, seed=1, limit=10.0, show=0, say=print):
    """Run the fuzzer; return {"runs", "crashes", "hangs", "poisoned", "problems": [...]}."""
    stage = stage_name(stage)
    rng = random.Random(seed)
    replies, counts, problems = [], {"crash": 0, "hang": 0, "poisoned": 0}, []
    base = Path(tempfile.mkdtemp(prefix="tinyharness-fuzz-"))
    # Each request takes the next reply of this run's script; the last one repeats.
    server = ScriptedServer(policy=lambda body, index: replies.pop(0) if len(replies) > 1 else replies[0], strict=False)
    try:
        with server:
            for number in range(runs):
                streamed = stage == FINAL and rng.random() < 0.5
                kind, script = plan_run(rng, streamed)
                replies[:] = script
                server.requests.clear()
                workspace = base / f"run{number}"
                workspace.mkdir()
                (workspace / "notes.txt").write_text("The testing budget is 300 KM.\n", encoding="utf-8")
                argv = ["--stream" if streamed else "--no-stream"] if stage == FINAL else []
                argv += ["--base-url", server.base_url, "--max-turns", "5", TASK]
                outcome, code, stdout, stderr = run_once(stage, argv, workspace, limit)
                broken = [p for body in server.requests for p in request_problems(body)]
                label = f"{kind}{' (streamed)' if streamed else ''}"
                if outcome != "ok":
                    counts[outcome] += 1
                    problems.append((outcome, label, code, stderr.strip()[-1500:]))
                if broken:
                    counts["poisoned"] += 1
                    problems.append(("poisoned", label, code, "; ".join(sorted({f"{rule}" for _, rule, _ in broken}))))
                shutil.rmtree(workspace, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for outcome, label, code, detail in problems[:show]:
        say(f"--- {outcome}: {label}, exit {code}\n{detail}")
    say(f"fuzz {stage}: {runs} runs, {counts['crash']} crashes, {counts['hang']} hangs, {counts['poisoned']} poisoned")
    return {"runs": runs, "crashes": counts["crash"], "hangs": counts["hang"], "poisoned": counts["poisoned"],
            "problems": problems}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", help="m1_loop..m8_vision (or m1..m8) or tinyharness: fuzz the model's replies")
    parser.add_argument("--surface", choices=["terminal", "sessions", "mcp", "ollama", "hooks", "viewer", "all"],
                        help="fuzz another input of the package instead (benchmarks/fuzz_surfaces.py says how)")
    parser.add_argument("--runs", type=int, default=200, help="how many runs (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the same seed picks the same replies (default %(default)s)")
    parser.add_argument("--limit", type=float, help="seconds before a run counts as a hang (default 10; with "
                                                    "--surface, per surface: 10 to 30)")
    parser.add_argument("--show", type=int, default=3, help="print the details of this many problems (default %(default)s)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be 1 or more")
    if not (args.stage or args.surface) or (args.stage and args.surface and args.surface != "terminal"):
        parser.error("give --stage S (the model's replies) or --surface S (another input); both only as "
                     "--surface terminal --stage S (a stage's console)")
    if args.surface:
        from benchmarks.fuzz_surfaces import SURFACES, fuzz_surface
        stage = None
        if args.stage:
            try:  # m0 too: its console prints a server's error and reply like every stage's
                stage = "m0_llm" if args.stage in ("m0", "m0_llm") else stage_name(args.stage)
            except ValueError as e:
                parser.error(str(e))
            if stage == "tinyharness":
                stage = None
        found = [fuzz_surface(surface, args.runs, args.seed, args.limit, args.show, stage=stage)
                 for surface in (SURFACES if args.surface == "all" else [args.surface])]
        return 0 if not any(r["crashes"] or r["hangs"] or r["lost"] or r["injected"] for r in found) else 1
    if args.limit is None:
        args.limit = 10.0
    try:
        stage = stage_name(args.stage)
    except ValueError as e:
        parser.error(str(e))
    result = fuzz(stage, args.runs, args.seed, args.limit, args.show)
    return 0 if not (result["crashes"] or result["hangs"] or result["poisoned"]) else 1


if __name__ == "__main__":
    sys.exit(main())
