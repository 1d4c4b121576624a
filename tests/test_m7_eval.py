"""m7_eval: no improvement without a measurement.

The stage's eval (`python -m m7_eval.eval`) and `tinyharness eval` run the same five tasks in two
tiers through a harness - the stage's own, or `tinyharness run` - and judge the end state. Here they
are run for real against one ScriptedServer that plays the three scripted models by model name
(`tinyharness/eval/evals/policies.py:by_model`), whose scores are known in advance: `competent` passes
everything, `liar` passes nothing and claims success every time, `clumsy` fails five designed
tasks and claims four of those as done. The same assertions hold on every stage from m7 on and on
`tinyharness eval`.
"""
import atexit
import filecmp
import importlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.ladder import FINAL, ROOT, can_run_in_process, copies, import_roots, run_in_process, stages_from
from tinyharness.eval.evals import fact
from tinyharness.eval.evals.policies import POLICIES, by_model
from tinyharness.testing import ScriptedServer

STAGES = stages_from("m7")
MODELS = "competent,liar,clumsy"
CLUMSY_FAILS = {"fact/hard", "script/hard", "folder/easy", "hook/hard", "function/hard"}


def eval_command(stage, *args):
    if stage == FINAL:
        return [sys.executable, "-m", "tinyharness", "eval", *args]
    return [sys.executable, "-m", f"{stage}.eval", *args]


def eval_main(stage):
    if stage == FINAL:
        return lambda argv: importlib.import_module("tinyharness.cli").main(["eval", *argv])
    return importlib.import_module(f"{stage}.eval").main


def eval_env(stage):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*import_roots(stage), env.get("PYTHONPATH")]))
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def run_eval(stage, cwd, *args, timeout=1800, in_process=True, env=None):
    """The eval's command line; in this process like tests/ladder.py:run_stage (the harness runs it
    starts are real processes either way), or as its own process with in_process=False."""
    # 1800 s: thirty harness processes; at a load of 45 on two cores the 600 s of before was not enough
    env = env or eval_env(stage)
    if in_process and can_run_in_process(stage):
        return run_in_process(stage, cwd, list(args), "", timeout, env, main=eval_main(stage),
                              shown_as=eval_command(stage, *args))
    return subprocess.run(eval_command(stage, *args), cwd=cwd, capture_output=True, text=True, encoding="utf-8",
                          errors="replace", timeout=timeout, env=env)


def free_port():
    with socket.socket() as s:                   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def harness_tools(stage):
    """The tool names a harness offers the model, from its own tools.py (the package's: its records, the task
    tool's too)."""
    tools = importlib.import_module(f"{stage}.tools")
    if stage == FINAL:
        return sorted(tool.name for tool in tools.known())
    return sorted(s["function"]["name"] for s in tools.SCHEMAS)


# --- The three scripted models through the real eval and the real harness ------------------------

_SCRIPTED_RUNS = {}   # stage -> (stage, process, JSON report, requests sent), or the Future of it
_BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scripted-eval")


def one_scripted_eval(stage, folder, in_process=True, env=None):
    with ScriptedServer(policy=by_model(), model="competent") as server:
        proc = run_eval(stage, folder, "--base-url", server.base_url, "--models", MODELS, "--out", "results.json",
                        in_process=in_process, env=env)
        sent = list(server.requests)
    report = json.loads((folder / "results.json").read_text(encoding="utf-8")) if proc.returncode == 0 else None
    return stage, proc, report, sent


def start_scripted_evals(stages):
    """Start these stages' evals in the background, one after another, as their own processes (called
    by tests/conftest.py once the selected tests are known): their thirty harness processes each run on
    the machine's other core while the tests before them run here."""
    for stage in stages:
        if stage not in _SCRIPTED_RUNS:
            folder = Path(tempfile.mkdtemp(prefix="tinyharness-test-eval-"))
            atexit.register(shutil.rmtree, folder, True)
            env = eval_env(stage)            # read here: a test in this thread swaps os.environ while it runs
            _SCRIPTED_RUNS[stage] = _BACKGROUND.submit(one_scripted_eval, stage, folder, False, env)


def scripted_eval_run(stage, tmp_path_factory):
    """The three scripted models through `stage`'s real eval: (stage, process, JSON report, requests sent).

    Thirty harness runs are the slowest thing in the suite, so each stage's eval runs once per test
    session and every test that reads it shares the result (tests/test_eval.py reads tinyharness's).
    """
    if stage not in _SCRIPTED_RUNS:
        _SCRIPTED_RUNS[stage] = one_scripted_eval(stage, tmp_path_factory.mktemp("eval"))
    if isinstance(_SCRIPTED_RUNS[stage], Future):
        _SCRIPTED_RUNS[stage] = _SCRIPTED_RUNS[stage].result()
    return _SCRIPTED_RUNS[stage]


@pytest.fixture(scope="module", params=STAGES)
def scripted_run(request, tmp_path_factory):
    return scripted_eval_run(request.param, tmp_path_factory)


def runs_of(report, model):
    return [r for r in report["runs"] if r["model"] == model]


def test_competent_passes_every_task_in_both_tiers(scripted_run):
    stage, proc, report, _ = scripted_run
    assert proc.returncode == 0, proc.stderr
    runs = runs_of(report, "competent")
    assert len(runs) == 10 and all(r["passed"] for r in runs), [r["reason"] for r in runs if not r["passed"]]
    assert all(r["exit_code"] == 0 and r["turns"] >= 2 and not r["claimed_but_failed"] for r in runs)


def test_the_liar_passes_nothing_and_every_run_is_flagged(scripted_run):
    _, proc, report, _ = scripted_run
    runs = runs_of(report, "liar")
    assert len(runs) == 10 and not any(r["passed"] for r in runs)
    assert all(r["claimed_success"] and r["claimed_but_failed"] for r in runs)
    assert all(r["final_answer"] == "Done, I saved the file." and r["turns"] == 1 for r in runs)
    assert "| liar | 0/10 | 0% | 0/5 | 0/5 |" in proc.stdout
    assert proc.stderr.count("(claimed success)") == 10 + 4          # the liar's ten, the clumsy model's four


def test_clumsy_fails_exactly_the_designed_tasks(scripted_run):
    _, proc, report, _ = scripted_run
    runs = runs_of(report, "clumsy")
    failed = {f"{r['task']}/{r['tier']}" for r in runs if not r["passed"]}
    assert failed == CLUMSY_FAILS
    claimed = {f"{r['task']}/{r['tier']}" for r in runs if r["claimed_but_failed"]}
    assert claimed == CLUMSY_FAILS - {"function/hard"}              # that one admits its tests failed
    assert "| clumsy | 5/10 | 50% | 4/5 | 1/5 |" in proc.stdout


def test_the_overall_rows_and_the_json_file(scripted_run):
    _, proc, report, _ = scripted_run
    assert {"runs", "overall"} <= set(report)
    assert [r["model"] for r in report["overall"]] == MODELS.split(",")
    row = {r["model"]: r for r in report["overall"]}
    assert (row["competent"]["passes"], row["competent"]["runs"], row["competent"]["pass_rate"]) == (10, 10, 1.0)
    assert (row["liar"]["claimed_but_failed"], row["liar"]["mean_turns"]) == (10, 1.0)
    assert (row["clumsy"]["easy_passes"], row["clumsy"]["hard_passes"], row["clumsy"]["claimed_but_failed"]) == (
        "4/5", "1/5", 4)
    assert row["competent"]["mean_prompt_tokens"] > row["liar"]["mean_prompt_tokens"] > 0
    assert row["competent"]["completion_tokens_per_turn"] > 0
    for run in report["runs"]:
        assert set(run) >= {"model", "task", "tier", "passed", "reason", "claimed_success", "claimed_but_failed",
                            "exit_code", "turns", "prompt_tokens", "completion_tokens", "seconds", "final_answer"}
        assert isinstance(run["passed"], bool) and run["reason"] and run["seconds"] >= 0
    assert len(report["runs"]) == 30


def test_the_eval_runs_its_own_harness_through_the_command_line(scripted_run):
    stage, _, report, sent = scripted_run
    harness = report["eval"]["harness"] if stage == FINAL else report["harness"]
    assert harness == stage
    assert {r["model"] for r in sent} == set(MODELS.split(","))     # the --model flag reached the server
    offered = {tuple(sorted(t["function"]["name"] for t in r["tools"])) for r in sent}
    assert offered == {tuple(harness_tools(stage))}


# --- Failures: the eval says what went wrong and exits 1; bad flags exit 2 -------------------------

@pytest.mark.parametrize("stage", STAGES)
def test_a_server_that_is_down_exits_1_with_a_clear_message(stage, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = run_eval(stage, tmp_path, "--base-url", url, "--models", "qwen3:8b", "--out", "r.json")
    assert proc.returncode == 1, proc.stderr
    assert "Could not connect to the model server at" in proc.stderr and url in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("stage", STAGES)
def test_a_model_the_server_does_not_have_stops_the_eval_at_once(stage, tmp_path):
    with ScriptedServer(policy=by_model(), model="competent") as server:
        proc = run_eval(stage, tmp_path, "--base-url", server.base_url, "--models", "qwen3:99b,competent")
        sent = [r["model"] for r in server.requests]
    assert proc.returncode == 1 and "not found" in proc.stderr and "'qwen3:99b'" in proc.stderr
    assert sent == ["qwen3:99b"]                 # stopped at once: every other run would fail the same way
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("argv", [[], ["--models", ""], ["--models", "a,a"], ["--models", "a", "--repeat", "0"],
                                  ["--models", "a", "--repeat", "x"], ["--models", "a", "--no-such-flag"]])
def test_bad_flags_exit_2(stage, argv, tmp_path):
    proc = run_eval(stage, tmp_path, *argv)
    assert proc.returncode == 2 and "error:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("stage", STAGES)
def test_help_names_the_flags(stage, tmp_path):
    proc = run_eval(stage, tmp_path, "--help")
    assert proc.returncode == 0
    for flag in ("--models", "--base-url", "--repeat", "--out"):
        assert flag in proc.stdout


# --- tinyharness: `tinyharness eval`, settings compared, the scripted models served ---------------

# The package's own eval features, parametrised with it like a ladder case: `course check m7` (pytest
# --stage m7_eval) runs the stage's cases, not these.
ONLY_THE_PACKAGE = pytest.mark.parametrize("stage", [FINAL])


@ONLY_THE_PACKAGE
def test_tinyharness_eval_help_explains_comparing_settings(stage, tmp_path):
    proc = run_eval(FINAL, tmp_path, "--help")
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and text.startswith("usage: tinyharness eval")
    assert "--compare" in text and "scissors=;noscissors=--no-scissors" in text and "same model" in text
    assert "scripted:competent,scripted:liar,scripted:clumsy" in text and "fake-server --eval-models" in text
    listed = subprocess.run([sys.executable, "-m", "tinyharness", "--help"], capture_output=True, text=True)
    assert re.search(r"^\s+eval\s", listed.stdout, re.M)


@ONLY_THE_PACKAGE
def test_compare_runs_each_setting_on_the_same_model(stage, tmp_path):
    with ScriptedServer(policy=by_model(), model="competent") as server:
        proc = run_eval(FINAL, tmp_path, "--base-url", server.base_url, "--models", "competent", "--tasks", "fact",
                        "--compare", "scissors=;noscissors=--no-scissors", "--out", "r.json")
    assert proc.returncode == 0, proc.stderr
    assert "| competent | scissors | 2/2 |" in proc.stdout and "| competent | noscissors | 2/2 |" in proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["eval"]["settings"] == {"scissors": [], "noscissors": ["--no-scissors"]}


@ONLY_THE_PACKAGE
def test_without_base_url_one_scripted_server_plays_every_scripted_model(stage, tmp_path):
    # the full thirty runs of the three models are scored in scripted_run; here the `scripted:` names
    # must reach the same three policies: the clumsy one passes the easy fact task and fails the hard
    proc = run_eval(FINAL, tmp_path, "--models", "scripted:liar,scripted:competent,scripted:clumsy", "--tasks", "fact",
                    "--out", "r.json")
    assert proc.returncode == 0, proc.stderr
    assert "| scripted:liar | 0/2 |" in proc.stdout and "| scripted:competent | 2/2 |" in proc.stdout
    runs = {(r["model"], r["tier"]): r["passed"] for r in json.loads((tmp_path / "r.json").read_text())["runs"]}
    assert runs[("scripted:clumsy", "easy")] and not runs[("scripted:clumsy", "hard")]


def test_the_dispatching_policy_picks_by_model_name():
    policy = by_model()
    ask = lambda model: policy({"model": model, "messages": [{"role": "user", "content": fact.EASY.prompt}]}, 0)
    assert ask("liar") == ask("scripted:liar") == "Done, I saved the file."
    assert ask("competent")["tool_calls"][0]["name"] == "list_dir"
    missing = ask("qwen3:8b")
    assert missing["status"] == 404 and "not found" in missing["body"]["error"]["message"]
    assert set(POLICIES) == {"competent", "liar", "clumsy"}


@ONLY_THE_PACKAGE
def test_fake_server_serves_the_eval_models(stage, tmp_path):
    server = subprocess.Popen([sys.executable, "-m", "tinyharness", "fake-server", "--eval-models"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = server.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/v1", line).group(0)
        body = {"model": "liar", "messages": [{"role": "user", "content": "Write a poem."}]}
        answer = requests.post(url + "/chat/completions", json=body, timeout=10).json()
        assert answer["choices"][0]["message"]["content"] == "Done, I saved the file."
        proc = run_eval(FINAL, tmp_path, "--base-url", url, "--models", "liar", "--tasks", "hook", "--out", "r.json")
        assert proc.returncode == 0 and "| liar | 0/2 |" in proc.stdout, proc.stderr
    finally:
        server.kill()
        server.communicate(timeout=10)


# --- The stage and the package share the tasks and the judges -----------------------------------

@pytest.mark.parametrize("stage", stages_from("m7", final=False))
def test_the_stage_judges_exactly_like_tinyharness(stage):
    ours = {p.name for p in (ROOT / stage / "evals").glob("*.py")}
    package = {p.name for p in (ROOT / "tinyharness" / "eval" / "evals").glob("*.py")}
    assert ours == package - {"policies.py"}                         # the scripted models are test fixtures
    different = [n for n in sorted(ours) if not filecmp.cmp(ROOT / stage / "evals" / n,
                                                             ROOT / "tinyharness" / "eval" / "evals" / n, shallow=False)]
    assert not different, f"fix both copies: {different}"


@pytest.mark.parametrize("stage", stages_from("m7", final=False))
def test_the_stage_eval_measures_itself_by_default(stage):
    module = importlib.import_module(f"{stage}.eval")
    assert module.parse_args(["--models", "m"]).harness == stage


@pytest.mark.parametrize("stage", copies("m7", "evals/claims.py"))   # once per distinct copy of the claim check
@pytest.mark.parametrize("answer, claims", [
    ("The file was not saved.", False),                       # the negation right before the success word
    ("No file was ever saved.", False),                       # the fourth word before it: still inside the window
    ("No, the old file was saved.", True),                    # the fifth word before it: outside, a claim
    ("Nothing went wrong. Saved.", True),                     # another clause: its negation does not reach
    ("I saved it but it did not compile.", True),             # "but" ends the clause; no admission word
    ("I couldn\u2019t save it.", False),                       # a typographic apostrophe reads as '
    ("saved", True), ("   ", False), ("", False), (None, False),
])
def test_the_claim_check_at_its_boundaries(stage, answer, claims):
    # The negation window is four words: a copy that looks at three, or at the whole clause, misreads one side.
    module = importlib.import_module("tinyharness.eval.evals.claims" if stage == FINAL else f"{stage}.evals.claims")
    assert module.claims_success(answer) is claims
