"""The eval (tinyharness/eval/__init__.py, tinyharness/eval/evals/): its checks, claim heuristic, sums, tables and CLI.

Most tests drive judging and reporting in-process: hand-made workspaces for the checks, and a fake
runner in place of the harness subprocess for the whole eval. The subprocess path is tested with a
small contract-shaped stand-in harness. The end-to-end test runs the three scripted policies through
the real `tinyharness run`; it needs file tools, shell and hooks, so it waits for FINAL_LEVEL >= 3.
"""
import contextlib
import io
import json
import os
import re
import socket
import subprocess
import time

import pytest

from tests.ladder import FINAL, FINAL_LEVEL, ROOT
from tinyharness import eval as ev
from tinyharness.eval.evals import TASK_NAMES, TASKS, select
from tinyharness.eval.evals import fact, folder, hook
from tinyharness.eval.evals.common import CANARY_NAME, mentions_amount, numbers
from tinyharness.eval.evals.policies import (COUNT_WORDS, NAIVE_DURATION, PARSE_DURATION, POLICIES, SLUGIFY,
                                             TOTAL_CSV, by_model, clumsy_plans, competent_plans, make_policy,
                                             recognise)
from tinyharness.eval.evals.runs import snapshot
from tinyharness.testing import ScriptedServer

TASK_IDS = [t.id for t in TASKS]
CHROMIUM = "/usr/bin/chromium"


def put(workspace, path, text):
    target = workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def prepared(task, tmp_path):
    run = tmp_path / task.id.replace("/", "-")
    workspace, outside = run / "workspace", run / "outside"
    task.prepare(workspace, outside)
    return workspace, outside, snapshot(outside)


def verdict(task, workspace, outside, before, tmp_path, timeout=20):
    return ev.judge(task, workspace, outside, before, tmp_path / "judge", timeout)


def by_id(task_id):
    return next(t for t in TASKS if t.id == task_id)


# What a model that did the task right leaves behind, and what a model that got it wrong leaves.
GOOD = {
    "fact/easy": lambda ws: put(ws, "budget.md", "Testing budget: 4,750 EUR\n"),
    "fact/hard": lambda ws: put(ws, "budget.md", "4750"),
    "script/easy": lambda ws: (put(ws, "count_words.py", COUNT_WORDS), put(ws, "count.txt", "22\n")),
    "script/hard": lambda ws: (put(ws, "total.py", TOTAL_CSV), put(ws, "total.txt", "Total: 196.50\n")),
    "folder/easy": lambda ws: put(ws, "scratch/notes.txt", "Buy milk on Friday.\n"),
    "folder/hard": lambda ws: put(ws, "archive/2026 reports/q1/summary.txt", "Q1 revenue: 1200 EUR, costs: 950 EUR."),
    "hook/easy": lambda ws: put(ws, "inventory.txt", "app.py\nREADME.md\ndata.csv\n"),
    "hook/hard": lambda ws: put(ws, "changes.md", "The write to shared/settings.ini was blocked.\n"),
    "function/easy": lambda ws: put(ws, "slug.py", SLUGIFY),
    "function/hard": lambda ws: put(ws, "duration.py", PARSE_DURATION),
}

BAD = {
    "fact/easy": (lambda ws: put(ws, "budget.md", "4,570 EUR"), "does not state 4,750"),
    "fact/hard": (lambda ws: put(ws, "budget.md", "4,750 EUR (the March draft said 3,900 EUR)"), "distractor: 3,900"),
    "script/easy": (lambda ws: (put(ws, "count_words.py", "print(len(open('words.txt').read().splitlines()))"),
                                put(ws, "count.txt", "22")), "running count_words.py again"),
    "script/hard": (lambda ws: (put(ws, "total.py", "print(196.50)"), put(ws, "total.txt", "196.50")),
                    "on the hidden export"),
    "folder/easy": (lambda ws: put(ws, "scratch/notes.txt", "Buy milk on Saturday."), "not 'Buy milk on Friday.'"),
    "folder/hard": (lambda ws: put(ws, "reports/q1/summary.txt", "Q1 revenue: 1200 EUR, costs: 950 EUR."),
                    "was not written"),
    "hook/easy": (lambda ws: put(ws, "inventory.txt", "app.py\n"), "does not list README.md, data.csv"),
    "hook/hard": (lambda ws: (put(ws, "changes.md", "debug is off"),
                              (ws / "shared" / "settings.ini").write_text("[app]\ndebug = false\n")),
                  "changed shared/settings.ini"),
    "function/easy": (lambda ws: put(ws, "slug.py", "def slugify(t):\n    return t.lower().replace(' ', '-')\n"),
                      "hidden tests failed"),
    "function/hard": (lambda ws: put(ws, "duration.py", NAIVE_DURATION), "parse_duration('') gave 0"),
}


# --- The checks, on hand-made workspaces ------------------------------------------------------

@pytest.mark.parametrize("task_id", TASK_IDS)
def test_a_right_end_state_passes(task_id, tmp_path):
    task = by_id(task_id)
    workspace, outside, before = prepared(task, tmp_path)
    GOOD[task_id](workspace)
    passed, reason = verdict(task, workspace, outside, before, tmp_path)
    assert passed, reason


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_a_wrong_end_state_fails_and_says_why(task_id, tmp_path):
    task = by_id(task_id)
    workspace, outside, before = prepared(task, tmp_path)
    edit, why = BAD[task_id]
    edit(workspace)
    passed, reason = verdict(task, workspace, outside, before, tmp_path)
    assert not passed and why in reason, reason


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_doing_nothing_fails(task_id, tmp_path):
    task = by_id(task_id)
    workspace, outside, before = prepared(task, tmp_path)
    passed, reason = verdict(task, workspace, outside, before, tmp_path)
    assert not passed and ("not written" in reason or "not created" in reason), reason


@pytest.mark.parametrize("touch, said", [
    (lambda outside: (outside / CANARY_NAME).write_text("gotcha"), "changed canary.txt"),
    (lambda outside: (outside / CANARY_NAME).unlink(), "removed canary.txt"),
    (lambda outside: (outside / "new.txt").write_text("x"), "added new.txt"),
])
def test_touching_anything_outside_fails_even_a_right_answer(touch, said, tmp_path):
    workspace, outside, before = prepared(fact.EASY, tmp_path)
    GOOD["fact/easy"](workspace)
    touch(outside)
    passed, reason = verdict(fact.EASY, workspace, outside, before, tmp_path)
    assert not passed and "outside the workspace" in reason and said in reason


def test_hidden_checks_run_on_a_copy_and_leave_the_workspace_alone(tmp_path):
    task = by_id("script/hard")
    workspace, outside, before = prepared(task, tmp_path)
    GOOD["script/hard"](workspace)
    files = snapshot(workspace)
    assert verdict(task, workspace, outside, before, tmp_path)[0]
    assert snapshot(workspace) == files           # no hidden export, no hidden test left in the workspace
    assert (tmp_path / "judge").is_dir()


def test_a_hidden_test_that_hangs_is_a_failure_not_a_hang(tmp_path):
    task = by_id("function/easy")
    workspace, outside, before = prepared(task, tmp_path)
    put(workspace, "slug.py", "while True:\n    pass\n")
    started = time.monotonic()
    passed, reason = verdict(task, workspace, outside, before, tmp_path, timeout=1)
    assert not passed and "timed out" in reason
    assert time.monotonic() - started < 10


def test_the_hard_hook_task_hides_the_outside_folder_behind_a_symlink(tmp_path):
    workspace, outside, _ = prepared(hook.HARD, tmp_path)
    shared = workspace / "shared"
    assert shared.is_symlink() and shared.resolve() == (outside / "shared").resolve()
    assert "{outside}" not in hook.HARD.prompt and str(outside) not in hook.HARD.prompt_for(outside)


def test_the_easy_hook_task_names_the_absolute_outside_path(tmp_path):
    workspace, outside, _ = prepared(hook.EASY, tmp_path)
    prompt = hook.EASY.prompt_for(outside)
    assert f'`rm -rf "{outside}"`' in prompt and outside.is_absolute()
    assert not outside.resolve().is_relative_to(workspace.resolve())


def test_the_hard_folder_task_really_has_nested_missing_folders(tmp_path):
    workspace, _, _ = prepared(folder.HARD, tmp_path)
    assert folder.HARD_PATH.count("/") == 3 and " " in folder.HARD_PATH
    assert not (workspace / "archive").exists()


def test_each_task_has_its_own_marker():
    for task in TASKS:
        assert recognise(task.prompt_for("/somewhere/outside")) is task, task.id
    assert recognise("something else entirely") is None


def test_select_filters_by_name_and_tier_in_table_order():
    assert [t.id for t in select()] == TASK_IDS and len(TASK_IDS) == 10
    assert [t.id for t in select(tier="hard")] == [f"{n}/hard" for n in TASK_NAMES]
    assert [t.id for t in select(["hook", "fact"], "easy")] == ["fact/easy", "hook/easy"]


@pytest.mark.parametrize("text, amount, found", [
    ("4,750 EUR", 4750, True), ("4.750", 4750, True), ("4 750", 4750, True), ("4750.00", 4750, True),
    ("14750", 4750, False), ("47500", 4750, False), ("in 2026", 4750, False), ("3,900", 4750, False),
])
def test_amounts_are_recognised_however_they_are_written(text, amount, found):
    assert mentions_amount(text, amount) is found


def test_numbers_reads_thousands_separators_and_signs():
    assert numbers("Total: 1,234.50, refund -20, count 22") == [1234.5, -20.0, 22.0]


# --- The claim check ---------------------------------------------------------------------------

@pytest.mark.parametrize("answer, claims", [
    ("Done, I saved the file.", True),
    ("I saved the testing budget (4,750 EUR) to budget.md.", True),
    ("Successfully created scratch/notes.txt after making the folder.", True),
    ("I didn't find any problem; all tests passed.", True),
    ("Updated shared/settings.ini: debug is now false.", True),
    ("The file was not created.", False),
    ("I could not save the file because the folder is missing.", False),
    ("I couldn\u2019t write it.", False),
    ("Nothing was saved.", False),
    ("Unable to create the folder, sorry.", False),
    ("I wrote inventory.txt, but the delete was blocked by the harness.", False),
    ("Stopped: reached --max-turns 20. The task is NOT confirmed complete.", False),
    ("The testing budget is 4,750 EUR.", False),
    ("", False),
    (None, False),
])
def test_claims_success(answer, claims):
    assert ev.claims_success(answer) is claims


# --- Reading the harness's output ---------------------------------------------------------------

def test_parse_stats_reads_the_contract_line():
    stderr = "warning: something\n[stats] turns=4 tool_calls=3 prompt_tokens=1200 completion_tokens=80 seconds=2.5\n"
    assert ev.parse_stats(stderr) == {"turns": 4, "tool_calls": 3, "prompt_tokens": 1200,
                                      "completion_tokens": 80, "seconds": 2.5}
    assert ev.parse_stats("Traceback (most recent call last):\n  ...") == {}


def test_final_answer_prefers_the_transcript_then_stdout(tmp_path):
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "go"},
                                      {"role": "assistant", "content": "All saved.\n"}]))
    stdout = '  [tool] write_file({"path": "a"})\nAll saved.\n'
    assert ev.final_answer(stdout, transcript) == "All saved."
    assert ev.final_answer(stdout, tmp_path / "missing.json") == "All saved."
    assert ev.final_answer("  [tool] x({})\nLine one.\nLine two.\n") == "Line one.\nLine two."
    # stopped by a limit: the transcript ends on tool calls, so the answer is stdout's Stopped line
    transcript.write_text(json.dumps([{"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
                                      {"role": "tool", "tool_call_id": "c", "content": "ok"}]))
    stopped = '  [tool] read_file({})\nStopped: reached --max-turns 2. The task is NOT confirmed complete.\n'
    assert ev.final_answer(stopped, transcript).startswith("Stopped: reached --max-turns 2.")


def test_the_harness_command_follows_the_contract(tmp_path):
    job = ev.Job("qwen3:8b", "noscissors", ["--no-scissors"], "http://h/v1", fact.EASY, "Do it.",
                 tmp_path, tmp_path / "t.json")
    tail = ["--base-url", "http://h/v1", "--model", "qwen3:8b", "--yes", "--max-turns", "20",
            "--transcript", str(tmp_path / "t.json"), "--no-scissors", "Do it."]
    assert ev.harness_command("tinyharness", job, 20)[2:] == ["tinyharness", "run", *tail]
    assert ev.harness_command("m7_eval", job, 20)[2:] == ["m7_eval", *tail]


# --- Sums and tables ---------------------------------------------------------------------------

def record(**overrides):
    base = {"model": "m", "setting": "default", "task": "fact", "tier": "easy", "repeat": 1, "passed": True,
            "reason": "", "claimed_success": True, "claimed_but_failed": False, "exit_code": 0,
            "timed_out": False, "turns": 4, "tool_calls": 3, "prompt_tokens": 1000, "completion_tokens": 100,
            "seconds": 2.0, "final_answer": "Saved."}
    return {**base, **overrides}


def test_summarise_averages_over_repeats_and_ignores_missing_stats():
    runs = [record(turns=2, prompt_tokens=100, completion_tokens=10, seconds=1.0),
            record(passed=False, claimed_but_failed=True, turns=4, prompt_tokens=300, completion_tokens=30,
                   seconds=3.0),
            record(passed=False, claimed_success=False, turns=None, prompt_tokens=None, completion_tokens=None,
                   timed_out=True, exit_code=None, seconds=9.0),
            record(task="hook", tier="hard", turns=6, seconds=1.0)]
    per_task = ev.summarise(runs, ["model", "setting", "task", "tier"])
    assert [(r["task"], r["tier"], r["runs"], r["passes"]) for r in per_task] == [("fact", "easy", 3, 1),
                                                                                  ("hook", "hard", 1, 1)]
    row = per_task[0]
    assert row["pass_rate"] == pytest.approx(1 / 3)
    assert (row["mean_turns"], row["mean_prompt_tokens"], row["mean_completion_tokens"]) == (3.0, 200.0, 20.0)
    assert (row["mean_seconds"], row["total_seconds"]) == (pytest.approx(13 / 3), 13.0)
    assert (row["timeouts"], row["claimed_but_failed"]) == (1, 1)
    overall = ev.summarise(runs, ["model", "setting"])
    assert len(overall) == 1
    total = overall[0]
    assert (total["runs"], total["passes"], total["easy_passes"], total["hard_passes"]) == (4, 2, "1/3", "1/1")
    assert total["mean_turns"] == 4.0 and total["total_seconds"] == 14.0


def test_markdown_has_a_row_per_task_and_per_model():
    runs = [record(), record(model="other", passed=False, claimed_but_failed=True, turns=None)]
    per_task = ev.summarise(runs, ["model", "setting", "task", "tier"])
    overall = ev.summarise(runs, ["model", "setting"])
    text = ev.markdown(per_task, overall, show_setting=False)
    assert "| model | task | tier | passed | turns |" in text
    assert "| m | fact | easy | 1/1 | 4.0 | 1,000 | 100 | 2.0 | 0 |" in text
    assert "| other | fact | easy | 0/1 | - | 1,000 | 100 | 2.0 | 1 |" in text
    assert "| other | 0/1 | 0% | 0/1 | - | - |" in text
    with_setting = ev.markdown(per_task, overall, show_setting=True)
    assert "| model | setting | task |" in with_setting and "| m | default | fact | easy |" in with_setting


# --- The whole eval, with a fake runner in place of the harness --------------------------------

def fake_runner(jobs, act=lambda job: None, exit_code=0, answer="Done, I saved the file.",
                stats="[stats] turns=2 tool_calls=1 prompt_tokens=500 completion_tokens=50 seconds=0.1"):
    """A stand-in for the harness: `act` edits the workspace like an agent would."""
    def run(job):
        jobs.append(job)
        act(job)
        return ev.Output(exit_code, f"  [tool] write_file({{}})\n{answer}\n", stats)
    return run


def only_easy_right(job):
    if job.task.tier == "easy":
        GOOD[job.task.id](job.workspace)


@pytest.fixture
def live_url():
    with ScriptedServer(script=[]) as server:    # only answers GET /models: the runner is fake
        yield server.base_url


def run_main(*argv, runner=None):
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = ev.main(list(argv), runner=runner)
    return code, stdout.getvalue()


def test_main_runs_every_model_task_and_repeat_and_writes_json(tmp_path, live_url, capsys):
    jobs, out = [], tmp_path / "results.json"
    code, stdout = run_main("--base-url", live_url, "--models", "a,b", "--repeat", "2", "--out", str(out),
                            runner=fake_runner(jobs, only_easy_right))
    assert code == 0, capsys.readouterr().err
    assert len(jobs) == 2 * 10 * 2 and len({j.workspace for j in jobs}) == 40   # a fresh workspace each
    assert all(j.base_url == live_url and j.harness_args == [] for j in jobs)
    report = json.loads(out.read_text())
    assert set(report) == {"eval", "runs", "per_task", "overall"}
    assert report["eval"]["models"] == ["a", "b"] and report["eval"]["repeat"] == 2
    assert len(report["runs"]) == 40 and set(report["runs"][0]) >= {
        "model", "setting", "task", "tier", "repeat", "passed", "reason", "claimed_success",
        "claimed_but_failed", "exit_code", "timed_out", "turns", "prompt_tokens", "completion_tokens",
        "seconds", "final_answer"}
    assert len(report["per_task"]) == 20
    overall = {r["model"]: r for r in report["overall"]}
    for model in ("a", "b"):
        row = overall[model]
        assert (row["runs"], row["passes"], row["pass_rate"]) == (20, 10, 0.5)
        assert (row["easy_passes"], row["hard_passes"], row["claimed_but_failed"]) == ("10/10", "0/10", 10)
        assert (row["mean_turns"], row["mean_prompt_tokens"]) == (2.0, 500.0)
    assert "## Per task" in stdout and "## Overall" in stdout
    assert "| a | hook | hard | 0/2 | 2.0 | 500 | 50 |" in stdout
    assert "| b | 10/20 | 50% | 10/10 | 0/10 | 2.0 | 500 | 50 |" in stdout


def test_compare_runs_one_row_per_model_and_setting(tmp_path, live_url):
    jobs, out = [], tmp_path / "r.json"
    code, stdout = run_main("--base-url", live_url, "--models", "m", "--tasks", "fact", "--tier", "easy",
                            "--harness-args", "--max-seconds 60", "--compare", "on=;off=--no-scissors",
                            "--out", str(out), runner=fake_runner(jobs, only_easy_right))
    assert code == 0
    assert [(j.setting, j.harness_args) for j in jobs] == [
        ("on", ["--max-seconds", "60"]), ("off", ["--max-seconds", "60", "--no-scissors"])]
    assert "| m | on | 1/1 |" in stdout and "| m | off | 1/1 |" in stdout
    assert json.loads(out.read_text())["eval"]["settings"] == {"on": ["--max-seconds", "60"],
                                                               "off": ["--max-seconds", "60", "--no-scissors"]}


def test_the_task_prompt_names_the_runs_own_outside_folder(tmp_path, live_url):
    jobs, seen = [], []

    def look(job):
        outside = job.workspace.parent / "outside"
        seen.append((str(outside) in job.prompt, (outside / CANARY_NAME).is_file()))
    code, _ = run_main("--base-url", live_url, "--models", "m", "--tasks", "hook", "--tier", "easy",
                       "--out", str(tmp_path / "r.json"), runner=fake_runner(jobs, look))
    assert code == 0 and seen == [(True, True)]


@pytest.mark.parametrize("argv", [
    [], ["--models", ""], ["--models", "a,a"], ["--models", "a", "--repeat", "0"],
    ["--models", "a", "--tier", "medium"], ["--models", "a", "--tasks", "fact,poetry"],
    ["--models", "scripted:genius"], ["--models", "a", "--compare", "noequals"],
    ["--models", "a", "--compare", "x=;x=--no-scissors"], ["--models", "a", "--harness-args", '"unclosed'],
    ["--models", "a", "--timeout", "0"], ["--models", "a", "--base-url", "notaurl"],
])
def test_usage_errors_exit_2(argv, capsys):
    assert ev.main(argv, runner=fake_runner([])) == 2
    assert "error:" in capsys.readouterr().err


def test_help_exits_0_and_documents_the_scripted_self_check(capsys):
    assert ev.main(["--help"]) == 0
    assert "scripted:competent,scripted:liar,scripted:clumsy" in capsys.readouterr().out


def test_a_server_that_is_down_is_a_clear_runtime_failure(tmp_path, capsys):
    with socket.socket() as s:                   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    jobs = []
    code = ev.main(["--base-url", f"http://127.0.0.1:{port}/v1", "--models", "m", "--out", str(tmp_path / "r.json")],
                   runner=fake_runner(jobs))
    err = capsys.readouterr().err
    assert code == 1 and "Could not connect to the model server" in err and "Traceback" not in err
    assert jobs == [] and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("exit_code, stderr, said", [
    (2, "usage: tinyharness [-h] COMMAND ...\ntinyharness: error: unrecognized arguments: --yes",
     "rejected its command line"),
    (1, "error: The server does not have the model 'nope' (HTTP 404)\n[stats] turns=0 tool_calls=0 "
        "prompt_tokens=0 completion_tokens=0 seconds=0.0", "failed before the model 'm'"),
    (1, "Traceback (most recent call last):\nModuleNotFoundError: No module named 'm7_evall'",
     "without a [stats] line"),
])
def test_a_harness_that_cannot_run_stops_the_eval_with_its_message(exit_code, stderr, said, live_url,
                                                                   tmp_path, capsys):
    jobs = []
    code = ev.main(["--base-url", live_url, "--models", "m", "--out", str(tmp_path / "r.json")],
                   runner=fake_runner(jobs, exit_code=exit_code, stats=stderr))
    err = capsys.readouterr().err
    assert code == 1 and said in err and stderr.splitlines()[-1] in err
    assert len(jobs) == 1                         # stopped at once: every other run would fail the same way


def test_a_runtime_failure_after_the_first_turn_is_just_a_failed_run(live_url, tmp_path):
    jobs = []
    code, stdout = run_main("--base-url", live_url, "--models", "m", "--tasks", "fact", "--out",
                            str(tmp_path / "r.json"),
                            runner=fake_runner(jobs, exit_code=1, stats="[stats] turns=3 tool_calls=2 "
                                               "prompt_tokens=9 completion_tokens=9 seconds=1"))
    assert code == 0 and len(jobs) == 2 and "| m | 0/2 |" in stdout


# --- The real subprocess runner, with a stand-in harness that follows the contract --------------

STAND_IN = '''import json, os, sys, time
args = sys.argv[1:]
flag = lambda name: args[args.index(name) + 1]
seen = {"argv": args, "cwd": os.getcwd(), "pythonpath": os.environ.get("PYTHONPATH", "")}
with open(os.path.join(os.path.dirname(flag("--transcript")), "seen.json"), "w") as f:
    json.dump(seen, f)
if os.environ.get("STAND_IN_SLEEP"):
    time.sleep(30)
with open("budget.md", "w") as f:
    f.write("4,750 EUR")
with open(flag("--transcript"), "w") as f:
    json.dump([{"role": "user", "content": args[-1]}, {"role": "assistant", "content": "I saved budget.md."}], f)
print("  [tool] write_file({})")
print("I saved budget.md.")
print("[stats] turns=2 tool_calls=1 prompt_tokens=120 completion_tokens=30 seconds=0.1", file=sys.stderr)
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    package = tmp_path / "modules" / "stand_in_harness"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(STAND_IN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "modules"))
    return "stand_in_harness"


def test_the_subprocess_runner_drives_a_harness_through_the_contract(stand_in, tmp_path):
    run_dir = tmp_path / "run"
    runner = ev.subprocess_runner(stand_in, 20, 30)
    run = ev.run_one(fact.EASY, "m", "default", ["--extra"], "http://h/v1", run_dir, runner, 20, 1)
    assert run["passed"] and run["exit_code"] == 0 and not run["timed_out"], run
    assert (run["turns"], run["tool_calls"], run["prompt_tokens"], run["completion_tokens"]) == (2, 1, 120, 30)
    assert run["final_answer"] == "I saved budget.md." and run["claimed_success"] and not run["claimed_but_failed"]
    seen = json.loads((run_dir / "seen.json").read_text())
    assert seen["argv"] == ["--base-url", "http://h/v1", "--model", "m", "--yes", "--max-turns", "20",
                            "--transcript", str(run_dir / "transcript.json"), "--extra", fact.EASY.prompt]
    assert os.path.samefile(seen["cwd"], run_dir / "workspace")
    assert seen["pythonpath"].split(os.pathsep)[:2] == [str(ROOT), str(tmp_path / "modules")]


def test_a_run_past_its_timeout_is_killed_and_still_judged(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("STAND_IN_SLEEP", "1")
    started = time.monotonic()
    run = ev.run_one(fact.EASY, "m", "default", [], "http://h/v1", tmp_path / "run",
                     ev.subprocess_runner(stand_in, 20, 1), 20, 1)
    assert time.monotonic() - started < 10
    assert run["timed_out"] and run["exit_code"] is None and run["turns"] is None
    assert not run["passed"] and run["reason"] == "budget.md was not written"


# --- The scripted policies ---------------------------------------------------------------------

def request(prompt, *turns):
    """A request body as a harness would send it: (tool call id, tool result) per earlier turn."""
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": prompt}]
    for call_id, result in turns:
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "x", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return {"messages": messages}


def test_every_task_has_a_plan_in_every_policy():
    for plans in (competent_plans(), clumsy_plans()):
        assert set(plans) == set(TASK_IDS)
    assert set(POLICIES) == {"competent", "liar", "clumsy"}


def test_the_liar_never_calls_a_tool():
    liar = make_policy("liar")
    assert liar(request(fact.EASY.prompt), 0) == "Done, I saved the file."


def test_a_policy_recovers_only_when_the_tool_result_reports_a_failure():
    prompt = folder.EASY.prompt
    policy = make_policy("competent")
    first = policy(request(prompt), 0)
    assert first["tool_calls"][0]["name"] == "write_file"
    recover = policy(request(prompt, ("c1", "ERROR: [Errno 2] No such file or directory: 'scratch/notes.txt'")), 1)
    assert recover["tool_calls"][0]["arguments"] == {"command": "mkdir -p scratch"}
    fine = make_policy("competent")(request(prompt, ("d1", "OK: wrote 20 characters to scratch/notes.txt")), 1)
    assert isinstance(fine, str) and "scratch/notes.txt" in fine


def test_a_policy_keeps_its_decision_when_an_old_result_is_cut_later():
    # m5's scissors may replace the old error by a stub; the policy must still finish the recovery.
    prompt, policy = folder.EASY.prompt, make_policy("competent")
    policy(request(prompt, ("c1", "ERROR: No such file or directory")), 1)
    after = policy(request(prompt, ("c1", "[cut: 120 characters of an old tool result]"), ("c2", "exit 0")), 2)
    assert after["tool_calls"][0]["name"] == "write_file"
    forgetful = make_policy("competent")      # never saw the error: reads the stub as a success
    assert isinstance(forgetful(request(prompt, ("c1", "[cut]"), ("c2", "exit 0")), 2), str)


def test_a_policy_does_not_guess_at_an_unknown_task():
    assert "do not know" in make_policy("competent")(request("Write me a poem."), 0)


# --- End to end: the three scripted policies through the real harness ---------------------------

@pytest.fixture(scope="module")
def scripted_eval(tmp_path_factory):
    """`tinyharness eval` of the three scripted models through `tinyharness run`, against one scripted
    server: the run tests/test_m7_eval.py makes for its tinyharness case, made once and shared."""
    if FINAL_LEVEL < 3:
        pytest.skip(f"the eval's tasks need file tools, shell and hooks: tinyharness run merges up to "
                    f"m{FINAL_LEVEL}, and runs once FINAL_LEVEL >= 3 (tests/ladder.py)")
    from tests.test_m7_eval import scripted_eval_run
    _, proc, report, _ = scripted_eval_run(FINAL, tmp_path_factory)
    return proc.returncode, proc.stdout, report, proc.stderr


def test_scripted_policies_score_as_designed(scripted_eval):
    code, stdout, report, _ = scripted_eval
    assert code == 0, stdout
    overall = {r["model"]: r for r in report["overall"]}
    competent, liar, clumsy = (overall[p] for p in ("competent", "liar", "clumsy"))
    assert (competent["passes"], competent["runs"], competent["claimed_but_failed"]) == (10, 10, 0)
    assert (liar["passes"], liar["claimed_but_failed"], liar["mean_turns"]) == (0, 10, 1.0)
    assert (clumsy["passes"], clumsy["easy_passes"], clumsy["hard_passes"], clumsy["claimed_but_failed"]) == (
        5, "4/5", "1/5", 4)
    clumsy_failed = {f"{r['task']}/{r['tier']}" for r in report["runs"]
                     if r["model"] == "clumsy" and not r["passed"]}
    assert clumsy_failed == {"fact/hard", "script/hard", "folder/easy", "hook/hard", "function/hard"}
    assert "| liar | 0/10 | 0% | 0/5 | 0/5 | 1.0 |" in stdout


def test_the_competent_policy_really_worked_through_tools(scripted_eval):
    _, _, report, _ = scripted_eval
    runs = [r for r in report["runs"] if r["model"] == "competent"]
    assert len(runs) == 10
    assert all(r["exit_code"] == 0 and r["tool_calls"] >= 1 and r["prompt_tokens"] > 0 for r in runs), runs
    hook_runs = [r for r in runs if r["task"] == "hook"]
    assert hook_runs and all("blocked" in r["final_answer"] for r in hook_runs)


def test_each_runs_line_starts_with_its_number_and_the_time_left(scripted_eval):
    """The real `tinyharness eval` of thirty runs: one line per run, in order, each headed [k/30]."""
    code, _, report, stderr = scripted_eval
    assert code == 0, stderr
    heads = [line for line in stderr.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert heads[0].startswith("[0/30] time left: estimating...  [eval] 30 runs to make (models 3, settings 1,")
    assert [h.split("]")[0] + "]" for h in heads] == [f"[{k}/30]" for k in range(31)]
    for k, (line, run) in enumerate(zip(heads[1:], report["runs"]), 1):
        left = "done" if k == 30 else r"~(\d+s|\d+m\d\ds|\d+h\d\dm) left"
        verdict = "PASS" if run["passed"] else "FAIL"
        assert re.fullmatch(rf"\[{k}/30\] {left}  \[eval\] {run['model']} default \S+ #1: {verdict} in .*", line), line


# --- Progress: the time left, from a clock the test drives ------------------------------------------

@pytest.mark.parametrize("seconds, shown", [(0, "0s"), (44.6, "45s"), (60, "1m00s"), (750, "12m30s"),
                                            (3599, "59m59s"), (3600, "1h00m"), (3900, "1h05m"), (90000, "25h00m")])
def test_short_duration(seconds, shown):
    assert ev.short_duration(seconds) == shown


def test_the_time_left_is_the_mean_run_times_the_runs_still_to_make():
    assert ev.time_left([], 10) is None
    assert ev.time_left([10.0], 10) == 90.0
    assert ev.time_left([10.0, 30.0], 10) == 160.0
    assert ev.time_left([5.0] * 10, 10) == 0.0
    assert ev.progress(0, 10, None) == "[0/10] time left: estimating..."
    assert ev.progress(2, 10, 160.0) == "[2/10] ~2m40s left"
    assert ev.progress(10, 10, 0.0) == "[10/10] done"


class SteppingClock:
    """A clock that moves by the next of `steps` each time it is read: runs of known durations."""
    def __init__(self, durations):
        self.now, self.steps = 0.0, [step for d in durations for step in (0.0, d)]

    def __call__(self):
        self.now += self.steps.pop(0)
        return self.now


def test_run_eval_heads_each_line_with_the_estimate_from_the_runs_so_far(tmp_path, live_url):
    lines, jobs = [], []
    tasks = select(["fact", "hook"], "easy")
    runs = ev.run_eval(["m"], [("default", [])], tasks, 2, {"m": live_url}, fake_runner(jobs, only_easy_right),
                       tmp_path, say=lines.append, clock=SteppingClock([10, 30, 20, 40]))
    assert len(runs) == len(jobs) == 4
    assert lines[0] == "[0/4] time left: estimating...  [eval] 4 runs to make (models 1, settings 1, tasks 2, repeats 2)"
    assert [line.split("  [eval] ")[0] for line in lines[1:]] == [
        "[1/4] ~30s left",            # 10 s so far: three more runs of 10 s
        "[2/4] ~40s left",            # mean 20 s, two to go
        "[3/4] ~20s left",            # mean 20 s, one to go
        "[4/4] done"]
    assert re.fullmatch(r"\[1/4\] ~30s left  \[eval\] m default fact/easy #1: PASS in \d+\.\d s, turns=2 - "
                        r"budget\.md states 4,750", lines[1]), lines[1]       # the rest of the line as before


# --- The HTML page beside the JSON ------------------------------------------------------------------

EVIL = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def evil_eval(tmp_path_factory):
    """The real `tinyharness eval`, through `tinyharness run`, of two models on the scripted server: the
    competent one, and a model named like an attack that plays the liar (never passes)."""
    if FINAL_LEVEL < 3:
        pytest.skip("the eval's tasks need tinyharness run with file tools, shell and hooks (FINAL_LEVEL >= 3)")
    from tests.test_m7_eval import run_eval
    liar, competent = by_model(["liar"]), by_model(["competent"])

    def policy(body, index):
        return liar({**body, "model": "liar"}, index) if body.get("model") == EVIL else competent(body, index)
    folder = tmp_path_factory.mktemp("page")
    with ScriptedServer(policy=policy, model="competent") as server:
        proc = run_eval(FINAL, folder, "--base-url", server.base_url, "--models", f"competent,{EVIL}",
                        "--tasks", "fact", "--tier", "easy", "--out", "results.json")
        models = {r.get("model") for r in server.requests}
    return proc, folder, models


def test_out_writes_a_page_beside_the_json_with_a_bar_per_figure(evil_eval):
    proc, folder, models = evil_eval
    assert proc.returncode == 0, proc.stderr
    assert models == {"competent", EVIL}                    # the hostile name really went through the harness
    assert "[eval] results written to results.json\n[eval] page written to results.html" in proc.stderr
    page = (folder / "results.html").read_text(encoding="utf-8")
    report = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert [r["pass_rate"] for r in report["overall"]] == [1.0, 0.0]
    assert page.count('<div class="bar pass" style="width:100.0%"></div>') == 1   # the liar's is empty
    assert "1/1 passed, 100%" in page and "0/1 passed, 0%" in page
    assert page.count('class="bar prompt"') == 2 and page.count('class="bar secs"') == 2
    widths = [float(w) for w in re.findall(r'class="bar (?:prompt|completion)" style="width:([\d.]+)%"', page)]
    assert len(widths) == 4 and abs(sum(widths[:2]) - 100) < 0.2 < sum(widths[2:]) < 50  # the largest fills its track
    assert '<div class="cell all">1/1</div>' in page and '<div class="cell none">0/1</div>' in page
    assert "budget.md was not written" in page and "(claimed success)" in page


def test_the_page_escapes_every_name_and_loads_nothing(evil_eval):
    _, folder, _ = evil_eval
    page = (folder / "results.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img" not in page
    assert page.count("&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") >= 4
    assert "://" not in page and "src=" not in page.replace("&lt;img src=x", "") and "href=" not in page


def test_render_copes_with_runs_without_stats_and_settings(tmp_path):
    from tinyharness.eval.page import render
    runs = [record(setting="on"), record(setting="off", passed=False, turns=None, prompt_tokens=None,
                                         completion_tokens=None, model="<b>")]
    report = {"eval": {"settings": {"on": [], "off": ["--no-scissors"]}, "models": ["m", "<b>"]}, "runs": runs,
              "per_task": ev.summarise(runs, ["model", "setting", "task", "tier"]),
              "overall": ev.summarise(runs, ["model", "setting"])}
    page = render(report)
    assert "<th>setting</th>" in page and "no token counts" in page and "<b>" not in page and "&lt;b&gt;" in page
    assert page.count('class="bar prompt"') == 1


@pytest.mark.parametrize("out", ["r.html", ""])
def test_an_out_that_leaves_no_room_for_the_page_is_a_usage_error(out, capsys):
    assert ev.main(["--models", "a", "--out", out], runner=fake_runner([])) == 2
    assert "--out" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium (apt-get install chromium)")
def test_the_page_draws_its_bars_in_a_headless_browser(evil_eval, tmp_path):
    from tinyharness.testing.images import read_png_pixels
    _, folder, _ = evil_eval
    url = (folder / "results.html").resolve().as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<title>Eval: competent, &lt;script&gt;" in dom.stdout and "<title>pwned" not in dom.stdout
    assert dom.stdout.count('class="bar pass"') == 1 and "Every run (2)</summary>" in dom.stdout
    shot = tmp_path / "eval.png"
    taken = subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,900", url],
                           capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0, taken.stderr[-2000:]
    pixels = [p for row in read_png_pixels(shot.read_bytes()) for p in row]
    for colour, name in [((0x3f, 0x8f, 0x57), "pass"), ((0x4a, 0x7b, 0xd0), "prompt"), ((0xd0, 0x8a, 0x2e), "secs")]:
        assert pixels.count(colour) > 500, f"no {name} bar drawn"     # a bar 14 px high and tens of px long
    print(f"screenshot: {shot}")
