"""What each context policy costs: prompt tokens, context size, and work for the server's prompt cache.

    python -m benchmarks.context [--window 8192] [--seed 7] [--no-overhead]
    python -m benchmarks.context --svg FILE     # the picture: prompt tokens per model call


Two scripted tasks are run once per policy of `tinyharness.context.POLICIES`, through the real
HTTP client (`tinyharness.llm.Client`) against `tinyharness.testing.ScriptedServer`:

- a 10-turn task (read a folder of notes, keep a note, write a summary), sized like the source
  article's A/B run, whose last uncut turn was 9,158 tokens;
- a 40-turn task (find and fix failing tests in a small project): directory listings, file reads of
  1-6k characters, test runs, greps and a few small writes.

The "model" is a policy function on the server that replays the task's tool calls; the tool results
are synthetic text of realistic sizes made by a small driver loop here (the real tools and loop are
not involved, so only the context policy differs between runs). Everything is seeded: the same
command prints the same figures.

Tokens are the scripted server's estimate (characters/4 of the request's JSON), and so is its
prefix cache: `cached_tokens` is the longest common prefix with the previous request, in
characters/4. "Re-processed" is what the server had to compute again: sum(prompt - cached).

Then the harness's own time: the REAL loop (`tinyharness.loop.run_agent`, real tools in a temporary
workspace) runs 10, 40 and 100 turns against the scripted server, which answers at once. A
stopwatch around each `client.chat` call takes out the time spent waiting for the "model" (the HTTP
exchange and the server's work, the request's JSON encoding included); what is left, per turn, is
the harness: the context policy and the watch, running the tools, the guards. Timings vary with the
machine and from run to run; they are printed, never asserted.

The same policies on a long output-heavy run, where the window stays full for a hundred turns and
more (the prefix a server's cache must prefill again, where the prefix breaks, the harness's own
time per turn early and late): `python -m benchmarks.window_edge`.

`--svg FILE` draws the 40-turn task's prompt tokens per model call for no scissors, the sliding
scissors (the stages) and batch+cap (tinyharness's default) as one picture, and prints nothing else:
docs/m5-context.svg is that picture, and a test regenerates it byte for byte.
"""
import argparse
import contextlib
import io
import json
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tinyharness.context import DEFAULT_POLICY, POLICIES, STUB_PREFIX, cap_chars
from tinyharness.hooks import approve_everything
from tinyharness.llm import Client
from tinyharness.loop import RunSettings, Stats, run_agent
from tinyharness.sandbox import Sandbox
from tinyharness.testing import ScriptedServer
from tinyharness.testing.replies import estimate_tokens

from .svgchart import Line, Series, line_chart

WINDOW = 8192
SEED = 7
NEAR = 0.9                 # a request over 90% of the window fails the "under the window" check

# The m5 agent's view of the world: a fixed copy, so the figures do not move when the real prompt
# or tool descriptions are edited.
SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. Old tool results may be cut to save room;
keep what you will need later with save_note. When the task is done, answer briefly with what you did."""


def schema(name, description, **params):
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(params),
                       "properties": {k: {"type": "string", "description": v} for k, v in params.items()}}}}


TOOLS = [
    schema("list_dir", "List the files and folders in a folder of the workspace.",
           path="folder path relative to the workspace, '.' for the top"),
    schema("read_file", "Read a text file of the workspace.", path="file path relative to the workspace"),
    schema("write_file", "Create or overwrite a text file in the workspace.",
           path="file path relative to the workspace", content="the full text to write"),
    schema("shell", "Run a shell command in the workspace and return its output. Each call is a fresh "
                    "process: `cd` does not persist. Long output is cut in the middle.",
           command="the command line"),
    schema("save_note", "Append a note to agent_notes.md. Old tool results get cut to save room; notes "
                        "survive, so write down facts you will need later, with file names and numbers.",
           text="the note"),
]


# --- Synthetic but realistic text --------------------------------------------------------------

WORDS = ("the store cart item price total order customer discount tax invoice report budget review "
         "meeting decision owner deadline risk test module function value error default config "
         "release draft plan team cost estimate vendor schedule migration database cache request").split()


def fill(rng, size, line):
    """Lines from `line(rng)` until the text is exactly `size` characters long."""
    lines, length = [], 0
    while length < size:
        lines.append(line(rng))
        length += len(lines[-1]) + 1
    return "\n".join(lines)[:size]


def prose_line(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
    return ("- " if rng.random() < 0.3 else "") + " ".join(words).capitalize() + "."


def code_line(rng):
    name, other = rng.choice(WORDS), rng.choice(WORDS)
    return rng.choice([
        f"def {name}_{other}(self, {other}):",
        f"    {name} = self.{other}.get(\"{name}\", 0)",
        f"    if {name} > {rng.randint(0, 500)}:",
        f"        return round({name} * {rng.random():.2f}, 2)",
        f"    # {prose_line(rng)}",
        f"class {name.capitalize()}{other.capitalize()}:",
        f"    assert {name}_{other}({rng.randint(1, 99)}) == {rng.randint(1, 999)}",
        "",
    ])


def listing(rng, count, folders=("src", "tests", "docs")):
    names = sorted({f"{rng.choice(WORDS)}_{rng.choice(WORDS)}.py" for _ in range(count)})
    return "\n".join([f"{f}/" for f in folders] + names)


def test_run(rng, size, failures):
    """Pytest-like output: progress dots, failures with their tracebacks, the summary."""
    def line(r):
        if r.random() < 0.25:
            return f"tests/test_{r.choice(WORDS)}.py " + "".join(r.choice("....F") for _ in range(r.randint(8, 40)))
        return "E       " + code_line(r).strip() if r.random() < 0.5 else "    " + code_line(r).strip()
    summary = f"\n{failures} failed, {rng.randint(20, 60)} passed in {rng.uniform(0.5, 3):.2f}s"
    return fill(rng, size - len(summary), line) + summary


def grep(rng, size):
    return fill(rng, size, lambda r: f"src/shop/{r.choice(WORDS)}.py:{r.randint(1, 300)}:{code_line(r)}")


def ok_write(path, content):
    return f"OK: wrote {len(content)} characters to {path}"


@dataclass
class Step:
    name: str
    arguments: dict
    result: str


@dataclass
class Task:
    title: str
    prompt: str
    steps: list = field(default_factory=list)
    answer: str = "Done."


def ten_turn_task(seed=SEED):
    """Nine tool calls and the answer: the shape of the source article's 10-turn notes task."""
    rng = random.Random(seed)
    task = Task("10-turn notes task", "Read the project notes in docs/ and write the open decisions, "
                "with owners and deadlines, to SUMMARY.md.")
    summary = fill(rng, 1600, prose_line)
    task.steps = [
        Step("list_dir", {"path": "docs"}, listing(rng, 9, folders=())),
        Step("read_file", {"path": "docs/architecture.md"}, fill(rng, 5800, prose_line)),
        Step("read_file", {"path": "docs/meeting-03-02.md"}, fill(rng, 5200, prose_line)),
        Step("read_file", {"path": "docs/budget.md"}, fill(rng, 4400, prose_line)),
        Step("save_note", {"text": fill(rng, 240, prose_line)}, "OK: saved a note of 240 characters"),
        Step("read_file", {"path": "docs/roadmap.md"}, fill(rng, 6000, prose_line)),
        Step("shell", {"command": "grep -rn DECISION docs"}, grep(rng, 2400)),
        Step("read_file", {"path": "docs/risks.md"}, fill(rng, 5900, prose_line)),
        Step("write_file", {"path": "SUMMARY.md", "content": summary}, ok_write("SUMMARY.md", summary)),
    ]
    task.answer = "I wrote SUMMARY.md: seven open decisions with their owners and deadlines."
    return task


def forty_turn_task(seed=SEED):
    """Thirty-nine tool calls and the answer: explore, run the tests, then read-fix-rerun cycles."""
    rng = random.Random(seed)
    task = Task("40-turn fix-the-tests task", "The tests of this project fail. Find out why and fix the code "
                "(not the tests) until `python -m pytest -q` passes.")
    steps = [
        Step("list_dir", {"path": "."}, listing(rng, 6)),
        Step("read_file", {"path": "README.md"}, fill(rng, rng.randint(2000, 4000), prose_line)),
        Step("list_dir", {"path": "src/shop"}, listing(rng, 14, folders=())),
        Step("list_dir", {"path": "tests"}, listing(rng, 10, folders=())),
        Step("shell", {"command": "python -m pytest -q"}, test_run(rng, rng.randint(2500, 4000), 5)),
    ]
    failing = 5
    while len(steps) < 39:
        module = rng.choice(WORDS)
        cycle = [Step("read_file", {"path": f"src/shop/{module}.py"}, fill(rng, rng.randint(1000, 6000), code_line)),
                 Step("read_file", {"path": f"tests/test_{module}.py"}, fill(rng, rng.randint(1000, 6000), code_line))]
        if rng.random() < 0.5:
            cycle.append(Step("shell", {"command": f"grep -rn {rng.choice(WORDS)} src"},
                              grep(rng, rng.randint(300, 1500))))
        if rng.random() < 0.4:
            other = rng.choice(WORDS)
            cycle.append(Step("read_file", {"path": f"src/shop/{other}.py"}, fill(rng, rng.randint(1000, 6000), code_line)))
        content = fill(rng, rng.randint(300, 1200), code_line)
        cycle.append(Step("write_file", {"path": f"src/shop/{module}.py", "content": content},
                          ok_write(f"src/shop/{module}.py", content)))
        failing = max(0, failing - 1)
        cycle.append(Step("shell", {"command": "python -m pytest -q"},
                          test_run(rng, rng.randint(1500, 4000), failing)))
        steps.extend(cycle)
    task.steps = steps[:39]
    task.answer = "Fixed the pricing, tax and discount code in src/shop; all tests pass now."
    return task


# --- The driver: a minimal agent loop with a context policy ------------------------------------

def scripted_model(task):
    """The server-side "model": the task's next tool call, then the answer."""
    def reply(body, index):
        if index < len(task.steps):
            step = task.steps[index]
            return {"content": "", "tool_calls": [{"name": step.name, "arguments": step.arguments}]}
        return {"content": task.answer}
    return reply


def drive(task, policy_name, window):
    """Run the task with one policy; return (requests the server saw, usages, original results)."""
    policy = POLICIES[policy_name]
    originals = {}                         # tool_call_id -> the result as the tool returned it
    usages = []
    with ScriptedServer(policy=scripted_model(task)) as server:
        client = Client(base_url=server.base_url, model="scripted", timeout=10)
        history = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]
        for turn in range(len(task.steps) + 1):
            history = policy(history, window)          # the loop keeps what the policy returns
            message, usage, _ = client.chat(history, tools=TOOLS)
            usages.append(usage)
            history.append(message)
            for call in message.get("tool_calls") or []:
                step = task.steps[turn]
                assert call["function"]["name"] == step.name, "the driver and the script disagree"
                originals[call["id"]] = step.result
                history.append({"role": "tool", "tool_call_id": call["id"], "content": step.result})
        return list(server.requests), usages, originals


def measure(task, policy_name, window=WINDOW):
    """The figures of one run, as a dict (see `COLUMNS` for what each means)."""
    requests, usages, originals = drive(task, policy_name, window)
    prompts = [u["prompt_tokens"] for u in usages]
    cached = [u["prompt_tokens_details"]["cached_tokens"] for u in usages]
    breaks = sum(1 for before, after in zip(requests, requests[1:])
                 if after["messages"][:len(before["messages"])] != before["messages"])
    first_seen = first_versions(requests)
    return {
        "policy": policy_name,
        "requests": len(requests),
        "prompt_tokens": sum(prompts),
        "final": prompts[-1],
        "peak": max(prompts),
        "reprocessed": sum(p - c for p, c in zip(prompts, cached)),
        "breaks": breaks,
        "under_window": all(p <= NEAR * window for p in prompts),
        "newest_intact": all(newest_intact(r["messages"], first_seen) for r in requests),
        "results": len(originals),
        "capped": sum(1 for i, text in first_seen.items() if text != originals[i]),
        "unseen": sum(omitted(text) for text in first_seen.values()),
        "cut": sum(1 for m in requests[-1]["messages"] if str(m.get("content")).startswith(STUB_PREFIX)),
    }


def omitted(text):
    """Characters a cap on insert left out, as its marker says (0 for a whole result)."""
    found = re.search(r"\[\.\.\. ([\d,]+) characters omitted", text)
    return int(found.group(1).replace(",", "")) if found else 0


def first_versions(requests):
    """tool_call_id -> the result as the model first saw it (after any cap on insert)."""
    first_seen = {}
    for request in requests:
        for m in request["messages"]:
            if m.get("role") == "tool":
                first_seen.setdefault(m["tool_call_id"], m["content"])
    return first_seen


def newest_intact(messages, first_seen, keep=2):
    """Are the newest `keep` results exactly as the model first saw them (not cut since)?

    A result capped on insert counts as intact here, like the shell tool's own output cap; the
    "capped" and "unseen" columns say how much such caps hid.
    """
    results = [m for m in messages if m.get("role") == "tool"][-keep:]
    return all(m["content"] == first_seen[m["tool_call_id"]] for m in results)


def floor_tokens(task, window=WINDOW):
    """The fewest prompt tokens any policy could send while keeping the newest two results whole:
    per request, the system prompt, the task and the schemas, plus those two results."""
    requests, _, originals = drive(task, "none", window)
    fixed = estimate_tokens(json.dumps(requests[0]["messages"][:2], ensure_ascii=False)) + schema_tokens()
    newest = [[m["tool_call_id"] for m in r["messages"] if m.get("role") == "tool"][-2:] for r in requests]
    return sum(fixed + sum(len(originals[i]) for i in ids) // 4 for ids in newest)


def schema_tokens():
    """What the simulated cache re-reads on every request because the schemas come last."""
    return estimate_tokens(json.dumps(TOOLS, ensure_ascii=False))


def run_all(task, window=WINDOW, policies=None):
    """measure() for each policy, plus ratios to the "none" run."""
    rows = [measure(task, name, window) for name in (policies or ["none", *(p for p in POLICIES if p != "none")])]
    none = next(r for r in rows if r["policy"] == "none")
    per_request = schema_tokens()
    for row in rows:
        row["prompt_vs_none"] = row["prompt_tokens"] / none["prompt_tokens"]
        row["reprocessed_vs_none"] = row["reprocessed"] / none["reprocessed"]
        # The same ratio if the schemas were cached, as they are when a chat template puts them first.
        row["schemas_first_vs_none"] = ((row["reprocessed"] - per_request * row["requests"])
                                        / (none["reprocessed"] - per_request * none["requests"]))
    return rows


def across_seeds(seeds, window=WINDOW, policies=("batch", DEFAULT_POLICY)):
    """The 40-turn figures of some policies on other random tasks: is the chosen seed a lucky draw?"""
    runs = [run_all(forty_turn_task(seed), window, ["none", *policies]) for seed in seeds]
    spread = {}
    for policy in policies:
        rows = [row_of(rows, policy) for rows in runs]
        ratios = sorted(r["reprocessed_vs_none"] for r in rows)
        spread[policy] = {"seeds": len(rows), "median": ratios[len(ratios) // 2], "worst": ratios[-1],
                          "under_window": sum(r["under_window"] for r in rows)}
    return spread


# --- Printing ------------------------------------------------------------------------------------

COLUMNS = [  # (header, key, format)
    ("policy", "policy", "{}"),
    ("prompt tokens", "prompt_tokens", "{:,}"),
    ("vs none", "prompt_vs_none", "{:.2f}x"),
    ("final ctx", "final", "{:,}"),
    ("peak ctx", "peak", "{:,}"),
    ("re-processed", "reprocessed", "{:,}"),
    ("vs none", "reprocessed_vs_none", "{:.2f}x"),
    ("(schemas first)", "schemas_first_vs_none", "{:.2f}x"),
    ("prefix breaks", "breaks", "{}"),
    ("<90% window", "under_window", "{}"),
    ("newest 2 intact", "newest_intact", "{}"),
    ("cut", "cut", "{}"),
    ("capped", "capped", "{}"),
    ("chars unseen", "unseen", "{:,}"),
]


def table(rows):
    def cell(row, key, fmt):
        value = row[key]
        return ("yes" if value else "NO") if isinstance(value, bool) else fmt.format(value)
    lines = [[h for h, _, _ in COLUMNS]] + [[cell(r, k, f) for _, k, f in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = ["| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))) + " |"
           for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def row_of(rows, policy):
    return next(r for r in rows if r["policy"] == policy)


TARGETS = [  # (name, task, test on a row, the figure shown)
    ("every request under 90% of the window", "40", lambda r: r["under_window"],
     lambda r: f"peak {r['peak']:,} tokens"),
    ("newest two results intact in every request", "40", lambda r: r["newest_intact"],
     lambda r: f"{r['capped']} of {r['results']} results capped on insert, {r['unseen']:,} characters never seen"),
    ("re-processed <= 1.15x none", "40", lambda r: r["reprocessed_vs_none"] <= 1.15,
     lambda r: f"{r['reprocessed_vs_none']:.2f}x; {r['schemas_first_vs_none']:.2f}x with the schemas cached"),
    ("prompt tokens <= 1/4 of none", "10", lambda r: r["prompt_vs_none"] <= 0.25,
     lambda r: f"{r['prompt_vs_none']:.2f}x"),
]


def target_lines(short_rows, long_rows, default=DEFAULT_POLICY):
    """One line per target for the default policy, then which policies meet it."""
    lines = []
    for name, task, ok, figure in TARGETS:
        rows = long_rows if task == "40" else short_rows
        row = row_of(rows, default)
        meeting = ", ".join(r["policy"] for r in rows if ok(r)) or "no policy"
        lines.append(f"target {task}-turn {name} ({default}): {'met' if ok(row) else 'NOT met'} "
                     f"({figure(row)}); met by: {meeting}")
    return lines


def header(window, seed):
    return "\n".join([
        f"Context policies on two scripted tasks: window {window:,} tokens, seed {seed}, default policy {DEFAULT_POLICY}.",
        "Tokens are estimated as characters/4 of the request's JSON (no tokenizer). The prompt cache is simulated",
        "by tinyharness.testing.ScriptedServer: cached = the longest common prefix with the previous request, and",
        "re-processed = sum(prompt - cached). That server puts the tool schemas after the messages, so it re-reads",
        f"them (~{schema_tokens()} tokens) on every request, for every policy; real chat templates put them first:",
        "'(schemas first)' is the ratio without them. 'prefix breaks' = requests that do not extend the previous",
        "one; 'intact' = as the model first saw them; 'cut' = results stubbed in the last request; 'capped' =",
        f"results capped on insert ({cap_chars(window):,} characters at this window). No real server truncates here.",
    ])


def report(window=WINDOW, seed=SEED, seeds=range(1, 9)):
    short, long = ten_turn_task(seed), forty_turn_task(seed)
    short_rows, long_rows = run_all(short, window), run_all(long, window)
    lines = [header(window, seed), ""]
    for task, rows in ((short, short_rows), (long, long_rows)):
        lines += [f"{task.title}: {len(task.steps)} tool calls, "
                  f"{sum(len(s.result) for s in task.steps):,} characters of tool results", table(rows), ""]
    for policy, spread in across_seeds(seeds, window, tuple(dict.fromkeys(["batch", DEFAULT_POLICY]))).items():
        lines.append(f"{policy} on the 40-turn task with seeds {seeds[0]}-{seeds[-1]}: re-processed vs none median "
                     f"{spread['median']:.2f}x, worst {spread['worst']:.2f}x; under 90% of the window in "
                     f"{spread['under_window']}/{spread['seeds']}")
    least = floor_tokens(short, window)
    lines.append(f"10-turn floor: a policy that sends the newest two results whole sends at least ~{least:,} prompt "
                 f"tokens on this task ({least / row_of(short_rows, 'none')['prompt_tokens']:.2f}x none)")
    return "\n".join(lines + target_lines(short_rows, long_rows))


# --- The harness's own time: the real loop, a model that answers at once ---------------------------

OVERHEAD_TURNS = (10, 40, 100)
OVERHEAD_POLICIES = (DEFAULT_POLICY, "sliding", "none")


class TimedClient:
    """The real HTTP client with a stopwatch around each model call."""

    def __init__(self, client):
        self.client, self.waiting = client, 0.0

    def chat(self, messages, tools=None, **options):
        started = time.perf_counter()
        try:
            return self.client.chat(messages, tools, **options)
        finally:
            self.waiting += time.perf_counter() - started


def overhead_workspace(folder, rng):
    """Twelve source files of 1-6k characters, like the 40-turn task's; returns their paths."""
    (folder / "src").mkdir()
    paths = [f"src/{word}.py" for word in WORDS[:12]]
    for path in paths:
        (folder / path).write_text(fill(rng, rng.randint(1000, 6000), code_line), encoding="utf-8")
    return paths


def overhead_model(paths, turns):
    """The scripted model: reads (three in five turns), a listing, a small write or a note; then the answer.
    No shell: starting /bin/sh costs the same few milliseconds on every turn and would hide the trend."""
    def reply(body, index):
        if index >= turns - 1:
            return {"content": "Done."}
        step = index % 5
        if step in (0, 1, 3):
            call = {"name": "read_file", "arguments": {"path": paths[(index * 7) % len(paths)]}}
        elif step == 2:
            call = {"name": "list_dir", "arguments": {"path": "src"}}
        elif index % 10 == 4:
            call = {"name": "write_file", "arguments": {"path": f"fix_{index}.txt", "content": f"fixed {index}\n" * 20}}
        else:
            call = {"name": "save_note", "arguments": {"text": f"Turn {index}: the tax rule lives in src/tax.py."}}
        return {"content": "", "tool_calls": [call]}
    return reply


def harness_overhead(turns, policy=DEFAULT_POLICY, window=WINDOW, seed=SEED):
    """Run the real loop for `turns` model calls; return its time split into waiting and the harness's own."""
    with tempfile.TemporaryDirectory() as folder:
        paths = overhead_workspace(Path(folder), random.Random(seed))
        with ScriptedServer(policy=overhead_model(paths, turns)) as server:
            client = TimedClient(Client(server.base_url, "scripted", timeout=60))
            stats, started = Stats(), time.perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):     # the context warnings of the uncut runs
                settings = RunSettings(max_turns=turns, echo=lambda line: None, approve=approve_everything,
                                       context_policy=policy, context_window=window, sandbox=Sandbox())
                answer = run_agent("Fix the tax rules.", client, folder, settings, stats)
            total = time.perf_counter() - started
    assert answer == "Done." and stats.turns == turns, "the scripted run did not finish as planned"
    return {"turns": turns, "policy": policy, "total": total, "waiting": client.waiting,
            "per_turn_ms": (total - client.waiting) / turns * 1000, "prompt_tokens": stats.prompt_tokens}


def overhead_report(window=WINDOW, seed=SEED, turns=OVERHEAD_TURNS, policies=OVERHEAD_POLICIES, repeat=3):
    """Harness time per turn for each policy and run length; the best of `repeat` runs (the least disturbed)."""
    lines = [f"Harness overhead: the real loop (tinyharness.loop.run_agent) and real tools, against the scripted server "
             f"with no delay; window {window:,}, best of {repeat} runs.",
             "Per turn: (wall time - time inside client.chat) / turns, in milliseconds. Timings, not asserted.",
             "| policy    | " + " | ".join(f"{n:>3} turns" for n in turns) + " | waiting for the model, longest run |",
             "|-----------|" + "|".join("-" * 11 for _ in turns) + "|------------------------------------|"]
    for policy in policies:
        runs = [min((harness_overhead(n, policy, window, seed) for _ in range(repeat)), key=lambda r: r["per_turn_ms"])
                for n in turns]
        cells = " | ".join(f"{r['per_turn_ms']:6.2f} ms" for r in runs)
        lines.append(f"| {policy:<9} | {cells} | {runs[-1]['waiting']:6.2f} s for {runs[-1]['prompt_tokens']:>9,} "
                     "prompt tokens |")
    return "\n".join(lines)


PICTURED = (("none", "no scissors", "#d62728"),              # a staircase, through the window
            ("sliding", "sliding, the stages", "#ff7f0e"),       # a little cut every turn
            ("batch+cap", "batch+cap, tinyharness", "#1f77b4"))  # a sawtooth: grow, then one cut


def prompt_sizes(task, policy_name, window=WINDOW):
    """The prompt tokens of each model call of one run."""
    _, usages, _ = drive(task, policy_name, window)
    return [u["prompt_tokens"] for u in usages]


def context_svg(window=WINDOW, seed=SEED):
    """The SVG text of the picture: prompt tokens per model call of the 40-turn task, one line per policy."""
    task = forty_turn_task(seed)
    runs = [(label, prompt_sizes(task, policy, window), color) for policy, label, color in PICTURED]
    series = [Series(f"{label}: {sum(sizes):,} in all", sizes, color) for label, sizes, color in runs]
    return line_chart(series, title="Prompt tokens per model call, the same 40-turn task",
                      subtitle=f"scripted server, tokens = characters/4; python -m benchmarks.context --svg FILE "
                               f"(seed {seed})",
                      x_label="model call", y_label="prompt tokens sent",
                      lines=(Line(window, f"window {window:,}"),))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.context",
                                     description="Measure the context policies on two scripted tasks.")
    parser.add_argument("--window", type=int, default=WINDOW, help="context window in tokens (default %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the synthetic tasks (default %(default)s)")
    parser.add_argument("--no-overhead", action="store_true", help="skip the timing of the real loop")
    parser.add_argument("--svg", metavar="FILE", help="instead of the tables, draw the 40-turn task's prompt tokens "
                                                      "per model call for none, sliding and batch+cap into FILE")
    args = parser.parse_args(argv)
    if args.window < 1024:
        parser.error("--window must be at least 1024 tokens")
    if args.svg:
        try:
            Path(args.svg).write_text(context_svg(args.window, args.seed), encoding="utf-8")
        except OSError as e:
            print(f"error: cannot write {args.svg}: {e.strerror or e}", file=sys.stderr)
            return 1
        print(f"wrote {args.svg}: prompt tokens per model call of the 40-turn task (none, sliding, batch+cap)")
        return 0
    print(report(args.window, args.seed))
    if not args.no_overhead:
        print()
        print(overhead_report(args.window, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
