"""Reaping: nothing a command started outlives it, however it forks.

A fork-and-exit chain (each process forks a child and exits at once, thousands of generations a second)
outran a cleanup that looks for the command's descendants and kills them: by the time it looks, the
process it found has a new child and is gone. In a PID namespace of its own the kernel ends every
process of the namespace when the command ends; without namespaces, the sandbox keeps every process in
the command's process group (setsid and setpgid are refused) and one kill of the group is exact: the
kernel makes a fork that races with it fail.
"""
import os
import shlex
import shutil
import tempfile
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ladder import run_stage, tool_results
from tinyharness import tools
from tinyharness import sandbox as sandbox_module
from tinyharness.sandbox import Sandbox, unavailable_reason
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
PY = sys.executable


def chain(marker):
    """A command that starts a fork-and-exit chain whose every generation carries `marker` on its command
    line and tries to leave the process group (setsid), waits until it runs, then ends."""
    program = ("import os\nn = 0\nwhile True:\n    try:\n        getattr(os, 'set' + 'sid')()\n    except OSError:\n"
               "        pass\n    if os.fork(): os._exit(0)\n    n += 1\n    if n == 50: open('started', 'w').close()")
    return (f"{PY} -c \"{program}\" {marker} > /dev/null 2>&1 & "
            "for i in $(seq 200); do [ -e started ] && break; sleep 0.05; done; sleep 0.3; "
            f"echo alive $(grep -l '{marker[:-1]}[{marker[-1]}]' /proc/[0-9]*/cmdline 2>/dev/null | wc -l); echo done")


def alive_at_the_end(result):
    """The command saw its chain still running just before it ended."""
    lines = result.splitlines()
    return lines[0] == "exit status 0" and lines[1].startswith("alive ") and int(lines[1].split()[1]) >= 1


def running(marker):
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if marker.encode() in Path(entry.path, "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def survivors(marker, wait=0.5):
    """The marked processes alive now, and again after `wait` (a late one would show there)."""
    now = running(marker)
    time.sleep(wait)
    return now + running(marker)


@pytest.mark.parametrize("isolate", [True, False], ids=["namespaces", "no-namespaces"])
def test_a_fork_and_exit_chain_is_gone_when_the_command_ends(tmp_path, isolate):
    if isolate and not sandbox_module.namespaces_work():
        pytest.skip("needs user namespaces")
    marker = f"chain-{os.getpid()}-{time.time_ns()}"
    result = tools.shell(str(tmp_path), chain(marker), timeout=30,
                         sandbox=Sandbox(isolate=isolate))
    try:
        assert alive_at_the_end(result), result  # it ran, and ran on, to the end
        assert survivors(marker) == [], result
    finally:
        for pid in running(marker):
            os.kill(pid, 9)


def test_a_fork_chain_under_run_yes_ends_with_its_command(tmp_path):
    marker = f"chain-{os.getpid()}-{time.time_ns()}"
    calls = [{"name": "shell", "id": "c", "arguments": {"command": chain(marker)}},
             {"name": "shell", "id": "d", "arguments": {"command": "echo next"}}]
    try:
        with ScriptedServer(script=[{"tool_calls": calls}, "done"]) as server:
            (tmp_path / "ws").mkdir()
            result = run_stage("tinyharness", tmp_path / "ws", "--yes", "--no-session", "--base-url", server.base_url,
                               "task", env={"HOME": str(tmp_path)}, in_process=False, timeout=60)
        gone = survivors(marker)
        results = tool_results(server.requests[-1])
        assert result.returncode == 0 and alive_at_the_end(results["c"]), results
        assert results["d"] == "exit status 0\nnext\n" and gone == []
    finally:
        for pid in running(marker):
            os.kill(pid, 9)



FORK_LOOP = ("import os, time\nfor n in range(100000):\n    try:\n        pid = os.fork()\n    except OSError as e:\n"
             "        print('stopped after', n, e); break\n    if pid == 0:\n        time.sleep(20); os._exit(0)")


def as_a_user():
    """The command line prefix that runs a program as an ordinary user: none when we are one; as root,
    setpriv to nobody (the kernel never counts root's processes), or None when that cannot work here."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    try:
        probe = subprocess.run([*prefix, PY, "-c", "import tinyharness"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if probe.returncode == 0 else None


def test_a_user_s_command_starts_at_most_256_tasks_and_leaves_none():
    """The bound the code really enforces: RLIMIT_NPROC, counted in the command's own user namespace
    (256 tasks of its own), or without one 256 more than the machine runs. Never for root."""
    prefix = as_a_user()
    if prefix is None:
        pytest.skip("running as root, and setpriv to nobody does not work here")
    ws = tempfile.mkdtemp(prefix="tinyharness-user-")  # in /tmp: nobody can reach it there
    try:
        if prefix:
            os.chmod(ws, 0o777)
        marker = f"{time.time_ns() % 10_000_000 / 1000 + 20:.3f}"
        program = FORK_LOOP.replace("time.sleep(20)", f"time.sleep({marker})")
        system_python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else PY  # any user may run it
        driver = (f"from tinyharness import tools\nprint(tools.shell({ws!r}, {system_python!r} + ' -c ' + "
                  f"{shlex.quote(program)!r}, timeout=60))")
        done = subprocess.run([*prefix, PY, "-c", driver], capture_output=True, text=True, timeout=120, cwd=ws)
        assert "stopped after" in done.stdout, done
        started = int(done.stdout.split("stopped after", 1)[1].split()[0])
        bound = 256 if sandbox_module.namespaces_work() else sandbox_module.tasks_now() + 256
        assert started < bound and survivors(f"sleep {marker}") == [], done.stdout
    finally:
        shutil.rmtree(ws, ignore_errors=True)
