"""A user's existing files, found where their tools keep them (tinyharness only): MCP servers in .mcp.json
(Claude Code's project scope) and .vscode/mcp.json (VS Code's shape and variables), hooks and permission
rules in .claude/settings.json and .claude/settings.local.json - each behind the trust question that names it."""
import json
import os
import sys
from pathlib import Path

import pytest

from tests.ladder import FINAL, ROOT, calls, run_stage, tool_call, tool_results
from tinyharness.mcp import config as mcp_config
from tinyharness.testing import ScriptedServer

SERVER = [sys.executable, str(ROOT / "tests" / "mcp_server.py")]


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def home(tmp_path):
    return {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def ws(tmp_path):
    """The workspace: beside the data folder, never holding it."""
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


# --- MCP servers -----------------------------------------------------------------------------------

def test_vs_code_variables_and_env_file_are_read_as_vs_code_reads_them(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("TOKEN", "t0k")
    write(tmp_path / ".env", "# secrets\nexport API_KEY='from-file'\nMODE=file\n")
    path = write(tmp_path / ".vscode" / "mcp.json", {"inputs": [{"id": "tok", "type": "promptString"}], "servers": {
        "notes": {"type": "stdio", "command": "python3", "args": ["${workspaceFolder}/srv.py", "${userHome}/x"],
                  "envFile": "${workspaceFolder}/.env", "env": {"MODE": "env", "T": "${env:TOKEN}"}},
        "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}}}})
    configs = mcp_config.load_config(path, tmp_path)
    assert configs["notes"]["command"] == ["python3", f"{tmp_path}/srv.py", f"{tmp_path}/me/x"]
    assert configs["notes"]["env"] == {"API_KEY": "from-file", "MODE": "env", "T": "t0k"}  # env wins over envFile
    assert configs["web"]["headers"] == {"Authorization": "Bearer t0k"}


def test_an_input_variable_is_never_sent_as_it_is(ws, home):
    """${input:ID} is asked for at the terminal (tests/test_mcp_scopes.py); headless the server is skipped with a
    line, and the run goes on."""
    path = write(ws / ".vscode" / "mcp.json", {"inputs": [{"id": "tok", "type": "promptString", "description": "T"}],
                                               "servers": {"web": {"type": "http", "url": "http://127.0.0.1:1/mcp",
                                                                   "headers": {"Authorization": "Bearer ${input:tok}"}}}})
    assert mcp_config.load_config(path, ws)["web"]["inputs"] == {"tok": "T"}
    with pytest.raises(ValueError, match=r"\$\{command:x\} is a VS Code command variable.*\$\{env:NAME\}"):
        mcp_config.vs_code_variables({"command": "${command:x}"}, str(ws), "here")
    with ScriptedServer(["Done."]) as server:
        done = run_stage(FINAL, ws, "--base-url", server.base_url, "--trust", "go", env=home)
    assert done.returncode == 0 and "[mcp] web: skipped: it needs ${input:tok}" in done.stderr, done.stderr


def test_mcp_json_and_vscode_mcp_json_are_found_trusted_each_by_name_and_used(ws, home):
    workspace = ws
    claude = write(workspace / ".mcp.json", {"mcpServers": {"claude": {"command": SERVER[0], "args": SERVER[1:]}}})
    vscode = write(workspace / ".vscode" / "mcp.json", {"servers": {
        "code": {"type": "stdio", "command": SERVER[0], "args": SERVER[1:], "env": {"W": "${workspaceFolder}"}}}})
    script = [calls(tool_call("mcp__claude__echo", text="a"), tool_call("mcp__code__echo", text="b")), "Done."]
    with ScriptedServer(script) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, "--yes", "go", tty="y\ny\n", env=home)
    assert done.returncode == 0, done.stderr
    assert f"This workspace has an MCP server list ({claude})" in done.stdout
    assert f"This workspace has an MCP server list ({vscode})" in done.stdout
    assert sorted(tool_results(server.requests[1]).values()) == ["echo: a", "echo: b"]


def test_an_untrusted_mcp_json_names_the_file_and_starts_nothing(ws, home):
    path = write(ws / ".mcp.json", {"mcpServers": {"x": {"command": "/nonexistent/server"}}})
    done = run_stage(FINAL, ws, "go", stdin="", env=home)
    assert done.returncode == 2 and f"{path} was not trusted" in done.stderr


def test_mcp_list_says_which_file_each_server_came_from(ws, home):
    import subprocess
    tmp_path = ws
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "/nonexistent/a"}}})
    write(tmp_path / ".vscode" / "mcp.json", {"servers": {"b": {"type": "stdio", "command": "/nonexistent/b"}}})
    done = subprocess.run([sys.executable, "-m", "tinyharness", "mcp", "list"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, **home, "PYTHONPATH": str(ROOT)}, timeout=60)
    lines = done.stdout.splitlines()
    assert lines[lines.index("a  [stdio] /nonexistent/a") + 1] == \
        f"  NOT trusted yet: {tmp_path / '.mcp.json'} (run or chat asks once; until then it is never started)"
    assert lines[lines.index("b  [stdio] /nonexistent/b") + 1].startswith(
        f"  NOT trusted yet: {Path(tmp_path) / '.vscode' / 'mcp.json'}")


# --- hooks and permission rules in Claude Code's project settings ------------------------------------

GUARD = ("import json, sys; e = json.load(sys.stdin); "
         "sys.exit(2) if 'rm ' in e['tool_input'].get('command', '') and print('no rm here', file=sys.stderr) is None "
         "else sys.exit(0)")


def claude_settings(ws, name="settings.json", **data):
    return write(ws / ".claude" / name, data)


def run_with(ws, home, script, *args, tty="y\n", stdin=""):
    """`tinyharness run`; `tty`: what is typed at its terminal (None: it has none), by default a y to trust."""
    with ScriptedServer(script) as server:
        done = run_stage(FINAL, ws, "--base-url", server.base_url, *args, "go", stdin=stdin, tty=tty, env=home)
    return done, server


def test_a_deny_hook_and_deny_rules_in_claude_settings_hold_without_copying_anything(ws, home):
    (ws / "keep.txt").write_text("keep")
    (ws / ".env").write_text("SECRET=1")
    (ws / "guard.py").write_text(GUARD)
    path = claude_settings(ws, hooks={"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": f"{sys.executable} guard.py"},
        {"type": "prompt", "prompt": "is this safe?"}]}]}, permissions={"deny": ["Read(./.env)"]})
    script = [calls(tool_call("shell", command="rm keep.txt"), tool_call("read_file", path=".env"),
                    tool_call("read_file", path="./sub/../.env")), "Done."]
    done, server = run_with(ws, home, script, "--yes", "--sandbox", "off")
    assert done.returncode == 0, done.stderr
    results = list(tool_results(server.requests[1]).values())
    assert results[0].startswith("BLOCKED: no rm here") and (ws / "keep.txt").exists()
    assert results[1] == results[2] == ("DENIED: the rule Read(./.env) (.claude/settings.json) denies this read_file "
                                        "call, so it did not run.")
    assert f"This workspace has a hooks or settings file ({path})" in done.stdout
    assert 'a PreToolUse hook of "type": "prompt" is skipped' in done.stderr


def test_settings_local_json_adds_its_rules_and_an_untrusted_one_stops_the_run(ws, home):
    claude_settings(ws, permissions={"deny": ["Bash(git push:*)"]})  # deny only: no question
    local = claude_settings(ws, "settings.local.json", permissions={"allow": ["Bash(echo hi)"]})
    done, _ = run_with(ws, home, ["Done."], tty=None)
    assert done.returncode == 2 and ".claude/settings.local.json was not trusted" in done.stderr
    assert f"({local})" in done.stdout
    assert ".." not in done.stderr and "Fix it or remove it" not in done.stderr  # one sentence, said once


def test_allow_and_deny_flags_in_claudes_spelling(ws, home):
    (ws / "src").mkdir()
    script = [calls(tool_call("shell", command="echo hi"), tool_call("shell", command="npm test --watch"),
                    tool_call("shell", command="npm test && echo chained"), tool_call("write_file", path="src/a.txt",
                                                                                      content="a")), "Done."]
    done, server = run_with(ws, home, script, "--sandbox", "off", "--allow", "Bash(echo hi)", "--allow",
                            "Bash(npm test:*)", "--allow", "Edit(src/**)", "--deny", "Bash(npm test --watch)",
                            tty=None)  # nobody answers: only what a rule allows runs
    results = list(tool_results(server.requests[1]).values())
    assert results[0] == "exit status 0\nhi\n"
    assert results[1].startswith("DENIED: the rule Bash(npm test --watch) (--deny) denies")  # deny wins over allow
    assert results[2].startswith("DENIED: the user did not allow")  # a chain is never allowed by a rule
    assert results[3].startswith("OK: wrote 1 characters") and (ws / "src" / "a.txt").read_text() == "a"
    assert "no terminal to answer at" not in done.stderr  # there are allow rules


def test_deny_wins_over_yes_and_a_headless_run_without_rules_says_what_will_happen(ws, home):
    script = [calls(tool_call("write_file", path="a.txt", content="a")), "Done."]
    done, server = run_with(ws, home, script, "--yes", "--deny", "Write")
    assert tool_results(server.requests[1]).popitem()[1].startswith("DENIED: the rule Write (--deny)")
    assert not (ws / "a.txt").exists() and "no terminal to answer at" not in done.stderr
    done, _ = run_with(ws, home, ["Done."], tty=None)
    assert "[permissions] there is no terminal to answer at and neither --yes nor an allow rule was given: every " \
           "write and command will be DENIED" in done.stderr
    bad = run_stage(FINAL, ws, "--deny", "Bash(", "go", env=home)
    assert bad.returncode == 2 and "is not a rule" in bad.stderr


@pytest.mark.parametrize("spec, path, hit", [
    ("./.env", ".env", True), ("./.env", "sub/.env", False), (".env", "sub/.env", True), ("src/**", "src/a/b.py", True),
    ("src/**", "srcx/a", False), ("src", "src/a.py", True), ("*.pem", "keys/k.pem", True), ("/docs/*.md", "docs/a.md", True),
    ("/docs/*.md", "docs/x/a.md", False)])
def test_file_specifiers_are_read_as_gitignore_reads_them(tmp_path, spec, path, hit):
    from tinyharness.permissions import path_matches
    assert path_matches(spec, path, str(tmp_path)) is hit


def test_a_link_to_a_denied_file_is_denied_too(tmp_path):
    from tinyharness.permissions import Rules
    (tmp_path / ".env").write_text("x")
    (tmp_path / "innocent").symlink_to(tmp_path / ".env")
    rules = Rules(tmp_path)
    rules.add(["Read(./.env)"], "deny", "--deny", [])
    assert rules.decide("read_file", {"path": "innocent"}).text == "Read(./.env)"
    assert rules.decide("read_file", {"path": "other"}) is None


def test_every_matching_hook_runs_and_a_block_from_any_blocks(ws, home):
    (ws / "audit.py").write_text("import json, sys; open('audit.log', 'a').write(json.load(sys.stdin)['tool_name'] + '\\n')")
    claude_settings(ws, hooks={"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "exit 1"},  # a guard that fails: blocks here (Claude Code would run the call)
        {"type": "command", "command": f"{sys.executable} audit.py"}]}]})
    done, server = run_with(ws, home, [calls(tool_call("shell", command="echo x")), "Done."], "--yes", "--sandbox", "off")
    result = tool_results(server.requests[1]).popitem()[1]
    assert result.startswith("BLOCKED: the hook `exit 1` failed with exit code 1") and "Claude Code would" in result
    assert (ws / "audit.log").read_text() == "Bash\n"  # the audit hook saw the blocked call


def test_a_headless_run_whose_every_write_and_command_was_denied_exits_3_and_says_nothing_was_allowed(ws, home):
    """Issue 30: no terminal, no --yes, no allow rule: every write and command is DENIED, and the run used
    to exit 0 as if done. Now it is "not confirmed complete" (3), in words and in the --json result; a
    "n" typed at a terminal is somebody's answer (a piped one is nobody's: issue 39), and an allow rule or --yes
    lets work run: those end as before."""
    script = [calls(tool_call("write_file", path="a.txt", content="a"), tool_call("shell", command="touch b")), "Done."]
    done, server = run_with(ws, home, script, "--json", tty=None)
    assert done.returncode == 3, done.stderr
    assert [r.startswith("DENIED: the user did not allow") for r in tool_results(server.requests[1]).values()] == \
           [True, True] and not (ws / "a.txt").exists() and not (ws / "b").exists()
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["type"], result["exit_code"], result["is_error"], result["answer"]) == ("result", 3, True, "Done.")
    assert result["stopped"].startswith("nothing was allowed: the 2 call(s) that needed approval")
    done, _ = run_with(ws, home, script, tty=None, stdin="n\nn\n")  # piped: no answer
    assert done.returncode == 3 and done.stdout.rstrip().splitlines()[-1] == (
        "Stopped: nothing was allowed: the 2 call(s) that needed approval (a write, a command, a URL) were DENIED, as "
        "nobody answered at a terminal (there was none, or its input ended) and neither --yes nor an allow rule was "
        "given. The task is NOT confirmed complete.")
    assert run_with(ws, home, script, tty="n\nn\n")[0].returncode == 0  # somebody said no
    assert run_with(ws, home, script, "--allow", "Write", tty=None)[0].returncode == 0  # the write ran
    assert run_with(ws, home, ["Done."], tty=None)[0].returncode == 0  # nothing was asked


# --- the user's own hooks: ~/.claude/settings.json and $XDG_CONFIG_HOME/tinyharness/hooks.json ----------------

USER_GUARD = """import json, os, sys
event = json.load(sys.stdin)
try:
    open(os.path.expanduser("~/.claude/.credentials.json")).read()
    creds = "read"
except OSError:
    creds = "no"
if "rm " in event["tool_input"].get("command", ""):
    print(f"no rm here (from {os.getcwd()}, credentials: {creds})", file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.skipif(__import__("tinyharness.sandbox").sandbox.unavailable_reason() is not None, reason="needs the sandbox")
def test_a_users_claude_hook_runs_without_a_trust_question_confined_in_its_hooks_folder(ws, home, tmp_path):
    """~/.claude/settings.json's hooks are the user's own: no trust question; the hook starts in
    ~/.claude/hooks (never the workspace) and, confined, reads its script there but no other file of
    the home folder (Claude's credentials beside it)."""
    me = tmp_path / "me"
    write(me / ".claude" / "hooks" / "guard.py", USER_GUARD)
    write(me / ".claude" / ".credentials.json", '{"token": "s3cr3t"}')
    write(me / ".claude" / "settings.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": f"{sys.executable} ~/.claude/hooks/guard.py"}]}]},
        "permissions": {"allow": ["Bash(echo fine:*)"], "deny": ["Write"]}})
    script = [calls(tool_call("shell", command="rm -f x"), tool_call("shell", command="echo fine"),
                    tool_call("write_file", path="w.txt", content="w")), "Done."]
    done, server = run_with(ws, {**home, "HOME": str(me)}, script, tty=None)  # no --yes: the allow rule lets it run
    assert done.returncode == 0 and "Trust this file" not in done.stdout, done.stdout + done.stderr
    assert f"[permissions] {me / '.claude' / 'settings.json'} (your own): its allow rules apply here too: " \
           "Bash(echo fine:*)" in done.stderr
    blocked, allowed, denied = tool_results(server.requests[1]).values()
    assert denied.startswith(f"DENIED: the rule Write ({me / '.claude' / 'settings.json'})") and not (ws / "w.txt").exists()
    assert blocked == f"BLOCKED: no rm here (from {me / '.claude' / 'hooks'}, credentials: no) (a pre_tool_use hook " \
                      "of the user)", blocked
    assert allowed == "exit status 0\nfine\n"  # the user's allow rule, with nobody to ask


def test_our_own_user_hooks_file_starts_its_hooks_in_its_folder_never_the_workspace(ws, home, tmp_path):
    """A `python -m audit` hook of $XDG_CONFIG_HOME/tinyharness/hooks.json ("sandbox": false) starts in that
    folder: the audit.py the model wrote in the workspace is not what runs, and its canary stays unwritten."""
    config = Path(home["XDG_CONFIG_HOME"]) / "tinyharness"
    write(config / "audit.py", "import os\nprint('audited from', os.getcwd())\n")
    write(config / "hooks.json", {"post_tool_use": [{"matcher": "write_file", "command": f"{sys.executable} -m audit",
                                                     "sandbox": False}]})
    canary = tmp_path / "canary"
    planted = f"import pathlib\npathlib.Path({str(canary)!r}).write_text('pwned')\n"
    script = [calls(tool_call("write_file", path="audit.py", content=planted)), "Done."]
    done, server = run_with(ws, {**home, "HOME": str(tmp_path / "me")}, script, "--yes", tty=None)
    assert done.returncode == 0 and "Trust this file" not in done.stdout, done.stdout + done.stderr
    assert tool_results(server.requests[1]).popitem()[1].endswith(f"audited from {config}")
    assert not canary.exists()


def test_hooks_list_names_each_file_its_trust_and_where_each_hook_runs(tmp_path, monkeypatch):
    from tinyharness import extensions
    me, ws = tmp_path / "me", tmp_path / "ws"
    for name, value in (("HOME", me), ("XDG_CONFIG_HOME", me / ".config"), ("XDG_DATA_HOME", tmp_path / "data")):
        monkeypatch.setenv(name, str(value))
    write(me / ".claude" / "hooks" / "guard.sh", "exit 0")
    write(me / ".claude" / "settings.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "~/.claude/hooks/guard.sh"}]}]}})
    write(me / ".config" / "tinyharness" / "hooks.json", {"stop": [{"command": "notify-send done", "sandbox": False}]})
    write(ws / ".tinyharness" / "hooks.json", {"post_tool_use": [{"command": "make test", "timeout": 90}]})
    lines = []
    assert extensions.list_hooks(str(ws), out=lines.append) == 0
    assert lines == [
        f"{me / '.claude' / 'settings.json'}  (your own file: no trust question)",
        "  pre_tool_use [Bash] ~/.claude/hooks/guard.sh",
        f"    in the sandbox; starts in {me / '.claude' / 'hooks'}; timeout 30 s",
        f"{me / '.config' / 'tinyharness' / 'hooks.json'}  (your own file: no trust question)",
        "  stop [*] notify-send done",
        f"    UNCONFINED (\"sandbox\": false); starts in {me / '.config' / 'tinyharness'}; timeout 30 s",
        f"{ws / '.tinyharness' / 'hooks.json'}  (NOT trusted yet: run or chat asks once; until then none runs)",
        "  post_tool_use [*] make test",
        "    in the sandbox; starts in the workspace; timeout 90 s"]
    (ws / ".tinyharness" / "hooks.json").write_text("[]")
    assert extensions.list_hooks(str(ws), out=lines.append) == 2 and lines[-1].startswith("error: ")
