"""Nothing of a hook outlives a killed harness (issue 37, finding 7).

The attack: SIGKILL the harness while a command hook runs. A shell command dies with it (its spawner
reads the end of its socket); a hook used to be left running - a copy of the harness (the process
between it and the hook's namespace), `sh` and the hook's command, confined or not, doing whatever it
does with nobody to stop it. Each case starts `python -m tinyharness run` against the scripted server,
waits until the hook runs, kills the harness with SIGKILL (no handler runs) and waits, with a generous
deadline, until no process whose command line carries the test's marker is left. The marker is in the
hook's command and in the task, so the harness's own copies carry it too.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder import ROOT
from tinyharness.sandbox import unavailable_reason
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
PY = sys.executable


def running(marker):
    """Pids on the machine whose command line holds MARKER (not this process)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def wait_until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def kill_left(marker):
    for pid in running(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# how the hooks file runs the hook: (entries of session_start; --sandbox)
HOOKS = {
    # one hook, alone on the main thread: cloned straight into its namespaces (no process between)
    "confined": (1, {}, "on"),
    # two hooks together, each on a thread of its own: the two-fork way (a copy of the harness between)
    "confined-together": (2, {}, "on"),
    # "sandbox": false: sh with all the user's rights, in a process group of its own
    "unconfined": (1, {"sandbox": False}, "on"),
    # --sandbox off: every hook unconfined
    "sandbox-off": (2, {}, "off"),
}


@pytest.mark.parametrize("how", sorted(HOOKS))
def test_a_killed_harness_leaves_no_process_of_a_running_hook(tmp_path, how):
    count, entry, sandbox = HOOKS[how]
    if sandbox == "on" and NO_SANDBOX and entry.get("sandbox", True):
        pytest.skip(str(NO_SANDBOX))
    marker = f"hookdeath-{os.getpid()}-{time.monotonic_ns()}"
    workspace, home = tmp_path / "ws", tmp_path / "home"
    (workspace / ".tinyharness").mkdir(parents=True)
    home.mkdir()
    # each hook says it started (a file in the workspace), then waits with the marker on its command line
    hooks = [{"command": f"touch started-{n}; {PY} -c 'import time; time.sleep(600)' {marker}", **entry}
             for n in range(count)]
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps({"session_start": hooks}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_STATE_HOME": str(home / "state"),
           "XDG_CACHE_HOME": str(home / "cache"), "TMPDIR": str(tmp_path)}
    # the workspace's hooks file trusted beforehand (the trust store), as a yes at an earlier run left it
    subprocess.run([PY, "-c", "import sys; from tinyharness import trust; trust.remember(sys.argv[1])",
                    str(workspace / ".tinyharness" / "hooks.json")], env=env, check=True, cwd=ROOT)
    with ScriptedServer(script=["done"]) as server:
        harness = subprocess.Popen([PY, "-m", "tinyharness", "run", "--yes", "--no-session", "--sandbox", sandbox,
                                    "--base-url", server.base_url, f"task {marker}"],
                                   cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)  # no terminal to ask at
        try:
            started = wait_until(lambda: harness.poll() is not None or (
                all((workspace / f"started-{n}").exists() for n in range(count)) and len(running(marker)) > count), 60)
            assert started and harness.poll() is None, \
                f"the hooks never started: {harness.poll()} {harness.stderr.read1(4000)!r}"
            harness.kill()  # SIGKILL: nothing of the harness runs after this
            harness.wait()
            left = wait_until(lambda: running(marker) == [], 30)
            assert left, f"still running 30 s after the harness was killed: {running(marker)}"
        finally:
            harness.kill()
            harness.wait()
            harness.stderr.close()
            kill_left(marker)
        assert server.requests == []  # the hook held the run before its first model call


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_killed_harness_leaves_no_shell_command_running(tmp_path, sandbox):
    """The same for the model's shell command: confined (its spawner ends with the harness's socket)
    and with --sandbox off (a process between the harness and the command's group kills the group
    when the harness is gone)."""
    if sandbox == "on" and NO_SANDBOX:
        pytest.skip(str(NO_SANDBOX))
    marker = f"shelldeath-{os.getpid()}-{time.monotonic_ns()}"
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    command = f"touch started; sleep 600 & {PY} -c 'import time; time.sleep(600)' {marker}; wait"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CONFIG_HOME": str(home / "config"), "TMPDIR": str(tmp_path)}
    script = [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}, "done"]
    with ScriptedServer(script=script) as server:
        harness = subprocess.Popen([PY, "-m", "tinyharness", "run", "--yes", "--no-session", "--sandbox", sandbox,
                                    "--base-url", server.base_url, "task"],
                                   cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        try:
            started = wait_until(lambda: harness.poll() is not None or (
                (workspace / "started").exists() and running(marker)), 60)
            assert started and harness.poll() is None, \
                f"the command never started: {harness.poll()} {harness.stderr.read1(4000)!r}"
            harness.kill()
            harness.wait()
            assert wait_until(lambda: running(marker) == [], 30), \
                f"still running 30 s after the harness was killed: {running(marker)}"
        finally:
            harness.kill()
            harness.wait()
            harness.stderr.close()
            kill_left(marker)
