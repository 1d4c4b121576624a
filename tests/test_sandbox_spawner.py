"""The run's spawner (tinyharness/sandbox/spawner.py): one confined process starts every shell command.

It lives as long as the run, inside the sandbox, where the model's commands run beside it; so each test
here is an attack from one command on what the next command, the spawner or the harness relies on: a
process left running, an IPC object left behind, the spawner killed, traced or read, its folder made
unwritable, a TMPDIR swapped for a link to a canary outside. Then the spawner itself misbehaving (a
spawner is never trusted): a wrong answer, no answer, no start. Each is judged from outside: the host's
process list, a canary folder's modes and contents, the next command's output.
"""
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ladder import run_stage, tool_results
from tests.test_sandbox import running
from tinyharness import tools
from tinyharness.sandbox import Sandbox, remove_tmpdir, spawner as spawner_module, unavailable_reason
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
CANARY = "canary: nobody may change or read this line\n"


@pytest.fixture
def place(tmp_path):
    """A workspace; beside it a canary folder (mode 0755, a file in a sub-folder) and a sandbox with
    namespaces, or a skip."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    ws.mkdir()
    (outside / "sub" / "canary.txt").write_text(CANARY)
    os.chmod(outside, 0o755)
    os.chmod(outside / "sub", 0o755)
    box = Sandbox()
    if not box.isolated:
        pytest.skip("user namespaces are switched off here: there is no spawner")
    yield SimpleNamespace(ws=ws, outside=outside, box=box)
    box._spawners.close(remove_tmpdir)  # as at the end of a run


def shell(place, command, timeout=60):  # generous: a loaded machine
    return tools.shell(str(place.ws), command, timeout=timeout, sandbox=place.box)


def the_spawner(place):
    (spawner,) = place.box._spawners.by_workspace.values()
    return spawner


def outside_untouched(place):
    return (oct(os.stat(place.outside).st_mode & 0o7777) == "0o755"
            and oct(os.stat(place.outside / "sub").st_mode & 0o7777) == "0o755"
            and (place.outside / "sub" / "canary.txt").read_text() == CANARY)


def test_commands_share_one_spawner_and_each_finds_nothing_the_last_one_left(place):
    marker = f"30{os.getpid() % 1000:03d}"
    first = shell(place, f"sleep {marker}1 & setsid sleep {marker}2 & (sleep {marker}3 &); "
                  "python3 -c 'import ctypes; print(\"shm\", ctypes.CDLL(None).shmget(0x5eed, 4096, 0o1600))'")
    assert "shm 0" in first or "shm " in first, first
    pid = the_spawner(place).process.pid
    second = shell(place, "ps -e -o pid=,comm=; ipcs -m")
    listed = [line.split() for line in second.splitlines()[1:] if line.strip()[:1].isdigit()]
    assert [pid_and_name[1] for pid_and_name in listed[:1]] == ["python"], second  # the spawner is PID 1
    assert not any(name == "sleep" for _, name in listed) and "0x00005eed" not in second, second
    assert running(f"sleep {marker}") == []  # gone from the host too
    assert the_spawner(place).process.pid == pid and the_spawner(place).state == "ready"


def test_the_spawner_cannot_be_killed_traced_or_read_by_its_commands(place):
    shell(place, "true")
    pid = the_spawner(place).process.pid
    attack = shell(place, """kill -KILL 1; kill -INT 1; kill -TERM 1; kill -HUP 1
cat /proc/1/environ && echo READ-ENVIRON
cat /proc/1/fd/3 && echo READ-SOCKET
python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("attach", libc.ptrace(16, 1, 0, 0))
try:
    open("/proc/1/mem", "rb").read(1)
    print("READ-MEMORY")
except OSError as e:
    print("mem refused", e.errno)
'""")
    assert "attach -1" in attack and "mem refused" in attack, attack
    assert "READ-" not in attack.replace("echo READ-", ""), attack
    after = shell(place, "echo still-served")
    assert "still-served" in after and the_spawner(place).process.pid == pid


def test_a_tmpdir_swapped_for_a_link_to_a_folder_outside_is_not_followed_when_removed(place):
    """The spawner's folder holds every command's TMPDIR and is writable to them: a command may rename
    its own and leave a link to a folder outside in its place. The harness removes the link, and
    changes nothing of where it leads (no chmod, no delete)."""
    result = shell(place, f'mkdir "$TMPDIR/d"; cd "$TMPDIR/.."; name=$(basename "$TMPDIR"); '
                          f'mv "$name" moved; ln -s {place.outside} "$name"; ln -s {place.outside}/sub "moved/d/x"; '
                          'chmod 000 moved/d; echo swapped')
    assert "swapped" in result and outside_untouched(place), result
    assert "exit status 0" in shell(place, "echo next") and outside_untouched(place)
    place.box._spawners.close(remove_tmpdir)  # the end of the run: the spawner's folder removed
    assert outside_untouched(place)


def test_a_spawner_folder_made_unwritable_does_not_stop_the_next_command(place):
    shell(place, 'chmod 000 "$TMPDIR/.."; echo done')
    result = shell(place, 'touch "$TMPDIR/mine" && echo own-tmpdir-ok')
    assert "own-tmpdir-ok" in result, result


def test_a_timed_out_command_is_killed_by_the_spawner_which_serves_the_next(place):
    shell(place, "true")
    pid = the_spawner(place).process.pid
    marker = f"31{os.getpid() % 1000:03d}"
    result = shell(place, f"sleep {marker} & sleep {marker}", timeout=1)
    assert result.startswith("ERROR: timed out after 1 s") and "exit status -9" in result, result
    assert running(f"sleep {marker}") == []
    assert "served" in shell(place, "echo served") and the_spawner(place).process.pid == pid


FAKE = {  # each names itself in its command line (a first line the test adds)
    "garbage": "import os, sys, time\nfd = int(sys.argv[1])\nos.write(fd, b'r')\nos.read(fd, 1 << 16)\n"
               "os.write(fd, b'zzzz')\ntime.sleep(60)\n",
    "silent": "import time\ntime.sleep(60)\n",
    "dead": "raise SystemExit(3)\n",
}


@pytest.mark.parametrize("how", sorted(FAKE))
def test_a_spawner_that_answers_wrong_or_never_is_killed_and_the_command_cloned(place, monkeypatch, tmp_path, how):
    """The harness trusts nothing the spawner says: a wrong answer, no answer, an early end - the spawner
    is killed (with its namespace) and the command runs cloned, confined as ever."""
    program, marker = tmp_path / "fake_spawner.py", f"fake-spawner-{os.getpid()}-{tmp_path.name}"
    program.write_text(f"# {marker}\n" + FAKE[how])
    monkeypatch.setattr(spawner_module, "PROGRAM", Path(program))
    # only the silent one is waited for until READY_SECONDS: the others must not miss it on a loaded machine
    monkeypatch.setattr(spawner_module, "READY_SECONDS", 1 if how == "silent" else 60)
    monkeypatch.setattr(spawner_module, "ANSWER_SECONDS", 1)
    result = shell(place, f"echo ran; echo x > {place.outside}/sub/canary.txt")
    assert result.splitlines()[1] == "ran" and outside_untouched(place), result
    assert place.box._spawners.failed == (how != "garbage")  # one that was ready may be started again
    assert not any(s.state != "dead" for s in place.box._spawners.by_workspace.values())
    assert running(marker) == []


def test_a_command_with_a_nul_byte_goes_the_cloned_way_and_the_spawner_serves_the_next(place):
    """A NUL byte cannot cross to the spawner (its fields end with one): the command is cloned, whose
    exec refuses it as before (cloned, exit 126 and the reason; forked beside other threads, Popen's
    ValueError), and the spawner is still there for the next."""
    try:
        result = shell(place, "echo a\0b")
        assert result.startswith("exit status 126"), result
    except ValueError as e:
        result = str(e)
    assert "embedded null byte" in result, result
    assert "next" in shell(place, "echo next") and the_spawner(place).state == "ready"


def test_spawners_that_keep_failing_stop_being_started(place, monkeypatch, tmp_path):
    """A spawner that was ready but cannot start a command (here: it refuses each) is killed, and the next
    command starts another; after the third, commands are only cloned (no start per command)."""
    program, marker = tmp_path / "refusing_spawner.py", f"fake-spawner-{os.getpid()}-{tmp_path.name}"
    program.write_text(f"# {marker}\nimport os, struct, sys, time\nfd = int(sys.argv[1])\nos.write(fd, b'r')\n"
                       "os.read(fd, 1 << 16)\nos.write(fd, b'e' + struct.pack('!I', 2) + b'no')\ntime.sleep(60)\n")
    monkeypatch.setattr(spawner_module, "PROGRAM", Path(program))
    started = []
    real_start = spawner_module.Spawner.start.__func__
    monkeypatch.setattr(spawner_module.Spawner, "start",
                        classmethod(lambda cls, *a: started.append(1) or real_start(cls, *a)))
    for number in range(5):
        assert shell(place, f"echo command-{number}").splitlines()[1] == f"command-{number}"
    assert len(started) == spawner_module.MAX_DEATHS and place.box._spawners.failed
    assert running(marker) == []


def test_a_run_uses_one_spawner_and_leaves_neither_it_nor_its_folder(place, tmp_path):
    """Through the real command line: the second command sees the spawner as PID 1 and nothing of the
    first; when the run ends, no spawner runs on and the folder that held the TMPDIRs is gone."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = f"32{os.getpid() % 1000:03d}"
    turns = [{"tool_calls": [{"name": "shell", "id": "first",
                              "arguments": {"command": f"sleep {marker} & echo started"}}]},
             {"tool_calls": [{"name": "shell", "id": "second", "arguments": {"command": "ps -e -o comm="}}]},
             "done"]
    with ScriptedServer(script=turns) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--base-url", server.base_url, "go", timeout=240,
                           env={"TMPDIR": str(tmp)}, in_process=False)
    second = tool_results(server.requests[-1])["second"]
    assert result.returncode == 0, result.stderr
    assert second.split()[3:] == ["python", "sh", "ps"], second  # the first command's sleep is gone
    assert running(str(tmp)) == [] and running(f"sleep {marker}") == []  # its folder ends its command line
    assert list(tmp.iterdir()) == []


def test_the_spawner_names_its_run_s_folder_in_its_command_line(place):
    """What the test above relies on to find a run's spawner among others."""
    shell(place, "true")
    assert len(running(the_spawner(place).root)) == 1  # (the harness's child, or the one behind it)


def test_a_command_holds_no_descriptor_but_its_three_streams(place):
    """Not the spawner's socket above all: on it a command could end itself early for the harness (its
    output cut, its processes alive) or read the next command's request."""
    result = shell(place, "ls /proc/$$/fd")
    assert result.split("\n", 1)[1].split() == ["0", "1", "2"], result


DEEP = ("python3 -c 'import os\nos.chdir(os.environ[\"TMPDIR\"] + \"/{where}\")\n"
        "for i in range(1500):\n    os.mkdir(\"d\"); os.chdir(\"d\")\nos.mkdir(\"shut\"); os.chmod(\"shut\", 0)\n"
        "print(\"deep\")'")


@pytest.mark.parametrize("where", [".", ".."])
def test_a_tree_deeper_than_recursion_and_path_max_is_removed(place, where):
    """In its TMPDIR, or beside it in the spawner's folder (removed at the run's end): 1,500 levels, past
    Python's recursion limit and, as one path, past PATH_MAX; the harness removes it all and says nothing."""
    assert "deep" in shell(place, DEEP.format(where=where))
    root = the_spawner(place).root
    assert os.listdir(root) == ([] if where == "." else ["d"])
    place.box._spawners.close(remove_tmpdir)
    assert not os.path.exists(root)
