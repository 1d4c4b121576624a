"""Trust is checked where it is used (issue 37, finding 1): before each start of an unconfined hook and of a
workspace MCP server, not once at the start of the run.

The attack: a workspace hooks file whose entry runs `sh scripts/check.sh` with "sandbox": false is trusted
(the question names scripts/check.sh); the model then rewrites scripts/check.sh with write_file - or a shell
command rewrites the tools/lint.py of a Claude-style PostToolUse hook, or the model creates a file the entry
names that did not exist at the question - and the next call's hook used to run the model's code with all the
user's rights. Each case runs `python -m tinyharness run --yes` against the scripted server, the hooks file
trusted beforehand (the trust store, as a yes at an earlier run leaves it) and no terminal (a session of its
own); a canary outside the workspace shows which version of the script ran. At a terminal (a pseudo-terminal)
the question is put again, naming the changed file.
"""
import json
import os
import select
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from tests.ladder import ROOT, tool_results
from tinyharness import mcp, trust
from tinyharness.testing import ScriptedServer

PY = sys.executable


@pytest.fixture
def place(tmp_path):
    ws, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    for folder in (ws / ".tinyharness", ws / ".claude", ws / "scripts", ws / "tools", outside, home):
        folder.mkdir(parents=True)
    canary = outside / "canary.txt"
    canary.write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_STATE_HOME": str(home / "state"),
           "XDG_CACHE_HOME": str(home / "cache")}
    return SimpleNamespace(ws=ws, canary=canary, env=env)


def appends(canary, text):
    """A shell line that appends TEXT to the canary outside the workspace."""
    return f"printf '%s' \"{text}\" >> '{canary}'\n"


def trusted_beforehand(place, path):
    subprocess.run([PY, "-c", "import sys; from tinyharness import trust; trust.remember(sys.argv[1])", str(path)],
                   env=place.env, check=True, cwd=ROOT, timeout=60)


def call(n, name, **arguments):
    return {"tool_calls": [{"name": name, "id": f"c{n}", "arguments": arguments}]}


def run(place, turns):
    """`tinyharness run --yes` with no terminal; (CompletedProcess, {call id: result})."""
    with ScriptedServer(script=[*turns, "done"]) as server:
        result = subprocess.run([PY, "-m", "tinyharness", "run", "--yes", "--no-session", "--base-url",
                                 server.base_url, "task"], cwd=place.ws, env=place.env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=120, start_new_session=True)
    results = {}
    for request in server.requests:
        results.update(tool_results(request))
    return result, results


def ours(place, command):
    path = place.ws / ".tinyharness" / "hooks.json"
    path.write_text(json.dumps({"pre_tool_use": [{"command": command, "sandbox": False}]}))
    return path


def claudes(place, command):
    path = place.ws / ".claude" / "settings.json"
    path.write_text(json.dumps({"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": command, "sandbox": False}]}]}}))
    return path


def rewritten_by_write_file(place):
    (place.ws / "scripts" / "check.sh").write_text(appends(place.canary, "the user's check;"))
    hooks = ours(place, "sh scripts/check.sh")
    # c0's hook runs the script as trusted (the control); c1's would run the model's
    turns = [call(0, "write_file", path="scripts/check.sh", content=appends(place.canary, "THE MODEL'S CODE")),
             call(1, "list_dir", path=".")]
    return hooks, turns, "the user's check;", "scripts/check.sh", "c1"


def rewritten_by_a_shell_command(place):
    (place.ws / "tools" / "lint.py").write_text(f"open({str(place.canary)!r}, 'a').write(\"the user's lint;\")\n")
    hooks = claudes(place, f'{PY} "$CLAUDE_PROJECT_DIR"/tools/lint.py')
    model = f"open({str(place.canary)!r}, 'a').write('THE MODEL\\'S CODE')"
    turns = [call(0, "shell", command="true"),
             call(1, "shell", command=f"printf '%s\\n' \"{model}\" > tools/lint.py")]
    return hooks, turns, "the user's lint;", "tools/lint.py", "c1"


def created_after_the_question(place):
    hooks = ours(place, "test -f scripts/extra.sh && sh scripts/extra.sh || true")
    turns = [call(0, "write_file", path="scripts/extra.sh", content=appends(place.canary, "THE MODEL'S CODE")),
             call(1, "list_dir", path=".")]
    return hooks, turns, "", "scripts/extra.sh", "c1"


ATTACKS = {"rewritten-by-write_file": rewritten_by_write_file,
           "claude-hook-rewritten-by-shell": rewritten_by_a_shell_command,
           "named-file-created-after-the-question": created_after_the_question}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_file_an_unconfined_hook_runs_changed_by_the_model_never_runs_headless(place, attack):
    hooks, turns, control, changed, blocked = ATTACKS[attack](place)
    trusted_beforehand(place, hooks)
    result, results = run(place, turns)
    assert result.returncode == 0, result.stderr
    assert place.canary.read_text() == control, (place.canary.read_text(), result.stderr)
    # refused, in one line on stderr naming the changed file; the call blocked as by a failing hook
    said = [line for line in result.stderr.splitlines() if "was not started" in line]
    assert len(said) == 1 and f"{changed} changed since you trusted" in said[0], result.stderr
    assert "no terminal to ask at" in said[0] and "refused" in said[0]
    assert "was not started" in results[blocked], results


def test_a_hook_whose_files_are_as_trusted_runs_every_time(place):
    """The control: nothing changed, so the unconfined hook runs before each call (no question, no refusal)."""
    (place.ws / "scripts" / "check.sh").write_text(appends(place.canary, "ran;"))
    trusted_beforehand(place, ours(place, "sh scripts/check.sh"))
    result, results = run(place, [call(0, "list_dir", path="."), call(1, "read_file", path="scripts/check.sh")])
    assert result.returncode == 0 and "was not started" not in result.stderr, result.stderr
    assert place.canary.read_text() == "ran;ran;"


# --- at a terminal: asked again, naming the file --------------------------------------------------------

BOOT = ("import fcntl, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "from tinyharness.cli import main; sys.exit(main(sys.argv[1:]))")


def read_until(fd, text, seen, seconds=60):
    deadline = time.monotonic() + seconds
    while text not in seen[0]:
        left = deadline - time.monotonic()
        assert left > 0, f"waited for {text!r}; the terminal shows:\n{seen[0][-3000:]}"
        if select.select([fd], [], [], left)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            assert chunk, f"the run ended before {text!r}:\n{seen[0][-3000:]}"
            seen[0] += chunk.decode("utf-8", errors="replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux pseudo-terminal")
@pytest.mark.parametrize("answer", ["n", "y"])
def test_at_a_terminal_the_question_is_asked_again_naming_the_changed_file(place, answer):
    hooks, turns, control, changed, _ = rewritten_by_write_file(place)
    trusted_beforehand(place, hooks)
    master, slave = os.openpty()
    with ScriptedServer(script=[*turns, "done"]) as server:
        process = subprocess.Popen([PY, "-c", BOOT, "run", "--yes", "--no-session", "--base-url", server.base_url,
                                    "task"], cwd=place.ws, env=place.env, stdin=slave, stdout=slave, stderr=slave,
                                   start_new_session=True)
        os.close(slave)
        seen = [""]
        try:
            read_until(master, "Run it as it is now, and trust it from now on? [y/N]", seen)
            assert f"{changed} changed since you trusted" in seen[0] and "THE MODEL'S CODE" in seen[0]
            os.write(master, f"{answer}\r".encode())
            assert process.wait(timeout=60) == 0, seen[0]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            os.close(master)
    assert place.canary.read_text() == control + ("THE MODEL'S CODE" if answer == "y" else "")


# --- a workspace MCP server: checked when it starts -----------------------------------------------------

def test_a_server_file_changed_after_the_yes_is_not_started(place, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", place.env["XDG_DATA_HOME"])
    (place.ws / "server.py").write_text(f"open({str(place.canary)!r}, 'a').write('the user\\'s server;')\n")
    config_file = place.ws / ".mcp.json"
    config_file.write_text(json.dumps({"mcpServers": {"s": {"command": PY, "args": ["server.py"]}}}))
    yes = trust.ensure_trusted(config_file, "an MCP server list", lambda question: True)
    config = {"type": "stdio", "command": [PY, "server.py"], "cwd": str(place.ws)}
    said = []
    mcp.Slots.start({"s": config}, report=said.append, trusted={"s": yes}).close()  # the control: it ran
    assert place.canary.read_text() == "the user's server;"
    (place.ws / "server.py").write_text(f"open({str(place.canary)!r}, 'a').write('THE MODEL')\n")
    said.clear()
    mcp.Slots.start({"s": config}, report=said.append, trusted={"s": yes}).close()
    assert place.canary.read_text() == "the user's server;"
    assert len(said) == 1 and "server.py changed since you trusted" in said[0], said
