"""Re-measure the figures NOTES.md states under "Our measurements", and compare.

    python -m benchmarks.notes            # figure, stated, measured, ok/DRIFT; exit 1 on a drift
    python -m benchmarks.notes --fast     # only the quick, deterministic figures (what the test runs)
    python -m benchmarks.notes --fix      # rewrite the stated exact figures with the measured ones

A figure written down once goes stale the next time the code changes: a token count moves when a
tool description gains a sentence, and nobody re-runs the command beside it. So every figure here
is a pattern that finds it in NOTES.md (one number in a sentence) and a measurement that produces
it again, by calling what the sentence names: the stage's CLI against the scripted server, a
benchmark module's figures, a test's scripted model.

Two kinds: `exact` figures are deterministic (token counts by the scripted server's characters/4,
character counts, line counts) and must match to the digit; `range` figures are timings, which
depend on the machine: they pass when the measurement is within a factor of the stated value, and
`--fix` leaves them alone. `slow` figures (the eval's 30 runs per stage) are measured by this
command but not by tests/test_notes.py. `--fix` also rewrites a stage README that quotes the same
sentence (the m5, m7 and m8 lessons quote some of these).
"""
from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "NOTES.md"
PAGE_M5 = "docs/m5-scissors-cost.md"   # the measured cost of the m5 scissors, beside the package's policy
NOTES_TASK = "Find the testing budget in my notes and save it to budget.md."
RANGE_FACTOR = 3.0   # a timing passes within 3x of the stated value, either way


@dataclass(frozen=True)
class Figure:
    name: str
    pattern: str                 # a regex with one group: the number as NOTES.md writes it
    measure: object              # () -> number
    kind: str = "exact"          # "exact" | "range" | "text" (a word, compared as it is written)
    slow: bool = False
    file: str = "NOTES.md"       # where the figure is stated (a stage README quotes some)
    also: tuple = ()             # other measurements that agree with the stated text (kind "text")


# --- Running a stage against the scripted server ---------------------------------------------------

def _env(data_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONIOENCODING"] = "utf-8"
    env["XDG_DATA_HOME"] = str(data_dir)
    return env


def stats_of(stderr):
    for line in stderr.splitlines():
        if line.startswith("[stats] "):
            return {k: float(v) if "." in v else int(v)
                    for k, v in (pair.split("=", 1) for pair in line[len("[stats] "):].split())}
    raise RuntimeError(f"no [stats] line in:\n{stderr}")


def run_stage(stage, *args, script=None, policy=None, example=None, stdin="", drop_images=False, task=NOTES_TASK,
              server=None):
    """Run `python -m STAGE --base-url URL ARGS TASK` in a fresh workspace (a copy of examples/EXAMPLE,
    or an empty folder) against a fresh scripted server (`server`: more of its options); return (stats,
    stdout, server requests)."""
    from tinyharness.testing import ScriptedServer, load_script
    replies = {"script": load_script(str(ROOT / "examples" / f"{script}.script.json"))} if script else {"policy": policy}
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        if example:
            shutil.copytree(ROOT / "examples" / example, workspace)
        else:
            workspace.mkdir()
        with ScriptedServer(**replies, drop_images=drop_images, **(server or {})) as server:
            done = run_cli(stage, ["--base-url", server.base_url, *args, task], workspace, stdin, _env(Path(tmp) / "data"))  # beside the workspace: never a workspace's parent
            return stats_of(done.stderr), done.stdout, list(server.requests)


def run_cli(stage, argv, workspace, stdin, env):
    """The stage's command line in this process when it can run there (tests/ladder.py: the same main(),
    with the workspace as its folder, its own environment and streams), else as `python -m STAGE`: the
    figures are the same either way, and the suite that checks them starts a Python less per run."""
    from tests.ladder import can_run_in_process, run_in_process
    if can_run_in_process(stage):
        return run_in_process(stage, workspace, argv, stdin, 120, env)
    command = [sys.executable, "-m", *(["tinyharness", "run"] if stage == "tinyharness" else [stage])]
    return subprocess.run([*command, *argv], cwd=workspace, input=stdin, capture_output=True, text=True,
                          timeout=120, env=env)


@functools.cache
def notes_task(stage, *args, stdin=""):
    return run_stage(stage, *args, script="notes", example="notes", stdin=stdin)[0]


@functools.cache
def self_rescue(stage):
    return run_stage(stage, script="self-rescue", task="Save my note to scratch/notes.txt")[0]


def shell_every_turn(commands):
    def policy(body, index):
        return {"tool_calls": [{"name": "shell", "arguments": {"command": commands(index)}}]}
    return policy


@functools.cache
def m4_loop(kind):
    commands = (lambda i: "sleep 0.01") if kind == "exact" else (lambda i: f"sleep 0.{i % 100:02d}")
    return run_stage("m4_guards", "--yes", policy=shell_every_turn(commands), task="go")[0]


@functools.cache
def m4_endless(max_seconds=None):
    calls = [{"tool_calls": [{"name": "shell", "arguments": {"command": "while true; do sleep 0.1; done"}}]}, "done"]
    policy = lambda body, index: calls[min(index, 1)]
    extra = ["--max-seconds", str(max_seconds)] if max_seconds else []
    started = time.perf_counter()
    stats = run_stage("m4_guards", "--yes", "--shell-timeout", "2", *extra, policy=policy, task="go")[0]
    return {**stats, "wall": time.perf_counter() - started}


def compaction_pattern(index, which):
    """The index-th 'before -> after' pair of the compaction figures, capturing one side."""
    pair = r"[\d,]+ -> [\d,]+"
    wanted = r"([\d,]+) -> [\d,]+" if which == "before" else r"[\d,]+ -> ([\d,]+)"
    return r"to about [\d,]+ \(" + (pair + ", ") * index + wanted


def m2_timeout_wall():
    calls = [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 100 & while true; do sleep 0.1; done"}}]}, "done"]
    started = time.perf_counter()
    run_stage("m2_tools", "--shell-timeout", "1", policy=lambda body, index: calls[min(index, 1)], task="go")
    return time.perf_counter() - started


# --- m5 ----------------------------------------------------------------------------------------------

@functools.cache
def context_rows():
    from benchmarks import context
    short, long = context.ten_turn_task(context.SEED), context.forty_turn_task(context.SEED)
    return {"10": {r["policy"]: r for r in context.run_all(short)},
            "40": {r["policy"]: r for r in context.run_all(long)},
            "floor": context.floor_tokens(short), "schemas": context.schema_tokens()}


def ctx(task, policy, key, scale=1):
    value = context_rows()[task][policy][key]
    return round(value * scale) if scale != 1 else value


@functools.cache
def context_seeds():
    from benchmarks import context
    return context.across_seeds(range(1, 9))


@functools.cache
def harness_ms(policy, turns):
    """The harness's own time per turn, best of 3, as benchmarks.context's last table."""
    from benchmarks import context
    return min(context.harness_overhead(turns, policy)["per_turn_ms"] for _ in range(3))


def overhead_pattern(policy, position):
    """The position-th number after the policy's name in NOTES.md's sentence of harness times."""
    lead = {"batch+cap": r"turns: batch\+cap\s+", "sliding": r"at 100; sliding ", "none": r"; none "}[policy]
    skip = r"[\d.]+[^,;]*, " * position
    return lead + skip + r"(\d+\.\d+)"


def m5_ab(scissors):
    return notes_task("m5_context", "--yes", *([] if scissors else ["--no-scissors"]))


M5_REPORTS_TASK = ("Read the weekly reports week-1.md to week-8.md and write summary.md: the testing budget, "
                   "and how many runs passed each week.")


@functools.cache
def m5_reports(scissors):
    """m5's Try-it: the reports task behind a server with an 8,192-token window that cuts as Ollama does."""
    return run_stage("m5_context", "--yes", *([] if scissors else ["--no-scissors"]), script="reports",
                     example="reports", task=M5_REPORTS_TASK, server={"context_window": 8192, "truncate": True})[0]


# --- m6 ----------------------------------------------------------------------------------------------

@functools.cache
def m6_story(name):
    from tests import test_m6_verify as t
    # The test runs its tests with sys.executable, whose path differs between machines (and between
    # `python` and `python3`): every character of it is in the prompt. The figure uses `python3`.
    t.RUN_TESTS = "python3 -m unittest -q test_dates"
    model = (t.SelfTestingModel(t.DATES, t.TEST_DATES) if name == "closed"
             else t.SelfTestingModel(t.LEAP, t.TEST_LEAP, [t.MODEL_BELIEF]))
    task = f"Write dates.py with {'next_weekday(day)' if name == 'closed' else 'is_leap_year(year)'} and unittest tests in test_dates.py."
    return {stage: run_stage(stage, "--yes", policy=model, task=task)[0] for stage in ("m6_verify", "tinyharness")}


def m6_note_length():
    sys.path.insert(0, str(ROOT))
    from m6_verify.verify import check_python
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "area.py").write_text("def area(width, height):\n    return width * height)\n")
        return len(check_python(tmp, "write_file", {"path": "area.py"}, "OK: wrote 49 characters to area.py", {}))


# --- m7 ----------------------------------------------------------------------------------------------

def _eval_table(command):
    from tinyharness.eval.evals.policies import by_model
    from tinyharness.testing import ScriptedServer
    with ScriptedServer(policy=by_model(), model="competent") as server:
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([sys.executable, "-m", *command, "--base-url", server.base_url],
                                  cwd=tmp, capture_output=True, text=True, timeout=600, env=_env(Path(tmp) / "data"))
    rows = {}
    header = None
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| model") or line.startswith("| setting"):
            header = cells
        elif header and line.startswith("| ") and not line.startswith("|---"):
            row = dict(zip(header, cells))
            rows[row["model"] + (f"/{row['setting']}" if "setting" in row else "")] = row
    if not rows:
        raise RuntimeError(f"no table from {command}:\n{done.stdout}\n{done.stderr}")
    return rows


@functools.cache
def m7_table(harness=None):
    extra = ["--harness", harness] if harness else []
    return _eval_table(["m7_eval.eval", "--models", "competent,liar,clumsy", *extra])


def m7_eval_seconds():
    m7_table.cache_clear()
    started = time.perf_counter()
    m7_table()
    return time.perf_counter() - started


@functools.cache
def m7_compare():
    return _eval_table(["tinyharness", "eval", "--models", "competent,clumsy",
                        "--compare", "scissors=;noscissors=--no-scissors"])


def number(text):
    return float(text.replace(",", "").rstrip("%"))


# --- m8 ----------------------------------------------------------------------------------------------

ASK = "What colour is each half of the image?"


@functools.cache
def m8_run(*args, guess="I cannot see any image.", before=(), drop=False):
    from tinyharness.testing import vision_policy
    policy = vision_policy(guess, before=[json.loads(b) for b in before])
    return run_stage("m8_vision", *args, policy=policy, example="images", drop_images=drop, task=ASK)[0]


VIEW = json.dumps({"tool_calls": [{"name": "view_image", "arguments": {"path": "red-blue.png"}}]})
LIST = json.dumps({"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]})


def m8_schema_chars(stage):
    sys.path.insert(0, str(ROOT))
    module = __import__(f"{stage}.tools", fromlist=["SCHEMAS"])
    return len(json.dumps(module.SCHEMAS, ensure_ascii=False))


@functools.cache
def big_data_uri():
    """The data URI of a 5 MiB PNG (the file's bytes matter only by their count)."""
    return "data:image/png;base64," + base64.b64encode(bytes(5 * 1024 * 1024)).decode()


@functools.cache
def m4_slow_writer():
    def slow_writer(body, i):
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": f"f{i}.txt", "content": "x"}}], "delay": 0.4}
    return run_stage("m4_guards", "--yes", "--max-seconds", "1", policy=slow_writer, task="go")[0]


def image_tokens_of(name):
    from tinyharness.testing.images import image_tokens, read_png_pixels
    rows = read_png_pixels((ROOT / "examples/images" / name).read_bytes())
    return image_tokens(len(rows[0]), len(rows))


def python_lines(folder, exclude=()):
    total = 0
    for path in (ROOT / folder).rglob("*.py"):
        rel = path.relative_to(ROOT / folder).as_posix()
        if "__pycache__" in rel or any(rel == e or rel.startswith(e + "/") for e in exclude):
            continue
        total += len(path.read_text(encoding="utf-8").splitlines())
    return total


def size_row(stage):
    """One stage's row of `python -m benchmarks.size`: lines by role, the key functions."""
    from benchmarks.size import measure
    return next(row for row in measure(ROOT) if row["stage"] == stage)


def first_stage_over(limit):
    """(short name, lines of Python) of the first stage whose Python is over `limit` lines."""
    for folder in sorted(p.name for p in ROOT.glob("m[0-9]_*") if p.is_dir()):
        lines = python_lines(folder)
        if lines > limit:
            return folder.split("_")[0], lines
    return "none", 0


def diff_lines(a, b):
    done = subprocess.run(["diff", "-ru", "-x", "__pycache__", "-x", "*.md", a, b], cwd=ROOT, capture_output=True, text=True)
    return len(done.stdout.splitlines())


def data_uri_length(name):
    return len("data:image/png;base64,") + len(base64.b64encode((ROOT / "examples/images" / name).read_bytes()))


# --- The figures ---------------------------------------------------------------------------------------

def stat(run, key):
    return lambda: run()[key]


@functools.lru_cache(maxsize=None)
def parallel_figures():
    from benchmarks.parallel import figures
    return figures(calls=4, seconds=0.5)


FIGURES = [
    # m0
    Figure("m0 refused connection, seconds", r"http://127\.0\.0\.1:9/v1 x` prints `seconds=([\d.]+)`",
           lambda: stats_of(subprocess.run([sys.executable, "-m", "m1_loop", "--base-url", "http://127.0.0.1:9/v1", "x"],
                                           cwd=ROOT, capture_output=True, text=True, timeout=60).stderr)["seconds"],
           kind="range"),
    # m1
    Figure("m1 notes task, turns", r"through our loop: `\[stats\] turns=(\d+)", stat(lambda: notes_task("m1_loop"), "turns")),
    Figure("m1 notes task, tool calls", r"through our loop: `\[stats\] turns=\d+ tool_calls=(\d+)",
           stat(lambda: notes_task("m1_loop"), "tool_calls")),
    Figure("m1 notes task, prompt tokens", r"through our loop: `\[stats\] turns=\d+ tool_calls=\d+ prompt_tokens=(\d+)",
           stat(lambda: notes_task("m1_loop"), "prompt_tokens")),
    Figure("m1 notes task with a transcript, prompt tokens", r"; (\d+) with\s+`--transcript run\.json`",
           stat(lambda: notes_task("m1_loop", "--transcript", "run.json"), "prompt_tokens")),
    Figure("m1 notes task, completion tokens", r"through our loop: `\[stats\][^`]*\n?[^`]*completion_tokens=(\d+)",
           stat(lambda: notes_task("m1_loop"), "completion_tokens")),
    Figure("m1 notes task on tinyharness run, prompt tokens", r"through `tinyharness run` costs (\d+) prompt tokens",
           stat(lambda: notes_task("tinyharness", "--yes"), "prompt_tokens")),
    # m2
    Figure("m2 four tool schemas, characters", r"The four tool schemas are ([\d,]+) characters",
           lambda: m8_schema_chars("m2_tools")),
    Figure("m1 tool schemas, characters", r"characters against m1's ([\d,]+)", lambda: m8_schema_chars("m1_loop")),
    Figure("m2 self-rescue, prompt tokens", r"self-rescue replay\s+costs `\[stats\] turns=\d+ tool_calls=\d+ prompt_tokens=(\d+)",
           stat(lambda: self_rescue("m2_tools"), "prompt_tokens")),
    Figure("m2 self-rescue, completion tokens",
           r"self-rescue replay\s+costs `\[stats\] turns=\d+ tool_calls=\d+ prompt_tokens=\d+ completion_tokens=(\d+)",
           stat(lambda: self_rescue("m2_tools"), "completion_tokens")),
    Figure("m2 seq 1 30000, output characters", r"`shell\(\"\.\", \"seq 1 30000\"\)`: ([\d,]+) characters",
           lambda: len(subprocess.run(["seq", "1", "30000"], capture_output=True, text=True).stdout)),
    Figure("m2 seq 1 30000, result characters", r"became a ([\d,]+)-character result",
           lambda: len(stage_function("m2_tools", "tools", "shell")(".", "seq 1 30000"))),
    Figure("m2 subprocess.run with a background sleep, seconds", r"shell=True, capture_output=True\)` took ([\d.]+) s",
           lambda: timed(lambda: subprocess.run("sleep 3 & echo hi", shell=True, capture_output=True)), kind="range", slow=True),
    Figure("m2 shell() with a background sleep, seconds", r"`hi` in ([\d.]+) s",
           lambda: timed(lambda: stage_function("m2_tools", "tools", "shell")(".", "sleep 3 & echo hi")), kind="range"),
    # m3
    Figure("m3 command_policy, microseconds", r"ordinary command (\d+) us",
           lambda: 1e6 * per_call("command_policy('python3 -m pytest -q tests && git status')",
                                  namespace={"command_policy": stage_function("m3_hooks", "hooks", "command_policy")}),
           kind="range"),
    Figure("m3 pre_tool_use on read_file, microseconds", r"`pre_tool_use` on a `read_file` (\d+) us",
           lambda: 1e6 * per_call("pre_tool_use('.', 'read_file', {'path': 'notes/ideas.md'})",
                                  namespace={"pre_tool_use": stage_function("m3_hooks", "hooks", "pre_tool_use")}),
           kind="range"),
    Figure("m3 shell attacks run", r"-rx`:\s+(\d+) shell attacks run", lambda: attack_counts()[0]),
    Figure("m3 shell attacks stopped", r"shell attacks run through the CLI, (\d+) stopped", lambda: attack_counts()[1]),
    Figure("m3 shell attacks escaped", r"shell attacks run through the CLI, \d+ stopped, (\d+) escaped", lambda: attack_counts()[2]),
    Figure("m3 path attacks", r"escaped \(each changed its canary\); (\d+) path", lambda: attack_counts()[3]),
    Figure("m3 policy-only payloads", r"(\d+) payloads too dangerous", lambda: attack_counts()[4]),
    Figure("m3 policy-only stopped", r"policy only: (\d+) stopped", lambda: attack_counts()[5]),
    Figure("m3 ordinary commands", r"(\d+) ordinary commands", lambda: len(__import__("tests.test_m3_attacks", fromlist=["x"]).ORDINARY_COMMANDS)),
    Figure("m2 --shell-timeout 1 endless loop, wall seconds", r"ends in about ([\d.]+) s of wall time", lambda: m2_timeout_wall(), kind="range"),
    Figure("m3 denied write, prompt tokens", r"answering `n`\):\s+`\[stats\] turns=\d+ tool_calls=\d+ prompt_tokens=(\d+)",
           stat(lambda: notes_task("m3_hooks", stdin="n\n"), "prompt_tokens")),
    # m4
    Figure("m4 exact repeat, turns", r"stopped after \d+ \(`turns=(\d+) prompt_tokens", stat(lambda: m4_loop("exact"), "turns")),
    Figure("m4 exact repeat, prompt tokens", r"stopped after \d+ \(`turns=\d+ prompt_tokens=(\d+)`",
           stat(lambda: m4_loop("exact"), "prompt_tokens")),
    Figure("m4 exact repeat, seconds", r"prompt_tokens=\d+`,\s+([\d.]+) s\); the near-repeat", stat(lambda: m4_loop("exact"), "seconds"),
           kind="range"),
    Figure("m4 near repeat, prompt tokens", r"\(`turns=30 prompt_tokens=(\d+)`", stat(lambda: m4_loop("near"), "prompt_tokens")),
    Figure("m4 near repeat, seconds", r"\(`turns=30 prompt_tokens=\d+`,\s+([\d.]+) s\)", stat(lambda: m4_loop("near"), "seconds"),
           kind="range"),
    Figure("m4 endless shell call, seconds", r"call ends after ([\d.]+) s and the run goes on", stat(lambda: m4_endless(), "seconds"),
           kind="range"),
    Figure("m4 endless call under --max-seconds 0.5, seconds", r"\(([\d.]+) s have passed\)`",
           stat(lambda: m4_endless(0.5), "seconds"), kind="range"),
    Figure("m4 RepeatGuard.see, microseconds", r"`RepeatGuard\.see` on a shell call ([\d.]+) us",
           lambda: 1e6 * per_call("g.see(c)", "g = RepeatGuard(); c = {'function': {'name': 'shell', 'arguments': '{\"command\": \"sleep 5\"}'}}",
                                  namespace={"RepeatGuard": stage_function("m4_guards", "guards", "RepeatGuard")}),
           kind="range"),
    Figure("m4 Budget.exceeded, microseconds", r"`Budget\.exceeded` ([\d.]+) us",
           lambda: 1e6 * per_call("b.exceeded(3)", "b = Budget()", namespace={"Budget": stage_function("m4_guards", "guards", "Budget")}),
           kind="range"),
    # m5: benchmarks.context
    Figure("m5 10-turn none, prompt tokens", r"10-turn notes task: no scissors ([\d,]+) prompt tokens", lambda: ctx("10", "none", "prompt_tokens")),
    Figure("m5 10-turn none, last request", r"prompt tokens, last request ([\d,]+)", lambda: ctx("10", "none", "final")),
    Figure("m5 10-turn sliding, prompt tokens", r"past 8,192\); sliding \(m5\) ([\d,]+)", lambda: ctx("10", "sliding", "prompt_tokens")),
    Figure("m5 10-turn batch+cap, prompt tokens", r"re-processed tokens; batch\+cap ([\d,]+)", lambda: ctx("10", "batch+cap", "prompt_tokens")),
    Figure("m5 40-turn none, prompt tokens", r"fix-the-tests task: no scissors ([\d,]+) tokens", lambda: ctx("40", "none", "prompt_tokens")),
    Figure("m5 40-turn none, peak", r"tokens, peak ([\d,]+) \(past the", lambda: ctx("40", "none", "peak")),
    Figure("m5 40-turn sliding, prompt tokens", r"request\); sliding ([\d,]+) \(0", lambda: ctx("40", "sliding", "prompt_tokens")),
    Figure("m5 40-turn sliding, re-processed", r"re-processed ([\d,]+) = ", lambda: ctx("40", "sliding", "reprocessed")),
    Figure("m5 40-turn sliding, prefix breaks", r"(\d+) prefix\s+breaks; batch", lambda: ctx("40", "sliding", "breaks")),
    Figure("m5 40-turn batch, breaks", r"batch [\d.]+x, (\d+) breaks", lambda: ctx("40", "batch", "breaks")),
    Figure("m5 40-turn batch+cap, prompt tokens", r"breaks; batch\+cap ([\d,]+) \(0", lambda: ctx("40", "batch+cap", "prompt_tokens")),
    Figure("m5 40-turn batch+cap, breaks", r"were cached\), (\d+) breaks", lambda: ctx("40", "batch+cap", "breaks")),
    Figure("m5 40-turn batch+cap, peak", r"breaks, peak ([\d,]+);", lambda: ctx("40", "batch+cap", "peak")),
    Figure("m5 40-turn batch+cap, capped results", r"; (\d+) of \d+ results capped", lambda: ctx("40", "batch+cap", "capped")),
    Figure("m5 40-turn batch+cap, characters never seen", r"results capped, ([\d,]+) characters", lambda: ctx("40", "batch+cap", "unseen")),
    Figure("m5 10-turn floor", r"whole is ~([\d,]+) tokens", lambda: context_rows()["floor"]),
    Figure("m5 schemas re-read per request", r"re-reads ~(\d+) tokens of schemas", lambda: context_rows()["schemas"]),
    Figure("m5 seeds 1-8, batch+cap under 90%", r"under 90% of the window (\d)/8", lambda: context_seeds()["batch+cap"]["under_window"], slow=True),
    Figure("m5 seeds 1-8, batch under 90%", r"batch\s+alone (\d)/8", lambda: context_seeds()["batch"]["under_window"], slow=True),
    Figure("m5 10-turn sliding vs none", r"sliding \(m5\) [\d,]+ \(([\d.]+)x\)", lambda: ctx("10", "sliding", "prompt_vs_none")),
    Figure("m5 10-turn sliding re-processed vs none", r"with ([\d.]+)x the re-processed tokens", lambda: ctx("10", "sliding", "reprocessed_vs_none")),
    Figure("m5 10-turn batch+cap vs none", r"batch\+cap [\d,]+ \(([\d.]+)x\) with", lambda: ctx("10", "batch+cap", "prompt_vs_none")),
    Figure("m5 10-turn batch+cap re-processed vs none", r"\(0\.\d+x\) with ([\d.]+)x\. 40-turn", lambda: ctx("10", "batch+cap", "reprocessed_vs_none")),
    Figure("m5 40-turn sliding vs none", r"sliding [\d,]+ \(([\d.]+)x\), re-processed", lambda: ctx("40", "sliding", "prompt_vs_none")),
    Figure("m5 40-turn sliding re-processed vs none", r"re-processed [\d,]+ = ([\d.]+)x", lambda: ctx("40", "sliding", "reprocessed_vs_none")),
    Figure("m5 40-turn batch re-processed vs none", r"breaks; batch ([\d.]+)x, \d+ breaks", lambda: ctx("40", "batch", "reprocessed_vs_none")),
    Figure("m5 40-turn batch+cap vs none", r"batch\+cap [\d,]+ \(([\d.]+)x\), re-processed", lambda: ctx("40", "batch+cap", "prompt_vs_none")),
    Figure("m5 40-turn batch+cap re-processed vs none", r"\(0\.\d+x\), re-processed ([\d.]+)x \(", lambda: ctx("40", "batch+cap", "reprocessed_vs_none")),
    Figure("m5 40-turn batch+cap, schemas cached", r"x \(([\d.]+)x if the\s+schemas were cached\)", lambda: ctx("40", "batch+cap", "schemas_first_vs_none")),
    Figure("m5 seeds 1-8, batch+cap median", r"batch\+cap: median ([\d.]+)x", lambda: context_seeds()["batch+cap"]["median"], slow=True),
    Figure("m5 seeds 1-8, batch+cap worst", r"worst ([\d.]+)x, under 90%", lambda: context_seeds()["batch+cap"]["worst"], slow=True),
    *[Figure(f"m5 harness time, {policy} at {turns} turns, ms", overhead_pattern(policy, position),
             functools.partial(harness_ms, policy, turns), kind="range", slow=True)
      for policy in ("batch+cap", "sliding", "none") for position, turns in enumerate((10, 40, 100))],
    # m5 A/B on the stage
    Figure("m5 A/B with scissors, prompt tokens", r"with the scissors\s+`\[stats\] turns=5 tool_calls=4 prompt_tokens=(\d+)",
           lambda: m5_ab(True)["prompt_tokens"]),
    Figure("m5 A/B with scissors, cached tokens", r"seconds=0\.0\s+cached_tokens=(\d+)`, without", lambda: m5_ab(True)["cached_tokens"]),
    Figure("m5 A/B without scissors, prompt tokens", r"without\s+`prompt_tokens=(\d+) \.\.\.", lambda: m5_ab(False)["prompt_tokens"]),
    Figure("m5 A/B without scissors, cached tokens", r"\.\.\. cached_tokens=(\d+)`\. One", lambda: m5_ab(False)["cached_tokens"]),
    Figure("m5 A/B, tokens saved", r"stubbed: (\d+) tokens fewer", lambda: m5_ab(False)["prompt_tokens"] - m5_ab(True)["prompt_tokens"]),
    Figure("m5 A/B, more re-processed", r"sent, (\d+) more re-processed",
           lambda: (m5_ab(True)["prompt_tokens"] - m5_ab(True)["cached_tokens"])
           - (m5_ab(False)["prompt_tokens"] - m5_ab(False)["cached_tokens"])),
    Figure("m5 A/B, re-processed with scissors", r"re-processed \(([\d,]+) against",
           lambda: m5_ab(True)["prompt_tokens"] - m5_ab(True)["cached_tokens"]),
    Figure("m5 A/B, re-processed without", r"against ([\d,]+)\)\.", lambda: m5_ab(False)["prompt_tokens"] - m5_ab(False)["cached_tokens"]),
    # m6
    Figure("m6 check of a file that compiles, ms", r"costs ([\d.]+) ms for a \d+-line file",
           lambda: 1000 * check_python_timings()["good"], kind="range"),
    Figure("m6 check of a file with a syntax error, ms", r"and ([\d.]+) ms for the same file with a syntax error",
           lambda: 1000 * check_python_timings()["broken"], kind="range"),
    Figure("m6 tools.py, lines", r"ms for a (\d+)-line file", lambda: check_python_timings()["lines"]),
    Figure("m6 py_compile in a new process, ms", r"in\s+a new process costs (\d+) ms",
           lambda: 1000 * min(timed(lambda: subprocess.run([sys.executable, "-m", "py_compile", str(ROOT / "m6_verify/tools.py")],
                                                           capture_output=True)) for _ in range(3)), kind="range"),
    Figure("m6 compile note, characters", r"two-line file is (\d+) characters", m6_note_length),
    Figure("m6 closed loop, prompt tokens", r"`\[stats\] turns=6 tool_calls=6 prompt_tokens=(\d+) completion_tokens=\d+` \(",
           lambda: m6_story("closed")["m6_verify"]["prompt_tokens"]),
    Figure("m6 closed loop, completion tokens", r"prompt_tokens=\d+ completion_tokens=(\d+)` \(\d+ prompt tokens on",
           lambda: m6_story("closed")["m6_verify"]["completion_tokens"]),
    Figure("m6 closed loop on tinyharness run, prompt tokens", r"\((\d+) prompt tokens on\s+`tinyharness run`",
           lambda: m6_story("closed")["tinyharness"]["prompt_tokens"]),
    Figure("m6 wrong program, prompt tokens", r"program\[m6_verify\]`\):\s+`\[stats\] turns=6 tool_calls=6 prompt_tokens=(\d+)",
           lambda: m6_story("wrong")["m6_verify"]["prompt_tokens"]),
    Figure("m6 wrong program, completion tokens", r"prompt_tokens=\d+ completion_tokens=(\d+)`, the model's tests green",
           lambda: m6_story("wrong")["m6_verify"]["completion_tokens"]),
    # m7 (slow: 30 runs per eval)
    *[Figure(f"m7 eval, {model} {column}", rf"\| {model} \|(?:[^|\n]*\|){{{index}}} ([\d,.]+) \|",
             functools.partial(lambda m, c: number(m7_table()[m][c]), model, column), slow=True,
             # clumsy's mean prompt count moves by 1 between fresh runs (cause not found): a range, said so
             kind="range" if (model, column) == ("clumsy", "prompt tok") else "exact")
      for model in ("competent", "liar", "clumsy")
      for index, column in ((10, "turns"), (11, "prompt tok"), (12, "completion tok/turn"))],
    Figure("m7 eval of 30 runs, wall seconds", r"The whole eval, 30 runs, took ([\d.]+) s", lambda: m7_eval_seconds(),
           kind="range", slow=True),
    Figure("m7 competent prompt tokens on m3", r"competent model: ([\d,]+) \(m3\)",
           lambda: number(m7_table("m3_hooks")["competent"]["prompt tok"]), slow=True),
    Figure("m7 competent prompt tokens on m4", r"\(m3\), ([\d,]+) \(m4\)",
           lambda: number(m7_table("m4_guards")["competent"]["prompt tok"]), slow=True),
    Figure("m7 competent prompt tokens on m5", r"\(m4\), ([\d,]+) \(m5, m6, m7\)",
           lambda: number(m7_table("m5_context")["competent"]["prompt tok"]), slow=True),
    Figure("m7 liar prompt tokens up to m4", r"single\s+request (\d+) up to m4",
           lambda: number(m7_table("m4_guards")["liar"]["prompt tok"]), slow=True),
    Figure("m7 save_note's cost per request", r"cost (\d+) tokens on every request",
           lambda: number(m7_table("m5_context")["liar"]["prompt tok"]) - number(m7_table("m4_guards")["liar"]["prompt tok"]),
           slow=True),
    Figure("m7 compare, competent prompt tokens", r"cutting \(([\d,]+) per\s+run for competent",
           lambda: number(m7_compare()["competent/scissors"]["prompt tok"]), slow=True),
    Figure("m7 compare, clumsy prompt tokens", r"for competent, ([\d,]+) for clumsy",
           lambda: number(m7_compare()["clumsy/scissors"]["prompt tok"]), slow=True),
    # m8
    Figure("m8 without an image, prompt tokens", r"without an image, (\d+) prompt tokens", lambda: m8_run()["prompt_tokens"]),
    Figure("m8 with red-blue.png, prompt tokens", r"`--image red-blue\.png`, ([\d,]+) tokens",
           lambda: m8_run("--image", "red-blue.png")["prompt_tokens"]),
    Figure("m8 with blue-red.png, prompt tokens", r"with `blue-red\.png`, ([\d,]+) and",
           lambda: m8_run("--image", "blue-red.png")["prompt_tokens"]),
    Figure("m8 image dropped, prompt tokens", r"the\s+right answer, (\d+) prompt tokens",
           lambda: m8_run("--image", "red-blue.png", guess="left: red, right: blue", drop=True)["prompt_tokens"]),
    Figure("m8 view_image delivered, prompt tokens", r"instead of `--image`: ([\d,]+) prompt tokens",
           lambda: m8_run(guess="left: red, right: blue", before=(VIEW,))["prompt_tokens"]),
    Figure("m8 view_image dropped, prompt tokens", r"over two turns delivered, ([\d,]+) dropped",
           lambda: m8_run(guess="left: red, right: blue", before=(VIEW,), drop=True)["prompt_tokens"]),
    Figure("m8 four turns without an image", r"cost ([\d,]+) prompt tokens without `--image`",
           lambda: m8_run(before=(LIST, LIST, LIST))["prompt_tokens"]),
    Figure("m8 four turns with an image", r"without `--image` and ([\d,]+) with it",
           lambda: m8_run("--image", "red-blue.png", before=(LIST, LIST, LIST))["prompt_tokens"]),
    Figure("m8 picture and note, tokens", r"4 x (\d+)\.",
           lambda: round((m8_run("--image", "red-blue.png", before=(LIST, LIST, LIST))["prompt_tokens"]
                          - m8_run(before=(LIST, LIST, LIST))["prompt_tokens"]) / 4)),
    Figure("m8 image tokens by the server's rule", r"\(the server's (\d+) image tokens", lambda: image_tokens_of("red-blue.png")),
    Figure("m8 view_image schema, added characters", r"schema adds (\d+) characters", lambda: m8_schema_chars("m8_vision") - m8_schema_chars("m7_eval")),
    Figure("m8 view_image schema, added tokens", r"about (\d+) tokens by characters / 4",
           lambda: (m8_schema_chars("m8_vision") - m8_schema_chars("m7_eval")) // 4),
    Figure("m8 red-blue.png, bytes", r"`red-blue\.png` is (\d+) bytes", lambda: (ROOT / "examples/images/red-blue.png").stat().st_size),
    Figure("m8 red-blue.png, data URI characters", r"bytes, a ([\d,]+)-character data URI", lambda: data_uri_length("red-blue.png")),
    Figure("m8 5 MiB image, data URI characters", r"A 5 MiB image is a ([\d,]+)-character", lambda: len(big_data_uri())),
    Figure("m8 5 MiB image, json.dumps seconds", r"`json\.dumps` takes about ([\d.]+) s", lambda: per_call(
        "json.dumps(body)", namespace={"json": json, "body": {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": big_data_uri()}}]}]}}), kind="range"),
    Figure("m4 --max-seconds 1 with replies 0.4 s apart, replies", r"delayed 0\.4 s stops after the (\w+) reply",
           lambda: {2: "second", 3: "third"}.get(m4_slow_writer()["turns"], str(m4_slow_writer()["turns"])), kind="text",
           also=("second",), slow=True),   # on a busy machine the second reply is already past 1 s
    Figure("m8 tool schemas before view_image", r"tool schemas \(([\d,]+) -> [\d,]+\)", lambda: m8_schema_chars("m7_eval")),
    Figure("m8 tool schemas with view_image", r"tool schemas \([\d,]+ -> ([\d,]+)\)", lambda: m8_schema_chars("m8_vision")),
    Figure("m8 stage, lines of Python", r"the m8 stage is ([\d,]+) lines of Python", lambda: python_lines("m8_vision")),
    Figure("m8 stage without the eval, lines", r"lines of Python, ([\d,]+) without the eval",
           lambda: python_lines("m8_vision", exclude=("eval.py", "evals"))),
    Figure("m8 eval, lines", r"`evals/`, (\d+)\)", lambda: python_lines("m8_vision") - python_lines("m8_vision", exclude=("eval.py", "evals"))),
    Figure("m8 vision.py, lines", r"`vision\.py` alone is (\d+)", lambda: python_lines("m8_vision") - python_lines("m8_vision", exclude=("vision.py",))),
    Figure("first stage over 700 lines", r"it passed that at (m\d)", lambda: first_stage_over(700)[0], kind="text"),
    Figure("first stage over 700 lines, lines", r"it passed that at m\d \((\d+) lines\)", lambda: first_stage_over(700)[1]),
    Figure("m1 lesson, lines", r"m1's lesson is (\d+) lines", lambda: size_row("m1_loop")["core"]),
    Figure("m1 run_agent, lines", r"with a `run_agent` of (\d+)", lambda: size_row("m1_loop")["functions"]["loop.py:run_agent"]),
    Figure("m8 lesson, lines", r"m8's is ([\d,]+) lines \(the eval", lambda: size_row("m8_vision")["core"]),
    Figure("m8 armour, lines", r"with (\d+) lines of armour", lambda: size_row("m8_vision")["armour"]),
    Figure("m7 -> m8 diff, lines", r"m8_vision` \(the code, without README and quiz\) is (\d+) lines", lambda: diff_lines("m7_eval", "m8_vision")),
    # Beyond m8: benchmarks.compaction's figures()
    Figure("compaction, model calls", r"the figures come from `figures\(\)`\):\s+(\d+) model calls", lambda: compaction()["model_calls"]),
    *[Figure(f"compaction {i + 1}, tokens {which}", compaction_pattern(i, which),
             functools.partial(lambda i, k: compaction()["tokens_before_after"][i][k], i, 0 if which == "before" else 1))
      for i in range(4) for which in ("before", "after")],
    Figure("compaction, largest prompt", r"Largest prompt ([\d,]+) tokens", lambda: compaction()["max_prompt_tokens"]),
    Figure("compaction, without compaction", r"without compaction reaches ([\d,]+)", lambda: compaction()["uncompacted_max_prompt_tokens"]),
    Figure("compaction, summary prompt tokens", r"summary requests were ([\d,]+) prompt tokens", lambda: compaction()["summary_prompt_tokens"]),
    Figure("compaction, summary new tokens", r"of which ([\d,]+) were not", lambda: compaction()["summary_new_tokens"]),
    Figure("compaction, summary tokens", r"the four summaries were (\d+) tokens", lambda: compaction()["summary_completion_tokens"]),
    # docs/m5-scissors-cost.md shows benchmarks.context's table and targets; m5's README quotes two ratios
    *[Figure(f"m5 page 40-turn {policy}, {what}", rf"\| {label} \|{cells}", functools.partial(ctx, "40", policy, key, *scale),
             file=PAGE_M5)
      for policy, label in (("none", "no scissors"), ("sliding", r"sliding scissors \(this stage\)"),
                            ("batch", "batch scissors"), ("batch+cap", r"batch \+ cap \(tinyharness's default\)"))
      for what, cells, key, scale in (
          ("prompt tokens", r" ([\d,]+)", "prompt_tokens", ()),
          ("peak", r"[^|]*\| ([\d,]+)", "peak", ()),
          ("re-processed", r"[^|]*\|[^|]*\| ([\d,]+)", "reprocessed", ()),
          ("re-processed vs none", r"[^|]*\|[^|]*\| [\d,]+ \(([\d.]+)x\)", "reprocessed_vs_none", ()),
          ("prefix breaks", r"[^|]*\|[^|]*\|[^|]*\| (\d+) \|", "breaks", ()))],
    *[Figure(f"m5 page 40-turn {policy}, prompt vs none", rf"\| {label} \| [\d,]+ \(([\d.]+)x\)",
             functools.partial(ctx, "40", policy, "prompt_vs_none"), file=PAGE_M5)
      for policy, label in (("sliding", r"sliding scissors \(this stage\)"), ("batch", "batch scissors"),
                            ("batch+cap", r"batch \+ cap \(tinyharness's default\)"))],
    Figure("m5 page batch+cap peak (targets)", r"met \(batch\+cap peak ([\d,]+);", lambda: ctx("40", "batch+cap", "peak"),
           file=PAGE_M5),
    Figure("m5 page batch+cap re-processed ratio (targets)", r"met by batch\+cap \(([\d.]+)x\)",
           lambda: ctx("40", "batch+cap", "reprocessed_vs_none"), file=PAGE_M5),
    Figure("m5 page sliding re-processed ratio (targets)", r"sliding scissors \(([\d.]+)x\);",
           lambda: ctx("40", "sliding", "reprocessed_vs_none"), file=PAGE_M5),
    Figure("m5 page 10-turn none", r"Our uncut 10-turn run sends ([\d,]+) tokens", lambda: ctx("10", "none", "prompt_tokens"),
           file=PAGE_M5),
    Figure("m5 page 10-turn none, last request", r"its last request is ([\d,]+)", lambda: ctx("10", "none", "final"),
           file=PAGE_M5),
    Figure("m5 page 10-turn sliding", r"the sliding scissors send ([\d,]+) \(", lambda: ctx("10", "sliding", "prompt_tokens"),
           file=PAGE_M5),
    Figure("m5 page 10-turn batch+cap", r"batch\+cap ([\d,]+) \(0\.\d+x, because", lambda: ctx("10", "batch+cap", "prompt_tokens"),
           file=PAGE_M5),
    Figure("m5 page 10-turn floor", r"~([\d,]+) tokens over this run", lambda: context_rows()["floor"], file=PAGE_M5),
    Figure("m5 page capped results", r"information again: (\d+) of the \d+ results were capped",
           lambda: ctx("40", "batch+cap", "capped"), file=PAGE_M5),
    Figure("m5 page characters never seen", r"never saw ([\d,]+) characters", lambda: ctx("40", "batch+cap", "unseen"),
           file=PAGE_M5),
    Figure("m5 README sliding prompt vs none", r"the sliding scissors send ([\d.]+)x the prompt tokens",
           lambda: ctx("40", "sliding", "prompt_vs_none"), file="m5_context/README.md"),
    Figure("m5 README sliding re-processed vs none", r"local server re-read ([\d.]+)x as much",
           lambda: ctx("40", "sliding", "reprocessed_vs_none"), file="m5_context/README.md"),
    Figure("m5 README A/B without scissors, prompt tokens the server reported", r"the run ends with `prompt_tokens=(\d+)`",
           lambda: m5_reports(False)["prompt_tokens"], file="m5_context/README.md"),
    Figure("m5 README A/B with scissors, prompt tokens", r"`\[stats\] turns=10 tool_calls=10 prompt_tokens=(\d+)`",
           lambda: m5_reports(True)["prompt_tokens"], file="m5_context/README.md"),
    # Beyond m8: parallel reads
    Figure("parallel reads, one after the other, seconds", r"one after the other \(`--no-parallel`\) ([\d.]+) s",
           lambda: parallel_figures()["serial_s"], kind="range", slow=True),
    Figure("parallel reads, together, seconds", r"together\n?\s*\(the default\) ([\d.]+) s",
           lambda: parallel_figures()["parallel_s"], kind="range", slow=True),
    # the house by idea: the design held against the imports (benchmarks/design.py)
    Figure("design: never rules broken", r"never rules broken today: (\d+)",
           lambda: len(design_check().broken_nevers())),
    Figure("design: imports between parts with no arrow", r"imports between parts with no arrow: (\d+)",
           lambda: len(design_check().undeclared_arrows())),
    Figure("design: package modules in no part", r"package modules in no part: (\d+)",
           lambda: len(design_check().unplaced())),
    Figure("design: never rules", r"`docs/architecture.json` holds (\d+) never rules",
           lambda: len(design_check().load()["never"])),
]


def design_check():
    from benchmarks import design
    return design


def stage_function(stage, module, name):
    sys.path.insert(0, str(ROOT))
    return getattr(__import__(f"{stage}.{module}", fromlist=[name]), name)


def per_call(statement, setup="pass", namespace=None):
    """Seconds per call of statement, the best of 5 timeit repeats (as `python -m timeit` reports)."""
    import timeit
    timer = timeit.Timer(statement, setup, globals=namespace)
    number, _ = timer.autorange()
    return min(timer.repeat(5, number)) / number


def timed(function):
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


@functools.cache
def check_python_timings():
    check_python = stage_function("m6_verify", "verify", "check_python")
    with tempfile.TemporaryDirectory() as tmp:
        good = (ROOT / "m6_verify/tools.py").read_text(encoding="utf-8")
        Path(tmp, "tools.py").write_text(good)
        Path(tmp, "broken.py").write_text(good + "\n)\n")
        names = {"check_python": check_python, "tmp": tmp}
        return {
            "good": per_call("check_python(tmp, 'write_file', {'path': 'tools.py'}, 'OK:', {})", namespace=names),
            "broken": per_call("check_python(tmp, 'write_file', {'path': 'broken.py'}, 'OK:', {})", namespace=names),
            "lines": len(good.splitlines()),
        }


@functools.cache
def attack_counts():
    from tests import test_m3_attacks
    line = test_m3_attacks.attack_table().splitlines()[-1]
    return tuple(int(n) for n in re.findall(r"\d+", line))   # run, stopped, escaped, path, payloads, stopped, escaped


@functools.cache
def compaction():
    from benchmarks import compaction as c
    return c.figures()


# --- Comparing and fixing ------------------------------------------------------------------------------

def parse(text):
    return float(text.replace(",", ""))


def regex(pattern):
    """The figure's pattern with each space matching any run of whitespace: rewrapping a paragraph
    must not lose a figure."""
    pattern = pattern.replace(r"[\d,]+", r"\d+(?:,\d{3})*")   # a number, never its trailing comma
    return re.sub(r"(?<!\\) ", lambda m: r"\s+", pattern)


def find(figure, text):
    """The one match of the figure's pattern in text (a pattern that finds 0 or 2 places is a bug)."""
    matches = list(re.finditer(regex(figure.pattern), text))
    if len(matches) != 1:
        raise LookupError(f"{figure.name}: the pattern matches {len(matches)} places in {figure.file}: {figure.pattern}")
    return matches[0]


def agrees(figure, stated, measured, decimals=0):
    if figure.kind == "exact":
        return stated == (round(measured, decimals) if decimals else measured)
    return stated / RANGE_FACTOR <= measured <= stated * RANGE_FACTOR or abs(measured - stated) < 0.05


def measure_all(figures):
    measured = {}
    for figure in figures:
        try:
            measured[figure.name] = figure.measure()
        except Exception as e:    # one broken measurement is a row, not the end of the report
            measured[figure.name] = e
    return measured


def text_of(figure, notes_text, texts=None):
    """The text a figure is stated in: NOTES.md's as given, a README's from `texts` when given
    there (so a test can change either), else from the file."""
    if figure.file == "NOTES.md":
        return notes_text
    if texts and figure.file in texts:
        return texts[figure.file]
    return (ROOT / figure.file).read_text(encoding="utf-8")


def decimals(stated):
    return len(stated.split(".")[1]) if "." in stated else 0


def compare(text, figures, measured, texts=None):
    """Rows (figure, stated text, measured, ok) for each figure, from NOTES.md's text (and the
    READMEs' for the figures they state)."""
    rows = []
    for figure in figures:
        value = measured[figure.name]
        try:
            stated = find(figure, text_of(figure, text, texts)).group(1)
        except LookupError as e:
            rows.append((figure, "(not found)", str(e), False))
            continue
        if isinstance(value, Exception):
            rows.append((figure, stated, f"{type(value).__name__}: {value}", False))
            continue
        if figure.kind == "text":
            rows.append((figure, stated, value, value == stated or value in figure.also))
            continue
        rows.append((figure, stated, value, agrees(figure, parse(stated), value, decimals(stated))))
    return rows


def formatted(value, like):
    """value written the way the stated figure was (thousands separators, decimals)."""
    if "." in like:
        return f"{value:.{len(like.split('.')[1])}f}"
    return f"{round(value):,}" if "," in like else str(round(value))


def fix(text, figures, measured, file="NOTES.md"):
    """text (the content of `file`) with every exact figure stated there that drifted replaced by
    its measurement."""
    for figure in figures:
        if figure.file != file:
            continue
        value = measured.get(figure.name)
        fixable = figure.kind == "exact" or (figure.kind == "text" and not figure.also)
        if not fixable or value is None or isinstance(value, Exception):
            continue
        for match in reversed(list(re.finditer(regex(figure.pattern), text))):
            stated = match.group(1)
            if figure.kind == "text":
                if stated != value:
                    text = text[:match.start(1)] + value + text[match.end(1):]
                continue
            if not agrees(figure, parse(stated), value, decimals(stated)):
                text = text[:match.start(1)] + formatted(value, match.group(1)) + text[match.end(1):]
    return text


def show(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.notes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="only the exact figures that measure in seconds")
    parser.add_argument("--fix", action="store_true",
                        help="rewrite drifted exact figures in NOTES.md and the stage READMEs that quote them")
    args = parser.parse_args(argv)
    figures = [f for f in FIGURES if not args.fast or (f.kind != "range" and not f.slow)]
    measured = measure_all(figures)
    text = NOTES.read_text(encoding="utf-8")
    rows = compare(text, figures, measured)
    width = max(len(f.name) for f, *_ in rows)
    for figure, stated, value, ok in rows:
        print(f"{figure.name:<{width}}  stated {stated:>9}  measured {show(value):>9}  "
              f"{'ok' if ok else 'DRIFT'}{' (timing, within 3x)' if figure.kind == 'range' else ''}")
    drifted = [r for r in rows if not r[3]]
    print(f"\n{len(rows) - len(drifted)} of {len(rows)} figures agree.")
    if args.fix:
        for path in [NOTES, *sorted(ROOT.glob("m[0-9]_*/README.md")), *sorted(ROOT.glob("docs/*.md"))]:
            before = path.read_text(encoding="utf-8")
            after = fix(before, figures, measured, path.relative_to(ROOT).as_posix())
            if after != before:
                path.write_text(after, encoding="utf-8")
                print(f"rewrote {path.relative_to(ROOT)}")
        if not args.fast:   # the figures the stage READMEs quote beside their Try it blocks
            from benchmarks import tryit
            tryit.main(["--fix"])
        return 0
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
