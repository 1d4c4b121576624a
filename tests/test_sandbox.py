"""The sandbox (tinyharness/sandbox/): the attacks the strongest sandboxes test themselves with.

Each attack aims at a canary outside the workspace (a file, a listening socket, a process) and checks
the canary afterwards, not only the message. Most fire at `tools.shell` in this process, with the
command regex out of the way, so what stops them is the kernel; one test fires one attack of each
family through `tinyharness run --yes`, where the regex stays in front. Tests that need Landlock skip
with the reason on a machine without it; the fail-closed tests run everywhere.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ladder import ROOT, run_stage, tool_results
from tinyharness import hooks, tools
from tinyharness import sandbox as sandbox_module
from tinyharness.sandbox import Sandbox, unavailable_reason
from tinyharness.sandbox.beneath import walk_open
from tinyharness.sandbox.git import config_is_harmless, protected_path
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
CANARY = "canary: nobody may change or read this line\n"
PY = sys.executable


@pytest.fixture
def place(tmp_path):
    """A workspace, and beside it a folder with a canary the commands must not touch or read."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    return SimpleNamespace(ws=ws, outside=outside, canary=outside / "canary.txt", root=tmp_path)


def run(ws, command, timeout=60, **options):  # generous: a loaded machine
    """One shell call in the sandbox, past the regex: only the kernel stands in the way."""
    return tools.shell(str(ws), command, timeout=timeout, sandbox=Sandbox(**options))


def untouched(place):
    return sorted(os.listdir(place.outside)) == ["canary.txt"] and place.canary.read_text() == CANARY


def running(marker):
    """The pids whose command line holds `marker`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if marker in Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


# --- files ------------------------------------------------------------------------------------------------

@needs_sandbox
def test_writes_outside_the_workspace_are_denied_and_inside_allowed(place):
    result = run(place.ws, f"echo x > {place.canary}; rm -f {place.canary}; touch ../new.txt; mv {place.canary} .; "
                           f"ln {place.canary} hard; echo fine > inside.txt; mkdir -p sub/deep && echo ok")
    assert untouched(place) and not (place.root / "new.txt").exists(), result
    assert (place.ws / "inside.txt").read_text() == "fine\n" and (place.ws / "sub" / "deep").is_dir()
    assert "Permission denied" in result and "\nok\n[sandbox] this command ran in the sandbox" in result


@needs_sandbox
def test_dev_null_and_the_other_harmless_devices_stay_usable(place):
    result = run(place.ws, "echo x > /dev/null && echo to-stderr > /dev/stderr && head -c 5 /dev/urandom | wc -c "
                           "&& cat /dev/null && echo done")
    assert result.startswith("exit status 0") and "to-stderr" in result and "5" in result, result


@needs_sandbox
def test_reading_a_secret_next_to_the_workspace_or_in_home_fails(place, monkeypatch):
    home = place.root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(CANARY)
    monkeypatch.setenv("HOME", str(home))
    result = run(place.ws, f'cat {place.canary}; cat ../outside/canary.txt; cat "$HOME/.s""sh/id_ed25519"; ls ~; '
                           f"cat /proc/self/root{place.canary}; cat /etc/shadow; cat /etc/hostname /etc/passwd > /dev/null")
    refused = result.count("Permission denied") + result.count("No such file")  # hidden by the private /tmp
    assert CANARY not in result and refused == 6 and "root:" not in result, result


@needs_sandbox
def test_sandbox_read_lets_one_more_folder_be_read_not_written(place):
    result = run(place.ws, f"cat {place.canary}; echo x >> {place.canary}", extra_read=[str(place.outside)])
    assert CANARY in result and "Permission denied" in result and place.canary.read_text() == CANARY


@needs_sandbox
def test_a_symlink_swapped_in_between_the_check_and_the_use_leads_nowhere(place):
    """The hooks resolve the path and find it inside; then the folder becomes a link to the outside.
    The file tools open beneath the workspace at the moment of the call, so the kernel says no."""
    (place.ws / "sub").mkdir()
    (place.ws / "sub" / "canary.txt").write_text("inside\n")
    for name, arguments in [("read_file", {"path": "sub/canary.txt"}),
                            ("write_file", {"path": "sub/canary.txt", "content": "pwned"}),
                            ("list_dir", {"path": "sub"})]:
        if (place.ws / "sub").is_symlink():
            (place.ws / "sub").unlink()
            (place.ws / "sub").mkdir()
        assert hooks.pre_tool_use(str(place.ws), name, arguments) is None  # the check passes...
        shutil.rmtree(place.ws / "sub")
        (place.ws / "sub").symlink_to(place.outside, target_is_directory=True)  # ...then the swap
        result = tools.run_tool(str(place.ws), name, arguments)
        assert result.startswith("ERROR") and "leads out of the workspace" in result, result
        assert untouched(place) and CANARY not in result


def test_the_file_tools_refuse_protected_paths(place):
    for path in [".git/hooks/pre-commit", ".git/config", ".tinyharness/settings.json", "sub/.git/hooks/post-merge"]:
        result = tools.run_tool(str(place.ws), "write_file", {"path": path, "content": "#!/bin/sh\ntouch pwned\n"})
        assert result.startswith("ERROR") and "is protected" in result, result
    assert not any(place.ws.rglob("*")) and protected_path(".gitignore") is None


# --- .git and the harness's settings --------------------------------------------------------------------------

@needs_sandbox
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_changes_to_hooks_and_git_config_are_undone_and_reported(place):
    subprocess.run(["git", "init", "-q", str(place.ws)], check=True)
    config = (place.ws / ".git" / "config").read_bytes()
    result = run(place.ws, "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
                           "git config core.fsmonitor 'touch pwned'; mkdir -p .tinyharness; echo x > .tinyharness/a; "
                           "echo work > work.txt")
    assert not (place.ws / ".git" / "hooks" / "pre-commit").exists() and not (place.ws / ".tinyharness").exists()
    assert (place.ws / ".git" / "config").read_bytes() == config and (place.ws / "work.txt").exists()
    assert "[sandbox] protected paths were changed and have been put back" in result and "pre-commit" in result


@needs_sandbox
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_ordinary_git_work_is_kept(place):
    result = run(place.ws, "git init -q && git config user.name Ann && git config user.email ann@example.com && "
                           "echo a > a.txt && git add a.txt && git commit -qm first && git log --format=%an")
    assert result.startswith("exit status 0") and "Ann" in result and "protected" not in result, result
    assert (place.ws / ".git" / "hooks").is_dir()


def test_a_config_may_gain_only_keys_that_run_nothing():
    assert config_is_harmless(b"[core]\n\tbare = false\n", b"[core]\n\tbare = false\n[user]\n\tname = Ann\n")
    assert not config_is_harmless(b"[core]\n\tbare = false\n", b"[core]\n\tbare = false\n\tfsmonitor = rm -rf ~\n")
    assert not config_is_harmless(None, b'[remote "o"]\n\turl = x\n[alias]\n\tst = !rm -rf ~\n')
    assert not config_is_harmless(None, b"[core]\n\thooksPath = /tmp/evil\n")


# --- the network -------------------------------------------------------------------------------------------------

@pytest.fixture
def listeners():
    """A TCP and a UDP socket on 127.0.0.1: nothing may reach them from inside."""
    tcp, udp = socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(5)
    udp.bind(("127.0.0.1", 0))
    tcp.setblocking(False)
    udp.setblocking(False)
    yield SimpleNamespace(tcp=tcp.getsockname()[1], udp=udp.getsockname()[1], tcp_socket=tcp, udp_socket=udp)
    tcp.close()
    udp.close()


def reached(listeners):
    for receive in (listeners.tcp_socket.accept, lambda: listeners.udp_socket.recvfrom(100)):
        try:
            receive()
            return True
        except BlockingIOError:
            pass
    return False


NETWORK = {
    "python-tcp": ("", "{py} -c \"import socket; socket.create_connection(('127.0.0.1', {tcp}), 2)\""),
    "python-udp": ("", "{py} -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                       ".sendto(b'secret', ('127.0.0.1', {udp}))\""),
    "python-tcp6": ("", "{py} -c \"import socket; socket.socket(socket.AF_INET6)\""),
    "bash-dev-tcp": ("bash", "bash -c 'echo secret > /dev/tcp/127.0.0.1/{tcp}'"),
    "bash-dev-udp": ("bash", "bash -c 'echo secret > /dev/udp/127.0.0.1/{udp}'"),
    "curl": ("curl", "curl -sS -m 3 http://127.0.0.1:{tcp}/"),
    "wget": ("wget", "wget -q -T 3 -t 1 -O- http://127.0.0.1:{tcp}/"),
    "nc": ("nc", "echo secret | nc -w 2 127.0.0.1 {tcp}"),
    "nc-udp": ("nc", "echo secret | nc -u -w 1 127.0.0.1 {udp}"),
    "ssh": ("ssh", "ssh -o BatchMode=yes -o ConnectTimeout=2 -p {tcp} 127.0.0.1 true"),
}


@needs_sandbox
@pytest.mark.parametrize("case", list(NETWORK))
def test_no_network_socket_opens(case, place, listeners):
    program, command = NETWORK[case]
    if program and shutil.which(program) is None:
        pytest.skip(f"needs {program}")
    result = run(place.ws, command.format(py=PY, tcp=listeners.tcp, udp=listeners.udp))
    assert not result.startswith("exit status 0") and not reached(listeners), result


@needs_sandbox
def test_a_unix_socket_pair_still_works(place):
    result = run(place.ws, f"{PY} -c \"import socket; a, b = socket.socketpair(); a.send(b'hi'); print(b.recv(2))\"")
    assert result.startswith("exit status 0") and "b'hi'" in result, result


# --- privileges, signals, processes --------------------------------------------------------------------------------

@needs_sandbox
def test_no_new_privileges_and_a_seccomp_filter(place):
    result = run(place.ws, "grep -E 'NoNewPrivs|Seccomp:|CapEff' /proc/self/status")
    assert "NoNewPrivs:\t1" in result and "Seccomp:\t2" in result and "CapEff:\t0000000000000000" in result, result


@needs_sandbox
def test_kill_of_a_process_outside_fails(place):
    outside = subprocess.Popen(["sleep", "60"])
    try:
        result = run(place.ws, f"kill -9 {outside.pid}; kill -TERM {outside.pid}")
        time.sleep(0.1)
        assert outside.poll() is None and ("Operation not permitted" in result or "No such process" in result), result
    finally:
        outside.kill()
        outside.wait()


@needs_sandbox
def test_a_setsid_child_and_a_double_fork_are_gone_when_the_command_ends(place):
    marker = f"{time.time_ns() % 10_000_000 / 1000:.3f}"  # a sleep length no other process uses
    result = run(place.ws, f"setsid sh -c 'sleep {marker}; touch later1' > /dev/null 2>&1 & "
                           f"( ( sleep {marker}; touch later2 ) & ) ; nohup sleep {marker} > /dev/null 2>&1 & "
                           "sleep 0.3; echo started")  # time for setsid to have left the group
    assert result.startswith("exit status 0") and "started" in result, result  # not held until the timeout
    assert running(f"sleep {marker}") == [], result  # a PID namespace, or setsid refused and one group kill


@needs_sandbox
def test_the_timeout_kills_what_left_the_process_group(place):
    marker = f"{time.time_ns() % 10_000_000 / 1000 + 1:.3f}"
    result = run(place.ws, f"setsid sleep {marker} & sleep 30", timeout=1)
    assert result.startswith("ERROR: timed out") and running(f"sleep {marker}") == [], result


@needs_sandbox
def test_a_file_is_capped_in_size(place):
    result = run(place.ws, "yes > big.txt; fallocate -l 1G big.bin; echo after", file_bytes=1 << 16)
    assert (place.ws / "big.txt").stat().st_size <= 1 << 16 and "after" in result, result
    assert not (place.ws / "big.bin").exists() or (place.ws / "big.bin").stat().st_size == 0


SECRETS = ["TINYHARNESS_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "MY_SECRET_THING", "DB_PASSWORD", "DATABASE_URL",
           "GITHUB_PAT", "AWS_ACCESS_KEY_ID", "MYSQL_PWD", "NGROK_AUTHTOKEN", "SENTRY_DSN", "REDIS_URL",
           "OPENAI_API_KEY_2", "PLAIN_SETTING"]


@needs_sandbox
def test_the_environment_is_an_allowlist_with_a_private_tmpdir(place, monkeypatch):
    """A denylist of secret-looking names leaks DATABASE_URL, GITHUB_PAT, MYSQL_PWD...: only the
    allowed names pass, and what --sandbox-env adds."""
    for name in SECRETS:
        monkeypatch.setenv(name, f"s3cr3t-{name}")
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
    monkeypatch.setenv("STY", "1.pts-0.host")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    result = run(place.ws, 'env; echo "tmp=$TMPDIR"; touch "$TMPDIR/scratch" && echo made', extra_env=["REDIS_URL"])
    assert "s3cr3t" not in result.replace("s3cr3t-REDIS_URL", "") and "REDIS_URL=s3cr3t-REDIS_URL" in result, result
    assert "TMUX" not in result and "STY" not in result and "LC_ALL=C.UTF-8" in result and "made" in result, result
    assert "PYTHONSAFEPATH" not in result and f"PWD={os.path.realpath(place.ws)}" in result
    tmpdir = result.split("tmp=", 1)[1].split()[0]
    assert Path(tmpdir).name.startswith("tinyharness-tmp-") and not Path(tmpdir).exists()


@needs_sandbox
def test_the_harness_environment_cannot_be_read_through_proc(place, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://u:s3cr3t@db/x")
    result = run(place.ws, f"cat /proc/{os.getpid()}/environ /proc/self/root/proc/{os.getpid()}/environ; "
                           "cat /proc/$PPID/environ")
    assert "s3cr3t" not in result and not result.startswith("exit status 0"), result


# --- fail closed --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("abi, words", [(0, "has no Landlock"), (3, "needs ABI 6")])
def test_without_landlock_the_shell_refuses_and_says_how_to_run_anyway(place, abi, words):
    sandbox = Sandbox()
    sandbox._abi = abi  # what the probe would find on an older kernel
    result = tools.shell(str(place.ws), "touch ran", sandbox=sandbox)
    assert result.startswith("ERROR: the shell is sandboxed and the sandbox cannot run here") and words in result
    assert "--sandbox off" in result and not (place.ws / "ran").exists()


def test_the_flags_off_with_a_warning_sandbox_read_and_help(place):
    with ScriptedServer(script=[{"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]}, "done"]) as s:
        result = run_stage("tinyharness", place.ws, "--yes", "--sandbox", "off", "--base-url", s.base_url, "task")
    assert result.returncode == 0 and "warning: --sandbox off" in result.stderr
    assert list(tool_results(s.requests[-1]).values()) == ["exit status 0\nhi\n"]
    if NO_SANDBOX is None:  # --sandbox-read reaches the sandbox: the canary can be read, still not written
        read = [{"name": "shell", "arguments": {"command": f"cat {place.canary}; echo x >> {place.canary}"}}]
        with ScriptedServer(script=[{"tool_calls": read}, "done"]) as s:
            run_stage("tinyharness", place.ws, "--yes", "--sandbox-read", str(place.outside), "--base-url",
                      s.base_url, "task")
        assert CANARY.strip() in str(s.requests[-1]) and untouched(place)
    missing = run_stage("tinyharness", place.ws, "--sandbox-read", str(place.root / "nope"), "task")
    assert missing.returncode == 2 and "--sandbox-read" in missing.stderr
    usage = run_stage("tinyharness", place.ws, "--help")
    assert "--sandbox {on,off}" in usage.stdout and "--sandbox-read PATH" in usage.stdout


# --- through the CLI: one attack of each family --------------------------------------------------------------------

@needs_sandbox
def test_one_attack_of_each_family_fails_under_run_yes(place, listeners):
    """The regex lets all of these through (none is BLOCKED); the sandbox stops every one."""
    for name in ["delete", "overwrite", "secret"]:
        (place.outside / name).mkdir()
        (place.outside / name / "canary.txt").write_text(CANARY)
    victim = subprocess.Popen(["sleep", "60"])
    out = place.outside
    attacks = {
        "delete": f"x=rm; $x -r -f {out}/delete",
        "overwrite": f"echo pwned > {out}/overwrite/canary.txt",
        "secret": f"cat {out}/secret/canary.txt",
        "tcp": f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {listeners.tcp}), 2)\"",
        "udp": f"{PY} -c \"import socket; socket.socket(2, 2).sendto(b'x', ('127.0.0.1', {listeners.udp}))\"",
        "kill": f"kill -9 {victim.pid}",
        "left-behind": f"{PY} -c \"import os, time; os.fork() or (getattr(os, 'set' + 'sid')(), time.sleep(2), open('left.txt', 'w'))\"",
    }
    calls = [{"name": "shell", "arguments": {"command": c}, "id": family} for family, c in attacks.items()]
    try:
        with ScriptedServer(script=[{"tool_calls": calls}, "done"]) as server:
            result = run_stage("tinyharness", place.ws, "--yes", "--base-url", server.base_url, "attack", timeout=240,
                               in_process=False)  # the real CLI process: subreaper, environment and all
        assert running("open('left.txt'") == []  # gone when the run ends: it can write nothing later
        results = tool_results(server.requests[-1])
        assert result.returncode == 0 and not any(r.startswith("BLOCKED") for r in results.values()), "\n".join(results.values())
        assert all(c.read_text() == CANARY for c in out.glob("*/canary.txt")) and len(list(out.glob("*/canary.txt"))) == 3
        assert CANARY.strip() not in str(server.requests) and not reached(listeners) and victim.poll() is None
        assert not (place.ws / "left.txt").exists(), results["left-behind"]
    finally:
        victim.kill()
        victim.wait()


@needs_sandbox
def test_a_rule_that_cannot_be_applied_stops_the_command_before_it_runs(place, monkeypatch):
    def broken(self):
        raise OSError(22, "Invalid argument")
    monkeypatch.setattr(sandbox_module.Rules, "apply", broken)
    result = run(place.ws, "touch ran")
    assert result.startswith("exit status 126") and "could not confine the command" in result
    assert not (place.ws / "ran").exists()


@needs_sandbox
def test_the_helper_applies_the_same_rules_then_execs(place):
    helper = subprocess.run([PY, "-m", "tinyharness.sandbox", "--exec", str(place.ws), "--", "sh", "-c",
                             f"echo x > {place.canary}; echo ok > inside.txt; grep NoNewPrivs /proc/self/status"],
                            capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert "Permission denied" in helper.stderr and "NoNewPrivs:\t1" in helper.stdout, helper
    assert untouched(place) and (place.ws / "inside.txt").read_text() == "ok\n"


def test_the_portable_walk_follows_no_link_and_no_dotdot(place):
    """What the file tools use where openat2 is missing (other POSIX systems, Linux before 5.6)."""
    (place.ws / "sub").mkdir()
    (place.ws / "sub" / "f.txt").write_text("inside")
    (place.ws / "out").symlink_to(place.outside, target_is_directory=True)
    root = os.open(place.ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with open(walk_open(root, "sub/f.txt", os.O_RDONLY, 0)) as f:
            assert f.read() == "inside"
        for path, error in [("out/canary.txt", OSError), ("../outside/canary.txt", PermissionError),
                            (str(place.canary), PermissionError)]:
            with pytest.raises(error):
                os.close(walk_open(root, path, os.O_RDONLY, 0))
    finally:
        os.close(root)


@needs_sandbox
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_undoing_never_works_through_a_link_the_command_planted(place):
    """The harness undoes changes with the user's full rights: a hooks folder swapped for a link to the
    outside must not make it delete or write there."""
    subprocess.run(["git", "init", "-q", str(place.ws)], check=True)
    (place.outside / "pre-commit.sample").write_text(CANARY)
    hooks_before = sorted(p.name for p in (place.ws / ".git" / "hooks").iterdir())
    result = run(place.ws, f"rm -rf .git/hooks && ln -s {place.outside} .git/hooks")
    assert sorted(os.listdir(place.outside)) == ["canary.txt", "pre-commit.sample"]
    assert all(p.read_text() == CANARY for p in place.outside.iterdir())
    assert not (place.ws / ".git" / "hooks").is_symlink(), result
    assert sorted(p.name for p in (place.ws / ".git" / "hooks").iterdir()) == hooks_before


def sleeping(marker):
    """How many `sleep MARKER` processes run (not the shell whose command line names them)."""
    found = 0
    for pid in running(f"sleep {marker}"):
        try:
            found += Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")
        except OSError:
            pass
    return found


@needs_sandbox
@pytest.mark.parametrize("way", ["cloned", "two-fork"])
def test_ctrl_c_during_a_command_ends_everything_it_started(place, monkeypatch, way):
    """When the shell tool passes Ctrl-C on, what the command started has ended, not only been sent its
    signal: the run may exit next. The run's spawner cloned into its namespaces, or started the two-fork way
    (a harness with threads: a copy of the harness between, whose death reaches the spawner a moment later)."""
    marker = f"{time.time_ns() % 10_000_000 / 1000 + 3:.3f}"
    if way == "two-fork":
        monkeypatch.setattr(sandbox_module.sandbox_clone, "works", lambda: False)

    seen = []

    def interrupted(process, timeout=None):  # the shell tool waits; the user presses Ctrl-C once both sleeps run
        deadline = time.monotonic() + 60
        while sleeping(marker) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(sleeping(marker))
        raise KeyboardInterrupt
    from tinyharness.sandbox.handle import Command
    from tinyharness.sandbox.spawner import Spawned
    for handle in (Spawned, Command):  # whichever started it: the shell tool waits on its handle
        monkeypatch.setattr(handle, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(place.ws, f"setsid sleep {marker} & sleep {marker}")
    assert running(f"sleep {marker}") == [] and seen == [2]


@needs_sandbox
@pytest.mark.parametrize("isolate", [None, False], ids=["namespaces", "landlock-alone"])
def test_rules_built_once_a_run_grant_no_earlier_tmpdir_and_hold_after_a_rebuild(place, monkeypatch, isolate):
    """The Landlock ruleset is built once a run and each command's TMPDIR added to it (benchmarks.sandbox:
    the per-command cost). A TMPDIR of an earlier command, made again at its path by another program, is
    another folder: no later command may write there. After REBUILD_AFTER commands the ruleset is built
    afresh, and confines as before."""
    monkeypatch.setattr(sandbox_module, "REBUILD_AFTER", 3)
    sandbox = Sandbox(isolate=isolate)
    sandbox._spawners.failed = True  # each command its own rules (the spawner's are made once)
    first = tools.shell(str(place.ws), 'echo "tmp=$TMPDIR"', sandbox=sandbox)
    old = first.split("tmp=", 1)[1].split()[0]
    assert not os.path.exists(old)
    os.mkdir(old)  # the same path, now another program's folder
    try:
        for _ in range(4):  # the third and fourth run under a rebuilt ruleset
            result = tools.shell(str(place.ws), f'touch "{old}/x"; echo x > "{place.canary}"; '
                                                'touch "$TMPDIR/own" && echo own-ok', sandbox=sandbox)
            assert "own-ok" in result and os.listdir(old) == [] and untouched(place), result
        assert sandbox._built[os.path.realpath(place.ws)][1] == 2  # rebuilt after the third command
    finally:
        shutil.rmtree(old)


# The sandbox mounts an empty tmpfs over /tmp, /run and home in the command's mount namespace, and no
# longer remounts / as private first: the namespace is made with a user namespace, so the kernel turns
# the shared mounts it copies into slaves. Checked where it matters, on a host whose / is shared (systemd
# makes it so): a child of this test makes such a host in namespaces of its own, runs one sandboxed
# command there, and looks at its own mount table while the command runs. The control case mounts the
# way a sandbox without a user namespace would, and must be seen, or the check proves nothing.
PROPAGATION_CHECK = r'''
import ctypes, os, sys, time
from tinyharness import sandbox
from tinyharness.sandbox import namespaces as ns
workspace, control = sys.argv[1], sys.argv[2] == "control"
uid, gid = os.geteuid(), os.getegid()
if ns.libc.unshare(ns.CLONE_NEWUSER | ns.CLONE_NEWNS) != 0:
    sys.exit(77)
for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
    with open(f"/proc/self/{name}", "w") as f:
        f.write(text)
MS_SHARED = 1 << 20
ns.mount(None, "/", None, ns.MS_REC | MS_SHARED)  # the host as systemd leaves it: every mount shared
def tmpfs_mounts():
    return sum(1 for line in open("/proc/self/mountinfo") if " - tmpfs " in line and line.split()[4] == "/tmp")
before = tmpfs_mounts()
if control:  # a mount namespace of the same user namespace: its mounts do reach this one
    pid = os.fork()
    if pid == 0:
        ns.libc.unshare(ns.CLONE_NEWNS)
        ns.mount("tmpfs", "/tmp", "tmpfs", 0, "size=4k")
        time.sleep(2)
        os._exit(0)
else:
    process, finish = sandbox.Sandbox().start(workspace, "sleep 2", 10)
time.sleep(1)
print(tmpfs_mounts() - before)
'''


@needs_sandbox
@pytest.mark.parametrize("how", ["sandbox", "control"])
def test_the_commands_mounts_never_reach_the_harness_on_a_shared_host(place, how):
    """A sandboxed command's tmpfs over /tmp stays in its namespace even where / is a shared mount."""
    if not sandbox_module.namespaces_work():
        pytest.skip("user namespaces are switched off here")
    done = subprocess.run([PY, "-c", PROPAGATION_CHECK, str(place.ws), how], capture_output=True, text=True,
                          timeout=30, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode == 77:
        pytest.skip("this machine does not let a test make a user namespace of its own")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == (["1"] if how == "control" else ["0"]), done.stderr


def pid_numbers(pid):
    """The process's number in each PID namespace it is in, the outermost first (`NSpid:`)."""
    line = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("NSpid:"))
    return [int(n) for n in line.split()[1:]]


@needs_sandbox
@pytest.mark.parametrize("threads", [1, 2])
def test_the_command_is_cloned_straight_into_its_namespaces_as_pid_1(place, monkeypatch, threads):
    """One copy of the harness per command (sandbox_clone.py): the shell is the harness's own child and
    PID 1 of its PID namespace, with no process in between; still confined. Beside another thread (a raw
    clone takes none of the C library's fork-time locks) the harness forks the two-fork way instead."""
    from tinyharness.sandbox import clone as sandbox_clone
    monkeypatch.setattr(sandbox_module.threading, "active_count", lambda: threads)
    box = Sandbox()
    if not box.isolated:
        pytest.skip("user namespaces are switched off here")
    process, finish = box.start(str(place.ws), f"echo $$; cat {place.canary}; echo x > {place.outside}/new; "
                                "sleep 0.5", 10, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    numbers = pid_numbers(process.pid)  # the harness's own child: the shell itself, or the process in between
    output = process.stdout.read().decode()
    process.wait()
    finish()
    if sandbox_clone.works() is False:
        pytest.skip("clone3 is refused here: the two-fork way is tested by the rest of this file")
    assert numbers[1:] == ([1] if threads == 1 else []) and output.splitlines()[0] == "1"
    assert CANARY.strip() not in output and untouched(place)  # /tmp is empty in there, or refused


@needs_sandbox
def test_where_clone3_is_refused_every_command_goes_the_two_fork_way(place, monkeypatch):
    from tinyharness.sandbox import clone as sandbox_clone

    def refused(flags):
        raise OSError(1, "Operation not permitted", "clone3")
    monkeypatch.setattr(sandbox_clone, "clone", refused)
    monkeypatch.setitem(sandbox_clone._state, "works", None)
    monkeypatch.setattr(sandbox_module.threading, "active_count", lambda: 1)  # a harness that would clone
    box = Sandbox()
    box._spawners.failed = True  # each command on its own (the spawner's own start: below)
    first = tools.shell(str(place.ws), f"echo $$; cat {place.canary}", sandbox=box)
    assert sandbox_clone.works() is False
    second = tools.shell(str(place.ws), f"echo x > {place.outside}/new", sandbox=box)
    if box.isolated:
        assert first.splitlines()[1] == "1"  # PID 1 of its namespace, behind the process in between
    assert CANARY.strip() not in first and "exit status 0" not in second and untouched(place)
    # the run's spawner starts the two-fork way too, and its commands are as confined
    spawned = Sandbox()
    third = tools.shell(str(place.ws), f"echo $$; cat {place.canary}; echo x > {place.outside}/new",
                        sandbox=spawned)
    if spawned.isolated:
        assert list(spawned._spawners.by_workspace.values())[0].state == "ready"
        assert third.splitlines()[1] != "1"  # the spawner is PID 1
    assert CANARY.strip() not in third and untouched(place)
