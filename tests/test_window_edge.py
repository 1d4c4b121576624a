"""The context policy at the window's edge (tinyharness/context.py, benchmarks/window_edge.py): on a
long output-heavy run the server's cached prefix holds between cuts, every request fits the window,
and a collapsed history loses no message from the session file or the stream-json lines."""
import copy
import json
import os
import subprocess
import sys

from benchmarks import window_edge as edge
from tests.ladder import ROOT, calls, tool_call
from tinyharness.context import COLLAPSED, DEFAULT_POLICY, POLICIES, STUB_PREFIX, batch_scissors, collapse
from tinyharness.testing import ScriptedServer


def pairs_whole(messages):
    """Every result follows the reply that asked for it, and every call of a seen reply has its
    result."""
    asked, answered = set(), set()
    for message in messages:
        if message.get("role") == "assistant":
            asked |= {c["id"] for c in message.get("tool_calls") or []}
        if message.get("role") == "tool":
            assert message["tool_call_id"] in asked, message["tool_call_id"]
            answered.add(message["tool_call_id"])
    return asked == answered


def test_the_default_policy_prefills_at_most_1_5x_the_floor_on_200_output_heavy_turns():
    row = edge.edge_figures(edge.seq_task(200), DEFAULT_POLICY)
    assert row["requests"] == 201 and row["under_window"], row["peak"]   # every request fits: the run completes
    assert row["ratio"] <= 1.5, (row["ratio"], row["breaks"])
    apart = [b - a for a, b in zip(row["where"], row["where"][1:])]
    assert row["where"][0] >= 10 and min(apart) >= 4                   # batches stay apart to the end
    assert row["collapsed"] == 1                                       # the skeleton was collapsed, into one line
    assert edge.edge_figures(edge.seq_task(60), DEFAULT_POLICY)["ratio"] <= 1.5


def test_every_request_keeps_the_newest_results_whole_and_every_call_with_its_result():
    task = edge.seq_task(120)
    for number, messages in enumerate(edge.requests(task, DEFAULT_POLICY), start=1):
        results = [m for m in messages if m.get("role") == "tool"]
        seen = min(number - 1, 2)
        assert [m["content"] for m in results[len(results) - seen:]] == \
               [s.result for s in task.steps[number - 1 - seen:number - 1]]
        assert pairs_whole(messages)
        summaries = [m for m in messages if str(m.get("content")).startswith(COLLAPSED)]
        assert len(summaries) <= 1 and messages[:2] == edge.requests(task, "none")[0][:2]
        collapsed = int(summaries[0]["content"].split("(shell: ")[1].split(")")[0]) if summaries else 0
        assert collapsed + sum(len(m.get("tool_calls") or []) for m in messages) == number - 1   # counts add up


def conversation(turns, size=900):
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Read the notes."}]
    for i in range(turns):
        name = "shell" if i % 3 == 0 else "read_file"
        messages += [{"role": "assistant", "content": "", "tool_calls": [
                         {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * size}]
    return messages


def test_a_collapse_keeps_the_task_and_the_newest_turns_and_merges_an_earlier_summary():
    messages = conversation(12)
    before = copy.deepcopy(messages)
    once = collapse(messages, 0, 3000)
    assert messages == before                                          # the input is not changed
    assert once[:2] == messages[:2] and once[-4:] == messages[-4:]     # the task; the newest two turns
    summary = once[2]
    assert summary["role"] == "user" and summary["content"].startswith(COLLAPSED)
    gone = (len(messages) - len(once) + 1) // 2                        # turns replaced by the line
    assert f"the {gone} oldest tool calls" in summary["content"] and pairs_whole(once)
    assert collapse(once, 10 ** 6, 0) == once                          # a skeleton under the mark: nothing
    again = collapse(once + conversation(6)[2:], 0, 0)                 # six more turns, all but two collapsed
    assert [m["content"] for m in again if m["role"] == "user"][-1].startswith(COLLAPSED)
    assert len([m for m in again if str(m["content"]).startswith(COLLAPSED)]) == 1
    assert "the 16 oldest tool calls" in again[2]["content"]
    assert "read_file: 10, shell: 6" in again[2]["content"]            # 12 + 6 turns, 2 kept


def test_batch_collapses_only_when_stubbing_cannot_reach_the_low_mark():
    short = conversation(8, 3000)                                      # stubs are enough
    out = batch_scissors(short, 4000)
    assert len(out) == len(short) and any(str(m["content"]).startswith(STUB_PREFIX) for m in out)
    long = conversation(60, 3000)                                      # the skeleton alone is past the low mark
    out = batch_scissors(long, 4000)
    assert len(out) < len(long) and out[2]["content"].startswith(COLLAPSED) and pairs_whole(out)
    assert [m["content"] for m in out[-4:]] == [m["content"] for m in long[-4:]]
    grown = out + conversation(61, 300)[-2:]                          # a quiet turn after the cut: no cut
    assert batch_scissors(grown, 4000) == grown


def test_the_benchmark_prints_each_policy_with_its_breaks():
    out = edge.edge_table(turns=(60,))
    rows = [line for line in out.splitlines() if line.startswith("| 60 turns |")]
    assert [row.split(" | ")[1] for row in rows] == list(POLICIES)
    default = next(row for row in rows if f"| {DEFAULT_POLICY} |" in row)
    assert "x |" in default and " of 61 |" in default and default.split(" | ")[-1].startswith("11")
    assert edge.spans([11, 17, 52, 53, 54]) == "11, 17, 52-54" and edge.spans([]) == "none"


def test_a_collapsed_run_loses_no_message_from_the_session_or_the_stream(tmp_path):
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    for i in range(30):
        (workspace / f"f{i}.txt").write_text(f"{i} " * 300)
    script = [calls(tool_call("read_file", path=f"f{i}.txt")) for i in range(30)] + ["Read them all."]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(data), XDG_CONFIG_HOME=str(data / "config"), HOME=str(data),
               TERM="dumb")
    with ScriptedServer(script) as server:
        done = subprocess.run([sys.executable, "-m", "tinyharness", "run", "--base-url", server.base_url, "--yes",
                               "--context-window", "3072", "--max-turns", "40", "--output-format", "stream-json", "--verbose",
                               "Read every file."], cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(m["content"].startswith(COLLAPSED) for m in server.requests[-1]["messages"]
               if isinstance(m.get("content"), str))                   # the run did collapse
    [session] = (data / "tinyharness" / "sessions").glob("*.jsonl")
    events = [json.loads(line) for line in session.read_text().splitlines()[1:]]
    results = [e["message"]["tool_call_id"] for e in events if e.get("type") == "tool"]
    replies = [e for e in events if e.get("type") == "assistant"]
    assert len(results) == 30 == len(set(results)) and len(replies) == 31
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    streamed = [block["tool_use_id"] for line in lines if line.get("type") == "user"
                for block in line["message"]["content"] if block.get("type") == "tool_result"]
    assert streamed == results
