"""Helpers for the ladder tests: which stages exist, and how to run a stage's CLI for real.

A behaviour introduced at stage K is tested on K, on every later stage and on `tinyharness run`:
parametrise a test with `stages_from("m2")` and it grows as stages are added.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = sorted(p.name for p in ROOT.glob("m[0-9]_*") if (p / "__main__.py").is_file())
FINAL = "tinyharness"
FINAL_LEVEL = 8  # the highest stage whose lesson tinyharness/ has merged; raise it with each merge
STAGE_DIR_ENV = "TINYHARNESS_STAGE_DIR"  # a learner's copy of one stage (`tinyharness course check --mine`)


def level(stage):
    """The stage number (m3_hooks -> 3); the final package counts as the highest stage it merged."""
    return FINAL_LEVEL if stage == FINAL else int(stage[1:].split("_")[0])


def stages_from(first, final=True):
    """Stage folder names from `first` (e.g. "m1") on, plus the final package."""
    chosen = [s for s in STAGES if level(s) >= int(first[1:].split("_")[0])]
    return chosen + ([FINAL] if final else [])


def command(stage, *args):
    """The argv that runs one stage (or `tinyharness run`) with the contract's flags."""
    if stage == FINAL:
        return [sys.executable, "-m", "tinyharness", "run", *args]
    return [sys.executable, "-m", stage, *args]


def import_roots(stage):
    """The folders a stage's subprocess imports from: the repository, after a learner's copy of this
    stage when TINYHARNESS_STAGE_DIR names one (a folder called like the stage)."""
    mine = os.environ.get(STAGE_DIR_ENV)
    if mine and Path(mine).name == stage:
        return [str(Path(mine).resolve().parent), str(ROOT)]
    return [str(ROOT)]


def run_stage(stage, workspace, *args, stdin="", timeout=60, env=None, approve=False):
    """Run a stage's CLI in `workspace` (its cwd); return the CompletedProcess (text mode).

    approve=True adds --yes on stages that ask permission (m3 on), so a test of an earlier
    lesson can run unchanged on the later stages.
    """
    if approve and level(stage) >= 3:
        args = ("--yes", *args)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    full_env["PYTHONPATH"] = os.pathsep.join(import_roots(stage)) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env["PYTHONIOENCODING"] = "utf-8"
    full_env["XDG_DATA_HOME"] = str(Path(workspace).parent / "data")  # sessions go to the test's folder, not home
    full_env.update(env or {})
    return subprocess.run(command(stage, *args), cwd=workspace, input=stdin, capture_output=True,
                          text=True, encoding="utf-8", errors="replace", timeout=timeout, env=full_env)


def tool_call(name, **arguments):
    """One scripted tool call, in the scripted server's reply format."""
    return {"name": name, "arguments": arguments}


def calls(*tool_calls):
    """A scripted reply that asks for these tool calls."""
    return {"tool_calls": list(tool_calls)}


def tool_results(request):
    """The tool messages of a recorded request, as {tool_call_id: content}."""
    return {m.get("tool_call_id"): m.get("content") for m in request["messages"] if m.get("role") == "tool"}


def stats_line(stderr):
    """Parse the `[stats] key=value ...` line into a dict of strings."""
    for line in stderr.splitlines():
        if line.startswith("[stats] "):
            return dict(pair.split("=", 1) for pair in line[len("[stats] "):].split())
    raise AssertionError(f"no [stats] line in stderr:\n{stderr}")


def load_json(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))
