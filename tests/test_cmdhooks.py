"""Command hooks fail closed: exit 0 allows, exit 2 blocks with stderr, anything else blocks too."""
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from tinyharness.hooks import commands
from tinyharness.sandbox import Sandbox
from tinyharness import trust

PY = sys.executable


def hooks_for(workspace, event, command, matcher=None):
    entry = {"command": command, **({"matcher": matcher} if matcher else {})}
    (workspace / ".tinyharness").mkdir(exist_ok=True)
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps({event: [entry]}))
    reports = []
    return commands.CommandHooks(commands.load(workspace), workspace, "s1", report=reports.append, timeout=2,
                                 sandbox=Sandbox()), reports


def script(workspace, body):
    path = workspace / "hook.py"
    path.write_text(body)
    return f"{PY} hook.py"


def test_exit_0_allows_and_the_hook_reads_the_event_on_stdin(workspace):
    command = script(workspace, "import json,sys; e=json.load(sys.stdin); open('seen.json','w').write(json.dumps(e))")
    hooks, _ = hooks_for(workspace, "pre_tool_use", command)
    assert hooks.run("pre_tool_use", "shell", {"command": "ls"}).allowed
    seen = json.loads((workspace / "seen.json").read_text())
    assert (seen["event"], seen["tool_name"], seen["tool_input"], seen["session_id"]) == \
           ("pre_tool_use", "shell", {"command": "ls"}, "s1")


def test_exit_2_blocks_with_stderr_as_the_reason(workspace):
    hooks, reports = hooks_for(workspace, "pre_tool_use", "echo 'migrations are frozen' >&2; exit 2")
    verdict = hooks.run("pre_tool_use", "write_file", {"path": "migrations/1.py", "content": ""})
    assert not verdict.allowed and verdict.reason == "migrations are frozen"
    assert "blocked write_file" in reports[0] and "exit 2" in reports[0]  # the user sees which hook decided


@pytest.mark.parametrize("command, why", [
    ("exit 1", "failed with exit code 1"),
    ("sleep 30", "did not finish within 2 s"),
    ("""echo '{"decision": "block"'""", "JSON that cannot be read as a decision"),
    ("/nonexistent/policy", "failed with exit code 127"),
    ("printf '\\377\\376'", "not UTF-8"),
])
def test_a_hook_that_fails_hangs_or_prints_junk_blocks(workspace, command, why):
    hooks, _ = hooks_for(workspace, "pre_tool_use", command)
    verdict = hooks.run("pre_tool_use", "shell", {"command": "ls"})
    assert not verdict.allowed and why in verdict.reason


def test_a_json_decision_can_block(workspace):
    hooks, _ = hooks_for(workspace, "pre_tool_use", """echo '{"decision": "block", "reason": "no network"}'""")
    verdict = hooks.run("pre_tool_use", "shell", {"command": "curl x"})
    assert (verdict.allowed, verdict.reason) == (False, "no network")


def test_the_matcher_picks_tools(workspace):
    hooks, _ = hooks_for(workspace, "pre_tool_use", "exit 2", matcher="shell|write_file")
    assert not hooks.run("pre_tool_use", "shell", {}).allowed
    assert hooks.run("pre_tool_use", "read_file", {"path": "x"}).allowed
    assert hooks.run("pre_tool_use", "shell_extra", {}).allowed  # the whole name must match


def test_post_tool_use_output_goes_to_the_model(workspace):
    hooks, _ = hooks_for(workspace, "post_tool_use", "echo 'lint: line 3 too long'")
    verdict = hooks.run("post_tool_use", "write_file", {"path": "a.py", "content": "x"}, result="OK: wrote")
    assert verdict.allowed and verdict.output == "lint: line 3 too long"


@pytest.mark.parametrize("text, problem", [
    ("not json", "cannot read it as JSON"),
    ('{"on_write": []}', "unknown event"),
    ('{"stop": [{"cmd": "x"}]}', "needs \"command\""),
    ('{"stop": [{"command": "x", "matcher": "("}]}', "not a regular expression"),
])
def test_a_broken_hooks_file_is_an_error_not_an_empty_policy(workspace, text, problem):
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "hooks.json").write_text(text)
    with pytest.raises(commands.HooksFileError, match=problem):
        commands.load(workspace)


def test_trust_is_asked_once_and_again_when_the_file_changes(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = workspace / "hooks.json"
    path.write_text('{"stop": []}')
    questions = []
    assert not trust.ensure_trusted(path, "a hooks file", lambda q: questions.append(q) or False)
    assert trust.ensure_trusted(path, "a hooks file", lambda q: questions.append(q) or True)
    assert trust.ensure_trusted(path, "a hooks file", lambda q: questions.append(q) or False)  # remembered
    assert len(questions) == 2
    path.write_text('{"stop": [{"command": "rm -rf ~"}]}')
    assert not trust.ensure_trusted(path, "a hooks file", lambda q: False)


# --- Claude Code's shapes, and decisions that must fail closed -----------------------------------------

def claude_hooks(workspace, settings, timeout=None):
    (workspace / ".tinyharness").mkdir(exist_ok=True)
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps(settings))
    reports = []
    return commands.CommandHooks(commands.load(workspace), workspace, "s1", report=reports.append,
                                 timeout=timeout, sandbox=Sandbox()), reports


def pre_tool_use(command, matcher="Bash"):
    return {"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]}}


def printing(decision):
    return f"echo '{json.dumps(decision)}'"


@pytest.mark.parametrize("decision, allowed, ask", [
    ({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                             "permissionDecisionReason": "no rm here"}}, False, ""),
    ({"hookSpecificOutput": {"permissionDecision": "allow"}}, True, ""),
    ({"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}}, True, "sure?"),
    ({"hookSpecificOutput": {"permissionDecision": "maybe"}}, False, ""),
    ({"hookSpecificOutput": {"permissionDecision": 5}}, False, ""),
    ({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}}, False, ""),
    ({"decision": "approve"}, True, ""),
    ({"decision": "block", "reason": "no"}, False, ""),
    ({"decision": "later"}, False, ""),
    ({"continue": False, "stopReason": "halt"}, False, ""),
    ({"suppressOutput": True}, True, ""),
])
def test_claude_decisions_on_exit_0(workspace, decision, allowed, ask):
    hooks, _ = claude_hooks(workspace, pre_tool_use(printing(decision)))
    verdict = hooks.run("pre_tool_use", "shell", {"command": "rm -rf x"})
    assert (verdict.allowed, verdict.ask) == (allowed, ask)
    if decision.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
        assert verdict.reason == "no rm here"


def test_a_claude_hook_sees_the_file_save_note_really_writes(workspace):
    """save_note appends to agent_notes.md: a hook that guards files by Claude's file_path must be
    told that name, not another (it was told NOTES.md, a file the tool never touches)."""
    record = script(workspace, "import json,sys; e=json.load(sys.stdin); "
                               "open('seen.json','a').write(json.dumps(e)+'\\n')")
    hooks, _ = claude_hooks(workspace, {"hooks": {
        "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": record}]}]}})
    assert hooks.run("pre_tool_use", "save_note", {"note": "the build needs make"}).allowed
    seen = json.loads((workspace / "seen.json").read_text())
    assert (seen["tool_name"], seen["tool_input"]["file_path"]) == ("Edit", str(workspace / "agent_notes.md"))


def test_claude_names_in_matchers_and_on_stdin(workspace):
    record = script(workspace, "import json,os,sys; e=json.load(sys.stdin); e['env']=os.environ['CLAUDE_PROJECT_DIR']; "
                               "open('seen.json','a').write(json.dumps(e)+'\\n')")
    hooks, _ = claude_hooks(workspace, {"hooks": {
        "PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": record, "timeout": 5}]}],
        "PostToolUse": [{"hooks": [{"type": "command", "command": record}]}],
        "pre_tool_use": [{"matcher": "write_file", "command": record}]}})
    assert hooks.run("pre_tool_use", "write_file", {"path": "sub/a.txt", "content": "x"}, tool_use_id="t1").allowed
    assert hooks.run("pre_tool_use", "shell", {"command": "ls"}).allowed  # no matcher matches shell: nothing ran
    assert hooks.run("post_tool_use", "shell", {"command": "ls"}, result="exit 0\na.txt").allowed
    seen = {e["hook_event_name"]: e for e in map(json.loads, (workspace / "seen.json").read_text().splitlines())}
    claude, ours, post = seen["PreToolUse"], seen["pre_tool_use"], seen["PostToolUse"]   # the two pre hooks ran together
    assert (claude["hook_event_name"], claude["tool_name"], claude["tinyharness_tool_name"]) == \
           ("PreToolUse", "Write", "write_file")
    assert claude["tool_input"]["file_path"] == str(workspace / "sub" / "a.txt")
    assert (claude["cwd"], claude["env"], claude["session_id"], claude["tool_use_id"], claude["agent"]) == \
           (str(workspace), str(workspace), "s1", "t1", "parent")
    assert (ours["hook_event_name"], ours["tool_name"]) == ("pre_tool_use", "write_file")
    assert (post["hook_event_name"], post["tool_name"], post["tool_response"]["stdout"]) == \
           ("PostToolUse", "Bash", "exit 0\na.txt")


@pytest.mark.parametrize("settings, problem", [
    ({"pre_tool_use": [{"matcher": 5, "command": "x"}]}, '"matcher" must be a string'),
    ({"PreToolUse": [{"matcher": ["Bash"], "hooks": [{"type": "command", "command": "x"}]}]}, "must be a string"),
    ({"PreToolUse": [{"hooks": [{"type": "script", "script": "x"}]}]}, "only hooks of \"type\": \"command\""),
    ({"PreToolUse": [{"hooks": []}]}, '"hooks" must be a list'),
    ({"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "timeout": "60"}]}]}, '"timeout" must be'),
    ({"pre_tool_use": [{"command": "x", "timeout": 0}]}, '"timeout" must be'),
    ({"BeforeTool": []}, "unknown event 'BeforeTool'"),
])
def test_a_bad_claude_or_our_entry_is_a_sentence(workspace, settings, problem):
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps({"hooks": settings}))
    with pytest.raises(commands.HooksFileError, match=re.escape(problem)):
        commands.load(workspace)


def test_a_per_hook_timeout_and_the_runs_time_left_bound_a_hook(workspace):
    hooks, _ = claude_hooks(workspace, {"pre_tool_use": [{"command": "sleep 30", "timeout": 1}]})
    verdict = hooks.run("pre_tool_use", "shell", {})
    assert not verdict.allowed and "did not finish within 1 s" in verdict.reason
    hooks, _ = claude_hooks(workspace, {"pre_tool_use": [{"command": "sleep 30"}]})
    verdict = hooks.run("pre_tool_use", "shell", {}, deadline=time.monotonic() - 5)  # the run's time is out
    assert not verdict.allowed and f"within {commands.MIN_TIMEOUT:g} s" in verdict.reason


def alive(pid):
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def left_running(marker, seconds=10):
    """Whether a process whose command line holds `marker` is still alive after `seconds` (found through
    /proc from outside: a confined hook's child has a number of its own PID namespace)."""
    deadline = time.monotonic() + seconds
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                    found.append(entry.name)
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("sandbox", [True, False], ids=["confined", "unconfined"])
def test_a_background_child_holding_the_output_neither_holds_the_call_nor_survives(workspace, sandbox):
    # Before: the call waited for the child's end of the pipe (the whole timeout), then blocked, and the child lived on.
    marker = f"{300 + (not sandbox)}.{os.getpid()}{time.monotonic_ns() % 10**6}"
    hooks, _ = claude_hooks(workspace, {"pre_tool_use": [{"command": f"sleep {marker} & exit 0", "timeout": 120,
                                                          "sandbox": sandbox}]})
    verdict = hooks.run("pre_tool_use", "shell", {})
    assert verdict.allowed, verdict.reason
    assert left_running(marker.encode()) == []


@pytest.mark.parametrize("sandbox", [True, False], ids=["confined", "unconfined"])
def test_a_timed_out_hook_is_killed_with_its_children(workspace, sandbox):
    marker = f"{300 + (not sandbox)}.{os.getpid()}{time.monotonic_ns() % 10**6}"
    hooks, _ = claude_hooks(workspace, {"pre_tool_use": [{"command": f"sleep {marker} & sleep 300", "timeout": 1,
                                                          "sandbox": sandbox}]})
    assert not hooks.run("pre_tool_use", "shell", {}).allowed
    assert left_running(marker.encode()) == []


def test_user_prompt_submit_text_is_context_and_a_json_block_refuses(workspace):
    hooks, _ = claude_hooks(workspace, {"UserPromptSubmit": [{"hooks": [{"type": "command",
                                                                         "command": "echo 'Branch: main'"}]}]})
    verdict = hooks.run("user_prompt_submit", prompt="fix it")
    assert verdict.allowed and verdict.output == "Branch: main"
    hooks, _ = claude_hooks(workspace, {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": printing(
        {"decision": "block", "reason": "no secrets in prompts"})}]}]})
    assert hooks.run("user_prompt_submit", prompt="x").reason == "no secrets in prompts"


def test_claude_stop_fires_for_the_parent_subagent_stop_for_the_child_and_agent_says_which(workspace):
    from tinyharness.counts import Stats
    from tinyharness.extensions import Extensions, RunHands
    from tinyharness.settings import RunSettings
    from tinyharness.subagents import Parent, child_settings
    record = script(workspace, "import json,sys; e=json.load(sys.stdin); "
                               "open('seen.txt','a').write(e['hook_event_name']+' '+e['agent']+'\\n')")
    hooks, _ = claude_hooks(workspace, {"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": record}]}],
        "SubagentStop": [{"hooks": [{"type": "command", "command": record}]}],
        "pre_tool_use": [{"command": record}]}})
    parent = RunHands(RunSettings(extensions=Extensions(hooks=hooks)))
    child = RunHands(child_settings(Parent(None, None, str(workspace), Stats(), parent.settings)))
    assert parent.stop("done") is None and child.stop("done") is None
    assert child.pre_tool_use("read_file", {"path": "a"}) is None
    assert (workspace / "seen.txt").read_text().splitlines() == ["Stop parent", "SubagentStop subagent",
                                                                 "pre_tool_use subagent"]


def test_ask_puts_a_read_to_the_user_and_a_write_to_the_usual_prompt(workspace):
    from tinyharness.extensions import Extensions, RunHands
    from tinyharness.settings import RunSettings
    hooks, reports = claude_hooks(workspace, pre_tool_use(printing(
        {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "secrets nearby"}}), ".*"))
    questions = []
    ext = RunHands(RunSettings(extensions=Extensions(hooks=hooks), approve=lambda q: questions.append(q) or False))
    assert "did not confirm" in ext.pre_tool_use("read_file", {"path": ".env"})
    assert questions == ["A hook asks you to confirm: allow read_file({\"path\": \".env\"})? [y/N] "]
    assert ext.pre_tool_use("shell", {"command": "ls"}) is None  # shell asks anyway: asked once, by the loop
    assert len(questions) == 1 and "secrets nearby" in reports[-1]
    yes = RunSettings(extensions=Extensions(hooks=hooks), approve=lambda q: True)
    assert RunHands(yes).pre_tool_use("read_file", {"path": "a"}) is None


# --- through `tinyharness run`: hooks written for Claude Code, unchanged -----------------------------

# As Claude Code's hooks guide writes them: a Python validator answering with a JSON decision, and a bash
# file guard reading stdin with jq and blocking with exit 2. Neither knows tinyharness exists.
CLAUDE_BASH_VALIDATOR = '''#!/usr/bin/env python3
import json
import sys

try:
    input_data = json.load(sys.stdin)
except json.JSONDecodeError as e:
    print(f"Error: Invalid JSON input: {e}", file=sys.stderr)
    sys.exit(1)

tool_name = input_data.get("tool_name", "")
tool_input = input_data.get("tool_input", {})
command = tool_input.get("command", "")

if tool_name != "Bash" or not command:
    sys.exit(0)

if ".env" in command:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "Commands may not touch .env files",
        }
    }
    print(json.dumps(output))
sys.exit(0)
'''

CLAUDE_FILE_GUARD = '''#!/bin/bash
INPUT=$(cat)
FILE_PATH=$(echo "$INPUT" | jq -r '.tool_input.file_path // empty')

if [[ "$FILE_PATH" == *".env"* ]]; then
  echo "Blocked: $FILE_PATH is a protected file" >&2
  exit 2
fi
exit 0
'''

CLAUDE_SETTINGS = {
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash",
             "hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/validate-bash.py"}]},
            {"matcher": "Edit|MultiEdit|Write",
             "hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/protect-files.sh",
                        "timeout": 60}]},
        ]
    }
}


def run_cli(workspace, tmp_path, hooks, script, *args, tty="y\n"):
    """`tinyharness run --yes`, the workspace's hooks file trusted at the terminal (`tty`: y)."""
    from tests.ladder import FINAL, run_stage
    from tinyharness.testing import ScriptedServer
    (workspace / ".tinyharness").mkdir(exist_ok=True)
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps(hooks))
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}
    with ScriptedServer(script=script) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "--yes", *args, tty=tty, env=env)
    return result, server


def install_claude_hooks(workspace):
    folder = workspace / ".claude" / "hooks"
    folder.mkdir(parents=True)
    for name, text in (("validate-bash.py", CLAUDE_BASH_VALIDATOR), ("protect-files.sh", CLAUDE_FILE_GUARD)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)


@pytest.mark.skipif(not shutil.which("jq") or not shutil.which("bash"), reason="the bash hook reads stdin with jq")
def test_hooks_written_for_claude_code_block_calls_unchanged(workspace, tmp_path):
    from tests.ladder import calls, tool_call, tool_results
    install_claude_hooks(workspace)
    canary = workspace / ".env"
    canary.write_text("API_KEY=canary\n")
    script = [calls(tool_call("shell", command="echo 'API_KEY=stolen' > .env")),
              calls(tool_call("write_file", path=".env", content="API_KEY=stolen\n")),
              calls(tool_call("shell", command="echo ok > fine.txt")),
              "Done."]
    result, server = run_cli(workspace, tmp_path, CLAUDE_SETTINGS, script, "change the key")
    assert result.returncode == 0, result.stderr
    answers = [list(tool_results(request).values())[-1] for request in server.requests[1:]]
    assert answers[0] == "BLOCKED: Commands may not touch .env files (a pre_tool_use hook of this workspace)"
    assert answers[1] == (f"BLOCKED: Blocked: {canary} is a protected file (a pre_tool_use hook of this workspace)")
    assert answers[2].startswith("exit status 0")  # the same hooks let an ordinary command through
    assert canary.read_text() == "API_KEY=canary\n" and (workspace / "fine.txt").read_text() == "ok\n"
    assert "validate-bash.py` blocked shell: Commands may not touch .env files" in result.stderr


def test_a_matcher_that_is_not_a_string_is_a_usage_error(workspace, tmp_path):
    result, server = run_cli(workspace, tmp_path, {"pre_tool_use": [{"matcher": ["shell"], "command": "true"}]},
                             ["Done."], "go")
    assert result.returncode == 2 and server.requests == []
    assert '"matcher" must be a string' in result.stderr and "Traceback" not in result.stderr


def test_a_guarded_claude_stop_hook_sends_the_model_back_once(workspace, tmp_path):
    # The Stop hook of Claude Code's guide: it must not block again when stop_hook_active is true.
    guard = script(workspace, "import json,sys\nd=json.load(sys.stdin)\n"
                              "if d.get('stop_hook_active'): sys.exit(0)\n"
                              "print(json.dumps({'decision': 'block', 'reason': 'Run the tests first.'}))\n")
    hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": guard}]}]}}
    result, server = run_cli(workspace, tmp_path, hooks, ["Done.", "Tests pass. Done.", "never asked"], "go")
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 2 and result.stdout.strip().endswith("Tests pass. Done.")
    assert server.requests[1]["messages"][-1]["content"].endswith("Run the tests first.")


def test_user_prompt_submit_stdout_reaches_the_model_as_context(workspace, tmp_path):
    hooks = {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo 'The release is frozen.'"}]}]}
    result, server = run_cli(workspace, tmp_path, hooks, ["Done."], "fix the bug")
    assert result.returncode == 0, result.stderr
    task = [m for m in server.requests[0]["messages"] if m["role"] == "user"][-1]["content"]
    assert task == "fix the bug\n\n[hook] Context from this workspace's hooks:\nThe release is frozen."


def test_chat_hooks_get_the_sessions_id_and_file(workspace, tmp_path):
    import os
    from tests.ladder import ROOT, run_on_terminal
    from tinyharness.testing import ScriptedServer
    record = script(workspace, "import json,sys; e=json.load(sys.stdin); "
                               "open('seen.txt','a').write(e['session_id']+' '+e['transcript_path']+'\\n')")
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps(
        {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": record}]}]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(tmp_path / "data"), "TERM": "dumb"}
    with ScriptedServer(script=["Hello.", "Again."]) as server:  # the hooks file trusted at the terminal (y)
        done = run_on_terminal([sys.executable, "-m", "tinyharness", "chat", "--base-url", server.base_url],
                               workspace, "hi\nmore\n", "y\n", 60, env)
    assert done.returncode == 0, done.stderr
    [session] = (tmp_path / "data" / "tinyharness" / "sessions").glob("*.jsonl")
    assert (workspace / "seen.txt").read_text().splitlines() == [f"{session.stem} {session}"] * 2


def test_the_runs_time_left_bounds_each_hook(workspace):
    from tinyharness.extensions import Extensions, RunHands
    from tinyharness.settings import RunSettings
    hooks, _ = claude_hooks(workspace, {"pre_tool_use": [{"command": "sleep 30", "timeout": 60}]})
    ext = RunHands(RunSettings(extensions=Extensions(hooks=hooks), max_seconds=0.2))  # --max-seconds 0.2
    assert ext.user_prompt_submit("task") is None   # the run's clock starts with its task
    reason = ext.pre_tool_use("shell", {"command": "ls"})
    assert f"did not finish within {commands.MIN_TIMEOUT:g} s" in reason


@pytest.mark.parametrize("sandboxes", [(True, True), (True, False)], ids=["both-confined", "one-unconfined"])
def test_hooks_running_together_never_reap_each_other(workspace, sandboxes):
    """Every matching hook runs together. The quick one's clean-up looks for what its command left behind:
    the slow one, started meanwhile, is no leftover of it - killed and reaped, its Popen would read exit 0,
    and a guard that never decided would allow the call."""
    slow = script(workspace, "import sys, time; time.sleep(0.6); print('slow done', file=sys.stderr); sys.exit(2)")
    hooks, _ = claude_hooks(workspace, {"pre_tool_use": [
        {"command": "exit 0", "sandbox": sandboxes[0]}, {"command": slow, "sandbox": sandboxes[1]}]})
    verdict = hooks.run("pre_tool_use", "shell", {"command": "ls"})  # the slow one still runs when the quick one ends
    assert (verdict.allowed, verdict.reason) == (False, "slow done")
