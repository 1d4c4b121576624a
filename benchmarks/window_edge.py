"""The context policies at the window's edge: an output-heavy run, what a prefix cache prefills, and
the harness's own time per turn as the history grows.

    python -m benchmarks.window_edge [--turns 60,200] [--window 8192] [--no-timing]

The workload: every turn the model runs `seq N N+399` (400 lines, about 1.9 KB of output), so the
window fills by the 11th call and stays full for the rest of the run.

1. Prefill (deterministic, printed per policy of `tinyharness.context.POLICIES`). The requests are
   the messages as the loop sends them: the policy applied to the history, the history kept as the
   policy returned it, an assistant message with one call, its result. A server's prefix cache
   (llama.cpp, Ollama) keeps the longest unchanged prefix of the previous prompt and computes
   everything after the first changed byte again: "prefill anew" is the sum of those bytes over
   the run, in UTF-8 bytes of the messages' JSON. "The floor" is every message of the run processed
   once, as the tools returned it: the last request of a run that never cuts. A "prefix break" is a
   request that does not extend the one before; "where" lists the calls that break it. A request
   over the window would be refused (or cut silently by Ollama): "peak" is the largest one, in the
   harness's own estimate (characters/4).
2. Timing (not asserted anywhere): the real loop (`tinyharness.loop.run_agent`, the real shell tool,
   `--sandbox off` so that starting a sandbox does not hide the trend; and the same lines read with
   read_file, which starts no process) against the scripted server, which answers at once. "Gap" = from a reply's return from `client.chat` to the next call of it:
   the harness's own work between two requests (the context policy and the watch, the command,
   the hooks and guards). Turns 1-20 and the last 20 of the same run, median each.
"""
import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time

from tinyharness.context import COLLAPSED, DEFAULT_POLICY, POLICIES, json_chars
from tinyharness.hooks import approve_everything
from tinyharness.llm import Client
from tinyharness.loop import RunSettings, Stats, run_agent
from tinyharness.sandbox import Sandbox
from tinyharness.testing import ScriptedServer

from .context import SYSTEM_PROMPT, Step, Task

WINDOW = 8192
TURNS = (60, 200)
FIRST = 1000          # the first seq starts here: 4-digit numbers, ~1.9 KB a result


def seq_output(n):
    """What the shell tool returns for `seq n n+399`."""
    return "exit status 0\n" + "".join(f"{i}\n" for i in range(n, n + 400))


def seq_task(turns, first=FIRST):
    task = Task(f"{turns}-turn output-heavy run", "Print the numbers from 1000 on, 400 at a time, with seq.")
    task.steps = [Step("shell", {"command": f"seq {first + i} {first + i + 399}"}, seq_output(first + i))
                  for i in range(turns)]
    return task


def requests(task, policy_name, window=WINDOW):
    """The messages of each request of the run, as the loop would send them."""
    policy, sent = POLICIES[policy_name], []
    history = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]
    for turn, step in enumerate(task.steps):
        history = policy(history, window)
        sent.append(history)
        call = f"call_{turn + 1}"
        history = history + [
            {"role": "assistant", "content": "", "tool_calls": [{"id": call, "type": "function", "function": {
                "name": step.name, "arguments": json.dumps(step.arguments)}}]},
            {"role": "tool", "tool_call_id": call, "content": step.result}]
    sent.append(policy(history, window))
    return sent


def prompt_bytes(messages):
    """The request's messages as UTF-8 JSON, without the closing bracket (a request that only adds
    messages extends the one before)."""
    return json.dumps(messages, ensure_ascii=False).encode("utf-8")[:-1]


def common_prefix(a, b):
    low, high = 0, min(len(a), len(b))
    while low < high:                    # the longest equal prefix, by halves
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def edge_figures(task, policy_name, window=WINDOW):
    """Prefill anew, the floor, the breaks and where, the peak, for one policy on one task."""
    sent = requests(task, policy_name, window)
    texts = [prompt_bytes(m) for m in sent]
    anew, where = len(texts[0]), []
    for number, (before, after) in enumerate(zip(texts, texts[1:]), start=2):
        shared = common_prefix(before, after)
        anew += len(after) - shared
        if shared < len(before):
            where.append(number)
    floor = len(prompt_bytes(requests(task, "none", window)[-1]))
    peak = max((json_chars(m) + 3) // 4 for m in sent)
    return {"policy": policy_name, "requests": len(sent), "anew": anew, "floor": floor, "ratio": anew / floor,
            "breaks": len(where), "where": where, "peak": peak, "under_window": peak <= window,
            "collapsed": sum(str(m.get("content")).startswith(COLLAPSED) for m in sent[-1])}


def spans(numbers):
    """[11, 17, 52, 53, 54] -> '11, 17, 52-54'."""
    parts, run = [], []
    for n in numbers + [None]:
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [n]
    return ", ".join(parts) or "none"


def edge_table(turns=TURNS, policies=None, window=WINDOW):
    lines = [f"Output-heavy runs (`seq N N+399` every turn, ~1.9 KB a result), window {window:,} tokens; bytes of the "
             "messages' JSON; floor = every message once, as the tools returned it.",
             "| run | policy | prefill anew | floor | anew/floor | prefix breaks | peak tokens | where the prefix breaks |",
             "|-----|--------|-------------:|------:|-----------:|--------------:|------------:|-------------------------|"]
    for count in turns:
        task = seq_task(count)
        for name in policies or POLICIES:
            row = edge_figures(task, name, window)
            peak = f"{row['peak']:,}" + ("" if row["under_window"] else " (over)")
            lines.append(f"| {count} turns | {name} | {row['anew']:,} | {row['floor']:,} | {row['ratio']:.2f}x | "
                         f"{row['breaks']} of {row['requests']} | {peak} | {spans(row['where'])} |")
    return "\n".join(lines)


# --- The harness's own time between two requests --------------------------------------------------

class GapClient:
    """The real client; notes when each reply came back and when the next request was asked for."""

    def __init__(self, client):
        self.client, self.returned, self.gaps = client, None, []

    def chat(self, messages, tools=None, **options):
        if self.returned is not None:
            self.gaps.append(time.perf_counter() - self.returned)
        try:
            return self.client.chat(messages, tools, **options)
        finally:
            self.returned = time.perf_counter()


READS = 7            # files the read_file variant reads in turn (the same call thrice in a row is stopped)


def seq_model(turns, first=FIRST, tool="shell"):
    """The scripted model: `seq N N+399` each turn, or a read of a file that holds the same lines."""
    def reply(body, index):
        if index >= turns:
            return {"content": "Done."}
        if tool == "read_file":
            return {"content": "", "tool_calls": [{"name": "read_file", "arguments": {"path": f"seq{index % READS}.txt"}}]}
        return {"content": "", "tool_calls": [{"name": "shell", "arguments": {
            "command": f"seq {first + index} {first + index + 399}"}}]}
    return reply


def gap_run(turns=200, policy=DEFAULT_POLICY, window=WINDOW, tool="shell"):
    """The real loop for `turns` seq commands (or reads of the same lines: no process started); the
    gap after each reply, in seconds."""
    model, held = seq_model(turns, tool=tool), {}

    def reply(body, index):   # the server's record of every request, let go: a real server is another process,
        held["server"].requests.clear()   # and 200 requests held here would slow this process's garbage collector
        return model(body, index)
    with tempfile.TemporaryDirectory() as folder, ScriptedServer(policy=reply) as server:
        held["server"] = server
        for i in range(READS):
            with open(os.path.join(folder, f"seq{i}.txt"), "w", encoding="utf-8") as f:
                f.write(seq_output(FIRST + i)[len("exit status 0\n"):])
        client = GapClient(Client(server.base_url, "scripted", timeout=60))
        settings = RunSettings(max_turns=turns + 1, echo=lambda line: None, approve=approve_everything,
                               warn=lambda line: None, context_policy=policy, context_window=window,
                               sandbox=Sandbox(enabled=False))
        with contextlib.redirect_stderr(io.StringIO()):
            answer = run_agent("Print the numbers.", client, folder, settings, Stats())
    assert answer == "Done." and len(client.gaps) == turns, "the scripted run did not finish as planned"
    return client.gaps


def gap_line(gaps, label="", span=20):
    first, last = statistics.median(gaps[:span]), statistics.median(gaps[-span:])
    return (f"{label}turns 1-{span}: {first * 1000:.2f} ms, turns {len(gaps) - span + 1}-{len(gaps)}: "
            f"{last * 1000:.2f} ms, ratio {last / first:.2f}")


def gap_report(turns=200, policies=(DEFAULT_POLICY,), window=WINDOW):
    lines = [f"The harness's gap between a reply and the next request (median of 20 turns; the real loop, "
             f"--sandbox off, {turns} turns; load average {os.getloadavg()[0]:.2f}). Timings, not asserted."]
    for policy in policies:
        for tool, what in (("shell", "seq commands"), ("read_file", "reads of the same lines")):
            lines.append(gap_line(gap_run(turns, policy, window, tool), f"{policy}, {what}: "))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.window_edge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default=",".join(map(str, TURNS)), help="run lengths (default %(default)s)")
    parser.add_argument("--window", type=int, default=WINDOW, help="context window in tokens (default %(default)s)")
    parser.add_argument("--no-timing", action="store_true", help="only the deterministic prefill table")
    args = parser.parse_args(argv)
    try:
        turns = [int(t) for t in args.turns.split(",")]
    except ValueError:
        parser.error("--turns: whole numbers separated by commas, e.g. 60,200")
    if min(turns) < 1 or args.window < 1024:
        parser.error("--turns must be at least 1 and --window at least 1024 tokens")
    print(edge_table(turns, window=args.window))
    if not args.no_timing:
        print()
        print(gap_report(max(max(turns), 40), window=args.window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
