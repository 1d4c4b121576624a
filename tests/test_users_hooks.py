"""Hooks as Claude Code's users write them (issue 39, 6), through the real command line: a friendly line on
stdout with exit 0 is no objection (shown, not a block); a sandboxed hook runs the user's own tools from
~/.local/bin (and what they need) but reads no key; `continue: false` ends the run with its stopReason;
`systemMessage` is shown; SessionStart says `resume` on --continue and `compact` after /compact."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ladder import FINAL, calls, run_stage, tool_call, tool_results
from tinyharness.testing import ScriptedServer

needs_sandbox = pytest.mark.skipif(__import__("tinyharness.sandbox").sandbox.unavailable_reason() is not None,
                                   reason="needs the sandbox")


def write(path, text, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if isinstance(text, str) else json.dumps(text))
    if mode:
        path.chmod(mode)
    return path


def users_hooks(me, event, command, matcher=None):
    """The user's own Claude settings (no trust question) with one command hook."""
    entry = {"hooks": [{"type": "command", "command": command}], **({"matcher": matcher} if matcher else {})}
    write(me / ".claude" / "settings.json", {"hooks": {event: [entry]}})


def run(ws, me, script, *args, env=None):
    with ScriptedServer(script) as server:
        done = run_stage(FINAL, ws, "--base-url", server.base_url, "--yes", *args, "go",
                         env={"HOME": str(me), "XDG_CONFIG_HOME": str(me / ".config"), **(env or {})})
    return done, server


@pytest.fixture
def place(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws", tmp_path / "me"


def test_a_friendly_line_with_exit_0_is_no_objection_and_the_user_sees_it(place):
    ws, me = place
    users_hooks(me, "PreToolUse", "echo 'policy checked, all good'", matcher="Bash")
    done, server = run(ws, me, [calls(tool_call("shell", command="echo ran")), "Done."])
    assert done.returncode == 0, done.stderr
    assert tool_results(server.requests[1]).popitem()[1] == "exit status 0\nran\n"
    assert "[hook] pre_tool_use `echo 'policy checked, all good'`: policy checked, all good" in done.stderr
    assert "policy checked" not in json.dumps(server.requests[1]["messages"])  # shown, not given to the model


def test_a_plain_stop_hook_line_does_not_send_the_model_back(place):
    ws, me = place
    users_hooks(me, "Stop", "echo 'session logged'")
    done, server = run(ws, me, ["Done."])
    assert done.returncode == 0 and len(server.requests) == 1, done.stderr
    assert "session logged" in done.stderr


def test_unreadable_json_where_a_decision_belongs_still_blocks(place):
    ws, me = place
    users_hooks(me, "PreToolUse", """echo '{"decision": "block"'""", matcher="Bash")
    done, server = run(ws, me, [calls(tool_call("shell", command="echo ran")), "Done."])
    result = tool_results(server.requests[1]).popitem()[1]
    assert result.startswith("BLOCKED:") and "cannot be read" in result, result


@needs_sandbox
def test_a_sandboxed_hook_runs_the_users_own_tools_but_reads_no_key(place, tmp_path):
    """A formatter in ~/.local/bin (a link into the folder the tool was installed in, which reads its own
    data there) runs from a confined hook; the hook still reads nothing of ~/.ssh nor the rest of home."""
    ws, me = place
    write(me / ".ssh" / "id_rsa", "PRIVATE-KEY")
    write(me / "notes.txt", "HOME-NOTE")
    install = me / ".local" / "share" / "fmt" / "bin" / "fmt-tool"
    write(install.parent.parent / "lib" / "style.txt", "style: 4 spaces")
    write(install, "#!/bin/sh\nhere=$(dirname \"$(readlink -f \"$0\")\")\necho \"formatted with $(cat $here/../lib/style.txt)\"\n"
                   "cat ~/.ssh/id_rsa 2>/dev/null || echo 'key: unreadable'\n"
                   "cat ~/notes.txt 2>/dev/null || echo 'notes: unreadable'\n", mode=0o755)
    (me / ".local" / "bin").mkdir(parents=True)
    (me / ".local" / "bin" / "fmt-tool").symlink_to(install)
    users_hooks(me, "PostToolUse", "fmt-tool", matcher="Write")
    path = f"{me / '.local' / 'bin'}{os.pathsep}{os.environ['PATH']}"
    done, server = run(ws, me, [calls(tool_call("write_file", path="a.py", content="x = 1\n")), "Done."],
                       env={"PATH": path})
    assert done.returncode == 0, done.stderr
    result = tool_results(server.requests[1]).popitem()[1]
    assert "formatted with style: 4 spaces" in result, result + done.stderr
    assert "key: unreadable" in result and "notes: unreadable" in result and "PRIVATE-KEY" not in result


def test_continue_false_ends_the_run_with_its_stop_reason(place):
    ws, me = place
    users_hooks(me, "PreToolUse", """echo '{"continue": false, "stopReason": "deploy freeze until Monday"}'""")
    done, server = run(ws, me, [calls(tool_call("shell", command="echo ran")), "Done."])
    assert done.returncode == 3, done.stdout + done.stderr
    assert len(server.requests) == 1  # the model is not asked again
    assert "Stopped: a pre_tool_use hook ended the run: deploy freeze until Monday." in done.stdout


def test_a_system_message_is_shown_to_the_user(place):
    ws, me = place
    users_hooks(me, "PreToolUse", """echo '{"systemMessage": "remember: tests run in CI"}'""")
    done, server = run(ws, me, [calls(tool_call("shell", command="echo ran")), "Done."])
    assert done.returncode == 0, done.stderr
    assert tool_results(server.requests[1]).popitem()[1] == "exit status 0\nran\n"
    assert "remember: tests run in CI" in done.stderr


def test_session_start_says_resume_on_continue(place):
    ws, me = place
    users_hooks(me, "SessionStart", f"{sys.executable} -c \"import json,sys; "
                                    f"print('source=' + json.load(sys.stdin)['source'])\"")
    done, server = run(ws, me, ["Done."])
    assert done.returncode == 0, done.stderr
    assert "source=startup" in server.requests[0]["messages"][-1]["content"]
    done, server = run(ws, me, ["Done again."], "--continue")
    assert done.returncode == 0, done.stderr
    assert "source=resume" in server.requests[0]["messages"][-1]["content"]


def test_session_start_says_compact_after_a_chat_compacts(place):
    """After /compact the session starts afresh from the summary: SessionStart fires again with source
    "compact" (as Claude Code's does), and what it prints reaches the model with the next message."""
    ws, me = place
    users_hooks(me, "SessionStart", f"{sys.executable} -c \"import json,sys; "
                                    f"print('source=' + json.load(sys.stdin)['source'])\"")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(HOME=str(me), XDG_CONFIG_HOME=str(me / ".config"), XDG_DATA_HOME=str(me / ".local" / "share"),
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    with ScriptedServer(["One.", "Two.", "Summary: we said hello.", "Three."]) as server:
        done = subprocess.run([sys.executable, "-m", "tinyharness", "chat", "--yes", "--no-stream", "--keep-turns",
                               "1", "--base-url", server.base_url], cwd=ws, env=env, capture_output=True, text=True,
                              input="hello\nagain\n/compact\nthird\n/quit\n", timeout=60)
    assert done.returncode == 0, done.stderr
    sent = [request["messages"][-1]["content"] for request in server.requests]
    assert "source=startup" in sent[0] and "source=" not in sent[1], sent
    assert "source=compact" in sent[3], sent
