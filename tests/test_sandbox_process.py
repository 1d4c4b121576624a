"""The sandbox against the process family: what Landlock does not scope, seccomp refuses.

Landlock keeps signals inside the sandbox, but not `prlimit64` (a limit of 0 open files or 0 bytes per
file on another process cripples or kills it), nor `setpriority`, `sched_setaffinity`,
`sched_setscheduler` or `ioprio_set` on another process of the same user. And as root, a command could
leave a setuid-root program in the workspace for a later user to run. Each attack is fired for real
through `tinyharness run --yes`, at a canary process the test started (or at the workspace's files), and
the canary is checked afterwards; the same commands without the sandbox show that the canary is real.
"""
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ladder import run_stage, tool_results
from tinyharness import tools
from tinyharness.sandbox import Sandbox, unavailable_reason
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
PY = sys.executable


def process_attacks(pid):
    """family -> command, each aimed at the process `pid` (outside the workspace, not the command's)."""
    return {
        "prlimit-nofile": f"prlimit --pid {pid} --nofile=0:0",
        "prlimit-fsize": f"prlimit --pid {pid} --fsize=0:0",
        "prlimit-python": f"{PY} -c \"import resource; resource.prlimit({pid}, resource.RLIMIT_CPU, (1, 1))\"",
        "renice": f"renice -n 19 -p {pid}",
        "taskset": f"taskset -p 1 {pid}",
        "chrt": f"chrt -b -p 0 {pid}",
        "ionice": f"ionice -c 3 -p {pid}",
    }


def state_of(pid):
    """What the attacks would change about the process: its limits, nice value, CPUs, policy, I/O class."""
    limits = Path(f"/proc/{pid}/limits").read_text()
    nice = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16]
    cpus = os.sched_getaffinity(pid)
    policy = os.sched_getscheduler(pid)
    io = subprocess.run(["ionice", "-p", str(pid)], capture_output=True, text=True).stdout if shutil.which("ionice") else ""
    return limits, nice, cpus, policy, io


@pytest.fixture
def canary():
    """A process outside the sandbox: the attacks aim at it."""
    process = subprocess.Popen(["sleep", "120"])
    yield process
    process.kill()
    process.wait()


def needed(*programs):
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def attack(ws, commands, home):
    calls = [{"name": "shell", "arguments": {"command": c}, "id": family} for family, c in commands.items()]
    with ScriptedServer(script=[{"tool_calls": calls}, "done"]) as server:
        result = run_stage("tinyharness", ws, "--yes", "--no-session", "--base-url", server.base_url, "attack",
                           env={"HOME": str(home)}, timeout=60, in_process=False)
    results = tool_results(server.requests[-1])
    assert result.returncode == 0 and set(results) == set(commands), result.stderr
    assert not any(r.startswith("BLOCKED") for r in results.values()), results  # the regex did not stop them
    return results


def test_the_canary_process_is_real_without_the_sandbox(tmp_path, canary):
    needed("prlimit", "renice", "taskset", "chrt")
    before = state_of(canary.pid)
    for command in process_attacks(canary.pid).values():
        tools.shell(str(tmp_path), command, sandbox=Sandbox(enabled=False))
    after = state_of(canary.pid)
    changed = [i for i in range(4) if before[i] != after[i]]
    assert changed == [0, 1, 2, 3] or (changed == [0, 1, 3] and len(before[2]) == 1), (before, after)


def test_no_limit_priority_cpu_or_io_class_of_another_process_changes(tmp_path, canary):
    needed("prlimit", "renice", "taskset", "chrt", "ionice")
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    before, mine = state_of(canary.pid), state_of(os.getpid())
    results = attack(tmp_path / "ws", process_attacks(canary.pid), tmp_path / "home")
    assert canary.poll() is None and state_of(canary.pid) == before and state_of(os.getpid()) == mine, results
    for family, text in results.items():
        assert not text.startswith("exit status 0") and ("Operation not permitted" in text or
                                                          "No such process" in text), (family, text)


def test_the_harness_itself_cannot_be_crippled(tmp_path):
    """`prlimit --pid $PPID --nofile=0:0` took the harness's file descriptors away, and with them the
    restore of .git. The run must go on: the next command runs, the model gets its answer."""
    needed("prlimit")
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    results = attack(tmp_path / "ws", {"parent": "prlimit --pid $PPID --nofile=0:0 --fsize=0:0; "
                                                 "prlimit --pid $(ps -o ppid= $PPID 2>/dev/null || echo 1) --nofile=0:0",
                                       "after": "echo still-here > proof.txt && cat proof.txt"},
                     tmp_path / "home")
    assert "Operation not permitted" in results["parent"] or "No such process" in results["parent"], results
    assert results["after"] == "exit status 0\nstill-here\n" and (tmp_path / "ws" / "proof.txt").exists()


SETUID = {
    "chmod": "cp /bin/true t1 && chmod 4755 t1",
    "chmod-g": "cp /bin/true t2 && chmod g+s t2",
    "install": "install -m 4755 /bin/true t3",
    "python-chmod": f"cp /bin/true t4 && {PY} -c \"import os; os.chmod('t4', 0o6755)\"",
    "python-fchmod": f"cp /bin/true t5 && {PY} -c \"import os; f = os.open('t5', os.O_RDONLY); os.fchmod(f, 0o4755)\"",
    "open-with-mode": f"{PY} -c \"import os; os.close(os.open('t6', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
    "mknod": f"{PY} -c \"import os, stat; os.mknod('t7', stat.S_IFREG | 0o4755)\"",
}


def setid_files(ws):
    return [p.name for p in ws.iterdir() if p.lstat().st_mode & (stat.S_ISUID | stat.S_ISGID)]


def test_no_setuid_or_setgid_file_is_left_in_the_workspace(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "home").mkdir()
    results = attack(tmp_path / "ws", SETUID, tmp_path / "home")
    assert setid_files(tmp_path / "ws") == [], results
    assert all("Operation not permitted" in r for r in results.values()), results
    plain = tools.run_tool(str(tmp_path / "ws"), "shell", {"command": "chmod 755 t1 && chmod u+x t1 && ls -l t1"},
                           sandbox=Sandbox())
    assert plain.startswith("exit status 0") and "-rwxr-xr-x" in plain, plain  # ordinary modes still work


def test_the_setuid_canary_is_real_without_the_sandbox(tmp_path):
    for command in SETUID.values():
        tools.shell(str(tmp_path), command, sandbox=Sandbox(enabled=False))
    assert len(setid_files(tmp_path)) == len(SETUID)
