"""A subagent is held to what is left of the run's limits, counts the files it wrote by any tool, and
its turn is shown folded under its `task` call in the session's page."""
import json
import time

from tests.ladder import FINAL, calls, run_stage, tool_call, tool_results
from tinyharness.testing import ScriptedServer

CHILD_TASK = "Child: look around."


def family(child_script, parent_script, delay=0.0):
    """One server for both; the first user message tells them apart. Each reply waits DELAY seconds."""
    asked = {"child": 0, "parent": 0}

    def policy(body, index):
        first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        who = "child" if first_user == CHILD_TASK else "parent"
        asked[who] += 1
        time.sleep(delay)
        own = child_script if who == "child" else parent_script
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return own[min(turn, len(own) - 1)]
    return policy, asked


def run(workspace, tmp_path, policy, *args):
    with ScriptedServer(policy=policy) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, *args,
                           env={"XDG_DATA_HOME": str(tmp_path / "data")})
    return result, server


PARENT = [calls(tool_call("task", description=CHILD_TASK)), "The parent is done."]
LOOKING = [calls(tool_call("list_dir", path="."))]


def session_events(tmp_path):
    [session] = (tmp_path / "data" / "tinyharness" / "sessions").glob("*.jsonl")
    return [json.loads(line) for line in session.read_text().splitlines()]


def task_result(server):
    return [r for r in server.requests if r["messages"][1]["content"] != CHILD_TASK][-1]


def test_the_child_gets_what_is_left_of_the_runs_tokens(workspace, tmp_path):
    policy, asked = family(LOOKING * 20, PARENT)
    result, server = run(workspace, tmp_path, policy, "--max-tokens", "1500", "--subagent-max-turns", "12", "go")
    # the parent's first call costs about 900 tokens, each of the child's as much: 600 were left for the child
    assert asked["child"] == 1, result.stderr
    assert result.returncode == 3  # and then the parent itself is out of tokens
    child_said = [e["message"]["content"] for e in session_events(tmp_path) if e.get("type") == "tool"][-1]
    assert child_said.startswith("NOT confirmed complete") and "token budget" in child_said


def test_the_child_gets_what_is_left_of_the_runs_time(workspace, tmp_path):
    policy, asked = family(LOOKING * 20, PARENT, delay=0.6)
    result, server = run(workspace, tmp_path, policy, "--max-seconds", "2", "--subagent-max-turns", "12", "go")
    # the parent's call took 0.6 s of its 2: the child, its own limit 300 s, may not take more than the rest
    assert 1 <= asked["child"] <= 3, (asked, result.stderr)
    child_said = [e["message"]["content"] for e in session_events(tmp_path) if e.get("type") == "tool"][-1]
    assert child_said.startswith("NOT confirmed complete: the helper agent was stopped (reached --max-seconds")


def test_files_written_counts_a_write_by_the_shell(workspace, tmp_path):
    child = [calls(tool_call("shell", command="echo made > by_shell.txt")),
             calls(tool_call("write_file", path="by_tool.txt", content="x")), "Wrote two files."]
    policy, _ = family(child, PARENT)
    result, server = run(workspace, tmp_path, policy, "--yes", "--sandbox", "off", "go")
    assert result.returncode == 0, result.stderr
    assert (workspace / "by_shell.txt").exists()
    child_said = list(tool_results(task_result(server)).values())[0]
    assert child_said.endswith("files written: by_shell.txt, by_tool.txt"), child_said


def test_view_folds_the_childs_turn_under_its_task_call(workspace, tmp_path):
    (workspace / "seen.txt").write_text("x")
    child = [calls(tool_call("read_file", path="seen.txt")), "The child read seen.txt."]
    policy, _ = family(child, PARENT)
    result, _ = run(workspace, tmp_path, policy, "go")
    assert result.returncode == 0, result.stderr
    [session] = (tmp_path / "data" / "tinyharness" / "sessions").glob("*.jsonl")
    from tinyharness.view import render
    page = render(session)
    task_call = page.index('<span class="name">task</span>')
    folded = page.index('<details class="subagent">', task_call)
    child_call = page.index('<span class="name">read_file</span>', folded)
    task_result_at = page.index("[subagent] turns=2 tool_calls=1", child_call)
    assert task_call < folded < child_call < task_result_at
    assert "(no result recorded)" not in page
