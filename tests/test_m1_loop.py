"""m1: the loop. Run on m1, every later stage and `tinyharness run`."""

import os
import pytest

from tests.ladder import calls, load_json, run_stage, stages_from, stats_line, tool_call, tool_results
from tests.ladder import ROOT
from tinyharness.testing import ScriptedServer, load_script

LADDER = stages_from("m1")
TASK = "Find the testing budget in my notes and save it to budget.md."


def notes_script():
    return load_script(ROOT / "examples" / "notes.script.json")


@pytest.mark.parametrize("stage", LADDER)
def test_notes_task_writes_budget_in_five_turns(stage, notes_workspace, tmp_path):
    with ScriptedServer(script=notes_script()) as server:
        result = run_stage(stage, notes_workspace, "--base-url", server.base_url, TASK, approve=True)
    assert result.returncode == 0, result.stderr
    assert "300 KM" in (notes_workspace / "budget.md").read_text()
    stats = stats_line(result.stderr)
    assert (stats["turns"], stats["tool_calls"]) == ("5", "4")
    assert int(stats["prompt_tokens"]) > 0 and int(stats["completion_tokens"]) > 0
    lines = result.stdout.rstrip().splitlines()
    assert '  [tool] list_dir({"path": "."})' in lines
    assert lines[-1] == "The testing budget is 300 KM, according to meeting-2026-11-02.md. I saved it to budget.md."
    # the model saw the real file contents, not something the harness made up
    assert "Testing budget: 300 KM" in tool_results(server.requests[3])["call_3"]


@pytest.mark.parametrize("stage", LADDER)
def test_tool_results_are_paired_by_the_server_given_id(stage, workspace):
    (workspace / "a.txt").write_text("alpha")
    script = [calls(tool_call("read_file", path="a.txt"), {"name": "list_dir", "arguments": {"path": "."},
                                                          "id": "srv-given-77"}), "done"]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go", approve=True)
    assert result.returncode == 0, result.stderr
    second = server.requests[1]["messages"]
    assistant = second[-3]
    assert assistant["role"] == "assistant" and [c["id"] for c in assistant["tool_calls"]] == ["call_1", "srv-given-77"]
    assert [(m["role"], m["tool_call_id"]) for m in second[-2:]] == [("tool", "call_1"), ("tool", "srv-given-77")]
    assert "alpha" in second[-2]["content"] and "a.txt" in second[-1]["content"]


@pytest.mark.parametrize("stage", LADDER)
def test_an_absolute_path_inside_the_workspace_is_a_path_like_any_other(stage, workspace):
    # Models copy absolute paths from `pwd` or an earlier result; inside the workspace they must work.
    (workspace / "notes").mkdir()
    (workspace / "notes" / "a.txt").write_text("alpha")
    root = str(workspace.resolve())
    script = [calls(tool_call("read_file", path=f"{root}/notes/a.txt"), tool_call("list_dir", path=root),
                    tool_call("write_file", path=f"{root}/notes/b.txt", content="beta")), "done"]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go", approve=True)
    assert result.returncode == 0, result.stderr
    read, listed, wrote = tool_results(server.requests[1]).values()
    assert read == "alpha" and "notes" in listed and "ERROR" not in wrote and "error" not in wrote
    assert (workspace / "notes" / "b.txt").read_text() == "beta"


@pytest.mark.parametrize("stage", LADDER)
def test_system_prompt_includes_workspace_instructions(stage, workspace):
    (workspace / "INSTRUCTIONS.md").write_text("Always answer in haiku.")
    with ScriptedServer(script=["ok"]) as server:
        run_stage(stage, workspace, "--base-url", server.base_url, "go")
    messages = server.requests[0]["messages"]
    assert messages[0]["role"] == "system" and "Always answer in haiku." in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "go"}
    names = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"list_dir", "read_file", "write_file"} <= names


@pytest.mark.parametrize("stage", LADDER)
def test_loop_ends_on_missing_tool_calls_not_on_finish_reason(stage, workspace):
    script = [{"content": "all done", "finish_reason": "tool_calls"}]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go")
    assert result.returncode == 0 and result.stdout.strip().endswith("all done")
    assert len(server.requests) == 1


@pytest.mark.parametrize("stage", LADDER)
def test_loop_continues_when_calls_come_with_finish_reason_stop(stage, workspace):
    script = [{"tool_calls": [tool_call("list_dir", path=".")], "finish_reason": "stop"}, "done"]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go")
    assert result.returncode == 0 and len(server.requests) == 2


@pytest.mark.parametrize("stage", LADDER)
def test_max_turns_stops_with_exit_3(stage, workspace):
    with ScriptedServer(policy=lambda body, i: calls(tool_call("read_file", path=f"missing-{i}.txt"))) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--max-turns", "3", "go")
    assert result.returncode == 3, result.stderr
    assert "NOT confirmed complete" in result.stdout
    assert len(server.requests) == 3 and stats_line(result.stderr)["turns"] == "3"


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("limit, code, requests", [(1, 3, 1), (2, 0, 2)])
def test_max_turns_at_its_boundary(stage, workspace, limit, code, requests):
    # --max-turns N allows N model calls: an answer in call N ends the run (0); a call that asks for a
    # tool in call N is run, and then the run stops (3) without an N+1st request.
    script = [calls(tool_call("list_dir", path=".")), "done"]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--max-turns", str(limit), "go")
    assert result.returncode == code, result.stdout + result.stderr
    assert len(server.requests) == requests and stats_line(result.stderr)["tool_calls"] == "1"
    assert ("NOT confirmed complete" in result.stdout) == (code == 3)


@pytest.mark.parametrize("stage", LADDER)
def test_transcript_survives_a_crash(stage, workspace, tmp_path):
    transcript = tmp_path / "run.json"
    script = [calls(tool_call("list_dir", path=".")), {"status": 500, "body": "out of memory"}]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--transcript", str(transcript), "go")
    assert result.returncode == 1 and "out of memory" in result.stderr
    roles = [m["role"] for m in load_json(transcript)]
    assert roles == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize("stage", LADDER)
def test_transcript_holds_the_whole_conversation(stage, workspace, tmp_path):
    transcript = tmp_path / "run.json"
    with ScriptedServer(script=[calls(tool_call("list_dir", path=".")), "finished"]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--transcript", str(transcript), "go")
    assert result.returncode == 0
    messages = load_json(transcript)
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"] == "finished"
    assert messages[:-1] == server.requests[-1]["messages"]


@pytest.mark.parametrize("stage", LADDER)
def test_a_run_stopped_at_max_turns_keeps_its_last_results_in_the_transcript(stage, workspace, tmp_path):
    # the last turn's results come after the last model call: the transcript still holds both
    transcript = tmp_path / "run.json"
    script = [calls(tool_call("list_dir", path="."), tool_call("read_file", path="nope.txt"))]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--max-turns", "1", "--transcript",
                           str(transcript), "go")
    assert result.returncode == 3, result.stdout + result.stderr
    messages = load_json(transcript)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in messages[-2:]] == [c["id"] for c in messages[2]["tool_calls"]]


@pytest.mark.parametrize("stage", LADDER)
def test_failing_tool_does_not_crash_the_loop(stage, workspace):
    with ScriptedServer(script=[calls(tool_call("read_file", path="nope.txt")), "sorry"]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "nope.txt" in tool_results(server.requests[1])["call_1"]


@pytest.mark.parametrize("stage", LADDER)
def test_usage_is_summed_over_turns(stage, workspace):
    script = [{"tool_calls": [tool_call("list_dir", path=".")], "usage": {"prompt_tokens": 100, "completion_tokens": 7}},
              {"content": "done", "usage": {"prompt_tokens": 150, "completion_tokens": 5}}]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go")
    stats = stats_line(result.stderr)
    assert (stats["prompt_tokens"], stats["completion_tokens"]) == ("250", "12")
    assert float(stats["seconds"]) >= 0


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("args", [["--max-turns", "0", "go"], ["--max-turns", "x", "go"], ["   "], []])
def test_usage_errors_exit_2(stage, args, workspace):
    result = run_stage(stage, workspace, *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.parametrize("stage", LADDER)
def test_unencodable_content_leaves_the_old_file_intact(stage, workspace):
    (workspace / "keep.txt").write_text("precious")
    broken = {"name": "write_file", "arguments": '{"path": "keep.txt", "content": "half \\ud800 a surrogate"}'}
    with ScriptedServer(script=[calls(broken), "done"]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go", approve=True)
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert (workspace / "keep.txt").read_text() == "precious"
    assert "surrogate" in tool_results(server.requests[1])["call_1"].lower()


@pytest.mark.parametrize("stage", LADDER)
def test_the_transcript_is_private_whatever_the_umask_or_its_old_mode(stage, workspace, tmp_path):
    # it holds every file the model read: another user of the machine must not read it
    fresh, old = tmp_path / "fresh.json", tmp_path / "old.json"
    old.write_text("[]")
    old.chmod(0o644)
    mask = os.umask(0o022)
    try:
        for transcript in (fresh, old):
            with ScriptedServer(script=["finished"]) as server:
                result = run_stage(stage, workspace, "--base-url", server.base_url, "--transcript",
                                   str(transcript), "go")
            assert result.returncode == 0, result.stderr
            assert oct(transcript.stat().st_mode & 0o777) == "0o600", transcript.name
    finally:
        os.umask(mask)
