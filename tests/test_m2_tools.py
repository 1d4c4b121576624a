"""m2: error messages are the model's senses. Run on m2, every later stage and `tinyharness run`.

The shell tool (a new process per call, a timeout that kills the whole process group, bytes decoded
with a fallback, long output cut head + tail), results written for someone who cannot see the screen,
and bad calls that never crash the loop nor poison the history.
"""
import importlib
import io
import json
import locale
import os
import signal
import time
from pathlib import Path

import pytest

from tests.ladder import ROOT, calls, copies, run_stage, stages_from, stats_line, tool_call, tool_results
from tinyharness.testing import ScriptedServer, load_script

LADDER = stages_from("m2")
TOOL_NAMES = ("list_dir", "read_file", "write_file", "shell")
NOTE = "Testing budget: 300 KM (2 Nov).\n"  # 32 characters, as in the source article's "OK: wrote 32 characters"
posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups are a POSIX feature")


def run(stage, workspace, script, *flags):
    """Run the stage on a script; return (result, server) after the run."""
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *flags, "go", approve=True)
    assert "Traceback" not in result.stderr, result.stderr
    return result, server


def one_result(stage, workspace, call, *flags):
    """Run one tool call, then let the model finish; return (result, the text the model got back)."""
    result, server = run(stage, workspace, [calls(call), "done"], *flags)
    assert result.returncode == 0, result.stderr
    return result, tool_results(server.requests[1])["call_1"]


def raw_reply(*tool_calls):
    """A reply written by hand, for what the scripted server never sends: object arguments, no id."""
    message = {"role": "assistant", "content": "", "tool_calls": list(tool_calls)}
    return {"raw": json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 5}})}


def is_gone(pid, wait=3.0):
    """True once the process has ended (a zombie waiting to be reaped counts as ended)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    return False


def assert_killed(pid_file):
    pid = int(pid_file.read_text())
    try:
        ours = b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return  # ended
    if not ours or is_gone(pid):
        return  # ended; or a number from the command's own PID namespace (the package's sandbox), not a pid here
    if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
        os.kill(pid, signal.SIGKILL)  # it is still our sleep: do not leave it running after the test
    raise AssertionError(f"the background process {pid} outlived its shell call")


# --- shell -----------------------------------------------------------------------------------

@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_shell_output_and_exit_status_reach_the_model(stage, workspace):
    result, text = one_result(stage, workspace, tool_call("shell", command="echo out; echo oops >&2; exit 3"))
    assert text.splitlines() == ["exit status 3", "out", "oops"]
    assert '  [tool] shell({"command": "echo out; echo oops >&2; exit 3"})' in result.stdout.splitlines()


@pytest.mark.parametrize("stage", LADDER)
def test_shell_description_says_nothing_persists(stage, workspace):
    _, server = run(stage, workspace, ["done"])
    tools = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert set(TOOL_NAMES) <= set(tools)
    assert "cd and variables do not persist" in tools["shell"]["description"]
    assert tools["shell"]["parameters"]["required"] == ["command"]


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_cd_and_variables_do_not_persist_between_calls(stage, workspace):
    script = [calls(tool_call("shell", command="mkdir sub && cd sub && X=42 && pwd && echo X=[$X]"),
                    tool_call("shell", command="pwd; echo X=[$X]")), "done"]
    result, server = run(stage, workspace, script)
    first, second = tool_results(server.requests[1])["call_1"], tool_results(server.requests[1])["call_2"]
    assert first.splitlines()[1:] == [str(workspace.resolve() / "sub"), "X=[42]"]
    assert second.splitlines()[1:] == [str(workspace.resolve()), "X=[]"]


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_timeout_kills_the_whole_process_group_and_keeps_partial_output(stage, workspace):
    command = "sleep 100 & echo $! > bg.pid; echo before; while true; do sleep 0.1; done; echo never-printed"
    result, text = one_result(stage, workspace, tool_call("shell", command=command), "--shell-timeout", "1")
    assert text.startswith("ERROR: timed out after 1 s") and "exit status -9" in text
    assert text.endswith("Output until then:\nbefore\n") and "never-printed" not in text
    assert float(stats_line(result.stderr)["seconds"]) < 10
    assert_killed(workspace / "bg.pid")


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_a_background_child_holding_the_output_open_does_not_hang_the_call(stage, workspace):
    # `sleep 100 &` inherits the pipe; waiting for the pipe to close would wait for the full timeout
    result, text = one_result(stage, workspace, tool_call("shell", command="sleep 100 & echo $! > bg.pid; echo started"))
    assert text == "exit status 0\nstarted\n"
    assert float(stats_line(result.stderr)["seconds"]) < 10  # the default timeout is 60 s
    assert_killed(workspace / "bg.pid")


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_stray_bytes_in_the_output_do_not_crash(stage, workspace):
    _, text = one_result(stage, workspace, tool_call("shell", command=r"printf 'ok \377\376 end'"))
    assert text.startswith("exit status 0\nok ") and text.endswith(" end")


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_long_output_is_cut_head_and_tail_with_the_count(stage, workspace):
    _, text = one_result(stage, workspace, tool_call("shell", command="seq 1 30000"))
    full = "".join(f"{n}\n" for n in range(1, 30001))
    assert len(text) < 6500
    assert text.startswith("exit status 0\n1\n2\n3\n") and text.endswith("29999\n30000\n")
    head, rest = text.split("\n", 1)[1].split("\n[... ", 1)
    count, rest = rest.split(" characters omitted", 1)
    hint, tail = rest.split("]\n", 1)
    assert full.startswith(head) and full.endswith(tail)
    assert int(count) == len(full) - len(head) - len(tail)  # the count is the truth, not a guess
    assert all(word in hint for word in ("head", "tail", "grep"))


# --- what every tool says --------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_results_say_what_happened(stage, workspace):
    (workspace / "empty.txt").write_text("")
    script = [calls(tool_call("write_file", path="scratch/notes.txt", content=NOTE),
                    tool_call("write_file", path="notes.txt", content=NOTE),
                    tool_call("list_dir", path="."),
                    tool_call("read_file", path="empty.txt"),
                    tool_call("read_file", path="missing.txt"),
                    tool_call("list_dir", path="notes.txt")), "done"]
    result, server = run(stage, workspace, script)
    results = list(tool_results(server.requests[1]).values())
    assert results[0].startswith("ERROR: cannot write scratch/notes.txt: the folder scratch does not exist "
                                 "[Errno 2] No such file or directory")
    assert results[1] == "OK: wrote 32 characters to notes.txt"
    assert results[2] == "OK: . has 2 entries:\nempty.txt\nnotes.txt"
    assert results[3].startswith("OK: empty.txt is empty")
    assert results[4].startswith("ERROR: cannot read missing.txt: missing.txt does not exist [Errno 2]")
    assert results[5].startswith("ERROR: cannot list notes.txt: notes.txt is a file, not a folder [Errno 20]")
    assert not (workspace / "scratch").exists() and (workspace / "notes.txt").read_text() == NOTE


@pytest.mark.parametrize("stage", LADDER)
def test_unknown_tool_gets_the_list_of_valid_tools(stage, workspace):
    result, text = one_result(stage, workspace, tool_call("delete_everything", path="."))
    assert text.startswith("ERROR: there is no tool named 'delete_everything'")
    assert all(name in text for name in TOOL_NAMES)
    assert result.stdout.strip().endswith("done")


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("arguments, problem", [({"path": "a.txt"}, "missing: content"),
                                                ({"path": "a.txt", "content": "x", "mode": "a"}, "not expected: mode"),
                                                ({"path": "a.txt", "content": 7}, "not a string: content")])
def test_wrong_arguments_say_which_are_expected(stage, workspace, arguments, problem):
    _, text = one_result(stage, workspace, {"name": "write_file", "arguments": arguments})
    assert text.startswith("ERROR: wrong arguments for write_file") and problem in text
    assert '{"path": "<string>", "content": "<string>"}' in text
    assert not (workspace / "a.txt").exists()


def parse_error(text):
    try:
        json.loads(text)
    except ValueError as e:
        return str(e)
    raise AssertionError(f"{text!r} is valid JSON")


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("how", ["cut by the server", "written as text"])
def test_invalid_json_arguments_never_reach_the_history(stage, workspace, how):
    if how == "cut by the server":   # the scripted server sends the JSON text cut in half
        whole = json.dumps({"path": "a.txt", "content": "x"})
        sent = whole[:len(whole) // 2]
        bad = {"tool_calls": [tool_call("write_file", path="a.txt", content="x")], "malformed_arguments": True}
    else:
        sent = "{path: 'a.txt', content: 'x'}"
        bad = calls({"name": "write_file", "arguments": sent})
    result, server = run(stage, workspace, [bad, calls(tool_call("list_dir", path=".")), "done"])
    assert result.returncode == 0
    assert "  [tool] write_file({})" in result.stdout.splitlines()
    for later in server.requests[1:]:  # Ollama's /v1 would answer 400 to every one of them
        assert later["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"
    text = tool_results(server.requests[1])["call_1"]
    assert text.startswith("ERROR: the arguments are not valid JSON") and parse_error(sent) in text
    assert not (workspace / "a.txt").exists()


@pytest.mark.parametrize("stage", LADDER)
def test_arguments_as_an_object_and_a_call_without_id_are_accepted(stage, workspace):
    (workspace / "a.txt").write_text("alpha")
    call = {"type": "function", "function": {"name": "read_file", "arguments": {"path": "a.txt"}}}
    result, server = run(stage, workspace, [raw_reply(call), "done"])
    assert result.returncode == 0
    assert '  [tool] read_file({"path": "a.txt"})' in result.stdout.splitlines()
    assistant, tool = server.requests[1]["messages"][2:4]
    sent_back = assistant["tool_calls"][0]
    assert sent_back["function"]["arguments"] == '{"path": "a.txt"}'  # a string again, as /v1 expects
    assert sent_back["id"] and tool == {"role": "tool", "tool_call_id": sent_back["id"], "content": "alpha"}


@pytest.mark.parametrize("stage", LADDER)
def test_the_tool_line_shows_canonical_json(stage, workspace):
    script = [calls({"name": "write_file", "arguments": '{ "path":"b.txt",\n "content" : "é" }'}), "done"]
    result, _ = run(stage, workspace, script)
    assert '  [tool] write_file({"content": "é", "path": "b.txt"})' in result.stdout.splitlines()


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_bad_shell_timeout_is_a_usage_error(stage, workspace, value):
    result = run_stage(stage, workspace, "--shell-timeout", value, "go")
    assert result.returncode == 2 and "--shell-timeout" in result.stderr and "Traceback" not in result.stderr


# --- the self-rescue story: python -m pytest tests -k self_rescue ---------------------------

def rescuing_model(body, index):
    """Stands in for the model: it decides from the last tool result alone, as a real model must."""
    last = body["messages"][-1]
    if last["role"] == "user":
        return calls(tool_call("write_file", path="scratch/notes.txt", content=NOTE))
    if "the folder scratch does not exist" in last["content"]:
        return calls(tool_call("shell", command="mkdir scratch"))
    if last["content"].startswith("exit status 0"):
        return calls(tool_call("write_file", path="scratch/notes.txt", content=NOTE))
    return f"Finished. The last result was: {last['content']}"


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_self_rescue_the_model_reads_the_error_and_makes_the_folder(stage, workspace):
    with ScriptedServer(policy=rescuing_model) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "Save my note to scratch/notes.txt",
                           approve=True)
    assert result.returncode == 0, result.stderr
    assert (workspace / "scratch" / "notes.txt").read_text() == NOTE
    assert [line for line in result.stdout.splitlines() if "[tool]" in line] == [
        f'  [tool] write_file({json.dumps({"content": NOTE, "path": "scratch/notes.txt"})})',
        '  [tool] shell({"command": "mkdir scratch"})',
        f'  [tool] write_file({json.dumps({"content": NOTE, "path": "scratch/notes.txt"})})']
    assert result.stdout.splitlines()[-1] == "Finished. The last result was: OK: wrote 32 characters to scratch/notes.txt"
    assert len(server.requests) == 4  # no retry logic in the harness: every step was the model's


@posix_only
@pytest.mark.parametrize("stage", LADDER)
def test_self_rescue_replayed_from_the_example_script(stage, workspace):
    result, server = run(stage, workspace, load_script(ROOT / "examples" / "self-rescue.script.json"))
    assert result.returncode == 0 and (workspace / "scratch" / "notes.txt").read_text() == NOTE
    assert "the folder scratch does not exist" in tool_results(server.requests[1])["call_1"]


@posix_only
@pytest.mark.parametrize("stage", ["m1_loop", *LADDER])
def test_self_rescue_the_reactive_script_makes_the_folder_only_where_the_error_says_why(stage, workspace):
    # examples/reads-errors.script.json (m2's Try it): its second move depends on the result it reads, so m1's
    # bare exception and m2's sentence lead the same stand-in two ways; the ids are the server's, not call_N
    with ScriptedServer(script=load_script(ROOT / "examples" / "reads-errors.script.json")) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "Save my note to scratch/notes.txt",
                           approve=True)
    assert result.returncode == 0, result.stderr
    first = tool_results(server.requests[1])["call_7f3a9c2e"]
    if stage == "m1_loop":
        assert first.startswith("error: FileNotFoundError") and len(server.requests) == 2
        assert "I could not save the note" in result.stdout and not (workspace / "scratch").exists()
    else:
        assert "the folder scratch does not exist" in first and len(server.requests) == 4
        assert list(tool_results(server.requests[3])) == ["call_7f3a9c2e", "call_b81d04e6", "call_3c5e7a90"]
        assert (workspace / "scratch" / "notes.txt").read_text() == NOTE


def test_a_reactive_reply_is_checked_when_the_script_is_read():
    from tinyharness.testing.replies import normalise_reply, reacted
    reply = normalise_reply({"react": [{"if_result_contains": "missing", "reply": "mkdir"}, {"reply": "give up"}]})
    tool = lambda text: {"messages": [{"role": "user", "content": "go"}, {"role": "tool", "content": text}]}
    assert reacted(reply, tool("the folder is missing")) == {"content": "mkdir"}
    assert reacted(reply, tool("FileNotFoundError")) == {"content": "give up"}
    assert reacted({"content": "plain"}, tool("x")) == {"content": "plain"}
    assert isinstance(reacted(normalise_reply({"react": [{"if_result_contains": "a", "reply": "b"}]}), tool("z")), str)
    for bad in ({"react": []}, {"react": [{"reply": "x", "when": "y"}]}, {"react": [{"reply": "x"}], "content": "y"},
                {"react": [{"reply": {"react": [{"reply": "x"}]}}]}):
        with pytest.raises(ValueError):
            normalise_reply(bad)


# --- the pure helpers --------------------------------------------------------------------------

@pytest.fixture(params=copies("m2", "tools.py", "safeio.py"))   # once per distinct copy of the helpers
def tools(request):
    return importlib.import_module(f"{request.param}.tools")


def test_decode_tries_utf8_then_the_locale_then_replaces(tools, monkeypatch):
    monkeypatch.setattr(locale, "getpreferredencoding", lambda do_setlocale=True: "cp950")
    assert tools.decode("預算 300 KM".encode("utf-8")) == "預算 300 KM"
    assert tools.decode("找不到檔案".encode("cp950")) == "找不到檔案"  # the mojibake story: cp950 read as cp950
    assert tools.decode(b"ok \xff end") == "ok \ufffd end"  # fits neither: one mark, the rest intact
    monkeypatch.setattr(locale, "getpreferredencoding", lambda do_setlocale=True: "no-such-codec")
    assert tools.decode(b"\xff") == "\ufffd"


def test_cut_keeps_head_and_tail_and_counts_the_rest(tools):
    assert tools.cut("short") == "short"
    text = "".join(f"line {n}\n" for n in range(5000))
    out = tools.cut(text, keep=100)
    assert out.startswith(text[:100]) and out.endswith(text[-100:])
    assert f"[... {len(text) - 200} characters omitted." in out
    assert f"[... {len(text) - 200 + 7} characters omitted." in tools.cut(text, dropped=7, keep=100)


def test_cut_at_its_boundaries(tools):
    exact = "x" * 200
    assert tools.cut(exact, keep=100) == exact                       # both ends fill it exactly: nothing cut
    one_more = "a" * 100 + "b" + "c" * 100
    out = tools.cut(one_more, keep=100)
    assert out.startswith("a" * 100 + "\n[... 1 characters omitted.") and out.endswith("]\n" + "c" * 100)
    assert "b" not in out
    assert tools.cut("", keep=100) == ""


def test_explain_names_the_first_missing_step_at_every_depth(tools, tmp_path):
    # The first step that is missing (or a file) is named, at the top, in the middle and at the very end.
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "f.txt").write_text("x")
    def said(path, call):
        try:
            call(tmp_path / path)
        except OSError as error:
            return tools.explain(error, tmp_path, path)
        raise AssertionError(f"{path} did not fail")
    read = lambda p: p.read_text()
    assert said("x/y.txt", read).startswith("the folder x does not exist [Errno 2]")          # the first step
    assert said("a/x/y/z.txt", read).startswith("the folder a/x does not exist [Errno 2]")    # a middle one
    assert said("a/b/z.txt", read).startswith("a/b/z.txt does not exist [Errno 2]")           # only the file itself
    assert said("z.txt", read).startswith("z.txt does not exist [Errno 2]")                   # at the top
    assert said("a/f.txt/z.txt", read).startswith("a/f.txt is a file, not a folder [Errno 20]")
    assert said("a/b", read).startswith("a/b is a folder, not a file [Errno 21]")


def test_output_holds_only_both_ends_of_a_flood(tools, monkeypatch):
    home = importlib.import_module(tools.Output.__module__)  # a stage keeps it in its armour, safeio.py
    monkeypatch.setattr(home, "KEEP_BYTES", 1000)
    output = tools.Output()
    output.collect(io.BufferedReader(io.BytesIO(b"a" * 1000 + b"b" * 50_000 + b"c" * 1000)))
    assert output.head == b"a" * 1000 and output.tail == b"c" * 1000 and output.dropped == 50_000


def test_parse_arguments_accepts_text_and_objects(tools):
    assert tools.parse_arguments('{"path": "."}') == ({"path": "."}, None)
    assert tools.parse_arguments({"path": "."}) == ({"path": "."}, None)
    assert tools.parse_arguments("") == ({}, None) and tools.parse_arguments(None) == ({}, None)
    for bad in ('{"path": ', "[1, 2]", "null"):
        arguments, problem = tools.parse_arguments(bad)
        assert arguments == {} and problem
