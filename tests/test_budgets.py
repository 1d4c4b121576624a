"""Counts and budgets below the loop (tinyharness/counts.py, tinyharness/guards.py).

Two runs' counts are added one way (Stats.add), so every total says the same; every budget is a line
in guards.LIMITS, and a subagent is given what is left of each. The three-edit rule is tried the way
a maintainer would meet it: in a copy of the package, a new budget is its flag, its settings field and
its line in LIMITS, and the parent's run and its subagent both keep to it."""
import json
import os
import shutil
import subprocess
import sys

from tests.ladder import FINAL, ROOT, calls, run_stage, stats_line, tool_call, tool_results
from tinyharness.testing import ScriptedServer

PACKAGE = ROOT / "tinyharness"
CHILD_TASK = "List the folder, again and again."


def family(child_script, parent_script):
    """One server for a parent and its subagent; the first user message tells them apart."""
    def policy(body, index):
        first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        own = child_script if first_user == CHILD_TASK else parent_script
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return own[min(turn, len(own) - 1)]
    return policy


def child_answer(server):
    """What the parent's model read as the task tool's result."""
    asked_after = [r for r in server.requests if r["messages"][1]["content"] != CHILD_TASK][-1]
    return [text for text in tool_results(asked_after).values() if "[subagent]" in text][-1]


LOOK = calls(tool_call("list_dir", path="."))
TASK = calls(tool_call("task", description=CHILD_TASK))


def test_a_subagents_counts_are_added_whole_so_json_says_what_the_stats_line_says(workspace):
    # the parent's server sends no counts for its own replies, the child's replies carry them
    parent = [{**TASK, "usage": False}, {"content": "Done.", "usage": False}]
    child = [LOOK, "Listed."]
    with ScriptedServer(policy=family(child, parent)) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, "--json", "--no-session",
                         "go")
    assert done.returncode == 0, done.stderr
    shown = stats_line(done.stderr)
    result = json.loads(done.stdout.splitlines()[-1])
    assert shown["turns"] == "4" and shown["prompt_tokens"] != "?"
    # the child's counts were sent by the server: its sum says so, as the [stats] line does
    assert result["usage"]["prompt_tokens"] == int(shown["prompt_tokens"]) > 0
    assert result["usage"]["completion_tokens"] == int(shown["completion_tokens"]) > 0


def test_a_subagent_is_given_what_is_left_of_every_budget():
    from tinyharness.counts import Stats
    from tinyharness.extensions import Extensions
    from tinyharness.guards import Budget
    from tinyharness.settings import RunSettings
    from tinyharness.subagents import Parent, child_settings
    own = Extensions(subagents=True, subagent_max_turns=12, subagent_max_seconds=300)
    settings = RunSettings(max_turns=5, max_seconds=100, max_tokens=1000, extensions=own)
    stats = Stats()
    stats.count_turn({"prompt_tokens": 300, "completion_tokens": 100})
    budget = Budget(settings, stats)
    budget.started -= 40                                # 40 of its 100 seconds are gone
    assert budget.exceeded(2) is None                   # the third model call is made
    child = child_settings(Parent(None, None, ".", stats, settings, budget))
    assert child.max_turns == 2 and child.max_tokens == 600 and 0 < child.max_seconds <= 60
    # the child's own caps, when they are less than what is left
    mean = Extensions(subagents=True, subagent_max_turns=1, subagent_max_seconds=5)
    budget = Budget(RunSettings(max_turns=5, max_seconds=100, extensions=mean), Stats())
    child = child_settings(Parent(None, None, ".", Stats(), budget.settings, budget))
    assert (child.max_turns, child.max_seconds, child.max_tokens) == (1, 5, None)
    # nothing left: the child stops before its first call
    spent = Stats()
    spent.count_turn({"prompt_tokens": 1200, "completion_tokens": 0})
    budget = Budget(settings, spent)
    child = child_settings(Parent(None, None, ".", spent, settings, budget))
    assert child.max_tokens == 0 and Budget(child, Stats()).exceeded(0) == (
        "the token budget of max_tokens 0 was used (0 tokens by the server's counts)")


def test_a_subagent_started_late_gets_only_the_parents_turns_that_are_left(workspace):
    parent = [LOOK, TASK, "Done."]
    child = [LOOK]
    with ScriptedServer(policy=family(child, parent)) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, "--no-session",
                         "--max-turns", "3", "--subagent-max-turns", "12", "go")
    assert done.returncode == 0, done.stderr
    # two of the parent's three calls were made when it started the child: one is left for it
    assert child_answer(server).startswith(
        "NOT confirmed complete: the helper agent was stopped (reached --max-turns 1)")
    assert sum(r["messages"][1]["content"] == CHILD_TASK for r in server.requests) == 1


# --- A new budget is three edits: its flag, its settings field, its line in guards.LIMITS ---------

FLAG = ('    parser.add_argument("--max-reply-tokens",',
        '    parser.add_argument("--max-tool-calls", type=int, metavar="N")\n'
        '    parser.add_argument("--max-reply-tokens",')
FIELD = ("    max_tokens: int | None = None\n",
         "    max_tokens: int | None = None\n    max_tool_calls: int | None = None\n")
LIMIT = ("\n]\n\n\nclass Budget:",
         '\n    Limit("max_tool_calls", lambda run: run.stats.tool_calls),\n]\n\n\nclass Budget:')
EDITS = (("flags.py", FLAG), ("settings.py", FIELD), ("guards.py", LIMIT))


def test_a_new_budget_is_three_edits_and_binds_the_run_and_its_subagent(tmp_path, workspace):
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "tinyharness", ignore=shutil.ignore_patterns("__pycache__"))
    for name, (old, new) in EDITS:
        path = copy / "tinyharness" / name
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, name
        path.write_text(text.replace(old, new), encoding="utf-8")
    parent = [LOOK, TASK, "Done."]
    env = {**os.environ, "PYTHONPATH": str(copy)}
    with ScriptedServer(policy=family([LOOK], parent)) as server:
        done = subprocess.run([sys.executable, "-m", "tinyharness", "run", "--base-url",
                               server.base_url, "--no-session", "--max-tool-calls", "3", "go"],
                              cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    # the parent had made one call of its three: the child was given two, and stopped there
    assert ("    -> NOT confirmed complete: the helper agent was stopped (reached --max-tool-calls 2)."
            in done.stdout.splitlines()), done.stdout
    assert "  | subagent stopped: [subagent] turns=2 tool_calls=2 files written: none" in done.stdout
    # and the parent, its child's calls counted in its own, stops before its next model call
    assert "Stopped: reached --max-tool-calls 3. The task is NOT confirmed complete." in done.stdout
    asked = [r["messages"][1]["content"] == CHILD_TASK for r in server.requests]
    assert (asked.count(False), asked.count(True)) == (2, 2)
