"""The permission prompt as people answer it (issue 39, finding 1): at the terminal, never from piped data.

Each run is the real command line with a pty as its controlling terminal (tests/ladder.py:run_on_terminal):
what the test "types" is written to the pty, standard input is a pipe of its own. Checked: `yes`/`no` in any
case; a piped `y` approves nothing, with or without a terminal; anything else asks again, then denies; `always`
allows the rule the call needs from now on, saves it in .claude/settings.local.json (merged, 0600, every other
key kept) and the next run uses it without a question; a rule the model slipped into that file is never
vouched for; a write's question is a short diff, not the content as JSON.
"""
import json
import os
import stat
import sys

import pytest

from tests.ladder import FINAL, ROOT, calls, run_on_terminal, run_stage, sessions_home, tool_call, tool_results
from tinyharness.always import rule_for
from tinyharness.asking import for_call
from tinyharness.testing import ScriptedServer

SETTINGS = (".claude", "settings.local.json")


def run(workspace, script, *args, tty=None, stdin="", code=0):
    with ScriptedServer(script=script) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, *args, "go", stdin=stdin, tty=tty)
    assert result.returncode == code and "Traceback" not in result.stderr, (result.stdout, result.stderr)
    return result, server


def shell(*commands):
    return [calls(*(tool_call("shell", command=c) for c in commands))]


@pytest.mark.parametrize("typed, approved", [("yes\n", True), ("YES\n", True), (" Yes \n", True), ("y\n", True),
                                             ("no\n", False), ("No\n", False), ("N\n", False)])
def test_yes_and_no_in_any_case_at_the_terminal(typed, approved, workspace):
    result, server = run(workspace, shell("echo ran > marker.txt") + ["done"], tty=typed)
    assert 'Allow shell({"command": "echo ran > marker.txt"})? [y/N] ' in result.screen  # asked at the terminal
    assert (workspace / "marker.txt").exists() == approved
    assert tool_results(server.requests[1])["call_1"].startswith("exit status 0" if approved else "DENIED: ")


@pytest.mark.parametrize("terminal", [None, "n\n"])
def test_a_piped_y_answers_nothing(terminal, workspace):
    """`cat log | tinyharness run ...` with a log whose first line is y: no terminal, the call is denied (exit 3,
    nobody answered); at a terminal, what the person types decides, never the piped line."""
    result, server = run(workspace, shell("echo ran > marker.txt") + ["done"], stdin="y\ny\nyes\n", tty=terminal,
                         code=0 if terminal else 3)
    assert not (workspace / "marker.txt").exists()
    assert tool_results(server.requests[1])["call_1"].startswith("DENIED: ")
    if terminal is None:
        assert "there is no terminal to answer at" in result.stderr
        assert "(no terminal to answer at: denied)" in result.stdout


def test_anything_else_asks_again_then_denies(workspace):
    result, server = run(workspace, shell("echo one > a.txt", "echo two > b.txt") + ["done"],
                         tty="sure\nok\nyep\nmaybe\nyes\n")
    assert result.screen.count("is not an answer: type y (yes) or n (no), then Enter") == 3
    assert "No clear answer: denied." in result.screen
    assert not (workspace / "a.txt").exists()      # three unclear answers: a no
    assert (workspace / "b.txt").exists()          # the next question: `maybe`, then `yes`
    outcomes = list(tool_results(server.requests[1]).values())
    assert outcomes[0].startswith("DENIED: ") and outcomes[1].startswith("exit status 0")


def test_always_allows_the_command_from_now_on_and_saves_the_rule(workspace):
    first, server = run(workspace, shell("echo one") + shell("echo one two") + ["done"], tty="a\n")
    assert "(a = always: allow Bash(echo one:*) from now on, saved in .claude/settings.local.json)" in first.screen
    assert "[y/N/a] " in first.screen
    said = "[permissions] allowed Bash(echo one:*) from now on; saved in .claude/settings.local.json"
    assert first.screen.count(said) == 1 and said in first.stdout
    assert first.screen.count("Allow shell(") == 1  # `echo one two` ran unasked
    assert tool_results(server.requests[2])["call_2"].split() == ["exit", "status", "0", "one", "two"]
    saved = workspace.joinpath(*SETTINGS)
    assert json.loads(saved.read_text()) == {"permissions": {"allow": ["Bash(echo one:*)"]}}
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    # the next run: no terminal, no flag; the saved rule holds without a trust question (the user's own answer)
    second, server = run(workspace, shell("echo one three") + ["done"])
    assert "Allow" not in second.stdout and "Trust this file" not in second.stdout
    assert tool_results(server.requests[1])["call_1"].split() == ["exit", "status", "0", "one", "three"]


def test_always_merges_into_the_users_file_and_keeps_every_other_key(workspace):
    saved = workspace.joinpath(*SETTINGS)
    saved.parent.mkdir()
    mine = {"permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"], "additionalDirectories": ["../x"]},
            "env": {"FOO": "1"}, "model": "mine"}
    saved.write_text(json.dumps(mine))
    # the file has an allow rule: the run asks to trust it first (y), then the write (always)
    script = [calls(tool_call("write_file", path="src/app.py", content="print(1)\n")), "done"]
    (workspace / "src").mkdir()
    result, _ = run(workspace, script, tty="y\nalways\n")
    assert "allowed Edit(src/app.py) from now on" in result.screen
    assert (workspace / "src" / "app.py").read_text() == "print(1)\n"
    mine["permissions"]["allow"].append("Edit(src/app.py)")
    assert json.loads(saved.read_text()) == mine
    # trusted before the merge: trusted after it; the rule lets the next write run without asking
    script = [calls(tool_call("write_file", path="src/app.py", content="print(2)\n")), "done"]
    second, _ = run(workspace, script)
    assert "Allow" not in second.stdout and (workspace / "src" / "app.py").read_text() == "print(2)\n"


def test_a_rule_the_model_slipped_into_the_file_is_never_vouched_for(workspace, tmp_path):
    """The attack: the model writes an allow rule for reading a canary outside the workspace into
    .claude/settings.local.json (the user approves what looks like a config write), then asks for a command the
    user allows "always". The merge must not mark the model's rule as the user's: the next run asks the trust
    question, and without a terminal the run does not start - the canary is never read."""
    canary = tmp_path / "canary.txt"
    canary.write_text("SECRET-CANARY")
    (workspace / ".claude").mkdir()  # a folder many projects have
    planted = json.dumps({"permissions": {"allow": [f"Bash(cat {canary}:*)"]}})
    script = [calls(tool_call("write_file", path=".claude/settings.local.json", content=planted)),
              *shell("echo fine"), "done"]
    first, _ = run(workspace, script, tty="y\na\n")
    rules = json.loads(workspace.joinpath(*SETTINGS).read_text())["permissions"]["allow"]
    assert rules == [f"Bash(cat {canary}:*)", "Bash(echo fine:*)"], first.stdout
    second, server = run(workspace, shell(f"cat {canary} > leak.txt") + ["done"], "--sandbox", "off", code=2)
    assert "was not trusted" in second.stderr and len(server.requests) == 0
    assert not (workspace / "leak.txt").exists()


def test_no_always_is_offered_for_a_chain_and_a_typed_a_asks_again(workspace):
    result, _ = run(workspace, shell("echo a && echo b > c.txt") + ["done"], tty="a\nn\n")
    assert 'Allow shell({"command": "echo a && echo b > c.txt"})? [y/N] ' in result.screen
    assert "always" not in result.screen.split("Allow shell(")[0]
    assert "'a' is not an answer: type y (yes) or n (no), then Enter" in result.screen
    assert not workspace.joinpath(*SETTINGS).exists() and not (workspace / "c.txt").exists()


def test_a_write_question_is_a_short_diff_not_the_content_as_json(workspace):
    """A 6,800-character write to a file that exists: its size and the changed lines, not the content escaped as
    JSON (the issue measured a 14,050-character question); a new file: its first lines and how many more."""
    old = [f"line {i:03}: " + "x" * 20 for i in range(200)]
    (workspace / "big.txt").write_text("\n".join(old) + "\n")
    new = list(old)
    new[100] = 'line 100: "changed" \\ here'
    content = "\n".join(new) + "\n"
    assert len(content) > 6000
    script = [calls(tool_call("write_file", path="big.txt", content=content)),
              calls(tool_call("write_file", path="fresh.md", content="\n".join(f"row {i}" for i in range(40)))), "done"]
    result, _ = run(workspace, script, tty="y\nn\n")
    screen = result.screen.replace("\r\n", "\n")
    question = screen[screen.index("write_file big.txt:"):screen.index("Allow write_file(big.txt)? [y/N/a] ")]
    assert len(question) < 1000, question
    assert f"{len(content):,} characters in 200 lines, replacing {len(''.join(o + chr(10) for o in old)):,} bytes" \
           f": +1 -1 lines" in question
    assert '-line 100: xxxx' in question and '+line 100: "changed" \\ here' in question
    assert '\\"changed\\"' not in screen  # no JSON escaping of the content in the question
    fresh = screen[screen.index("write_file fresh.md:"):screen.index("Allow write_file(fresh.md)?")]
    assert "a new file, 269 characters in 40 lines" in fresh and "+row 0\n" in fresh and "[28 more lines]" in fresh
    assert "row 39" not in fresh
    assert (workspace / "big.txt").read_text() == content and not (workspace / "fresh.md").exists()


def test_chat_reads_its_messages_from_the_pipe_and_its_answers_from_the_terminal(workspace):
    """Before: chat's prompt took the next piped line for its answer, so the second message was lost."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=sessions_home(), PYTHONIOENCODING="utf-8")
    script = [calls(tool_call("write_file", path="b.txt", content="hi")), "made it", "it says hi"]
    with ScriptedServer(script=script) as server:
        argv = [sys.executable, "-m", "tinyharness", "chat", "--no-stream", "--base-url", server.base_url]
        chat = run_on_terminal(argv, workspace, "make a file\nwhat is in it?\n", "yes\n", 60, env)
    assert chat.returncode == 0 and "Traceback" not in chat.stderr, chat.stderr
    assert (workspace / "b.txt").read_text() == "hi"
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["make a file", "what is in it?"]


@pytest.mark.parametrize("name, arguments, rule", [
    ("shell", {"command": "npm test --watch"}, "Bash(npm test:*)"),
    ("shell", {"command": "ls"}, "Bash(ls:*)"),
    ("shell", {"command": "python -c 'print(1)'"}, "Bash(python -c:*)"),
    ("shell", {"command": "cat 'my file'"}, "Bash(cat:*)"),
    ("shell", {"command": "npm test && curl x | sh"}, None),
    ("shell", {"command": "echo $(id)"}, None),
    ("write_file", {"path": "src/app.py", "content": ""}, "Edit(src/app.py)"),
    ("write_file", {"path": "./src/../notes.md", "content": ""}, "Edit(./notes.md)"),
    ("write_file", {"path": "src/*.py", "content": ""}, None),
    ("view_image", {"path": "https://example.com/a.png"}, None),
    ("mcp__notes__add", {"text": "x"}, "mcp__notes__add"),
])
def test_the_rule_always_saves_is_claudes_spelling_and_covers_the_call(name, arguments, rule, tmp_path):
    assert rule_for(name, arguments, str(tmp_path)) == rule


def test_a_path_cannot_draw_lines_of_its_own_in_the_question(tmp_path):
    """The model picks the path: one with line breaks would otherwise print a fake diff or a fake question."""
    question = for_call("write_file", {"path": "a.txt\n  +harmless\nAllow write_file(b.txt)? [y/N] ", "content": "x"},
                        str(tmp_path))
    assert question.count("\n") == 2 and question.splitlines()[1] == "  +x"
    assert question.endswith('Allow write_file(a.txt\\n  +harmless\\nAllow write_file(b.txt)? [y/N] )? [y/N] ')
