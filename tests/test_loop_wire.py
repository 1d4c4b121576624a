"""The loop against what real servers do: each result shown under its call, replies cut at the length
limit, no usage reported, a context that overflows, an empty answer, a reply that outlasts --max-seconds.
Run on m1 (m2, m3, m4, m5 where the behaviour starts there), every later stage and `tinyharness run`."""
import json
import os
import re
import threading
import time

import pytest

from tests.ladder import FINAL, ROOT, calls, level, run_stage, stages_from, stats_line, tool_call
from tinyharness.testing import ScriptedServer, load_script

posix_only = pytest.mark.skipif(os.name != "posix", reason="the shell tool needs a POSIX system")
# What llama.cpp's server answers when the prompt does not fit its context (HTTP 400).
OVERFLOW = {"status": 400, "body": {"error": {
    "code": 400, "message": "the request exceeds the available context size, try increasing it",
    "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 1000}}}


def run(stage, workspace, script, *flags, stdin="", approve=True, tty=None):
    """Run the stage on a script; return (result, server) after the run. `tty`: the answers typed."""
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *flags, "go", stdin=stdin,
                           approve=approve, tty=tty)
    assert "Traceback" not in result.stderr, result.stderr
    return result, server


def result_lines(stdout):
    """The `    -> ...` lines, in order."""
    return [line for line in stdout.splitlines() if line.startswith("    -> ")]


def last_messages(request, count):
    return request["messages"][-count:]


# --- the result under each call ---------------------------------------------------------------

@pytest.mark.parametrize("stage", stages_from("m1"))
def test_each_call_is_followed_by_its_result_line(stage, notes_workspace):
    result, _ = run(stage, notes_workspace, load_script(ROOT / "examples" / "notes.script.json"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip().splitlines()
    tools = [i for i, line in enumerate(lines) if line.startswith("  [tool] ")]
    assert len(tools) == 4 and all(lines[i + 1].startswith("    -> ") for i in tools)
    ok = "" if level(stage) < 2 else "OK: "  # m2 teaches results that give evidence
    assert lines[tools[-1] + 1] == f"    -> {ok}wrote 98 characters to budget.md"
    assert lines[-1] == "The testing budget is 300 KM, according to meeting-2026-11-02.md. I saved it to budget.md."


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_result_line_shows_the_first_line_only_and_at_most_160_characters(stage, workspace):
    (workspace / "long.txt").write_text("x" * 500 + "\nsecond line\n")
    result, _ = run(stage, workspace, [calls(tool_call("read_file", path="long.txt")), "done"])
    assert result_lines(result.stdout) == ["    -> " + "x" * 160]


@posix_only
@pytest.mark.parametrize("stage", stages_from("m2"))
def test_the_self_rescue_error_is_visible_on_screen(stage, workspace):
    result, _ = run(stage, workspace, load_script(ROOT / "examples" / "self-rescue.script.json"))
    assert result.returncode == 0, result.stderr
    shown = result_lines(result.stdout)
    assert shown[0].startswith("    -> ERROR: cannot write scratch/notes.txt: the folder scratch does not exist")
    assert shown[-1] == "    -> OK: wrote 32 characters to scratch/notes.txt"


@pytest.mark.parametrize("stage", stages_from("m3"))
def test_blocked_and_denied_calls_are_visible_on_screen(stage, workspace):
    script = [calls(tool_call("write_file", path="../outside.txt", content="x"),
                    tool_call("write_file", path="inside.txt", content="x")), "I saved both files."]
    result, _ = run(stage, workspace, script, tty="n\n", approve=False)
    assert result.returncode == 0, result.stderr
    shown = result_lines(result.stdout)
    assert shown[0].startswith("    -> BLOCKED: ") and shown[1].startswith("    -> DENIED: ")
    assert not (workspace / "inside.txt").exists()
    assert result.stdout.rstrip().splitlines()[-1] == "I saved both files."  # the claim, and above it the truth


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_garbled_call_is_not_run_and_its_result_says_what_a_valid_call_looks_like(stage, workspace):
    script = [{"tool_calls": [tool_call("write_file", path="a.txt", content="x")], "malformed_arguments": True},
              "done"]
    result, server = run(stage, workspace, script)
    assert result.returncode == 0 and not (workspace / "a.txt").exists()
    call, answer = last_messages(server.requests[1], 2)
    assert call["tool_calls"][0]["function"]["arguments"] == "{}"   # what goes back is always sendable
    assert answer["tool_call_id"] == call["tool_calls"][0]["id"]
    assert answer["content"].startswith("ERROR: ") and "A valid call looks like" in answer["content"]
    assert result_lines(result.stdout)[0].startswith("    -> ERROR: ")


@pytest.mark.parametrize("stage", [FINAL])
def test_streamed_runs_show_the_result_line_and_end_with_the_answer(stage, notes_workspace):
    result, _ = run(stage, notes_workspace, load_script(ROOT / "examples" / "notes.script.json"), "--stream")
    assert result.returncode == 0, result.stderr
    assert "    -> OK: wrote 98 characters to budget.md" in result.stdout.splitlines()
    assert result.stdout.rstrip().splitlines()[-1].endswith("I saved it to budget.md.")


# --- replies cut at the length limit ------------------------------------------------------------

def cut_reply(path):
    return {"content": "I will write", "tool_calls": [tool_call("write_file", path=path, content="x")],
            "finish_reason": "length"}


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_cut_reply_is_never_run_and_the_model_is_told_once(stage, workspace):
    result, server = run(stage, workspace, [cut_reply("cut.txt"), "done"])
    assert result.returncode == 0, result.stderr
    assert not (workspace / "cut.txt").exists() and "[tool]" not in result.stdout
    assert "  [harness] the reply was cut at max_tokens=4096: none of it was used" in result.stdout.splitlines()
    assert server.requests[0]["max_tokens"] == 4096
    kept, notice = last_messages(server.requests[1], 2)
    assert kept == {"role": "assistant", "content": "I will write"}   # the text only: no call without a result
    assert notice["role"] == "user"
    assert notice["content"].startswith("[harness] Your last reply was cut off at the length limit (max_tokens=4096)")
    assert result.stdout.rstrip().splitlines()[-1] == "done"


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_cut_reply_without_calls_is_not_said_to_have_calls(stage, workspace):
    result, _ = run(stage, workspace, [{"content": "The budget is", "finish_reason": "length"}, "done"])
    assert result.returncode == 0, result.stderr
    assert "  [harness] the reply was cut at max_tokens=4096: none of it was used" in result.stdout.splitlines()
    assert "calls" not in result.stdout


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_second_cut_reply_stops_the_run_with_exit_3(stage, workspace):
    result, server = run(stage, workspace, [cut_reply("one.txt"), cut_reply("two.txt"), "never asked"])
    assert result.returncode == 3, result.stderr
    assert ("Stopped: the model's reply was cut at the length limit twice (max_tokens=4096). "
            "The task is NOT confirmed complete.") in result.stdout
    assert len(server.requests) == 2 and not list(workspace.iterdir())


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_reply_the_server_cut_short_of_max_tokens_is_not_blamed_on_it(stage, workspace):
    """llama.cpp's server stops at its own n_predict or when the window is full, and still says "length":
    its count of the reply (under our max_tokens) tells whose limit it was."""
    early = {**cut_reply("one.txt"), "usage": {"prompt_tokens": 50, "completion_tokens": 200}}
    result, server = run(stage, workspace, [early, {**early, "usage": {"prompt_tokens": 60, "completion_tokens": 0}},
                                            "never asked"])
    assert result.returncode == 3, result.stderr
    assert ("  [harness] the reply was cut at 200 tokens, under max_tokens=4096 (a limit of the server's own, its "
            "context window or reply cap): none of it was used") in result.stdout.splitlines()
    notice = last_messages(server.requests[1], 1)[0]["content"]
    assert notice.startswith("[harness] Your last reply was cut off at the length limit (200 tokens, under max_tokens=4096")
    assert ("Stopped: the model's reply was cut at the length limit twice (0 tokens, under max_tokens=4096 (a limit "
            "of the server's own") in result.stdout
    assert not list(workspace.iterdir())


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_a_cut_reply_without_a_count_names_both_limits(stage, workspace):
    """A stream without usage (llama-cpp-python's): the harness cannot tell whose limit it was, and says so."""
    result, server = run(stage, workspace, [{**cut_reply("cut.txt"), "usage": False}, "done"])
    assert result.returncode == 0, result.stderr
    assert ("  [harness] the reply was cut at max_tokens=4096 or a limit of the server's own (no count came with "
            "the reply): none of it was used") in result.stdout.splitlines()
    assert not (workspace / "cut.txt").exists()


def test_max_reply_tokens_is_sent_and_named_in_the_notice(workspace):
    result, server = run(FINAL, workspace, [cut_reply("cut.txt"), "done"], "--max-reply-tokens", "300")
    assert result.returncode == 0, result.stderr
    assert [r["max_tokens"] for r in server.requests] == [300, 300]
    assert "(max_tokens=300)" in server.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize("value", ["0", "-5", "x"])
def test_bad_token_flags_are_usage_errors(workspace, value):
    for flag in ("--max-reply-tokens", "--max-tokens"):
        result = run_stage(FINAL, workspace, flag, value, "go")
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"{flag} must be 1 or more" in result.stderr if value != "x" else "invalid int value" in result.stderr


# --- honest counts ------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", stages_from("m1"))
def test_stats_say_unknown_when_the_server_reports_no_usage(stage, workspace):
    result, _ = run(stage, workspace, [{**calls(tool_call("list_dir", path=".")), "usage": {}},
                                       {"content": "done", "usage": {}}])
    stats = stats_line(result.stderr)
    assert (stats["turns"], stats["prompt_tokens"], stats["completion_tokens"]) == ("2", "?", "?")
    assert "usage_missing_turns" not in stats
    result, _ = run(stage, workspace, [{**calls(tool_call("list_dir", path=".")),
                                        "usage": {"prompt_tokens": 100, "completion_tokens": 7}},
                                       {"content": "done", "usage": {}}])
    stats = stats_line(result.stderr)
    assert (stats["prompt_tokens"], stats["completion_tokens"], stats["usage_missing_turns"]) == ("100", "7", "1")
    assert result.stderr.rstrip().endswith("usage_missing_turns=1")


@pytest.mark.parametrize("stage", stages_from("m5"))
def test_the_context_watch_falls_back_to_an_estimate_labelled_as_one(stage, workspace):
    (workspace / "INSTRUCTIONS.md").write_text("Be careful. " * 400)   # about 1,200 tokens in every prompt
    result, _ = run(stage, workspace, [{"content": "done", "usage": {}}], "--context-window", "1000")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("[context]")]
    assert warnings and "(estimated" in warnings[0]


# --- context overflow ---------------------------------------------------------------------------

@pytest.mark.parametrize("stage", stages_from("m1", final=False))
def test_a_context_overflow_exits_1_with_the_numbers_and_what_to_do(stage, workspace):
    result, server = run(stage, workspace, [OVERFLOW])
    assert result.returncode == 1 and len(server.requests) == 1
    assert "9000" in result.stderr and "1000" in result.stderr and "num_ctx" in result.stderr


def reading_turns(workspace, count):
    """`count` turns that each read a different 1,000-character file: old results to cut."""
    for i in range(count):
        (workspace / f"f{i}.txt").write_text(str(i) * 1000)
    return [calls(tool_call("read_file", path=f"f{i}.txt")) for i in range(count)]


def test_the_package_cuts_old_results_and_retries_once_after_an_overflow(workspace):
    result, server = run(FINAL, workspace, reading_turns(workspace, 3) + [OVERFLOW, "done"])
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 5 and "[context]" in result.stderr
    first, retry = server.requests[3]["messages"], server.requests[4]["messages"]
    assert len(first) == len(retry)
    assert not any(m["content"].startswith("[cut by the harness") for m in first if m["role"] == "tool")
    assert retry[3]["content"].startswith("[cut by the harness: read_file(\"f0.txt\")")
    assert retry[-1] == first[-1]                   # the newest results stay whole


def test_the_package_stops_with_exit_1_when_the_retry_overflows_too(workspace):
    result, server = run(FINAL, workspace, reading_turns(workspace, 3) + [OVERFLOW, OVERFLOW, "never asked"])
    assert result.returncode == 1 and len(server.requests) == 5
    error = result.stderr.split("error: ", 1)[1]
    assert "9000" in error and "num_ctx" in error and "once more" in error


def test_the_package_does_not_retry_when_there_is_nothing_to_cut(workspace):
    result, server = run(FINAL, workspace, [OVERFLOW, "never asked"])
    assert result.returncode == 1 and len(server.requests) == 1 and "num_ctx" in result.stderr
    assert "Nothing was retried: the history holds no tool result to cut" in result.stderr


def test_the_message_after_nothing_could_be_cut_says_what_was_checked(workspace):
    result, server = run(FINAL, workspace, reading_turns(workspace, 2) + [OVERFLOW, "never asked"])
    assert result.returncode == 1 and len(server.requests) == 3
    assert "of the 2 tool result(s) in the history, 2 are the newest (never cut)" in result.stderr


# A server with a 3,000-token window that overflows as llama-cpp-python does: a 400 with both numbers
# unstreamed, an empty 200 stream streamed (no numbers at all). Four reads of 3,000 characters each:
# the fourth request (about 3,200 tokens) no longer fits.
def four_big_reads(workspace, count=4):
    for i in range(count):
        (workspace / f"f{i}.txt").write_text(str(i) * 3000)
    return [calls(tool_call("read_file", path=f"f{i}.txt")) for i in range(count)] + ["done"]


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_the_package_cuts_and_retries_when_a_server_overflows_like_llama_cpp_python(workspace, stream):
    with ScriptedServer(script=four_big_reads(workspace), context_window=3000) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, stream, "go", approve=True)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("done") and server.replies_sent == 5 and server.overflows
    first = server.overflows[0]
    assert first + 1 not in server.overflows                      # the retry fitted
    retry = server.requests[first + 1]["messages"]
    assert retry[3]["content"].startswith('[cut by the harness: read_file("f0.txt")')
    assert [m["content"][:3] for m in retry[-3::2]] == ["111", "222"]   # the newest two are not stubbed
    assert "[context] the server says the prompt does not fit its context; cut" in result.stderr
    learned = "[context] the server says its context window holds 3000 tokens, not the 8192 planned"
    # Only the 400 names the window; the empty stream says nothing, and nothing is made up.
    assert result.stderr.count(learned) == (1 if stream == "--no-stream" else 0)


def test_a_learned_window_drives_the_policy_for_the_rest_of_the_run(workspace):
    with ScriptedServer(script=four_big_reads(workspace, count=7), context_window=3000) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "--no-stream", "go", approve=True)
    assert result.returncode == 0, result.stderr
    # After the first overflow, results are capped for a 3,000-token window and the batch policy cuts
    # at 75% of it: no second overflow. (Planning with 8,192 tokens, every later turn overflowed.)
    assert len(server.overflows) == 1 and server.replies_sent == 8


def test_a_window_the_server_tells_up_front_is_used_from_the_first_call(workspace):
    with ScriptedServer(script=four_big_reads(workspace), context_window=3000, announce_window=True) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "--no-stream", "go", approve=True)
    assert result.returncode == 0, result.stderr
    assert server.overflows == [] and server.replies_sent == 5    # capped and cut for 3,000 tokens from the start


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_a_subagent_cuts_and_retries_too(workspace, stream):
    script = [calls(tool_call("task", description="read the four files"))] + four_big_reads(workspace) \
        + ["The parent is done."]
    with ScriptedServer(script=script, context_window=3000) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, stream, "go",
                           approve=True)
    assert result.returncode == 0, result.stderr
    assert server.overflows and "cut 1 old tool result(s)" in result.stderr
    assert result.stdout.rstrip().endswith("The parent is done.")


# --- an empty answer ----------------------------------------------------------------------------

@pytest.mark.parametrize("stage", stages_from("m1"))
def test_an_empty_answer_ends_with_a_line_that_says_so(stage, workspace):
    result, server = run(stage, workspace, ["", "  "])
    assert result.returncode == 0 and len(server.requests) == (2 if level(stage) >= 4 else 1)
    assert result.stdout.splitlines()[-1] == "(The model gave no answer. The [tool] lines above show what it did.)"


@pytest.mark.parametrize("stage", stages_from("m4"))
def test_an_empty_answer_gets_one_nudge(stage, workspace):
    result, server = run(stage, workspace, ["", "The answer."])
    assert result.returncode == 0 and result.stdout.rstrip().splitlines()[-1] == "The answer."
    assert server.requests[1]["messages"][-1]["content"].startswith("[harness] Your reply was empty.")


# --- budgets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", stages_from("m4"))
def test_max_seconds_bounds_a_single_reply(stage, workspace):
    started = time.monotonic()
    result, _ = run(stage, workspace, [{"content": "too late", "delay": 6}], "--max-seconds", "1.5")
    assert time.monotonic() - started < 5.5
    assert result.returncode == 3, result.stderr
    assert re.search(r"Stopped: reached --max-seconds 1\.5 \(\d+\.\d s have passed\)", result.stdout)


class Trickle:
    """A server that sends its headers at once, then its answer one byte every 0.2 s: every read is
    well within any socket timeout, and the whole answer takes minutes. Both dialects, both modes."""

    def __enter__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                native = self.path.startswith("/api/")
                answer = (json.dumps({"message": {"role": "assistant", "content": "slow " * 300}, "done": True})
                          if native else json.dumps({"choices": [{"message": {"role": "assistant",
                                                                              "content": "slow " * 300}}]}))
                if body.get("stream", native):
                    answer = answer + "\n" if native else f"data: {answer}\n\ndata: [DONE]\n\n"
                data = answer.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass                    # the client hung up: what the test wants

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("api", ["openai", "ollama"])
@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_max_seconds_bounds_a_reply_that_trickles_one_byte_at_a_time(workspace, api, stream):
    # 1,500 bytes at 0.2 s each is five minutes: without a bound per byte the run (and this test) hangs.
    with Trickle() as url:
        result = run_stage(FINAL, workspace, "--base-url", url, "--api", api, "--context-window", "8192", stream,
                           "--max-seconds", "1.5", "go", approve=True)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 3, result.stderr
    assert re.search(r"Stopped: reached --max-seconds 1\.5 \(\d+\.\d s have passed\)", result.stdout)


def test_max_tokens_stops_the_package_gracefully(workspace):
    usage = {"prompt_tokens": 80, "completion_tokens": 20}
    script = [{**calls(tool_call("list_dir", path=".")), "usage": usage} for _ in range(5)]
    result, server = run(FINAL, workspace, script, "--max-tokens", "250")
    assert result.returncode == 3 and len(server.requests) == 3
    assert ("Stopped: the token budget of --max-tokens 250 was used (300 tokens by the server's counts). "
            "The task is NOT confirmed complete.") in result.stdout


def test_max_tokens_says_once_when_the_server_reports_no_counts(workspace):
    # The budget counts the server's tokens; a server that sends none must not leave it silently off.
    script = [{**calls(tool_call("list_dir", path=".")), "usage": False} for _ in range(3)] + ["done"]
    result, server = run(FINAL, workspace, script, "--max-tokens", "250")
    assert result.returncode == 0 and len(server.requests) == 4
    warnings = [line for line in result.stderr.splitlines() if "--max-tokens" in line]
    assert warnings == ["[harness] --max-tokens 250 cannot be enforced: the server reports no token counts "
                        "for its replies (see `tinyharness doctor`)."], result.stderr


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_the_tool_line_is_one_line_whatever_the_model_spelled(stage, workspace):
    script = [calls({"name": "write_file", "arguments": '{ "path":"a.txt",\n "content" : "x" }'}), "done"]
    result, _ = run(stage, workspace, script)
    lines = result.stdout.splitlines()
    assert lines[0] == '  [tool] write_file({"content": "x", "path": "a.txt"})' and lines[1].startswith("    -> ")
