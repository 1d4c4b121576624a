"""Attacks on the run's spawner, written from the outside: from the README's sandbox section, `run --help`
and the scripted server, not from the sandbox's code.

Each attack is a command (or a few) of one run: several shell commands in one Sandbox, or several turns
of `tinyharness run --yes`. Each is judged by an effect outside the workspace or on a later command: a
canary folder beside the workspace (its file's content and mode), a marker process still running on the
host (/proc/*/cmdline), a later command's output against what a fresh sandbox gives, a hang (timeouts) or
a Python traceback on stderr. The `test_control_*` tests do the effect themselves, outside the sandbox,
to show each check can fail.

An attack the harness does not stop (or whose effect the README does not admit) is marked
xfail(strict=True) with "ESCAPE: ..." in its reason. Against the spawner as first written, 8 of the 40
attacks escaped: five through the spawner's socket to the harness, which every command inherited (a
forged end that hid output, left processes running, let a git hook be planted after the restore, and
let a command take the next command's request); a 1,500-level tree (a RecursionError traceback, in the
TMPDIR and at the run's end); a TMPDIR swapped for a FIFO (the harness hung). All 8 hold now.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ladder import run_stage, tool_results
from tinyharness import tools
from tinyharness.sandbox import Sandbox, remove_tmpdir, unavailable_reason
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
CANARY = "canary: nobody may change, read or delete this line\n"
MARK = f"4{os.getpid() % 10000:04d}"  # a number no other test sleeps for
VARIANTS_DEEP = True  # the first case of each attack in the quick tier, the other variants in the deep one


# --- the place, the checks ---------------------------------------------------------------------------

@pytest.fixture
def place(tmp_path, monkeypatch):
    """A workspace, a canary folder beside it (0755, a sub-folder 0755 with a 0644 file), a TMPDIR of the
    test's own, a sandbox with namespaces (or a skip); its spawner is closed at the end as a run's is."""
    ws, outside, tmp = tmp_path / "ws", tmp_path / "outside", tmp_path / "tmp"
    for folder in (ws, outside / "sub", tmp):
        folder.mkdir(parents=True)
    (outside / "sub" / "canary.txt").write_text(CANARY)
    os.chmod(outside / "sub" / "canary.txt", 0o644)
    os.chmod(outside, 0o755)
    os.chmod(outside / "sub", 0o755)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    box = Sandbox()
    if not box.isolated:
        pytest.skip("user namespaces are switched off here: there is no spawner")
    here = SimpleNamespace(ws=ws, outside=outside, tmp=tmp, box=box, tmp_path=tmp_path)
    yield here
    try:
        box._spawners.close(remove_tmpdir)
    except RecursionError:  # test_a_deep_tree_* report it themselves
        pass
    # a deep tree left behind would break pytest's own clean-up of old tmp_paths (a recursive rmtree too)
    subprocess.run(["rm", "-rf", "--", str(tmp_path)], check=False)


def left_in(place):
    """The harness's folders left in the test's TMPDIR (not the test suite's own, made there lazily)."""
    return [p for p in place.tmp.iterdir() if p.name.startswith("tinyharness-tmp-")]


def sh(place, command, timeout=60, box=None):  # generous: a loaded machine
    return tools.shell(str(place.ws), command, timeout=timeout, sandbox=box or place.box)


def fresh(place, command):
    """What the command gives in a sandbox of its own (no earlier command): the baseline."""
    box = Sandbox()
    try:
        return sh(place, command, box=box)
    finally:
        box._spawners.close(remove_tmpdir)


def canary_intact(place):
    canary = place.outside / "sub" / "canary.txt"
    return (canary.is_file() and canary.read_text() == CANARY
            and os.stat(canary).st_mode & 0o7777 == 0o644 and os.stat(canary).st_nlink == 1
            and os.stat(place.outside).st_mode & 0o7777 == 0o755
            and os.stat(place.outside / "sub").st_mode & 0o7777 == 0o755
            and sorted(p.name for p in place.outside.rglob("*")) == ["canary.txt", "sub"])


def running(marker):
    """Pids on the host whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes().replace(b"\0", b" "):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def appears(marker, seconds=60.0):
    """The pids holding `marker` once there are any: a process shows its command line in /proc a moment
    after Popen returns (once its exec has set it up), later still on a loaded machine."""
    deadline = time.monotonic() + seconds
    while not running(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    return running(marker)


def gone_soon(marker, seconds=2.0):
    deadline = time.monotonic() + seconds
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running(marker) == []


def kill_left(marker):
    for pid in running(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def cli(place, commands, timeout=240, args=(), think=0):
    """One `tinyharness run --yes` whose model runs `commands` one a turn, then answers after `think` seconds;
    (process, {id: result}). `timeout` catches a hang: generous, a run takes minutes on a loaded machine."""
    turns = [{"tool_calls": [{"name": "shell", "id": f"c{n}", "arguments": {"command": c}}]}
             for n, c in enumerate(commands)] + [{"content": "done", "delay": think}]
    home = place.tmp_path / "home"
    env = {"TMPDIR": str(place.tmp), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".data"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_STATE_HOME": str(home / ".state")}
    with ScriptedServer(script=turns) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", *args, "--base-url", server.base_url,
                           "go", timeout=timeout, env=env, in_process=False)
    results = {}
    for request in server.requests:
        results.update(tool_results(request))
    return result, results


# --- controls: each check can fail -------------------------------------------------------------------

def test_control_the_canary_check_sees_a_change_a_chmod_and_a_link(place):
    assert canary_intact(place)
    canary = place.outside / "sub" / "canary.txt"
    os.chmod(canary, 0o600)
    assert not canary_intact(place)
    os.chmod(canary, 0o644)
    os.link(canary, place.tmp_path / "hard")
    assert not canary_intact(place)
    os.unlink(place.tmp_path / "hard")
    canary.write_text("x")
    assert not canary_intact(place)


def test_control_the_process_check_sees_a_process_left_outside(place):
    child = subprocess.Popen(["sleep", f"{MARK}7"])
    try:
        assert appears(f"sleep {MARK}7") == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert gone_soon(f"sleep {MARK}7")


def test_control_a_later_command_check_sees_a_changed_limit_and_a_file_left(place):
    assert fresh(place, "ulimit -n; nice") != sh(place, "ulimit -n 50; renice -n 3 -p $$ >/dev/null; ulimit -n; nice")
    sh(place, 'echo left > "$TMPDIR/../left"')  # the one effect the README admits
    probe = 'cat "$TMPDIR/../left" 2>/dev/null; echo rc=$?'
    assert sh(place, probe) != fresh(place, probe)


def test_control_the_traceback_check_sees_one(place):
    done = subprocess.run([sys.executable, "-c", "import shutil; shutil.rmtree(1)"], capture_output=True, text=True)
    assert "Traceback" in done.stderr


# --- the control socket the commands inherit (descriptor 5, the spawner's line to the harness) ------------

FORGE = """import os, stat, struct
def is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
line = [fd for fd in range(3, 256) if is_socket(fd)][0]   # one the command did not open
os.write(line, b"x" + struct.pack("!i", 0))   # "this command ended, status 0"
"""
FORGE_END = "python3 forge.py"  # the model writes forge.py with write_file, or a heredoc: the test writes it


def plant(place):
    (place.ws / "forge.py").write_text(FORGE)
    (place.ws / "steal.py").write_text(STEALER)


STEALER = r'''
import array, os, socket, stat, struct, sys
def is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
line = [fd for fd in range(3, 256) if is_socket(fd)][0]   # one the command did not open
s = socket.socket(fileno=line)
os.write(line, b"x" + struct.pack("!i", 0))   # "this command ended, status 0"
for _ in range(3):                          # four readers of the line, to beat the spawner to the next request
    if os.fork() == 0:
        break
log = open(sys.argv[1], "ab")
while True:
    msg, anc, flags, addr = s.recvmsg(1 << 20, socket.CMSG_SPACE(16 * 4))
    if not msg:
        break
    fds = array.array("i")
    for level, kind, data in anc:
        fds.frombytes(data[:len(data) - len(data) % 4])
    log.write(msg + b"\n")
    log.flush()
    if len(fds) >= 3:                       # the next command's stdin, stdout, stderr
        os.write(line, b"s")
        os.write(fds[1], b"FORGED-OUTPUT\n")
        for fd in fds:
            os.close(fd)
        os.write(line, b"x" + struct.pack("!i", 0))
'''


def test_a_command_forges_its_own_end_and_hides_its_output(place):
    plant(place)
    result = sh(place, f"echo shown; {FORGE_END}; sleep 0.3; echo hidden; exit 3")
    assert result.startswith("exit status 3") and "hidden" in result, result


def test_a_command_holds_no_socket_it_did_not_open(place):
    """The line every forged-end attack below looks for: before the fix, the spawner's socket to the harness."""
    result = sh(place, "ls -l /proc/self/fd/")
    assert "socket:" not in result, result


def test_a_process_outlives_its_command_after_a_forged_end(place):
    plant(place)
    try:
        sh(place, f"echo first; exec >/dev/null 2>&1 </dev/null; {FORGE_END}; sleep {MARK}1", timeout=2)
        assert running(f"sleep {MARK}1") == []
    finally:
        kill_left(f"sleep {MARK}1")


def test_a_command_steals_the_next_command_and_forges_its_output(place, tmp_path):
    plant(place)
    seen = []
    for attempt in range(2):  # the race was won 3 times in 5 while the socket was there to take
        box = Sandbox()
        try:
            sh(place, "echo first; exec >/dev/null 2>&1 </dev/null; python3 steal.py log; sleep 20", box=box,
               timeout=2)
            for n in range(3):
                seen.append(sh(place, f"echo REAL-{n}", box=box))
        finally:
            box._spawners.close(remove_tmpdir)
        log = (place.ws / "log").read_bytes() if (place.ws / "log").exists() else b""
        assert all("FORGED" not in r for r in seen) and b"REAL-" not in log, (seen, log[:300])
    assert running("steal.py") == []


def test_through_the_cli_a_forged_end_reaches_the_model(place):
    plant(place)
    result, results = cli(place, [f"echo shown; {FORGE_END}; sleep 0.3; echo hidden; exit 7", "echo next"])
    assert result.returncode == 0, result.stderr
    assert results["c0"].startswith("exit status 7") and "hidden" in results["c0"], results


def test_after_the_run_no_process_of_a_forged_end_is_left(place):
    plant(place)
    marker = f"sleep {MARK}2"
    try:
        result, results = cli(place, [f"exec >/dev/null 2>&1 </dev/null; {FORGE_END}; {marker}"],
                              args=("--shell-timeout", "3"))
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert gone_soon(marker)
        assert left_in(place) == []
    finally:
        kill_left(marker)


# --- the spawner's settings, which every later command inherits ------------------------------------------

SPAWNER_CHANGES = {
    "prlimit": ("prlimit --pid 1 --nofile=64:64 --fsize=1000:1000", "ulimit -n; ulimit -f"),
    "renice": ("renice -n 15 -p 1", "nice"),
    "renice-group": ("renice -n 15 -g 1; renice -n 15 -g 0", "nice"),
    "renice-user": ("renice -n 15 -u $(id -u)", "nice"),
    "taskset": ("taskset -p 1 1", "taskset -p $$ | sed 's/.*: //'"),
    "chrt": ("chrt -i -p 0 1", "chrt -p $$ | sed 's/.*: //'"),
    "ionice": ("ionice -c 3 -p 1; ionice -c 3 -P 1; ionice -c 3 -u $(id -u)", "ionice"),
    "umask-and-cwd": ("umask 077; cd /", "umask; pwd"),
}


@pytest.mark.parametrize("how", sorted(SPAWNER_CHANGES))
def test_a_change_to_the_spawner_reaches_no_later_command(place, how):
    attack, probe = SPAWNER_CHANGES[how]
    sh(place, f"{attack}; echo tried")
    later = sh(place, probe).replace(str(place.ws), "WS")
    assert later == fresh(place, probe).replace(str(place.ws), "WS")


def test_signals_by_every_route_leave_the_spawner_serving(place):
    sh(place, "true")
    attack = sh(place, """for s in KILL STOP SEGV TERM HUP INT USR1 ABRT XCPU; do kill -$s 1; done
kill -KILL -1; python3 -c '
import os, signal
fd = os.pidfd_open(1)
for s in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
    try:
        signal.pidfd_send_signal(fd, s)
    except OSError as e:
        print("pidfd", s, e.errno)
'; echo tried""")
    assert "tried" in attack or "exit status" in attack, attack
    later = sh(place, "ps -o comm= -p 1; echo served")
    assert later.split()[3:] == ["python", "served"], later


# --- what one command leaves for the next, beyond $TMPDIR/.. ----------------------------------------------

LEFT_BEHIND = {
    "dev-shm": ('echo x > /dev/shm/left', 'cat /dev/shm/left'),
    "tmp": ('echo x > /tmp/left', 'cat /tmp/left'),
    "run": ('echo x > /run/left', 'cat /run/left'),
    "home": ('mkdir -p ~/.local/lib && echo x > ~/left', 'cat ~/left'),
    "above-the-folder": ('echo x > "$TMPDIR/../../left"', 'cat "$TMPDIR/../../left"'),
    "posix-mqueue": ("python3 -c 'import ctypes, os; rt = ctypes.CDLL(\"librt.so.1\"); "
                     "print(rt.mq_open(b\"/left\", os.O_CREAT | os.O_RDWR, 0o600, None))'",
                     "python3 -c 'import ctypes, os; rt = ctypes.CDLL(\"librt.so.1\"); "
                     "print(rt.mq_open(b\"/left\", os.O_RDWR) >= 0)'"),
    "sysv-all-three": ("python3 -c 'import ctypes; c = ctypes.CDLL(None); "
                       "print(c.shmget(0x1eef, 4096, 0o1666), c.msgget(0x1eef, 0o1666), c.semget(0x1eef, 1, 0o1666))'",
                       "ipcs | grep -c 1eef"),
}


@pytest.mark.parametrize("how", sorted(LEFT_BEHIND))
def test_nothing_left_outside_the_folder_reaches_the_next_command(place, how):
    leave, probe = LEFT_BEHIND[how]
    sh(place, leave)
    probe += " 2>/dev/null; echo rc=$?"
    assert sh(place, probe) == fresh(place, probe)
    assert not (place.tmp_path / "left").exists() and not (place.tmp / "left").exists()


LEFT_RUNNING = {
    "nested-pid-namespace": "unshare -Urpf --mount-proc sleep {m} >/dev/null 2>&1 & sleep 0.3",
    "fork-storm": "for i in 1 2 3 4; do python3 -c 'import os, sys\nwhile True:\n    if os.fork(): os._exit(0)' & done; "
                  "sleep 0.5; setsid sleep {m} & sleep 0.1",
    "ignores-every-signal": "python3 -c 'import signal, time, sys\nfor s in range(1, 32):\n    try: signal.signal(s, signal.SIG_IGN)\n"
                            "    except (OSError, ValueError): pass\ntime.sleep(100)' {m} & sleep 0.3",
    "stopped-and-traced": "sleep {m} & kill -STOP $!; strace -p $! -o /dev/null 2>/dev/null & sleep 0.3",
}


@pytest.mark.parametrize("how", sorted(LEFT_RUNNING))
def test_nothing_keeps_running_after_its_command(place, how):
    marker = f"{MARK}3"
    try:
        sh(place, LEFT_RUNNING[how].format(m=marker), timeout=10)
        assert gone_soon(marker)
        assert "served" in sh(place, "echo served")
    finally:
        kill_left(marker)


def test_a_timed_out_fork_storm_leaves_nothing_and_the_next_command_runs(place):
    marker = f"{MARK}4"
    try:
        result = sh(place, "for i in 1 2 3; do python3 -c 'import os\nwhile True:\n    if os.fork(): os._exit(0)' & done; "
                    f"sleep {marker}", timeout=1)
        assert "timed out" in result, result
        assert gone_soon(marker) and "served" in sh(place, "echo served")
    finally:
        kill_left(marker)


# --- what the unconfined harness does with the folder the commands write -----------------------------------

DEEP = ("python3 -c 'import os\nos.chdir(os.environ[\"TMPDIR\"] + \"/{where}\")\n"
        "for i in range(1500):\n    os.mkdir(\"d\"); os.chdir(\"d\")\nprint(\"deep\")'")


def test_a_deep_tree_in_the_spawner_folder_at_the_run_s_end(place):
    result, results = cli(place, [DEEP.format(where=".."), "echo next"])
    assert "deep" in results["c0"], results
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, result.stderr[-600:]
    assert left_in(place) == []


def test_a_deep_tree_in_the_command_s_own_tmpdir(place):
    result, results = cli(place, [DEEP.format(where="."), "echo next"])
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, result.stderr[-600:]
    assert "next" in results.get("c1", ""), results
    assert left_in(place) == []


ODD_LEFTOVERS = {
    "fifo-socket-and-odd-names": ('cd "$TMPDIR/.."; mkfifo fifo; python3 -c \'import socket; '
                                  's = socket.socket(socket.AF_UNIX); s.bind("sock")\'; '
                                  'touch "$(printf "new\\nline")" "$(printf "bad\\377byte")" " -rf" "*"'),
    "links-to-the-canary-behind-mode-000": ('cd "$TMPDIR/.."; mkdir -p a/b; ln -s {out}/sub a/b/dir; '
                                            'ln -s {out}/sub/canary.txt a/b/file; ln -s {out} a/top; ln -s / a/root; '
                                            'chmod 000 a/b a; chmod 000 .'),
    "tmpdir-a-link-to-the-canary-file": 'cd "$TMPDIR/.."; n=$(basename "$TMPDIR"); mv "$n" m; ln -s {out}/sub/canary.txt "$n"',
    "tmpdir-a-link-loop-and-000": 'cd "$TMPDIR/.."; n=$(basename "$TMPDIR"); mv "$n" m; ln -s "$n" "$n"; chmod 000 m',
    "hard-link-to-the-canary": 'ln {out}/sub/canary.txt "$TMPDIR/h"; ln {out}/sub/canary.txt "$TMPDIR/../h"; '
                               'cat {out}/sub/canary.txt',
    "many-files": 'cd "$TMPDIR/.."; mkdir many; cd many; python3 -c \'import os\nfor i in range(20000): open(str(i), "w")\'',
}


@pytest.mark.parametrize("how", sorted(ODD_LEFTOVERS))
def test_odd_leftovers_are_removed_without_touching_the_canary_hanging_or_a_traceback(place, how):
    result, results = cli(place, [ODD_LEFTOVERS[how].format(out=place.outside), "echo next"])  # a hang: TimeoutExpired
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-600:]
    assert "next" in results["c1"] and CANARY.strip() not in results["c0"], results
    assert canary_intact(place) and left_in(place) == []


# --- what the model sends the harness to run --------------------------------------------------------------

@pytest.mark.parametrize("command", ["echo " + "0" * 200_000, "echo " + "0" * (5 << 20), "echo bad \udc80 surrogate"],
                         ids=["over-one-argument", "over-the-spawner-s-request", "lone-surrogate"])
def test_an_odd_command_neither_crashes_the_harness_nor_stops_the_next(place, command):
    result, results = cli(place, [command, "ps -o comm= -p 1; echo next"])
    assert "Traceback" not in result.stderr, result.stderr[-600:]
    assert "next" in results["c1"], results


def test_a_tmpdir_swapped_for_a_fifo_does_not_hang_the_harness(place):
    swap = 'cd "$TMPDIR/.."; n=$(basename "$TMPDIR"); mv "$n" m; mkfifo "$n"'
    try:
        result, results = cli(place, [swap, "echo next"], timeout=120,
                              args=("--shell-timeout", "5", "--max-seconds", "8"))
    except subprocess.TimeoutExpired:
        pytest.fail("the harness hung on a TMPDIR swapped for a FIFO")
    assert "Traceback" not in result.stderr and "next" in results.get("c1", ""), result.stderr[-600:]


PLANT_GIT = """import os, time
good = open(".git/config").read()
bad = good + "[core]\\n\\tfsmonitor = echo planted > {canary}; false\\n"
end = time.monotonic() + 20
while time.monotonic() < end:   # after the harness put .git back, put the hook in again, until killed
    with open(".git/config.new", "w") as f:
        f.write(bad)
    os.rename(".git/config.new", ".git/config")
    time.sleep(0.001)
"""


def test_a_process_after_a_forged_end_plants_a_git_hook_the_restore_never_sees(place):
    plant(place)
    subprocess.run(["git", "init", "-q", str(place.ws)], check=True)
    canary = place.outside / "sub" / "canary.txt"
    (place.ws / "plant.py").write_text(PLANT_GIT.format(canary=canary))
    result, results = cli(place, [f"exec >/dev/null 2>&1 </dev/null; {FORGE_END}; python3 plant.py"], think=1,
                          args=("--shell-timeout", "3"))
    assert result.returncode == 0, result.stderr
    config = (place.ws / ".git" / "config").read_text()
    subprocess.run(["git", "status"], cwd=place.ws, capture_output=True, timeout=20)  # the user, after the run
    assert canary_intact(place) and "fsmonitor" not in config, (canary.read_text(), config)


def test_control_a_planted_fsmonitor_runs_in_the_user_s_git(place):
    subprocess.run(["git", "init", "-q", str(place.ws)], check=True)
    canary = place.outside / "sub" / "canary.txt"
    with open(place.ws / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = echo planted > {canary}; false\n")
    subprocess.run(["git", "status"], cwd=place.ws, capture_output=True, timeout=20)
    assert not canary_intact(place)


SWAPPER = """import os, time
tmp = os.environ["TMPDIR"]
up, name = os.path.split(tmp)
end = time.monotonic() + 3
n = 0
while time.monotonic() < end:   # while the harness removes this TMPDIR: a folder of 000 folders, then a link
    n += 1
    try:
        os.makedirs(f"{{up}}/w{{n}}/d/e")
        os.symlink("{target}", f"{{up}}/w{{n}}/d/e/link")
        os.chmod(f"{{up}}/w{{n}}/d/e", 0); os.chmod(f"{{up}}/w{{n}}/d", 0)
        os.rename(f"{{up}}/w{{n}}", tmp)
    except OSError:
        pass
    try:
        os.symlink("{target}", f"{{up}}/l{{n}}")
        os.rename(f"{{up}}/l{{n}}", f"{{tmp}}/d")
    except OSError:
        pass
"""


def test_a_process_after_a_forged_end_racing_the_tmpdir_removal_reaches_no_canary(place):
    plant(place)
    (place.ws / "swap.py").write_text(SWAPPER.format(target=place.outside / "sub"))
    result, results = cli(place, [f"exec >/dev/null 2>&1 </dev/null; {FORGE_END}; python3 swap.py"],
                          think=1, args=("--shell-timeout", "5"))
    assert "Traceback" not in result.stderr, result.stderr[-600:]
    assert canary_intact(place)
