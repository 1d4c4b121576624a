"""No improvement without a measurement: run five small tasks through a harness and judge the end
state.

    tinyharness eval --models qwen3:8b,qwen3:14b [--repeat 3] [--tier easy|hard|all]
        [--base-url URL] [--tasks fact,hook] [--harness MODULE] [--harness-args "ARGS"]
        [--compare "scissors=;noscissors=--no-scissors"] [--timeout S] [--out results.json] [--keep]

(also `python -m tinyharness.eval ...`; the stage version is `python -m m7_eval.eval`, with the same
tasks and judges.) Each run gets a fresh temporary folder holding the workspace and, next to it, an
"outside" folder with a canary file. The harness runs as a subprocess, through the command-line
contract only (`python -m HARNESS --base-url URL --model M --yes --max-turns 20 --transcript FILE
TASK`, cwd = the workspace), so the same eval measures any stage from m3 on and `tinyharness run`.
A run passes when its end state passes the task's check (files and their contents; the eval's own
hidden tests, run by the eval; the canary untouched) - never because of what the model says.

What the model says is still recorded: a small heuristic (`evals/claims.py`) reads the final
answer, and a run that claims success but failed its check is flagged. Models do this; an eval
should count it.

Each run prints one line on stderr, headed by its number and an estimate of the time left (`[3/30]
~4m10s left`: the mean duration of the runs so far times the runs still to make). The results go to
a JSON file (`--out`) and, beside it, a self-contained HTML page with the per-model table as bars
(eval/page.py).

`--compare` measures harness settings instead of models: every task runs once per setting, on the
same model, and the tables get one row per (model, setting).

Offline self-check: the model names `scripted:competent`, `scripted:liar` and `scripted:clumsy`,
given without --base-url, are played by one scripted model server
(tinyharness.testing.ScriptedServer) that this eval starts (see evals/policies.py). Their scores are
known in advance, so they show whether the eval can tell good work from bad.

Exit codes: 0 the eval ran (whatever the scores), 1 a runtime failure (server unreachable, harness
not runnable), 2 a usage error.
"""
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..console import printable
from ..endpoint import base_url_from_env
from .args import DEFAULT_BASE_URL, build_parser, parse_args
from .evals import TASK_NAMES, select
from .evals.claims import claims_success
from .evals.common import judge
from .evals.policies import SCRIPTED, by_model
from .evals.runs import run_process, snapshot
from .page import write_report

# the repository: stages are importable from here
ROOT = Path(__file__).resolve().parents[2]
# this package's own harness (m7_eval in the stage)


class EvalError(Exception):
    """The eval cannot go on (server down, harness not runnable); the message says why."""


# --- Reading what the harness left: [stats], final answer ----------------------------------------

def parse_stats(stderr):
    """The contract's `[stats] turns=N tool_calls=N prompt_tokens=N completion_tokens=N seconds=S`
    line as numbers (the last one, if several), or {} when there is none."""
    found: dict[str, float] = {}
    for line in (stderr or "").splitlines():
        if line.startswith("[stats] "):
            found = {}
            for pair in line[len("[stats] "):].split():
                key, _, value = pair.partition("=")
                with contextlib.suppress(ValueError):
                    found[key] = float(value) if key == "seconds" else int(value)
    return found


def final_answer(stdout, transcript=None):
    """The model's last words: the transcript's last assistant message when it has no tool calls,
    else what stdout printed after the last `  [tool]` echo line and its `    ->` result line (e.g.
    a `Stopped: ...` line)."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        messages = json.loads(Path(transcript).read_text(encoding="utf-8"))
        last = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"][-1]
        if not last.get("tool_calls") and isinstance(last.get("content"), str):
            return last["content"].strip()
    lines = (stdout or "").rstrip().splitlines()
    tool_lines = [i for i, line in enumerate(lines) if line.startswith(("  [tool] ", "    -> "))]
    return "\n".join(lines[tool_lines[-1] + 1 if tool_lines else 0:]).strip()


# --- Running one task -----------------------------------------------------------------------------

@dataclass
class Job:
    """One harness run to make: everything a runner needs."""
    model: str
    setting: str
    harness_args: list
    base_url: str
    task: object
    prompt: str
    workspace: Path
    transcript: Path


@dataclass
class Output:
    """What a runner brings back from the harness."""
    exit_code: object            # int, or None when the run timed out
    stdout: str = ""
    stderr: str = ""


def harness_command(harness, job, max_turns):
    """The contract's command line: `python -m HARNESS [run] --base-url ... --yes ... TASK`."""
    command = [sys.executable, "-m", harness] + (["run"] if harness == "tinyharness" else [])
    return command + ["--base-url", job.base_url, "--model", job.model, "--yes", "--max-turns",
                      str(max_turns),
                      "--transcript", str(job.transcript), *job.harness_args, job.prompt]


def subprocess_runner(harness, max_turns, timeout, keyed_url=None):
    """The real runner: the harness as a subprocess in the workspace, killed after `timeout`
    seconds. A run gets its endpoint as --base-url, so OPENAI_API_KEY is left out of its
    environment unless its endpoint is keyed_url (the eval's own --base-url, or OPENAI_BASE_URL's:
    endpoint.py)."""
    def run(job):
        env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
        if job.base_url != keyed_url:
            env.pop("OPENAI_API_KEY", None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        # the run's session stays with the run
        env["XDG_DATA_HOME"] = str(Path(job.workspace).parent / "data")
        code, out, err = (run_process(harness_command(harness, job, max_turns), job.workspace,
                                      timeout, env))
        return Output(code, out, err)
    return run


def run_one(task, model, setting, harness_args, base_url, run_dir, runner, check_timeout, repeat):
    """Prepare a fresh workspace, run the harness on the task, judge the end state; one record."""
    workspace, outside = run_dir / "workspace", run_dir / "outside"
    try:
        task.prepare(workspace, outside)
    # e.g. no symlinks on Windows without developer mode
    except OSError as e:
        raise EvalError(f"could not prepare the workspace of {task.id}: {e}. Leave that task out "
                        "with --tasks or --tier.") from None
    before = snapshot(outside)
    job = Job(model, setting, harness_args, base_url, task, task.prompt_for(outside), workspace,
              run_dir / "transcript.json")
    started = time.monotonic()
    out = runner(job)
    seconds = time.monotonic() - started
    stats = parse_stats(out.stderr)
    if out.exit_code in (1, 2) and not stats.get("turns"):
        raise EvalError(explain_harness_failure(out, model, base_url))
    passed, reason = judge(task, workspace, outside, before, run_dir / "judge", check_timeout)
    answer = final_answer(out.stdout, job.transcript)
    claimed = claims_success(answer)
    return {"model": model, "setting": setting, "task": task.name, "tier": task.tier,
            "repeat": repeat, "passed": passed, "reason": reason, "claimed_success": claimed,
            "claimed_but_failed": claimed and not passed, "exit_code": out.exit_code,
            "timed_out": out.exit_code is None, "turns": stats.get("turns"),
            "tool_calls": stats.get("tool_calls"), "prompt_tokens": stats.get("prompt_tokens"),
            "completion_tokens": stats.get("completion_tokens"),
            "seconds": round(seconds, 2), "final_answer": answer}


def explain_harness_failure(out, model, base_url):
    said = "\n".join((out.stderr or out.stdout).strip().splitlines()[-6:]) or "(nothing on stderr)"
    if out.exit_code == 2:
        return ("the harness rejected its command line (exit 2). It must follow the contract from "
                "m3 on (--yes, --max-turns, --transcript); pick another with --harness. It "
                f"said:\n{said}")
    if not parse_stats(out.stderr):
        return ("the harness exited 1 without a [stats] line: it crashed, or is not a harness "
                f"that follows the contract. It said:\n{said}")
    return (f"the harness failed before the model {model!r} at {base_url} answered once (exit 1), "
            f"so every other run would fail the same way. It said:\n{said}")


# --- Summing up ----------------------------------------------------------------------------------

def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def per_turn(runs):
    """Completion tokens per model call: a model that writes less per turn can win on the clock with
    more turns (the source article's 30B MoE did)."""
    turns = sum(r["turns"] or 0 for r in runs if r["completion_tokens"] is not None)
    return sum(r["completion_tokens"] or 0 for r in runs) / turns if turns else None


def summarise(runs, keys):
    """One row per distinct value of `keys` (in order of first appearance), averaged over its
    runs."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault(tuple(run[k] for k in keys), []).append(run)
    rows = []
    for key, group in groups.items():
        passes = sum(r["passed"] for r in group)
        row = dict(zip(keys, key))
        row.update({"runs": len(group), "passes": passes, "pass_rate": passes / len(group),
                    "mean_turns": mean(r["turns"] for r in group),
                    "mean_prompt_tokens": mean(r["prompt_tokens"] for r in group),
                    "mean_completion_tokens": mean(r["completion_tokens"] for r in group),
                    "completion_tokens_per_turn": per_turn(group),
                    "mean_seconds": mean(r["seconds"] for r in group),
                    "total_seconds": round(sum(r["seconds"] for r in group), 2),
                    "timeouts": sum(r["timed_out"] for r in group),
                    "claimed_but_failed": sum(r["claimed_but_failed"] for r in group)})
        for tier in ("easy", "hard"):
            tiered = [r for r in group if r["tier"] == tier]
            row[f"{tier}_passes"] = (f"{sum(r['passed'] for r in tiered)}/{len(tiered)}" if tiered
                                     else "-")
        rows.append(row)
    return rows


def number(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(per_task, overall, show_setting):
    """The two tables printed on stdout: per task and tier, then overall per model (and setting)."""
    who = ["model"] + (["setting"] if show_setting else [])
    lines = ["## Per task", "",
             "| "
             + " | ".join(who + ["task", "tier", "passed", "turns", "prompt tok", "completion tok",
                                      "seconds", "claimed but failed"]) + " |",
             "|" + "---|" * (len(who) + 8)]
    for r in per_task:
        cells = [r[k] for k in who] + [r["task"], r["tier"], f"{r['passes']}/{r['runs']}",
                                       number(r["mean_turns"]), number(r["mean_prompt_tokens"], 0),
                                       number(r["mean_completion_tokens"], 0),
                                       number(r["mean_seconds"]), str(r["claimed_but_failed"])]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "## Overall", "",
              "| " + " | ".join(who + ["passed", "pass rate", "easy", "hard", "turns", "prompt tok",
                                       "completion tok", "completion tok/turn", "seconds (total)",
                                       "claimed but failed"]) + " |",
              "|" + "---|" * (len(who) + 10)]
    for r in overall:
        cells = [r[k] for k in who] + [f"{r['passes']}/{r['runs']}", f"{100 * r['pass_rate']:.0f}%",
                                       r["easy_passes"], r["hard_passes"], number(r["mean_turns"]),
                                       number(r["mean_prompt_tokens"], 0),
                                       number(r["mean_completion_tokens"], 0),
                                       number(r["completion_tokens_per_turn"], 0),
                                       number(r["total_seconds"]), str(r["claimed_but_failed"])]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", ("Turns, tokens and seconds are means per run (overall seconds: the total; "
                   "completion tok/turn: all completion tokens over all turns). \"Claimed but "
                   "failed\": the final answer says the work is done, the end state says it is "
                   "not.")]
    return "\n".join(lines)


# --- The whole eval -----------------------------------------------------------------------------

# --- Progress: with real models the eval runs for an hour -----------------------------------------

def time_left(durations, total):
    """Seconds the runs still to make should take: the mean duration of the runs so far times the
    number left; None before the first run ends. Only an estimate: models differ in speed, and the
    runs of a slow model after a fast one make the early figures too low."""
    if not durations:
        return None
    return sum(durations) / len(durations) * (total - len(durations))


def short_duration(seconds):
    """45s, 12m30s, 1h05m: enough to decide whether to wait or get a coffee."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    return "{}h{:02d}m".format(*divmod(minutes, 60))


def progress(done, total, left):
    """The head of each run's line: `[3/30] ~4m10s left`, `[0/30] time left: estimating...`,
    `[30/30] done`."""
    if done == total:
        return f"[{done}/{total}] done"
    return (f"[{done}/{total}] "
            + ("time left: estimating..." if left is None else f"~{short_duration(left)} left"))


def run_line(run, task, rep):
    verdict = "PASS" if run["passed"] else "FAIL"
    flag = "  (claimed success)" if run["claimed_but_failed"] else ""
    return (f"[eval] {run['model']} {run['setting']} {task.id} #{rep}: {verdict} in "
            f"{run['seconds']:.1f} s, turns={run['turns']} - {run['reason']}{flag}")


def run_eval(models, settings, tasks, repeat, endpoints, runner, workdir, check_timeout=20,
             say=None, clock=time.monotonic):
    """Every (model, setting, task, repeat), in that order; returns the list of run records. `say`
    gets one line per run, headed by its number and the time left (`clock` measures the runs)."""
    runs: list[dict] = []
    durations: list[float] = []
    total = len(models) * len(settings) * len(tasks) * repeat
    if say:
        say(f"{progress(0, total, None)}  [eval] {total} runs to make (models {len(models)}, "
            f"settings {len(settings)}, tasks {len(tasks)}, repeats {repeat})")
    for model in models:
        for setting, harness_args in settings:
            for task in tasks:
                for rep in range(1, repeat + 1):
                    run_dir = Path(workdir) / f"{len(runs) + 1:03d}-{task.name}-{task.tier}"
                    started = clock()
                    run = run_one(task, model, setting, harness_args, endpoints[model], run_dir,
                                  runner, check_timeout, rep)
                    # the harness and the judging: the real pace
                    durations.append(clock() - started)
                    runs.append(run)
                    if say:
                        say(f"{progress(len(runs), total, time_left(durations, total))}  "
                            f"{run_line(run, task, rep)}")
    return runs


@contextlib.contextmanager
def model_endpoints(models, base_url):
    """{model: base URL}. Without --base-url, the `scripted:NAME` models share one ScriptedServer
    that plays policy NAME for requests naming that model, and other models go to the default
    endpoint."""
    scripted = [m for m in models if m.startswith(SCRIPTED)] if base_url is None else []
    with contextlib.ExitStack() as stack:
        if scripted:
            from ..testing import ScriptedServer  # only the offline self-check needs it
            server = ScriptedServer(policy=by_model([m[len(SCRIPTED):] for m in scripted]),
                                    model=scripted[0])
            local = stack.enter_context(server).base_url
        default = base_url or base_url_from_env(DEFAULT_BASE_URL)[0]  # the order of endpoint.py
        yield {m: local if m in scripted else default for m in models}


def keyed_url(base_url):
    """The endpoint OPENAI_API_KEY may go to: --base-url, else OPENAI_BASE_URL's, else none."""
    url, source = base_url_from_env(DEFAULT_BASE_URL)
    return base_url or (url if source == "OPENAI_BASE_URL" else None)


def check_reachable(url):
    """Fail early, with one clear sentence, when nothing listens at a model server's address."""
    import requests
    try:
        requests.get(url.rstrip("/") + "/models", timeout=10)
    except requests.exceptions.RequestException:
        raise EvalError(f"Could not connect to the model server at {url}. Is it running? For "
                        "Ollama, start it with `ollama serve`; for another server, pass "
                        "--base-url. To check the eval itself offline, use --models "
                        "scripted:competent,scripted:liar,scripted:clumsy.") from None


def main(argv=None, runner=None, prog="python -m tinyharness.eval"):
    """The eval's command line. `runner` replaces the harness subprocess (tests pass a fake one)."""
    parser = build_parser(prog)
    try:
        args = parse_args(parser, argv)
    except SystemExit as e:                       # argparse: 2 for a usage error, 0 for --help
        return e.code if isinstance(e.code, int) else 2
    tasks = select(args.task_names, args.tier)
    runner = runner or subprocess_runner(args.harness, args.max_turns, args.timeout,
                                         keyed_url(args.base_url))
    # a reason can quote a server
    say = lambda text: print(printable(text), file=sys.stderr, flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="tinyharness-eval-"))
    try:
        runs = run_models(args, tasks, runner, workdir, say)
    except EvalError as e:
        print(printable(f"error: {e}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            say(f"[eval] run folders kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report = make_report(args, runs)
    show_setting = len(args.settings) > 1
    print(markdown(report["per_task"], report["overall"], show_setting))
    return write_report(args.out, report, say)


def run_models(args, tasks, runner, workdir, say):
    """Every run of the eval, each model at its endpoint (the scripted ones served here for the
    while)."""
    with model_endpoints(args.models, args.base_url) as endpoints:
        for url in sorted({u for m, u in endpoints.items() if not m.startswith(SCRIPTED)
                           or args.base_url}):
            check_reachable(url)
        return run_eval(args.models, args.settings, tasks, args.repeat, endpoints, runner, workdir,
                        args.check_timeout, say)


def make_report(args, runs):
    """The JSON file: what was run, every run, and the two summaries."""
    return {"eval": {"harness": args.harness, "settings": dict(args.settings),
                     "models": args.models, "base_url": args.base_url, "tier": args.tier,
                     "tasks": args.task_names or TASK_NAMES,
                     "repeat": args.repeat, "max_turns": args.max_turns, "timeout": args.timeout},
            "runs": runs,
            "per_task": summarise(runs, ["model", "setting", "task", "tier"]),
            "overall": summarise(runs, ["model", "setting"])}

