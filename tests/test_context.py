"""Context policies (tinyharness/context.py) and the benchmark that measures them (benchmarks/context.py)."""
import copy
import json

import pytest

from benchmarks import context as bench
from tinyharness import context
from tinyharness.context import (DEFAULT_POLICY, POLICIES, STUB_PREFIX, ContextWatch, batch_scissors,
                                 cap_on_insert, estimate_tokens, sliding_scissors)
from tinyharness.testing.replies import estimate_tokens as server_estimate


def turn(i, size, tool="read_file"):
    """The i-th call and its result: `size` characters of the i-th letter."""
    arguments = json.dumps({"path": f"notes/{i}.md"})
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call_{i}", "index": 0, "type": "function", "function": {"name": tool, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "abcdefghij"[i % 10] * size}]


def conversation(*sizes, tool="read_file"):
    """System, task, then one turn per size."""
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Summarise the notes."}]
    for i, size in enumerate(sizes):
        messages += turn(i, size, tool)
    return messages


def results(messages):
    return [m["content"] for m in messages if m["role"] == "tool"]


# --- sliding_scissors (the m5 stage's policy) ----------------------------------------------------

def test_sliding_cuts_every_long_result_but_the_newest_two():
    messages = conversation(5120, 300, 150, 900, 800)
    cut = results(sliding_scissors(messages))
    assert cut[0] == ('[cut by the harness: read_file("notes/0.md") returned 5,120 characters; '
                      'call it again if you need them]')
    assert cut[1].startswith(STUB_PREFIX) and "300 characters" in cut[1]
    assert cut[2] == "c" * 150                       # short enough to keep (limit 200)
    assert cut[3:] == ["d" * 900, "e" * 800]         # the newest two, whole


def test_sliding_stubs_are_deterministic_and_never_change_again():
    messages = conversation(5120, 3000, 900, 800)
    once = sliding_scissors(messages)
    assert sliding_scissors(copy.deepcopy(messages)) == once
    assert sliding_scissors(once) == once
    tiny = sliding_scissors(messages, limit=10)        # a stub is longer than this limit...
    assert sliding_scissors(tiny, limit=10) == tiny    # ...and still never cut again
    # a turn later the window slides: one more result is cut, everything else is as it was
    later = sliding_scissors(once + turn(4, 700))
    third_newest = 7
    assert later[third_newest]["content"].startswith(STUB_PREFIX)
    assert [m for i, m in enumerate(later[:len(once)]) if i != third_newest] == \
           [m for i, m in enumerate(once) if i != third_newest]
    assert results(later)[3:] == ["d" * 800, "e" * 700]


def test_sliding_leaves_other_messages_alone_and_does_not_mutate_its_input():
    messages = conversation(5120, 3000, 900, 800)
    messages[2]["content"] = "x" * 5000              # a long assistant text is not a tool result
    before = copy.deepcopy(messages)
    out = sliding_scissors(messages)
    assert messages == before
    assert out is not messages
    for old, new in zip(messages, out):
        if old["role"] != "tool":
            assert new is old


def test_sliding_keep_and_limit():
    messages = conversation(500, 500, 500)
    assert results(sliding_scissors(messages, keep=5)) == results(messages)
    cut = results(sliding_scissors(messages, keep=0))
    assert all(r.startswith(STUB_PREFIX) for r in cut[:2]) and cut[2] == "c" * 500   # the model has not seen it yet
    assert results(sliding_scissors(messages, limit=500)) == results(messages)


def test_no_scissors_cut_a_result_the_model_has_not_seen():
    messages = conversation(5000, 5000)
    messages += [{"role": "assistant", "content": "", "tool_calls": [
        {"id": f"call_new_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in range(4)]}]
    messages += [{"role": "tool", "tool_call_id": f"call_new_{i}", "content": "z" * 5000} for i in range(4)]
    assert results(sliding_scissors(messages))[2:] == ["z" * 5000] * 4         # one reply's four results, all whole
    assert all(r.startswith(STUB_PREFIX) for r in results(sliding_scissors(messages))[:2])
    assert results(batch_scissors(messages, 2000))[2:] == ["z" * 5000] * 4


def test_stub_copes_with_an_unknown_call_and_broken_arguments():
    messages = conversation(900, 900, 900)
    messages[2]["tool_calls"][0]["function"]["arguments"] = '{"path": "no'          # invalid JSON
    messages[5]["tool_call_id"] = "call_missing"
    cut = results(sliding_scissors(messages, keep=1))
    assert cut[0].startswith('[cut by the harness: read_file() returned 900')
    assert cut[1].startswith("[cut by the harness: a tool call returned 900")


def test_stub_abridges_long_arguments():
    messages = conversation(900, 10, 10, tool="shell")
    messages[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": "echo " + "y" * 500})
    stub = results(sliding_scissors(messages))[0]
    assert len(stub) < 200 and 'shell("echo yyy' in stub and '..."' in stub


@pytest.mark.parametrize("module", ["m5_context", "m6_verify", "m7_eval", "m8_vision", "tinyharness"])
def test_a_command_stub_does_not_invite_running_it_again(module):
    # reading a file again is harmless; running `pip install` or `echo x >> log` again is not
    scissors = __import__(f"{module}.context", fromlist=["sliding_scissors"]).sliding_scissors
    for policy in [scissors] + ([batch_scissors] if module == "tinyharness" else []):
        messages = conversation(9000, 9000, 9000, tool="shell")
        stub = results(policy(messages) if policy is scissors else policy(messages, 2048))[0]
        assert stub == ('[cut by the harness: shell("notes/0.md") returned 9,000 characters; '
                        'not shown again: running it again would repeat what it did]'), policy
        read = results(scissors(conversation(9000, 9000, 9000)))[0]
        assert read.endswith("returned 9,000 characters; call it again if you need them]")


# --- batch_scissors --------------------------------------------------------------------------

WINDOW = 4000   # tokens: high water 3,000 tokens = ~12,000 characters, low water 1,600 tokens


def test_batch_changes_nothing_below_the_high_water_mark():
    messages = conversation(4000, 4000, 2000)
    assert estimate_tokens(messages) < 0.75 * WINDOW
    assert batch_scissors(messages, WINDOW) == messages


def test_batch_cuts_oldest_first_in_one_go_down_to_the_low_water_mark():
    messages = conversation(4000, 4000, 2000, 2000, 1000)
    assert estimate_tokens(messages) > 0.75 * WINDOW
    before = copy.deepcopy(messages)
    out = batch_scissors(messages, WINDOW)
    assert messages == before                          # input untouched
    assert estimate_tokens(out) <= 0.40 * WINDOW
    cut = results(out)
    assert [r.startswith(STUB_PREFIX) for r in cut] == [True, True, True, False, False]
    assert cut[3:] == ["d" * 2000, "e" * 1000]         # the newest two, whole
    assert [m for m in out if m["role"] != "tool"] == [m for m in messages if m["role"] != "tool"]


def test_batch_stops_at_the_low_water_mark():
    messages = conversation(6000, 6000, 300, 300, 300)
    cut = results(batch_scissors(messages, WINDOW))
    assert cut[0].startswith(STUB_PREFIX) and cut[1].startswith(STUB_PREFIX)
    assert cut[2] == "c" * 300                         # under the low mark already: left whole


def test_batch_keeps_the_prefix_stable_between_cuts():
    history = batch_scissors(conversation(4000, 4000, 2000, 2000, 1000), WINDOW)
    for size in (500, 600, 700):                       # quiet turns: the history only grows
        grown = history + turn(len(results(history)), size)
        after = batch_scissors(grown, WINDOW)
        assert after == grown
        history = after
    grown = history + turn(8, 6000)                    # past the high mark again: a second cut
    after = batch_scissors(grown, WINDOW)
    assert estimate_tokens(grown) > 0.75 * WINDOW and after != grown
    for old, new in zip(history, after):               # what was cut stays byte-identical
        if str(old["content"]).startswith(STUB_PREFIX):
            assert new == old


def test_batch_never_cuts_the_newest_two_even_when_they_alone_overflow():
    messages = conversation(9000, 9000, 9000)
    cut = results(batch_scissors(messages, WINDOW))
    assert cut[0].startswith(STUB_PREFIX) and cut[1:] == ["b" * 9000, "c" * 9000]


# --- cap_on_insert -----------------------------------------------------------------------------

def test_cap_keeps_short_results_and_caps_long_ones_head_and_tail():
    assert cap_on_insert("short", 100) == "short"
    text = "".join(f"line {i}\n" for i in range(2000))
    capped = cap_on_insert(text, 1000)
    assert len(capped) <= 1000
    assert capped.startswith("line 0\nline 1\n") and capped.endswith("line 1999\n")
    head, rest = capped.split("\n[... ")
    omitted, tail = rest.split(" ...]\n")
    omitted = int(omitted.split(" characters omitted")[0].replace(",", ""))
    assert text.startswith(head) and text.endswith(tail) and len(head) + omitted + len(tail) == len(text)
    assert cap_on_insert(capped, 1000) == capped       # capping twice changes nothing


@pytest.mark.parametrize("head_keep, tail_keep", [(2900, 2900), (4000, 600)])
def test_cap_counts_what_a_tools_own_cut_hid(head_keep, tail_keep):
    full = "exit status 0\n" + "".join(f"{n}\n" for n in range(1, 30001))   # 168,908 characters of output
    marker = (f"\n[... {len(full) - head_keep - tail_keep} characters omitted. To see them, run the command "
              "again with | head, | tail or | grep to pick the part you need ...]\n")
    shell = full[:head_keep] + marker + full[-tail_keep:]                # the shell tool's own cut
    for max_chars in range(1000, len(shell), 3):                         # the marker cut, kept, or cut across
        capped = cap_on_insert(shell, max_chars)
        assert len(capped) <= max_chars
        # what is shown, gap by gap, adds up to the whole output: every count is the truth
        shown = context.OMITTED.split(capped)                            # text, count, text[, count, text]
        texts, counts = shown[0::2], [int(n.replace(",", "")) for n in shown[1::2]]
        assert 1 <= len(counts) <= 2 and sum(map(len, texts)) + sum(counts) == len(full)
        position = 0
        for text, count in zip(texts, counts + [0]):
            assert full[position:position + len(text)] == text
            position += len(text) + count
    assert len(context.OMITTED.findall(cap_on_insert(shell, 2867))) == (1 if head_keep == tail_keep else 2)


def test_cap_policy_caps_each_result_once():
    window = 2000                                      # cap: 700 characters
    messages = conversation(5000, 300)
    once = POLICIES["cap"](messages, window)
    assert len(results(once)[0]) <= context.cap_chars(window) and results(once)[1] == "b" * 300
    assert POLICIES["cap"](once, window) == once


# --- Measuring -----------------------------------------------------------------------------------

def test_estimate_tokens_is_the_scripted_servers_rule():
    messages = conversation(1234, 77)
    assert estimate_tokens(messages) == server_estimate(json.dumps(messages, ensure_ascii=False))


def test_watch_warns_once_when_the_prompt_nears_the_window():
    watch = ContextWatch(8192)
    assert watch.check(5000, 10, sent_tokens=5100) is None
    warning = watch.check(7500, 12, sent_tokens=7600)
    assert warning and "7500" in warning and "91%" in warning and "8192" in warning
    assert watch.check(7600, 14, sent_tokens=7700) is None   # still near: said already
    assert watch.check(3000, 16, sent_tokens=3100) is None   # the harness cut (its own estimate fell)
    assert watch.check(7400, 18, sent_tokens=7500) is not None  # a new crossing warns again


def test_watch_warns_when_the_prompt_drops_while_the_conversation_grew():
    watch = ContextWatch(8192)
    assert watch.check(3000, 10, sent_tokens=3100) is None
    warning = watch.check(2100, 12, sent_tokens=3900)  # we sent more, the server counted less
    assert warning and "fell from 3000 to 2100" in warning and "10 -> 12 messages" in warning
    # a drop the harness made itself (scissors) is not the server's doing
    watch = ContextWatch(8192)
    watch.check(3000, 10, sent_tokens=3100)
    assert watch.check(1500, 12, sent_tokens=1600) is None
    # without our own estimate, a drop with more messages is reported
    watch = ContextWatch(8192)
    watch.check(3000, 10)
    assert watch.check(2000, 12) is not None
    assert watch.check(1900, 12) is None               # same number of messages: a retry, not growth


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_has_the_uniform_signature_and_does_not_mutate(name):
    messages = conversation(*[3000] * 12)
    before = copy.deepcopy(messages)
    out = POLICIES[name](messages, 4096)
    assert messages == before and isinstance(out, list) and out is not messages
    if "cap" not in name:                              # only a cap may shorten the newest results
        assert results(out)[-2:] == results(messages)[-2:]


def test_the_default_is_a_registered_policy():
    assert DEFAULT_POLICY in POLICIES


# --- The benchmark -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def forty_turns():
    return bench.run_all(bench.forty_turn_task(), bench.WINDOW, ["none", "sliding", DEFAULT_POLICY])


def test_benchmark_default_policy_meets_the_40_turn_targets(forty_turns):
    none, sliding, default = forty_turns
    assert (none["requests"], default["requests"]) == (40, 40)
    assert default["under_window"] and default["peak"] <= 0.9 * bench.WINDOW
    assert default["newest_intact"]
    assert default["reprocessed_vs_none"] <= 1.15
    assert not none["under_window"]                    # the task really does overflow the window


def test_benchmark_sliding_scissors_cost_more_work_than_no_scissors(forty_turns):
    none, sliding, default = forty_turns
    assert sliding["reprocessed"] > none["reprocessed"]
    assert sliding["reprocessed"] > default["reprocessed"]
    assert sliding["breaks"] > default["breaks"] > none["breaks"] == 0
    assert sliding["prompt_tokens"] < none["prompt_tokens"]   # ...while sending far fewer tokens
    assert sliding["capped"] == 0 and sliding["newest_intact"]


def test_benchmark_prints_tables_and_targets():
    out = bench.report(bench.WINDOW, bench.SEED, seeds=range(1, 2))   # one extra seed keeps it quick
    assert "characters/4" in out and "simulated" in out
    for name in POLICIES:
        assert f"| {name} " in out
    targets = [line for line in out.splitlines() if line.startswith("target ")]
    assert len(targets) == 4 and all(": met (" in t or ": NOT met (" in t for t in targets)


def test_benchmark_times_the_real_loop_and_prints_per_turn_figures():
    run = bench.harness_overhead(6, DEFAULT_POLICY)     # the real run_agent, real tools, the scripted server
    assert (run["turns"], run["policy"]) == (6, DEFAULT_POLICY) and run["prompt_tokens"] > 0
    assert 0 < run["waiting"] < run["total"]            # the split is a split, not a timing target
    out = bench.overhead_report(turns=(3, 5), policies=("sliding",), repeat=1)
    assert "client.chat" in out and "not asserted" in out
    row = next(line for line in out.splitlines() if line.startswith("| sliding "))
    assert row.count(" ms ") == 2
