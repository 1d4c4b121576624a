"""No improvement without a measurement: five tasks, two tiers, judged by the end state.

    python -m m8_vision.eval --models qwen3:8b,qwen3:14b [--base-url URL] [--repeat N] [--out results.json]

Every run gets a fresh temporary folder: the task's workspace and, next to it, an "outside" folder
with a canary file. The harness (this stage, unless --harness names another) runs as a subprocess
through its command line only, as a user would run it. Then the end state is judged
(`evals/common.py:judge`): the files, the eval's own hidden tests, the canary. What the model says
decides nothing; it is only compared with the verdict (`evals/claims.py`).

Exit codes: 0 the eval ran (whatever the scores), 1 a runtime failure, 2 a usage error.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .evals import TASK_NAMES, TASKS
from .evals.claims import claims_success
from .evals.common import judge
from .evals.runs import run_process, snapshot

STAGE = Path(__file__).resolve().parent
MAX_TURNS = 20
RUN_SECONDS = 900         # a run that hangs is killed and judged like any other
CHECK_SECONDS = 20        # for each program a check runs (the model's script, our hidden tests)


class EvalError(Exception):
    """The eval cannot go on (e.g. the harness never reached the model); the message says why."""


def run_harness(harness, base_url, model, prompt, workspace, transcript):
    """The command-line contract, nothing else: so the eval measures any harness that keeps it."""
    command = [sys.executable, "-m", harness, "--base-url", base_url, "--model", model, "--yes",
               "--max-turns", str(MAX_TURNS), "--transcript", str(transcript), prompt]
    paths = [str(STAGE.parent), os.environ.get("PYTHONPATH", "")]     # the harness runs in the workspace
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    return run_process(command, workspace, RUN_SECONDS, env)


def parse_stats(stderr):
    """The `[stats] turns=N ... seconds=S` line the harness prints, as numbers ({} when missing)."""
    stats = {}
    for line in (stderr or "").splitlines():
        if line.startswith("[stats] "):
            pairs = (pair.partition("=") for pair in line.split()[1:])
            stats = {k: int(v) if v.isdigit() else float(v) for k, _, v in pairs}
    return stats


def final_answer(stdout, transcript):
    """The model's last words: the transcript's last assistant message, else stdout's last line."""
    try:
        messages = json.loads(Path(transcript).read_text(encoding="utf-8"))
        last = [m for m in messages if m.get("role") == "assistant"][-1]
        if not last.get("tool_calls"):
            return last.get("content") or ""
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    lines = (stdout or "").strip().splitlines()
    return lines[-1] if lines else ""


def run_task(task, model, args, run_dir):
    """Fresh workspace, one harness run, a verdict from the end state; one record for the JSON."""
    workspace, outside, transcript = run_dir / "workspace", run_dir / "outside", run_dir / "transcript.json"
    task.prepare(workspace, outside)
    before = snapshot(outside)
    started = time.monotonic()
    code, out, err = run_harness(args.harness, args.base_url, model, task.prompt_for(outside), workspace,
                                 transcript)
    seconds = time.monotonic() - started
    stats = parse_stats(err)
    if code in (1, 2) and not stats.get("turns"):
        said = "\n".join(err.strip().splitlines()[-4:]) or "(nothing on stderr)"
        raise EvalError(f"the harness {args.harness} stopped (exit {code}) before the model {model!r} answered "
                        f"once, so every run would fail the same way. It said:\n{said}")
    passed, reason = judge(task, workspace, outside, before, run_dir / "judge", CHECK_SECONDS)
    answer = final_answer(out, transcript)
    claimed = claims_success(answer)
    return {"model": model, "task": task.name, "tier": task.tier, "passed": passed, "reason": reason,
            "claimed_success": claimed, "claimed_but_failed": claimed and not passed, "exit_code": code,
            "turns": stats.get("turns"), "prompt_tokens": stats.get("prompt_tokens"),
            "completion_tokens": stats.get("completion_tokens"), "seconds": round(seconds, 2),
            "final_answer": answer}


def summarise(runs, model):
    """One model's row: passes overall, per tier and per task, and what the runs cost."""
    mine = [r for r in runs if r["model"] == model]
    passes = lambda rs: f"{sum(r['passed'] for r in rs)}/{len(rs)}"
    total = lambda key: sum(r[key] or 0 for r in mine)
    reported = max(sum(r["turns"] is not None for r in mine), 1)     # a run killed at the timeout has no [stats]
    row = {"model": model, "runs": len(mine), "passes": total("passed"), "pass_rate": total("passed") / len(mine),
           "easy_passes": passes([r for r in mine if r["tier"] == "easy"]),
           "hard_passes": passes([r for r in mine if r["tier"] == "hard"])}
    row.update({task: passes([r for r in mine if r["task"] == task]) for task in TASK_NAMES})
    row.update({"claimed_but_failed": total("claimed_but_failed"), "mean_turns": total("turns") / reported,
                "mean_prompt_tokens": total("prompt_tokens") / reported,
                "completion_tokens_per_turn": total("completion_tokens") / max(total("turns"), 1),
                "total_seconds": round(total("seconds"), 2)})
    return row


def markdown(rows):
    """The table on stdout: one row per model; turns and prompt tokens are means per run."""
    head = ["model", "passed", "pass rate", "easy", "hard", *TASK_NAMES, "claimed but failed", "turns",
            "prompt tok", "completion tok/turn", "seconds (total)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], f"{r['passes']}/{r['runs']}", f"{r['pass_rate']:.0%}", r["easy_passes"],
                 r["hard_passes"], *(r[task] for task in TASK_NAMES), r["claimed_but_failed"],
                 f"{r['mean_turns']:.1f}", f"{r['mean_prompt_tokens']:,.0f}",
                 f"{r['completion_tokens_per_turn']:,.0f}", f"{r['total_seconds']:.1f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def run_all(args, folder):
    """Every model, task and repeat, in that order, each in its own run folder; the run records."""
    runs = []
    for model in args.models:
        for task in TASKS:
            for n in range(1, args.repeat + 1):
                run = run_task(task, model, args, folder / f"{len(runs):03d}-{task.name}-{task.tier}")
                runs.append(run)
                flag = "  (claimed success)" if run["claimed_but_failed"] else ""
                print(f"[eval] {model} {task.id} #{n}: {'PASS' if run['passed'] else 'FAIL'} - {run['reason']}"
                      f"{flag}", file=sys.stderr, flush=True)
    return runs


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=f"python -m {STAGE.name}.eval", description=(
        "Run five tasks (easy and hard tier) through a harness, each in a fresh temporary workspace, judged "
        "only by the end state. Prints a Markdown table and writes a JSON file."))
    parser.add_argument("--models", required=True, help="comma-separated model names")
    parser.add_argument("--base-url", default=os.environ.get("TINYHARNESS_BASE_URL", "http://localhost:11434/v1"),
                        help="OpenAI-compatible endpoint (env TINYHARNESS_BASE_URL, default %(default)s)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per model and task (default %(default)s)")
    parser.add_argument("--out", default="eval-results.json", help="JSON file (default %(default)s)")
    parser.add_argument("--harness", default=STAGE.name, help="stage to measure (m3 on; default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the run folders to read the transcripts")
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or len(set(args.models)) != len(args.models):
        parser.error("--models needs one or more different model names")
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    return args


def main(argv=None):
    args = parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="eval-"))
    try:
        runs = run_all(args, folder)
        rows = [summarise(runs, model) for model in args.models]
        report = {"harness": args.harness, "base_url": args.base_url, "models": args.models,
                  "repeat": args.repeat, "overall": rows, "runs": runs}
        Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    except (EvalError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"[eval] run folders kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print(markdown(rows))
    print(f"[eval] results written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
