"""Command hooks fail closed: exit 0 allows, exit 2 blocks with stderr, anything else blocks too."""
import json
import sys

import pytest

from tinyharness import cmdhooks, trust

PY = sys.executable


def hooks_for(workspace, event, command, matcher=None):
    entry = {"command": command, **({"matcher": matcher} if matcher else {})}
    (workspace / ".tinyharness").mkdir(exist_ok=True)
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps({event: [entry]}))
    reports = []
    return cmdhooks.CommandHooks(cmdhooks.load(workspace), workspace, "s1", report=reports.append, timeout=2), reports


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
    ("echo 'ok sure, go ahead'", "not a JSON decision"),
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
    with pytest.raises(cmdhooks.HooksFileError, match=problem):
        cmdhooks.load(workspace)


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
