"""tinyharness chat, sessions, compaction and view (the package only: these come after m8)."""
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder import ROOT, calls, ctrl_c_as_on_a_terminal, run_on_terminal, tool_call, wait_for_the_first_request
from tinyharness.chat import compact
from tinyharness import sessions
from tinyharness.chat import INTERRUPTED_CALL, ChatSettings, Conversation, close_open_calls
from tinyharness.chat.input import Input
from tinyharness.llm import Client
from tinyharness.settings import RunSettings
from tinyharness.testing import ScriptedServer


def env_for(data_home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), PYTHONIOENCODING="utf-8",
               XDG_DATA_HOME=str(data_home), TERM="dumb")
    return env


def run_cli(workspace, data_home, *args, stdin="", timeout=60, tty=None):
    """`tinyharness ARGS`; `tty`: the answers typed at a terminal of its own (a pty), its messages still `stdin`."""
    if tty is not None:
        return run_on_terminal([sys.executable, "-m", "tinyharness", *args], workspace, stdin, tty, timeout,
                               env_for(data_home))
    return subprocess.run([sys.executable, "-m", "tinyharness", *args], cwd=workspace, input=stdin,
                          capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout,
                          env=env_for(data_home))


def session_files(data_home):
    return sorted((Path(data_home) / "tinyharness" / "sessions").glob("*.jsonl"))


def event_types(path):
    return [json.loads(line).get("type", "header") for line in Path(path).read_text().splitlines()]


def last_user_text(request):
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


# --- Pipe mode and sessions --------------------------------------------------------------------

def test_pipe_mode_answers_each_line_keeps_the_history_and_writes_every_event(workspace, tmp_path):
    script = [calls(tool_call("write_file", path="a.txt", content="hi")), "Wrote a.txt.", "It holds hi."]
    with ScriptedServer(script) as srv:
        done = run_cli(workspace, tmp_path / "data", "chat", "--yes", "--base-url", srv.base_url,
                       stdin="make a file\nwhat is in it?\n/quit\nnever sent\n")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("    -> ")]  # result lines: run's
    assert lines == ['  [tool] write_file({"content": "hi", "path": "a.txt"})', "Wrote a.txt.", "It holds hi."]
    assert (workspace / "a.txt").read_text() == "hi"
    assert len(srv.requests) == 3
    sent = [m.get("content") for m in srv.requests[2]["messages"]]
    assert sent[1:] == ["make a file", "", "OK: wrote 2 characters to a.txt", "Wrote a.txt.", "what is in it?"]
    assert done.stderr.count("[stats] ") == 2  # one per message, as run prints it
    [path] = session_files(tmp_path / "data")
    assert event_types(path) == ["header", "system", "user", "assistant", "tool", "assistant", "user", "assistant",
                                 "end"]
    header = json.loads(path.read_text().splitlines()[0])
    assert header["format"] == "tinyharness-session" and header["version"] == 1
    assert header["folder"] == str(workspace.resolve()) and header["id"] == path.stem
    events = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert events[-2]["usage"]["prompt_tokens"] > 0  # the server's count, beside the answer it paid for
    listed = run_cli(workspace, tmp_path / "data", "sessions")
    assert path.stem in listed.stdout and "make a file" in listed.stdout and "/ws  " in listed.stdout  # the folder, its start cut to fit 100 columns


@pytest.mark.parametrize("value", ["", "relative/data"])
def test_a_relative_or_empty_xdg_data_home_means_the_default(monkeypatch, tmp_path, value):
    # The XDG base directory rule: a relative path is invalid. Taken as it is, it would put the
    # sessions (and the trust store) inside whatever folder the agent works in.
    from tinyharness import trust
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", value)
    assert sessions.sessions_dir() == tmp_path / ".local" / "share" / "tinyharness" / "sessions"
    assert trust.store_path() == tmp_path / ".local" / "share" / "tinyharness" / "trusted.json"


def test_ctrl_c_in_pipe_mode_ends_the_session_with_130_and_says_so(workspace, tmp_path):
    import signal
    with ScriptedServer(script=[{"content": "too late", "delay": 300}]) as server:
        proc = subprocess.Popen([sys.executable, "-m", "tinyharness", "chat", "--base-url", server.base_url],
                                cwd=workspace, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env_for(tmp_path / "data"), preexec_fn=ctrl_c_as_on_a_terminal)
        try:
            proc.stdin.write("first\n")
            proc.stdin.flush()
            wait_for_the_first_request(server, proc)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)  # a loaded machine is slow to unwind
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "the session ends (exit 130)" in err and "Type your next message" not in err, err


def test_multiline_input_by_backslash_and_triple_quotes(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('one \\\ntwo\n"""\nblock a\n\nblock b\n"""\nlast\n'))
    reader = Input(interactive=False)
    assert reader.message() == "one \ntwo"
    assert reader.message() == "block a\n\nblock b"
    assert reader.message() == "last"
    with pytest.raises(EOFError):
        reader.message()


def test_run_writes_a_session_and_the_transcript_still_works(workspace, tmp_path):
    with ScriptedServer([calls(tool_call("list_dir", path=".")), "Empty."]) as srv:
        done = run_cli(workspace, tmp_path / "data", "run", "--base-url", srv.base_url, "--transcript", "t.json",
                       "look around")
    assert done.returncode == 0, done.stderr
    transcript = json.loads((workspace / "t.json").read_text())
    [path] = session_files(tmp_path / "data")
    assert sessions.load(path).messages() == transcript
    assert event_types(path)[-1] == "end"
    with ScriptedServer(["ok"]) as srv:
        run_cli(workspace, tmp_path / "data", "run", "--no-session", "--base-url", srv.base_url, "again")
    assert len(session_files(tmp_path / "data")) == 1


def test_a_truncated_session_resumes_from_its_last_whole_event_with_a_warning(workspace, tmp_path):
    data = tmp_path / "data"
    with ScriptedServer(["First answer.", "Second answer."]) as srv:
        run_cli(workspace, data, "chat", "--base-url", srv.base_url, stdin="first\nsecond\n")
    [path] = session_files(data)
    text = path.read_text()
    lines = text.splitlines()
    assert json.loads(lines[-2])["message"]["content"] == "Second answer."
    cut = "\n".join(lines[:-2]) + "\n" + lines[-2][:25]   # a crash in the middle of writing the answer
    path.write_text(cut)
    with ScriptedServer(["Third answer."]) as srv:
        done = run_cli(workspace, data, "chat", "--continue", "--base-url", srv.base_url, stdin="third\n")
    assert done.returncode == 0, done.stderr
    assert "is damaged at line" in done.stderr and "goes on from the" in done.stderr
    sent = [m["content"] for m in srv.requests[0]["messages"][1:]]
    assert sent == ["first", "First answer.", "second", "third"]  # the cut answer is gone, the rest is back
    assert path.with_name(path.name + ".damaged").read_text() == cut   # the damaged file is kept
    repaired = sessions.load(path)
    assert repaired.warning is None
    assert [m["content"] for m in repaired.messages()[1:]] == sent + ["Third answer."]


def test_resuming_a_session_from_another_folder_asks_first(workspace, tmp_path):
    data = tmp_path / "data"
    with ScriptedServer(["Hello."]) as srv:
        run_cli(workspace, data, "chat", "--base-url", srv.base_url, stdin="hi\n")
    [path] = session_files(data)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ScriptedServer(["Resumed."]) as srv:
        refused = run_cli(elsewhere, data, "chat", "--resume", path.stem, "--base-url", srv.base_url, stdin="again\n", tty="n\n")
        assert refused.returncode == 1 and "not resumed" in refused.stderr and not srv.requests
        accepted = run_cli(elsewhere, data, "chat", "--resume", path.stem[:12], "--base-url", srv.base_url,
                           stdin="again\n", tty="yes\n")
    assert accepted.returncode == 0, accepted.stderr
    assert f"was started in {workspace.resolve()}" in accepted.stdout
    assert [m["content"] for m in srv.requests[0]["messages"][1:]] == ["hi", "Hello.", "again"]


def test_continue_without_a_session_in_this_folder_is_an_error(workspace, tmp_path):
    done = run_cli(workspace, tmp_path / "data", "chat", "--continue", "--base-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 1 and "no session was started in" in done.stderr


def test_an_interrupted_turn_gets_a_result_for_every_call():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "exit status 0"}]
    close_open_calls(messages)
    assert messages[-1] == {"role": "tool", "tool_call_id": "b", "content": INTERRUPTED_CALL}
    close_open_calls(messages)
    assert len(messages) == 5


# --- Compaction -----------------------------------------------------------------------------------

SETTINGS = {"max_turns": 5, "max_seconds": 60, "transcript": None, "shell_timeout": 10,
            "approve": lambda prompt: True, "context_policy": "batch+cap", "context_window": 8192}


def conversation(srv, workspace, tmp_path, **settings):
    """A Conversation whose warnings (the notices, the [stats] lines, the loop's) are kept in `.err`."""
    writer = sessions.SessionWriter.start(workspace, "m", directory=tmp_path / "sessions")
    err = io.StringIO()
    run = RunSettings(**{**SETTINGS, **settings}, warn=lambda text: print(text, file=err))
    chat = Conversation(Client(srv.base_url, "m"), str(workspace), ChatSettings(run, 0.8, 2), writer)
    chat.err = err
    return chat


def test_compact_sends_the_history_and_the_prompt_and_keeps_the_last_turns(workspace, tmp_path):
    (workspace / "agent_notes.md").write_text("The tests run with make check.\n")
    with ScriptedServer(["one", "two", "three", "SUMMARY: the user counted to three.", "four"]) as srv:
        chat = conversation(srv, workspace, tmp_path)
        for text in ("1", "2", "3"):
            chat.send(text, echo=lambda line: None)
        before = list(chat.messages)
        assert chat.compact("asked for with /compact")
        chat.send("4", echo=lambda line: None)
    request = srv.requests[3]
    assert request["messages"][:-1] == before            # the history exactly as the model last saw it
    assert request["tools"] == srv.requests[2]["tools"]  # and the same tools: the prefix cache holds
    prompt = request["messages"][-1]["content"]
    assert prompt.startswith(compact.SUMMARY_PROMPT)
    assert "The tests run with make check." in prompt      # what save_note holds
    sent = [m["content"] for m in srv.requests[4]["messages"]]
    assert sent[1].startswith(compact.SUMMARY_MARK) and sent[1].endswith("SUMMARY: the user counted to three.")
    assert "it replaces 2 earlier messages" in sent[1]
    assert sent[2:] == ["2", "two", "3", "three", "4"]     # the last KEEP_TURNS=2 turns, whole
    session = sessions.load(chat.writer.path)
    [event] = [e for e in session.events if e["type"] == "compaction"]
    assert event["replaced"] == before[1:3] and event["summary"]["content"] == sent[1]
    assert session.messages() == chat.messages


def test_the_summary_request_offers_exactly_the_conversations_tools(workspace, tmp_path):
    """What a request offers is decided in one place (extensions.Extensions.tools): with the task tool on,
    the chat's requests offer seven tools, and so does its summary request, so the server's prompt cache
    reuses the whole prefix."""
    from tinyharness.extensions import Extensions
    with ScriptedServer(["one", "two", "three", "SUMMARY: counted."]) as srv:
        chat = conversation(srv, workspace, tmp_path, extensions=Extensions(subagents=True))
        for text in ("1", "2", "3"):
            chat.send(text, echo=lambda line: None)
        assert chat.compact("asked for with /compact")
    offered = [tool["function"]["name"] for tool in srv.requests[2]["tools"]]
    from tinyharness import tools
    assert offered == [tool.name for tool in tools.known()] and offered[-1] == "task"
    assert srv.requests[3]["messages"][-1]["content"].startswith(compact.SUMMARY_PROMPT)
    assert srv.requests[3]["tools"] == srv.requests[2]["tools"]


@pytest.mark.parametrize("reply", ["", {"status": 500, "body": {"error": {"message": "boom"}}}])
def test_a_failed_or_empty_summary_keeps_the_history_and_says_so(workspace, tmp_path, reply):
    with ScriptedServer(["one", "two", "three", reply]) as srv:
        chat = conversation(srv, workspace, tmp_path)
        for text in ("1", "2", "3"):
            chat.send(text, echo=lambda line: None)
        before = list(chat.messages)
        assert not chat.compact("asked for with /compact")
    assert chat.messages == before
    said = chat.err.getvalue()
    assert "history is kept as it was" in said
    assert "compaction" not in [e["type"] for e in sessions.load(chat.writer.path).events]


def test_compaction_starts_by_itself_past_the_threshold(workspace, tmp_path):
    big = "x" * 4000
    with ScriptedServer(["short", big, big, "Summary.", "done"]) as srv:
        chat = conversation(srv, workspace, tmp_path, context_window=3000)
        chat.send("1", echo=lambda line: None)
        chat.send("2", echo=lambda line: None)   # 1,000 tokens of answer: under 80% of 3,000 after it
        assert not compact.needs_compaction(chat.tap.last_usage, chat.messages, 3000)
        chat.send("3", echo=lambda line: None)   # prompt + answer now past 80%: compact before the next
        chat.send("4", echo=lambda line: None)
    assert srv.requests[3]["messages"][-1]["content"].startswith(compact.SUMMARY_PROMPT)
    # In a 3,000-token window 80% would leave no room for the summary request: it fires earlier, and says so.
    assert re.search(r"counted by the server\), past \d\d% \(room left for the summary request\) of the "
                     r"3000-token window", chat.err.getvalue())
    assert srv.requests[4]["messages"][1]["content"].startswith(compact.SUMMARY_MARK)
    assert [m["content"] for m in srv.requests[4]["messages"][2:]] == ["2", big, "3", big, "4"]


def test_pre_compact_hooks_add_instructions_and_a_failing_hook_is_reported(workspace, tmp_path, monkeypatch):
    def keep_the_port(messages, workspace):
        return "Keep the port number exactly."

    def broken(messages, workspace):
        raise RuntimeError("no")
    monkeypatch.setattr(compact, "PRE_COMPACT", [keep_the_port, broken])
    with ScriptedServer(["one", "two", "three", "Summary."]) as srv:
        chat = conversation(srv, workspace, tmp_path)
        for text in ("1", "2", "3"):
            chat.send(text, echo=lambda line: None)
        assert chat.compact("test")
    assert srv.requests[3]["messages"][-1]["content"].endswith("Keep the port number exactly.")
    assert "the pre_compact hook broken failed (RuntimeError: no)" in chat.err.getvalue()


def test_nothing_to_compact_in_a_short_conversation(workspace, tmp_path):
    with ScriptedServer(["one"]) as srv:
        chat = conversation(srv, workspace, tmp_path)
        chat.send("1", echo=lambda line: None)
        assert not chat.compact("test")
    assert "nothing to compact" in chat.err.getvalue() and len(srv.requests) == 1


def test_chat_adopts_the_window_from_the_first_overflow_and_compacts_before_the_next(workspace, tmp_path):
    # A server with a 3,000-token window that says so only when a prompt overflows (llama-cpp-python's 400).
    for i in range(3):
        (workspace / f"f{i}.txt").write_text(str(i) * 3000)
    reads = [calls(tool_call("read_file", path=f"f{i}.txt")) for i in range(3)]
    with ScriptedServer(reads + ["done", "Summary: three files read.", "two"], context_window=3000) as srv:
        chat = conversation(srv, workspace, tmp_path)           # planning with 8,192 tokens
        chat.send("read the three files", echo=lambda line: None)
        assert srv.overflows == [3] and chat.window() == 3000   # learned from the first overflow
        chat.send("2", echo=lambda line: None)
    said = chat.err.getvalue()  # the loop's warnings and the chat's notices: one channel
    assert said.count("the server says its context window holds 3000 tokens, not the 8192 planned") == 1
    assert srv.requests[5]["messages"][-1]["content"].startswith(compact.SUMMARY_PROMPT)   # before message 2
    assert "of the 3000-token window" in chat.err.getvalue() and "only the last 0 turn(s)" in chat.err.getvalue()
    assert srv.overflows == [3]                                  # and message 2 fitted
    assert srv.requests[6]["messages"][1]["content"].startswith(compact.SUMMARY_MARK)
    assert srv.requests[6]["messages"][-1]["content"] == "2"


def test_a_summary_request_that_overflows_is_cut_and_sent_once_more(workspace, tmp_path):
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "big.txt"}'}}
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "read big.txt"},
               {"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "x" * 8000},
               {"role": "assistant", "content": "It is all x."}]
    seen = []
    with ScriptedServer(["Summary: big.txt is all x."], context_window=2500) as srv:
        done = compact.compact(history, Client(srv.base_url, "m"), str(workspace), keep_turns=0,
                               on_overflow=seen.append)
    assert srv.overflows == [0] and len(srv.requests) == 2
    assert srv.requests[1]["messages"][3]["content"].startswith('[cut by the harness: read_file("big.txt")')
    assert seen[0].context_window == 2500 and done.summary["content"].endswith("Summary: big.txt is all x.")
    assert done.replaced == history[1:]                          # the session keeps the whole result


def test_the_compaction_benchmark_keeps_the_fact_through_two_compactions():
    from benchmarks.compaction import figures
    f = figures()
    assert f["messages"] == 100 and f["compactions"] >= 2 and f["summary_calls"] == f["compactions"]
    assert f["fact_recalled"], f["fact_answer"]
    assert f["max_prompt_tokens"] < f["window"] < f["uncompacted_max_prompt_tokens"] * 1.1
    assert all(after < before / 2 for before, after in f["tokens_before_after"])


# --- View ---------------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
EVIL = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def five_turn_session(workspace, tmp_path):
    """A session with every kind of thing the page marks: calls, a BLOCKED verdict, a long result,
    a cut stub, a compaction, an interruption notice, hostile text, an image."""
    from tinyharness.testing.images import tiny_png
    from tinyharness.imageload import load_attachment
    from tinyharness.vision import image_part
    (workspace / "big.txt").write_text("".join(f"line {n} of a long file\n" for n in range(400)))
    (workspace / "red.png").write_bytes(tiny_png(8, 8, lambda x, y: (255, 0, 0)))
    script = [calls(tool_call("write_file", path="a.txt", content="hello")), "Wrote a.txt.",
              calls(tool_call("shell", command="sudo rm -rf /")), "That command was refused.",
              calls(tool_call("read_file", path="big.txt")), calls(tool_call("read_file", path="a.txt")),
              calls(tool_call("list_dir", path=".")), "Read it.",
              "Summary: wrote a.txt, read big.txt.",
              EVIL, "The image is red."]
    with ScriptedServer(script) as srv:
        chat = conversation(srv, workspace, tmp_path)
        chat.send("write a.txt", echo=lambda line: None)
        chat.send("delete everything", echo=lambda line: None)
        chat.send("read big.txt", echo=lambda line: None)
        assert chat.compact("asked for with /compact")
        chat.writer.notice("Interrupted: the turn was stopped; the conversation is kept.")
        chat.send("say something nasty", echo=lambda line: None)
        chat.send("what colour?", echo=lambda line: None, image=image_part(*load_attachment("red.png", workspace)))
        chat.writer.end("quit")
    return chat.writer.path


def test_view_escapes_marks_and_folds(workspace, tmp_path):
    from tinyharness.view import render
    page = render(five_turn_session(workspace, tmp_path))
    assert "<script" not in page and "&lt;script&gt;document.title" in page
    assert "onerror=alert" not in page.replace("&lt;img src=x onerror=alert(1)&gt;", "")
    for mark in ("BLOCKED</span>", "compaction summary", "<details><summary>line 0 of a long file",
                 'class="msg notice"', 'src="data:image/png;base64,', "<svg", "Turn 5</h2>"):
        assert mark in page, mark
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch


def test_view_marks_cut_results_and_cut_replies_in_a_transcript(tmp_path):
    from tinyharness.context import STUB_PREFIX
    from tinyharness.view import render
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": STUB_PREFIX + 'read_file("a") returned 9 characters]'},
                {"role": "assistant", "content": "half an answ"},
                {"role": "user", "content": "[harness] Your last reply was cut off at the length limit (max_tokens=5)"},
                {"role": "assistant", "content": "ok"}]
    (tmp_path / "t.json").write_text(json.dumps(messages))
    page = render(tmp_path / "t.json")
    assert "cut by the context policy</span>" in page and "cut at the length limit</span>" in page
    assert '<span class="badge harness-b">[harness]</span>' in page and "(estimated from the messages" in page


def test_view_command_writes_next_to_the_file_and_reads_transcripts(workspace, tmp_path):
    with ScriptedServer([calls(tool_call("list_dir", path=".")), "Done."]) as srv:
        run_cli(workspace, tmp_path / "data", "run", "--base-url", srv.base_url, "--transcript", "run.json", "look")
    done = run_cli(workspace, tmp_path / "data", "view", "run.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "run.html" and "Turn 1</h2>" in (workspace / "run.html").read_text()
    [session] = session_files(tmp_path / "data")
    done = run_cli(workspace, tmp_path / "data", "view", str(session), "-o", "s.html")
    assert done.stdout.strip() == "s.html" and "list_dir" in (workspace / "s.html").read_text()
    (workspace / "bad.json").write_text("{not json")
    bad = run_cli(workspace, tmp_path / "data", "view", "bad.json")
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium (apt-get install chromium)")
def test_view_page_renders_every_turn_in_a_headless_browser(workspace, tmp_path):
    from tinyharness.view import view_command
    page = tmp_path / "view.html"
    assert view_command(five_turn_session(workspace, tmp_path), str(page)) == 0
    profile, shot = tmp_path / "profile", tmp_path / "view.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}"]
    url = page.resolve().as_uri()
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for turn in range(1, 6):
        assert f'id="turn-{turn}"' in dom.stdout and f"Turn {turn}</h2>" in dom.stdout
    assert "<title>Session " in dom.stdout and "pwned" not in dom.stdout.split("</title>")[0]
    assert "&lt;script&gt;document.title" in dom.stdout   # shown as text, never run
    assert dom.stdout.count('class="call"') == 5
    taken = subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,2000", url],
                           capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


# --- A chat through a pseudo-terminal -------------------------------------------------------------

# The child makes the pseudo-terminal its controlling terminal, so Ctrl-C (\x03) typed into it
# becomes SIGINT for the chat, exactly as on a real terminal.
BOOT = ("import fcntl, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "from tinyharness.cli import main; sys.exit(main(sys.argv[1:]))")


class Terminal:
    """A program on a pseudo-terminal: type into it, wait for what it prints."""

    def __init__(self, args, cwd, env):
        import pty  # noqa: F401  (POSIX only; the test is skipped elsewhere)
        self.master, slave = os.openpty()
        self.process = subprocess.Popen([sys.executable, "-c", BOOT, *args], stdin=slave, stdout=slave, stderr=slave,
                                        cwd=cwd, env=env, start_new_session=True, close_fds=True,
                                        preexec_fn=ctrl_c_as_on_a_terminal)
        os.close(slave)
        self.output = ""

    def expect(self, text, timeout=20):
        import select
        deadline = time.monotonic() + timeout
        while text not in self.output:
            left = deadline - time.monotonic()
            assert left > 0, f"waited {timeout} s for {text!r}; the terminal shows:\n{self.output[-3000:]}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:   # the program ended and closed the terminal
                    chunk = b""
                assert chunk, f"the program ended before printing {text!r}:\n{self.output[-3000:]}"
                self.output += chunk.decode("utf-8", errors="replace")
        found = self.output
        self.output = self.output[self.output.index(text) + len(text):]   # expect the next thing after this
        return found

    def type(self, text):
        os.write(self.master, text.encode())

    def close(self):
        try:
            return self.process.wait(timeout=20)
        finally:
            os.close(self.master)


def commands_running(marker):
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker in Path(f"/proc/{entry}/cmdline").read_text(errors="replace"):
                found.append(entry)
        except OSError:
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal and /proc")
def test_a_chat_on_a_terminal_survives_ctrl_c_compacts_and_continues(workspace, tmp_path):
    data = tmp_path / "data"
    marker = f"never-{os.getpid()}-{time.monotonic_ns()}"
    slow = calls(tool_call("shell", command=f"sleep 30; echo {marker}"))
    script = ["Answer one.", slow, "Answer three.", "Summary: one, a slow command, three.", "Answer four.",
              "Answer five."]
    env = env_for(data)
    with ScriptedServer(script) as srv:
        term = Terminal(["chat", "--yes", "--base-url", srv.base_url], workspace, env)
        term.expect("you> ")
        term.type("message one\r")
        term.expect("Answer one.")
        term.expect("you> ")
        term.type("message two: run the slow command\r")
        term.expect("[tool] shell(")
        deadline = time.monotonic() + 10
        while not commands_running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert commands_running(marker), "the slow command never started"
        started = time.monotonic()
        term.type("\x03")                                       # Ctrl-C in the middle of `sleep 30`
        term.expect("Interrupted: the turn was stopped and 1 running command(s) killed")
        term.expect("you> ")
        while commands_running(marker) and time.monotonic() - started < 10:
            time.sleep(0.05)   # SIGKILL takes effect a moment later
        assert not commands_running(marker) and time.monotonic() - started < 10
        term.type("message three\r")
        term.expect("Answer three.")
        term.expect("you> ")
        term.type("/compact\r")
        term.expect("replaced 2 messages with a summary")
        term.expect("you> ")
        term.type("message four\r")
        term.expect("Answer four.")
        term.expect("you> ")
        term.type("\x04")                                       # Ctrl-D ends the session
        term.expect("saved (tinyharness chat --resume")
        assert term.close() == 0

        term = Terminal(["chat", "--continue", "--base-url", srv.base_url], workspace, env)
        term.expect("Resumed session")
        term.expect("you> ")
        term.type("message five\r")
        term.expect("Answer five.")
        term.expect("you> ")
        term.type("/quit\r")
        term.expect("saved (tinyharness chat --resume")
        assert term.close() == 0

    after_interrupt = [m["content"] for m in srv.requests[2]["messages"][1:]]
    assert after_interrupt == ["message one", "Answer one.", "message two: run the slow command", "",
                               INTERRUPTED_CALL, "message three"]
    assert srv.requests[3]["messages"][-1]["content"].startswith(compact.SUMMARY_PROMPT)
    last = [m["content"] for m in srv.requests[5]["messages"][1:]]
    assert last[0].startswith(compact.SUMMARY_MARK) and last[0].endswith("Summary: one, a slow command, three.")
    assert last[1:] == ["message two: run the slow command", "", INTERRUPTED_CALL, "message three", "Answer three.",
                        "message four", "Answer four.", "message five"]
    [path] = session_files(data)
    assert event_types(path) == [
        "header", "system", "user", "assistant", "user", "assistant", "tool", "notice",  # the interrupted turn
        "user", "assistant", "notice", "compaction", "notice", "user", "assistant", "end",
        "notice", "user", "assistant", "end"]
    events = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [e["reason"] for e in events if e["type"] == "end"] == ["end of input", "quit"]
    assert [e["message"]["content"] for e in events if e["type"] == "user"] == [
        "message one", "message two: run the slow command", "message three", "message four", "message five"]
    assert sessions.load(path).messages() == srv.requests[5]["messages"] + [{"role": "assistant", "content": "Answer five."}]


def test_slash_commands_in_pipe_mode(workspace, tmp_path):
    with ScriptedServer(["One.", "Two."]) as srv:
        done = run_cli(workspace, tmp_path / "data", "chat", "--base-url", srv.base_url,
                       stdin="/help\n/model other-model\nm1\n/save saved.json\n/clear\nm2\n/bogus\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "/compact" in done.stdout and "Unknown command /bogus" in done.stdout
    assert [r["model"] for r in srv.requests] == ["other-model", "other-model"]
    saved = json.loads((workspace / "saved.json").read_text())
    assert [m["content"] for m in saved[1:]] == ["m1", "One."]
    assert [m["role"] for m in srv.requests[1]["messages"]] == ["system", "user"]   # /clear forgot m1
    [path] = session_files(tmp_path / "data")
    assert "clear" in event_types(path) and sessions.load(path).messages() == srv.requests[1]["messages"] + [
        {"role": "assistant", "content": "Two."}]


def test_chat_usage_errors_exit_2_before_any_model_call(workspace, tmp_path):
    for flags in (["--compact-at", "0"], ["--keep-turns", "-1"], ["--max-turns", "0"], ["--continue", "--resume", "x"]):
        done = run_cli(workspace, tmp_path / "data", "chat", "--base-url", "http://127.0.0.1:9/v1", *flags)
        assert done.returncode == 2 and "error:" in done.stderr, flags


def test_max_turns_counts_per_message(workspace, tmp_path):
    script = [calls(tool_call("list_dir", path=".")), calls(tool_call("list_dir", path=".")), "Fine."]
    with ScriptedServer(script) as srv:
        done = run_cli(workspace, tmp_path / "data", "chat", "--max-turns", "1", "--base-url", srv.base_url,
                       stdin="look\nlook again\nanswer now\n")
    assert "Stopped: reached --max-turns 1. The task is NOT confirmed complete." in done.stdout
    assert done.stdout.count("Stopped:") == 2 and done.stdout.splitlines()[-1] == "Fine."
    assert done.returncode == 0 and len(srv.requests) == 3   # the last message finished: exit 0


def test_chat_keeps_runs_token_budget_and_checks_its_flags_like_run(workspace, tmp_path):
    script = [calls(tool_call("write_file", path="a.txt", content="hi")), "never asked for"]
    with ScriptedServer(script) as srv:
        done = run_cli(workspace, tmp_path / "data", "chat", "--yes", "--max-tokens", "1", "--base-url",
                       srv.base_url, stdin="make a file\n")
    assert "Stopped: the token budget of --max-tokens 1 was used" in done.stdout, done.stdout + done.stderr
    assert len(srv.requests) == 1
    bad = run_cli(workspace, tmp_path / "data", "chat", "--max-reply-tokens", "0", stdin="hi\n")
    assert bad.returncode == 2 and "usage: tinyharness chat" in bad.stderr
    assert "--max-reply-tokens must be 1 or more" in bad.stderr


# --- chat --json: scripted chats --------------------------------------------------------------------------

def test_chat_json_writes_only_json_lines_the_sessions_events_and_a_result_last(workspace, tmp_path):
    script = [calls(tool_call("write_file", path="a.txt", content="hi")), "Wrote a.txt.", "It holds hi."]
    with ScriptedServer(script) as srv:
        done = run_cli(workspace, tmp_path / "data", "chat", "--json", "--yes", "--base-url", srv.base_url,
                       stdin="make a file\nwhat is in it?\n")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON, nothing else
    assert [line["type"] for line in lines] == ["start", "system", "user", "assistant", "tool", "assistant", "user",
                                                "assistant", "result"]
    [path] = session_files(tmp_path / "data")
    assert lines[1:-1] == [json.loads(line) for line in path.read_text().splitlines()[1:-1]]  # the session's own events
    start, result = lines[0], lines[-1]
    assert (start["mode"], start["session"], start["folder"]) == ("chat", path.stem, str(workspace.resolve()))
    assert (result["exit_code"], result["is_error"], result["answer"], result["messages"], result["num_turns"]) == \
           (0, False, "It holds hi.", 2, 3)
    assert result["session_id"] == path.stem and result["usage"]["prompt_tokens"] == sum(
        line["usage"]["prompt_tokens"] for line in lines if line["type"] == "assistant" and "usage" in line)
    assert '  [tool] write_file({"content": "hi", "path": "a.txt"})' in done.stderr and "It holds hi." in done.stderr


def test_chat_json_ends_with_a_result_line_on_a_usage_error_and_a_stop(workspace, tmp_path):
    done = run_cli(workspace, tmp_path / "data", "chat", "--json", "--compact-at", "5")
    assert done.returncode == 2 and "--compact-at" in done.stderr
    [result] = [json.loads(line) for line in done.stdout.splitlines()]
    assert (result["type"], result["exit_code"], result["is_error"]) == ("result", 2, True)
    with ScriptedServer([calls(tool_call("list_dir", path="."))] * 3) as srv:
        done = run_cli(workspace, tmp_path / "data", "chat", "--json", "--max-turns", "1", "--base-url", srv.base_url,
                       stdin="look\n")
    result = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == 3 and (result["type"], result["exit_code"], result["answer"]) == ("result", 3, None)
