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
from tinyharness.sandbox.reaping import kill_if_still_ours
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
                               "task", env={"HOME": str(tmp_path)}, in_process=False, timeout=240)
        gone = survivors(marker)
        results = tool_results(server.requests[-1])
        assert result.returncode == 0 and alive_at_the_end(results["c"]), results
        assert results["d"] == "exit status 0\nnext\n" and gone == []
    finally:
        for pid in running(marker):
            os.kill(pid, 9)



FORK_LOOP = ("import os, time\nfor n in range(100000):\n    try:\n        pid = os.fork()\n    except OSError as e:\n"
             "        print('stopped after', n, e); break\n    if pid == 0:\n        time.sleep(20); os._exit(0)")


AS_A_USER_ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}


def as_a_user():
    """The command line prefix that runs a program as an ordinary user: none when we are one; as root,
    setpriv to nobody (the kernel never counts root's processes), or None when that cannot work here."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    try:
        # the same environment and folder as the run itself: from / only PYTHONPATH can find the package
        probe = subprocess.run([*prefix, PY, "-c", "from tinyharness import tools"], capture_output=True, timeout=30,
                               cwd="/", env=AS_A_USER_ENV)
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
        driver = (f"from tinyharness import tools\nfrom tinyharness.sandbox import Sandbox\n"
                  f"print(tools.shell({ws!r}, {system_python!r} + ' -c ' + "
                  f"{shlex.quote(program)!r}, timeout=60, sandbox=Sandbox()))")
        done = subprocess.run([*prefix, PY, "-c", driver], capture_output=True, text=True, timeout=120, cwd=ws,
                              env=AS_A_USER_ENV)
        assert "stopped after" in done.stdout, done
        started = int(done.stdout.split("stopped after", 1)[1].split()[0])
        bound = 256 if sandbox_module.namespaces_work() else sandbox_module.tasks_now() + 256
        assert started < bound and survivors(f"sleep {marker}") == [], done.stdout
    finally:
        shutil.rmtree(ws, ignore_errors=True)


# --- the kill names one process: the one still in the command's tree -----------------------------
# pid_max is often 32768: on a busy machine a number comes round in minutes, so the process found in
# /proc a moment ago may have been reaped and its number given to a stranger.

def sleeper(**popen):
    return subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, **popen)


def ended_within(process, seconds):
    try:
        process.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_a_stranger_with_a_number_from_the_tree_is_not_killed():
    stranger = sleeper(start_new_session=True)   # neither its parent nor its group is the command's
    try:
        assert kill_if_still_ours(stranger.pid, {os.getppid(), 1}, command_pid=stranger.pid + 1) is False
        assert not ended_within(stranger, 0.3)
    finally:
        stranger.kill()
        stranger.wait()


def test_a_process_of_the_tree_is_killed_and_one_outside_the_group_is_counted():
    in_group = sleeper(start_new_session=True)   # as the command: its own group
    assert kill_if_still_ours(in_group.pid, {os.getpid()}, command_pid=in_group.pid) is False  # killed, not escaped
    assert ended_within(in_group, 10) and in_group.returncode == -9
    left_group = sleeper(start_new_session=True)  # a child of ours (parent in the tree) in another group
    assert kill_if_still_ours(left_group.pid, {os.getpid()}, command_pid=left_group.pid + 1) is True
    assert ended_within(left_group, 10) and left_group.returncode == -9


def test_a_process_already_gone_is_neither_killed_nor_counted():
    gone = sleeper(start_new_session=True)
    gone.kill()
    gone.wait()                                   # reaped: its number is free
    assert kill_if_still_ours(gone.pid, {os.getpid()}, command_pid=12345) is False
