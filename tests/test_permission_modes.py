"""Claude Code's permission semantics (issue 39, finding 8), through the real command line.

An `ask` rule (a settings file's permissions.ask, or --ask) asks at the terminal even under --yes or a matching
allow rule, and with nobody there it is a denial that says so (deny, then ask, then allow, as Claude orders
them); `defaultMode` is honoured where it maps (acceptEdits: writes run unasked, commands still ask; plan: reads
only; dontAsk: what would ask is denied) and refused with a sentence where it does not (bypassPermissions); a
workspace file's mode, even a trusted one's, never lifts the user's own plan or dontAsk;
every settings key the harness does not use is named once; the trust question of a file that holds only
permission rules says what it allows, not that it runs commands.
"""
import json

import pytest

from tests.ladder import FINAL, calls, run_stage, tool_call, tool_results
from tinyharness.testing import ScriptedServer


@pytest.fixture
def home(tmp_path):
    """A home folder of the test's own: the trust store and the user's settings are the test's."""
    me = tmp_path / "me"
    me.mkdir()
    return {"HOME": str(me), "XDG_DATA_HOME": str(me / "data"), "XDG_CONFIG_HOME": str(me / "config")}


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def settings(ws, name="settings.json", **data):
    path = ws / ".claude" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def run(ws, home, script, *args, tty=None, code=0):
    with ScriptedServer(script) as server:
        done = run_stage(FINAL, ws, "--base-url", server.base_url, "--sandbox", "off", *args, "go", tty=tty,
                         env=home)
    assert done.returncode == code and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    return done, list(tool_results(server.requests[1]).values()) if len(server.requests) > 1 else []


@pytest.mark.parametrize("typed, runs", [("n\n", False), ("y\n", True)])
def test_an_ask_rule_asks_even_under_yes_and_a_matching_allow_rule(typed, runs, ws, home):
    """The attack of the finding: `git commit` under an ask rule ran unasked because --yes (or an allow rule) said
    yes first. Here the ask rule of .claude/settings.json (no trust needed: it only narrows) beats both."""
    settings(ws, permissions={"ask": ["Bash(echo committed:*)"]})
    script = [calls(tool_call("shell", command="echo committed > marker.txt")), "Done."]
    done, results = run(ws, home, script, "--yes", "--allow", "Bash(echo committed:*)", tty=typed)
    assert "the rule Bash(echo committed:*) (.claude/settings.json) asks" in done.screen
    assert 'Allow shell({"command": "echo committed > marker.txt"})? [y/N] ' in done.screen
    assert "a = always" not in done.screen  # an allow rule would not beat the ask rule: none is offered
    assert (ws / "marker.txt").exists() == runs
    assert results[0].startswith("exit status 0" if runs else "DENIED: the user did not allow this shell call")


def test_an_ask_rule_without_a_terminal_is_a_denial_that_says_so(ws, home):
    settings(ws, permissions={"ask": ["Bash(git commit:*)"]})
    script = [calls(tool_call("shell", command="git commit -m wip"), tool_call("shell", command="echo other")),
              "Done."]
    done, results = run(ws, home, script, "--yes", "--ask", "Bash(echo:*)")
    assert results[0] == ("DENIED: this shell call did not run: the rule Bash(git commit:*) (.claude/settings.json) "
                          "asks, and there is no terminal to ask at (--yes and allow rules never answer an ask rule).")
    assert results[1].startswith("DENIED: this shell call did not run: the rule Bash(echo:*) (--ask) asks")


def test_accept_edits_writes_without_asking_and_commands_still_ask(ws, home):
    settings(ws, "settings.local.json", permissions={"defaultMode": "acceptEdits"})
    script = [calls(tool_call("write_file", path="notes.md", content="hello\n"),
                    tool_call("shell", command="echo ran > marker.txt")), "Done."]
    # y: trust the file (acceptEdits lets writes run unasked, so it is trusted first); n: the command
    done, results = run(ws, home, script, tty="y\nn\n")
    assert "defaultMode \"acceptEdits\"" in done.stdout  # the trust question says what the file allows
    assert (ws / "notes.md").read_text() == "hello\n" and "Allow write_file(" not in done.screen
    assert done.screen.count("Allow shell(") == 1 and not (ws / "marker.txt").exists()
    assert results[0].startswith("OK: wrote") and results[1].startswith("DENIED: the user did not allow")


def test_plan_mode_reads_and_refuses_writes_and_commands_even_under_yes(ws, home):
    (ws / "a.txt").write_text("A")
    settings(ws, permissions={"defaultMode": "plan"})
    script = [calls(tool_call("read_file", path="a.txt"), tool_call("write_file", path="b.txt", content="b"),
                    tool_call("shell", command="echo ran > marker.txt")), "Done."]
    done, results = run(ws, home, script, "--yes")
    assert "A" in results[0]
    for result, name in zip(results[1:], ("write_file", "shell")):
        assert result.startswith(f'DENIED: plan mode (defaultMode "plan", .claude/settings.json): this {name} call')
    assert not (ws / "b.txt").exists() and not (ws / "marker.txt").exists()


def test_dont_ask_denies_what_would_ask_and_runs_what_is_allowed(ws, home):
    settings(ws, permissions={"defaultMode": "dontAsk"})
    script = [calls(tool_call("shell", command="echo allowed"), tool_call("shell", command="echo other")), "Done."]
    done, results = run(ws, home, script, "--allow", "Bash(echo allowed)", tty="y\ny\n")
    assert results[0].startswith("exit status 0")
    assert results[1].startswith('DENIED: defaultMode "dontAsk" (.claude/settings.json) denies')
    assert "Allow shell(" not in done.screen  # nothing was asked


@pytest.mark.parametrize("users, theirs", [("plan", "acceptEdits"), ("dontAsk", "default")])
def test_a_trusted_workspace_mode_never_lifts_the_users_own(users, theirs, ws, home):
    """The user's ~/.claude/settings.json says plan (or dontAsk); a workspace file the user trusts (--trust: it
    allows Read) says acceptEdits (or default). A later file's mode wins, but not past the user's own: under --yes
    the write and the command are refused, and one line says why the workspace's mode did not apply."""
    own = settings(ws.parent / "me", permissions={"defaultMode": users})
    settings(ws, "settings.local.json", permissions={"allow": ["Read"], "defaultMode": theirs})
    script = [calls(tool_call("write_file", path="b.txt", content="b"),
                    tool_call("shell", command="echo ran > marker.txt")), "Done."]
    done, results = run(ws, home, script, "--yes", "--trust")
    assert not (ws / "b.txt").exists() and not (ws / "marker.txt").exists(), results
    assert all(f'"{users}"' in result and str(own) in result for result in results), results
    assert (f'[permissions] .claude/settings.local.json: defaultMode "{theirs}" does not apply: it lets more run '
            f'than "{users}" ({own}), and a workspace file never lifts your own mode; "{users}" holds') in done.stderr


def test_modes_that_do_not_map_and_keys_not_used_are_named_once(ws, home):
    settings(ws, **{"$schema": "https://json.schemastore.org/claude-code-settings.json", "env": {"A": "1"},
                    "model": "opus", "statusLine": {"type": "command", "command": "x"},
                    "permissions": {"defaultMode": "bypassPermissions", "additionalDirectories": ["../x"]}})
    script = [calls(tool_call("write_file", path="b.txt", content="b")), "Done."]
    done, results = run(ws, home, script, code=3)  # 3: nothing was allowed, nobody was there to answer
    lines = done.stderr.splitlines()
    bypass = [line for line in lines if "bypassPermissions" in line]
    assert len(bypass) == 1 and "pass --yes yourself" in bypass[0], done.stderr
    unused = [line for line in lines if "tinyharness does not use" in line]
    assert len(unused) == 1, done.stderr
    for key in ("env", "model", "statusLine", "permissions.additionalDirectories"):
        assert key in unused[0]
    assert "$schema" not in unused[0]
    assert results[0].startswith("DENIED: the user did not allow")  # not bypassed: nobody was there to say yes


def test_the_trust_question_of_a_rules_only_file_says_what_it_allows(ws, home):
    path = settings(ws, "settings.local.json", permissions={"allow": ["Bash(npm test:*)", "Edit(src/**)"]})
    done, _ = run(ws, home, ["Done."], tty="n\n", code=2)
    assert f"({path})" in done.stdout
    assert "it allows these calls without asking: Bash(npm test:*), Edit(src/**)" in done.stdout
    assert "unconfined" not in done.stdout and "runs commands" not in done.stdout
