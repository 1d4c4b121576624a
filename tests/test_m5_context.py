"""m5: scissors and notebook. Run on m5, every later stage and `tinyharness run`.

The stages cut with the sliding scissors on every turn; tinyharness cuts in batches and caps long
results on insert by default (kinder to the server's prompt cache, see tinyharness/context.py) and
keeps the sliding scissors as `--context-policy sliding`. So the sliding tests give tinyharness that
flag, and the final package's default has its own tests at the end.
"""
import copy
import importlib
import json
import os

import pytest

from tests.ladder import FINAL, calls, copies, run_stage, stages_from, stats_line, tool_call, tool_results
from tinyharness.testing import ScriptedServer
from tinyharness.testing.replies import estimate_tokens

LADDER = stages_from("m5")
STUB = "[cut by the harness: "
NOTES = "agent_notes.md"


def sliding(stage):
    """The flags that make `stage` cut with the sliding scissors (the stages do by default)."""
    return ("--context-policy", "sliding") if stage == FINAL else ()


def run(stage, workspace, script, *flags, stdin=""):
    """Run the stage on a script with --yes; return (result, server) after the run."""
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *flags, "go", stdin=stdin, approve=True)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result, server


def make_files(workspace, **sizes):
    """name_ext=size: a file of `size` copies of its first letter (a_txt=5000 -> a.txt, 'aaaa...')."""
    for key, size in sizes.items():
        name = key.replace("_", ".")
        (workspace / name).write_text(name[0] * size)


def read_each(*names):
    """One read_file per turn, then the answer."""
    return [calls(tool_call("read_file", path=name)) for name in names] + ["done"]


def prompt_tokens(request):
    """What the scripted server counted for a request (messages then tools, characters/4)."""
    return estimate_tokens(json.dumps(request["messages"], ensure_ascii=False)
                           + json.dumps(request.get("tools"), ensure_ascii=False))


# --- The scissors --------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_old_long_results_are_stubbed_and_the_newest_two_kept(stage, workspace):
    make_files(workspace, a_txt=5000, b_txt=300, c_txt=150, d_txt=900, e_txt=800)
    _, server = run(stage, workspace, read_each("a.txt", "b.txt", "c.txt", "d.txt", "e.txt"), *sliding(stage))
    third = tool_results(server.requests[2])              # two results so far: nothing to cut
    assert third == {"call_1": "a" * 5000, "call_2": "b" * 300}
    fourth = tool_results(server.requests[3])             # a.txt is now the third-newest: cut
    assert fourth["call_1"] == ('[cut by the harness: read_file("a.txt") returned 5,000 characters; '
                                'call it again if you need them]')
    assert fourth["call_2"] == "b" * 300 and fourth["call_3"] == "c" * 150
    last = tool_results(server.requests[-1])
    assert last["call_2"].startswith(STUB) and "300 characters" in last["call_2"]
    assert last["call_3"] == "c" * 150                    # 200 characters or fewer: never cut
    assert (last["call_4"], last["call_5"]) == ("d" * 900, "e" * 800)   # the newest two, whole
    # only tool results are cut: the calls (and so what they asked for) stay in every request
    asked = [json.loads(c["function"]["arguments"])["path"] for m in server.requests[-1]["messages"]
             for c in m.get("tool_calls") or []]
    assert asked == ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]


@pytest.mark.parametrize("stage", LADDER)
def test_a_result_is_never_cut_before_the_model_has_seen_it(stage, workspace):
    make_files(workspace, a_txt=900, b_txt=900, c_txt=900, d_txt=900)
    script = [calls(*(tool_call("read_file", path=n) for n in ("a.txt", "b.txt", "c.txt", "d.txt"))), "done"]
    _, server = run(stage, workspace, script, *sliding(stage))
    assert list(tool_results(server.requests[1]).values()) == [c * 900 for c in "abcd"]


@pytest.mark.parametrize("stage", LADDER)
def test_stubs_are_deterministic(stage, tmp_path):
    sent = []
    for name in ("one", "two"):
        workspace = tmp_path / name
        workspace.mkdir()
        make_files(workspace, a_txt=5000, b_txt=4000, c_txt=3000, d_txt=2000)
        _, server = run(stage, workspace, read_each("a.txt", "b.txt", "c.txt", "d.txt", "a.txt"), *sliding(stage))
        sent.append(server.requests)
    assert sent[0] == sent[1]
    stubs = [text for text in tool_results(sent[0][-1]).values() if text.startswith(STUB)]
    assert len(stubs) == 3
    # a result cut once is sent byte-identical from then on: the prefix up to it never changes again
    first_stub = [m for m in sent[0][3]["messages"] if m.get("tool_call_id") == "call_1"]
    for request in sent[0][4:]:
        assert [m for m in request["messages"] if m.get("tool_call_id") == "call_1"] == first_stub


@pytest.mark.parametrize("stage", LADDER)
def test_no_scissors_sends_everything(stage, workspace):
    make_files(workspace, a_txt=5000, b_txt=4000, c_txt=3000, d_txt=2000)
    _, server = run(stage, workspace, read_each("a.txt", "b.txt", "c.txt", "d.txt"), "--no-scissors")
    assert list(tool_results(server.requests[-1]).values()) == ["a" * 5000, "b" * 4000, "c" * 3000, "d" * 2000]
    for before, after in zip(server.requests, server.requests[1:]):   # every request extends the one before
        assert after["messages"][:len(before["messages"])] == before["messages"]


@pytest.mark.parametrize("stage", copies("m5", "context.py"))   # once per distinct copy of the scissors
def test_the_scissors_return_a_new_list_and_leave_their_input_alone(stage):
    # The loop keeps what the scissors return, so a pair that cut in place would send the same bytes:
    # only the caller's list tells. A caller that keeps the whole story (a transcript, an A/B run with
    # --no-scissors, tinyharness's session file) would lose it to the stubs.
    scissors = importlib.import_module(f"{stage}.context").sliding_scissors
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    for n, size in enumerate((5000, 4000, 3000, 2000), 1):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"{n}.txt"})}}
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{n}", "content": str(n) * size}]
    messages.append({"role": "assistant", "content": "", "tool_calls": []})
    before = copy.deepcopy(messages)
    cut = scissors(messages)
    assert messages == before, "the scissors changed the list they were given: return a new list instead"
    assert cut is not messages
    assert [m["content"].startswith(STUB) for m in cut if m["role"] == "tool"] == [True, True, False, False]


def read_story(*sizes, answered=True):
    """The messages of a run that read one file per turn, of these sizes; `answered`: the model has
    replied since the last result (so every result has been seen)."""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    for n, size in enumerate(sizes, 1):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"{n}.txt"})}}
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{n}", "content": str(n) * size}]
    return messages + ([{"role": "assistant", "content": "", "tool_calls": []}] if answered else [])


def stubbed(messages):
    return [m["content"].startswith(STUB) for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("stage", copies("m5", "context.py"))   # once per distinct copy of the scissors
def test_the_scissors_at_their_boundaries(stage):
    # Only keep=2 runs in a real loop, so a slice that breaks at 0 (`positions[:-keep]` is empty when
    # keep is 0) or past the number of results would pass every other test.
    context = importlib.import_module(f"{stage}.context")
    scissors, older = context.sliding_scissors, context.older_results
    story = read_story(900, 900, 900)
    assert stubbed(scissors(story, keep=0)) == [True, True, True]      # keep nothing: every seen result is cut
    assert stubbed(scissors(story, keep=1)) == [True, True, False]
    assert stubbed(scissors(story, keep=3)) == [False, False, False]   # as many as there are: nothing to cut
    assert stubbed(scissors(story, keep=10)) == [False, False, False]  # more than there are
    assert older(story, 0) == [3, 5, 7] and older(story, 3) == [] and older(story, 10) == []
    # a result the model has not seen yet is never cut, even with keep=0
    assert stubbed(scissors(read_story(900, 900, answered=False), keep=0)) == [True, False]
    # the length limit: a result of exactly `limit` characters stays, one more is cut
    assert stubbed(scissors(read_story(200, 201, 5, 5))) == [False, True, False, False]
    assert stubbed(scissors(read_story(50, 51, 5, 5), limit=50)) == [False, True, False, False]
    assert scissors([]) == [] and older([], 0) == []                   # nothing at all: nothing to do
    no_reply = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    assert scissors(no_reply, keep=0) == no_reply                       # no results, no reply yet


# --- The notebook ----------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_save_note_appends_to_agent_notes_without_asking(stage, workspace):
    script = [calls(tool_call("save_note", text="Budget: 300 KM (meeting-2026-11-02.md)")),
              calls(tool_call("save_note", text="Owner: Mira, due Friday")), "done"]
    with ScriptedServer(script=script) as server:   # no --yes and nothing on stdin: a prompt would be denied
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go")
    assert result.returncode == 0 and "Allow" not in result.stdout, result.stdout + result.stderr
    text = (workspace / NOTES).read_text(encoding="utf-8")
    assert text.index("Budget: 300 KM (meeting-2026-11-02.md)") < text.index("Owner: Mira, due Friday")
    outcome = tool_results(server.requests[1])["call_1"]
    assert outcome.startswith("OK: ") and NOTES in outcome
    assert '  [tool] save_note({"text": "Owner: Mira, due Friday"})' in result.stdout.splitlines()


@pytest.mark.parametrize("stage", LADDER)
def test_save_note_description_says_notes_survive_the_scissors(stage, workspace):
    _, server = run(stage, workspace, ["done"])
    tools = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    description = tools["save_note"]["description"]
    assert "cut" in description and "survive" in description and NOTES in description
    assert tools["save_note"]["parameters"]["required"] == ["text"]


@pytest.mark.skipif(os.name != "posix", reason="symlinks and hard links")
@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("link", ["symlink", "hard link"])
def test_save_note_never_writes_through_a_link_planted_at_its_file(stage, link, tmp_path):
    workspace, outside = tmp_path / "ws", tmp_path / "outside.txt"
    workspace.mkdir()
    outside.write_text("untouched")
    (os.symlink if link == "symlink" else os.link)(outside, workspace / NOTES)
    _, server = run(stage, workspace, [calls(tool_call("save_note", text="x")), "done"])
    assert tool_results(server.requests[1])["call_1"].startswith("ERROR: ")
    assert outside.read_text() == "untouched"


# --- The context watch -----------------------------------------------------------------------

def usage(prompt, cached=None):
    details = {} if cached is None else {"prompt_tokens_details": {"cached_tokens": cached}}
    return {"prompt_tokens": prompt, "completion_tokens": 5, **details}


@pytest.mark.parametrize("stage", LADDER)
def test_warns_once_when_the_prompt_passes_90_percent_of_the_window(stage, workspace):
    make_files(workspace, a_txt=10)
    script = [{**calls(tool_call("read_file", path="a.txt")), "usage": usage(850)},
              {**calls(tool_call("read_file", path="a.txt")), "usage": usage(920)},
              {**calls(tool_call("list_dir", path=".")), "usage": usage(950)}, {"content": "done", "usage": usage(960)}]
    result, _ = run(stage, workspace, script, "--context-window", "1000")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("[context]")]
    assert len(warnings) == 1 and "prompt_tokens=920" in warnings[0] and "1000-token" in warnings[0]
    result, _ = run(stage, workspace, script)             # the default window, 8192: no warning
    assert "[context]" not in result.stderr


@pytest.mark.parametrize("stage", LADDER)
def test_warns_when_the_server_count_drops_while_the_conversation_grew(stage, workspace):
    make_files(workspace, a_txt=10, b_txt=10)
    script = [{**calls(tool_call("read_file", path="a.txt")), "usage": usage(3000)},
              {**calls(tool_call("read_file", path="b.txt")), "usage": usage(1000)}, "done"]
    result, _ = run(stage, workspace, script, *sliding(stage))
    assert "[context] prompt_tokens fell from 3000 to 1000" in result.stderr
    assert result.stdout.rstrip().endswith("done")        # a warning, not a stop


@pytest.mark.parametrize("stage", LADDER)
def test_the_scissors_own_cut_is_not_taken_for_the_servers(stage, workspace):
    make_files(workspace, a_txt=12000, b_txt=300, c_txt=300)
    result, server = run(stage, workspace, read_each("a.txt", "b.txt", "c.txt"), *sliding(stage))
    counts = [prompt_tokens(r) for r in server.requests]
    assert counts[3] < counts[2]                           # the count really fell: a.txt was cut
    assert "[context]" not in result.stderr


# --- [stats] ---------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_stats_add_cached_tokens_after_the_contract_fields(stage, workspace):
    script = [{**calls(tool_call("list_dir", path=".")), "usage": usage(100, cached=0)},
              {"content": "done", "usage": usage(180, cached=96)}]
    result, _ = run(stage, workspace, script)
    stats = stats_line(result.stderr)
    assert list(stats) == ["turns", "tool_calls", "prompt_tokens", "completion_tokens", "seconds", "cached_tokens"]
    assert (stats["prompt_tokens"], stats["cached_tokens"]) == ("280", "96")


@pytest.mark.parametrize("stage", LADDER)
def test_no_cached_tokens_when_the_server_does_not_report_them(stage, workspace):
    result, _ = run(stage, workspace, [{"content": "done", "usage": usage(100)}])
    assert list(stats_line(result.stderr)) == ["turns", "tool_calls", "prompt_tokens", "completion_tokens", "seconds"]


@pytest.mark.parametrize("stage", LADDER)
def test_context_window_must_be_a_positive_number(stage, workspace):
    for bad in ("0", "-5", "many"):
        result = run_stage(stage, workspace, "--context-window", bad, "go")
        assert result.returncode == 2 and "--context-window" in result.stderr
    run(stage, workspace, ["done"], "--context-window", "16384")     # and a good one is taken


# --- tinyharness: the cache-friendly default -------------------------------------------------

def test_tinyharness_caps_long_results_on_insert_and_keeps_the_prefix(workspace):
    make_files(workspace, a_txt=5000, b_txt=4000, c_txt=300)
    _, server = run(FINAL, workspace, read_each("a.txt", "b.txt", "c.txt"), "--context-window", "4000")
    first = tool_results(server.requests[1])["call_1"]     # the first time the model sees a.txt
    assert first.startswith("aaa") and first.endswith("aaa") and "characters omitted" in first
    assert len(first) <= 0.35 * 4000
    for before, after in zip(server.requests, server.requests[1:]):   # below the high-water mark: only appends
        assert after["messages"][:len(before["messages"])] == before["messages"]
    assert tool_results(server.requests[-1])["call_3"] == "c" * 300


def test_tinyharness_cuts_in_one_batch_past_the_high_water_mark(workspace):
    make_files(workspace, **{f"{c}_txt": 1000 for c in "abcdefghij"})
    _, server = run(FINAL, workspace, read_each(*(f"{c}.txt" for c in "abcdefghij")), "--context-window", "2000")
    breaks = [i for i, (before, after) in enumerate(zip(server.requests, server.requests[1:]), 1)
              if after["messages"][:len(before["messages"])] != before["messages"]]
    assert breaks and len(breaks) < len(server.requests) - 3   # some cuts, but not one every turn
    last = list(tool_results(server.requests[-1]).values())
    # the oldest turns stubbed, or collapsed into one line once the calls and stubs grew too many
    collapsed = [m for m in server.requests[-1]["messages"] if str(m["content"]).startswith("[harness] To keep")]
    assert last[0].startswith(STUB) or len(collapsed) == 1
    assert not last[-1].startswith(STUB) and not last[-2].startswith(STUB)


def test_tinyharness_no_scissors_and_context_policy_are_one_choice(workspace):
    result = run_stage(FINAL, workspace, "--no-scissors", "--context-policy", "sliding", "go")
    assert result.returncode == 2
    result = run_stage(FINAL, workspace, "--context-policy", "sharp", "go")
    assert result.returncode == 2 and "sliding" in result.stderr
