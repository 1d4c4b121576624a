"""m4: guards - repeat detection, budgets the model cannot negotiate, a graceful stop.
Run on m4, every later stage and `tinyharness run`."""
import importlib
import json
import time

import pytest

from tests.ladder import FINAL, calls, copies, load_json, run_stage, stages_from, stats_line, tool_call, tool_results
from tinyharness.testing import ScriptedServer

LADDER = stages_from("m4")
ENDLESS = "while true; do sleep 0.1; done"


def run(stage, workspace, *args, script=None, policy=None, stdin="", approve=False, tty=None):
    with ScriptedServer(script=script, policy=policy) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *args, "go", stdin=stdin, approve=approve,
                           tty=tty)
    assert "Traceback" not in result.stderr, result.stderr
    return result, server


def harness_messages(request):
    return [m for m in request["messages"] if m["role"] == "user" and m["content"].startswith("[harness]")]


def read(path):
    return calls(tool_call("read_file", path=path))


def stopped_lines(stdout):
    """The Stopped line and the account after it, to the end of stdout."""
    lines = stdout.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Stopped: ")]
    assert starts, f"no Stopped line in stdout:\n{stdout}"
    return lines[starts[-1]:]


# --- Repeat detection -----------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_three_identical_calls_bring_a_harness_message_after_all_results(stage, workspace):
    script = [read("missing.txt"), read("missing.txt"),
              calls(tool_call("read_file", path="missing.txt"), tool_call("list_dir", path=".")), "I give up."]
    result, server = run(stage, workspace, script=script)
    assert result.returncode == 0 and len(server.requests) == 4
    assert not harness_messages(server.requests[2])  # two identical calls are not a loop
    after_third = server.requests[3]["messages"]
    # the assistant message, both of its tool results, then the [harness] message: never between results
    assert [m["role"] for m in after_third[-4:]] == ["assistant", "tool", "tool", "user"]
    warning = after_third[-1]["content"]
    assert warning.startswith("[harness]") and 'read_file({"path": "missing.txt"})' in warning
    assert "different approach" in warning
    assert len(harness_messages(server.requests[3])) == 1
    # and on screen, where the learner watches the guard fire (after the turn's results, before the answer)
    lines = result.stdout.splitlines()
    shown = '  [harness] read_file({"path": "missing.txt"}) 3 times in a row: the model is asked for another approach'
    assert lines[-2:] == [shown, "I give up."], result.stdout


@pytest.mark.parametrize("stage", LADDER)
def test_different_arguments_are_not_a_repeat(stage, workspace):
    script = [read("a.txt"), read("b.txt"), read("a.txt"), read("a.txt"), "done"]
    result, server = run(stage, workspace, script=script)
    assert result.returncode == 0
    assert not any(harness_messages(r) for r in server.requests)


@pytest.mark.parametrize("stage", LADDER)
def test_key_order_and_spacing_do_not_hide_a_repeat(stage, workspace):
    spellings = ['{"path": "a.txt", "content": "x"}', '{"content":"x","path":"a.txt"}', '{ "content": "x", "path": "a.txt" }']
    script = [calls({"name": "write_file", "arguments": text}) for text in spellings] + ["done"]
    result, server = run(stage, workspace, script=script, approve=True)
    assert result.returncode == 0
    assert not harness_messages(server.requests[2])
    (warning,) = harness_messages(server.requests[3])
    assert 'write_file({"content": "x", "path": "a.txt"})' in warning["content"]


@pytest.mark.parametrize("stage", LADDER)
def test_identical_broken_calls_count_as_repeats(stage, workspace):
    broken = {"tool_calls": [tool_call("read_file", path="a.txt")], "malformed_arguments": True}  # JSON cut in half
    result, server = run(stage, workspace, script=[broken, broken, broken, "done"])
    assert result.returncode == 0
    assert "not valid JSON" in tool_results(server.requests[3])["call_3"]
    (warning,) = harness_messages(server.requests[3])
    # named with what was wrong, which quotes the text the model sent (the JSON cut in half): the history keeps {}
    assert warning["content"].startswith("[harness] You have called read_file({}) - the arguments are not valid JSON")
    assert """'{"path":'""" in warning["content"] and "3 times in a row" in warning["content"]


@pytest.mark.parametrize("stage", LADDER)
def test_different_broken_calls_are_not_a_repeat(stage, workspace):
    # all three are {} in the history, but the model sent three different texts
    script = [calls({"name": "read_file", "arguments": text}) for text in ('{"path": "a', '{"path": "b', '{"path": "c')]
    result, server = run(stage, workspace, script=script + ["done"])
    assert result.returncode == 0
    assert not any(harness_messages(r) for r in server.requests)


@pytest.mark.parametrize("stage", LADDER)
def test_a_second_repeat_stops_the_run_and_keeps_the_transcript(stage, workspace, tmp_path):
    transcript = tmp_path / "run.json"
    result, server = run(stage, workspace, "--transcript", str(transcript), policy=lambda body, i: read("missing.txt"))
    assert result.returncode == 3
    assert len(server.requests) == 6  # warned after the third call, stopped after the sixth
    assert harness_messages(server.requests[3]) and len(harness_messages(server.requests[5])) == 1
    lines = stopped_lines(result.stdout)
    assert lines[0].startswith("Stopped: ") and 'read_file({"path": "missing.txt"})' in lines[0]
    assert lines[0].endswith("The task is NOT confirmed complete.")
    assert "read_file x6" in "\n".join(lines[1:])
    assert stats_line(result.stderr)["turns"] == "6"
    messages = load_json(transcript)
    assert [m["role"] for m in messages].count("assistant") == 6 and messages[-1]["role"] == "tool"


# --- Budgets ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_max_turns_defaults_to_30(stage, workspace):
    result, server = run(stage, workspace, policy=lambda body, i: read(f"missing-{i}.txt"))
    assert result.returncode == 3 and len(server.requests) == 30
    assert stopped_lines(result.stdout)[0] == "Stopped: reached --max-turns 30. The task is NOT confirmed complete."
    assert not any(harness_messages(r) for r in server.requests)


@pytest.mark.parametrize("stage", LADDER)
def test_max_seconds_stops_between_turns_with_an_account(stage, workspace, tmp_path):
    transcript = tmp_path / "run.json"

    def slow_writer(body, i):
        return {"tool_calls": [tool_call("write_file", path=f"f{i}.txt", content="x")], "delay": 0.4}
    result, server = run(stage, workspace, "--max-seconds", "2", "--transcript", str(transcript),
                         policy=slow_writer, approve=True)
    assert result.returncode == 3, result.stderr
    turns = int(stats_line(result.stderr)["turns"])  # the replies that came back in time
    assert 1 <= turns <= 5  # 0.4 s a reply: past 2 s after the fifth (fewer on a busy machine, never none)
    assert turns <= len(server.requests) <= turns + 1  # a reply still under way when the time ran out is dropped
    lines = stopped_lines(result.stdout)
    assert lines[0].startswith("Stopped: reached --max-seconds 2 ") and lines[0].endswith("NOT confirmed complete.")
    account = "\n".join(lines[1:])
    assert f"write_file x{turns}" in account
    written = sorted(p.name for p in workspace.iterdir())
    assert written == [f"f{i}.txt" for i in range(turns)]
    assert all(name in account for name in written)
    assert [m["role"] for m in load_json(transcript)].count("tool") == turns  # kept, up to the last result


@pytest.mark.parametrize("stage", LADDER)
def test_the_account_lists_only_files_really_written(stage, workspace):
    script = [calls(tool_call("write_file", path="kept.txt", content="1")),
              calls(tool_call("write_file", path="denied.txt", content="2")),
              calls(tool_call("write_file", path="../outside.txt", content="3"), tool_call("list_dir", path="."))]
    result, server = run(stage, workspace, "--max-turns", "3", script=script, tty="y\nn\n")
    assert result.returncode == 3
    lines = stopped_lines(result.stdout)
    assert lines == ["Stopped: reached --max-turns 3. The task is NOT confirmed complete.",
                     "Tool calls: write_file x3, list_dir x1.", "Files written: kept.txt."]
    assert sorted(p.name for p in workspace.iterdir()) == ["kept.txt"]


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_bad_max_seconds_is_a_usage_error(stage, workspace, value):
    result = run_stage(stage, workspace, "--max-seconds", value, "go")
    assert result.returncode == 2 and "--max-seconds" in result.stderr


# --- Each guard only sees its own timeline -----------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_an_endless_shell_call_is_ended_by_the_shell_timeout_not_the_budget(stage, workspace):
    # the loop budget is checked between turns; this call never ends its turn. Only the timeout inside
    # the shell tool can end it, and then the run goes on to the next turn.
    script = [calls(tool_call("shell", command=ENDLESS)), "The loop never ended; I stopped trying."]
    started = time.monotonic()
    result, server = run(stage, workspace, "--shell-timeout", "1", "--max-seconds", "30", script=script, approve=True)
    assert time.monotonic() - started < 15
    assert result.returncode == 0 and len(server.requests) == 2
    assert tool_results(server.requests[1])["call_1"].startswith("ERROR: timed out after 1 s")
    assert result.stdout.rstrip().endswith("I stopped trying.")


@pytest.mark.parametrize("stage", LADDER)
def test_the_time_budget_cannot_interrupt_a_turn(stage, workspace, tmp_path):
    # a 0.3 s budget, a shell call that runs until its 1 s timeout: the budget is overrun, and the loop
    # only notices before the next model call
    transcript = tmp_path / "run.json"
    script = [calls(tool_call("shell", command=ENDLESS)), "never asked"]
    result, server = run(stage, workspace, "--shell-timeout", "1", "--max-seconds", "0.3",
                         "--transcript", str(transcript), script=script, approve=True)
    assert result.returncode == 3 and len(server.requests) == 1
    assert stopped_lines(result.stdout)[0].startswith("Stopped: reached --max-seconds 0.3 ")
    if stage == FINAL:  # the package bounds the run whole: the command gets only what is left of 0.3 s
        assert float(stats_line(result.stderr)["seconds"]) < 1
        assert load_json(transcript)[-1]["content"].startswith(("ERROR: timed out after 0.",
                                                                 "ERROR: the run's --max-seconds is spent"))
        return
    assert float(stats_line(result.stderr)["seconds"]) >= 1
    assert load_json(transcript)[-1]["content"].startswith("ERROR: timed out after 1 s")


@pytest.mark.parametrize("stage", LADDER)
def test_near_repeats_escape_the_repeat_guard_and_meet_the_turn_budget(stage, workspace):
    # the source article's model varied sleep 5 / 10 / 30: exact matching never fires, by design
    result, server = run(stage, workspace, "--max-turns", "5",
                         policy=lambda body, i: calls(tool_call("shell", command=f"sleep 0.0{i}")), approve=True)
    assert result.returncode == 3 and len(server.requests) == 5
    assert not any(harness_messages(r) for r in server.requests)
    lines = stopped_lines(result.stdout)
    assert lines[0] == "Stopped: reached --max-turns 5. The task is NOT confirmed complete."
    assert lines[1:] == ["Tool calls: shell x5.", "Files written: none."]


# --- The guards at their boundaries, once per distinct copy of guards.py ---------------------------

def call(name, **arguments):
    return {"id": "x", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def budget_of(stage, max_turns, max_seconds):
    """A stage's Budget(max_turns, max_seconds); the package's reads every budget from a run's settings and
    counts (guards.LIMITS), named as the command line names them."""
    guards = importlib.import_module(f"{stage}.guards")
    if stage != FINAL:
        return guards.Budget(max_turns=max_turns, max_seconds=max_seconds)
    from tinyharness.counts import Stats
    from tinyharness.flags import flag_name
    from tinyharness.settings import RunSettings
    settings = RunSettings(max_turns=max_turns, max_seconds=max_seconds, budget_name=flag_name)
    return guards.Budget(settings, Stats())


@pytest.mark.parametrize("stage", copies("m4", "guards.py"))
def test_the_budget_at_its_boundaries(stage):
    budget = budget_of(stage, max_turns=3, max_seconds=600)
    assert budget.exceeded(0) is None and budget.exceeded(2) is None   # call number 3 may still be made
    assert budget.exceeded(3) == "reached --max-turns 3"                # a fourth may not
    one = budget_of(stage, max_turns=1, max_seconds=600)
    assert one.exceeded(0) is None and one.exceeded(1) == "reached --max-turns 1"
    spent = budget_of(stage, max_turns=3, max_seconds=0)                # no time at all: stop before the first call
    assert spent.exceeded(0).startswith("reached --max-seconds 0 (")


@pytest.mark.parametrize("stage", copies("m4", "guards.py"))
def test_the_repeat_guard_at_its_boundaries(stage):
    guards = importlib.import_module(f"{stage}.guards")
    guard = guards.RepeatGuard(limit=3)
    same = guards.signature(call("read_file", path="missing.txt"))
    for _ in range(2):                                  # one short of the limit: no warning
        guard.see(call("read_file", path="missing.txt"))
    assert guard.end_turn() is None and guard.warnings == 0
    guard.see(call("read_file", path="missing.txt"))    # the limit: one warning, for that call
    assert guard.end_turn() == same and guard.warnings == 1
    assert guard.end_turn() is None                     # asked once per warning
    for _ in range(2):                                  # the count starts again after a warning
        guard.see(call("read_file", path="missing.txt"))
    assert guard.end_turn() is None and guard.warnings == 1
    guard.see(call("read_file", path="missing.txt"))
    assert guard.end_turn() == same and guard.warnings == 2
    other = guards.RepeatGuard(limit=3)                 # a different call in between breaks the run of three
    for path in ("a.txt", "a.txt", "b.txt", "a.txt", "a.txt"):
        other.see(call("read_file", path=path))
    assert other.end_turn() is None and other.warnings == 0
    reordered = guards.RepeatGuard(limit=2)             # the same arguments in another order are the same call
    reordered.see({"id": "1", "type": "function", "function": {"name": "write_file", "arguments": '{"path": "a", "content": "b"}'}})
    reordered.see({"id": "2", "type": "function", "function": {"name": "write_file", "arguments": '{"content":"b","path":"a"}'}})
    assert reordered.warnings == 1
    single = guards.RepeatGuard(limit=1)                # a limit of one warns at the first call
    single.see(call("list_dir", path="."))
    assert single.warnings == 1
