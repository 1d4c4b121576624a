"""The run's sandbox, made once: a confined process that starts each command.

The problem: a sandboxed command used to cost about 10 ms more than a plain one, and most of that
was not the confinement but making it again for every command: a copy of the harness (tens of MiB
of page tables, and Python's after-fork work), five namespaces made and torn down, the mounts of the
file system view, the Landlock ruleset and the seccomp filter applied (benchmarks/sandbox.py has
each part). None of it depends on the command.

The mechanism: at a run's first command the harness starts, as a sandboxed command of its own, a
small Python program (sandbox/spawner_main.py, its text passed with `python -I -S -c`), which is
then PID 1 of the run's namespaces, with the run's view of the files, Landlock, seccomp, no new
privileges and the limits; its TMPDIR is a folder that holds each command's own. The harness waits
for it to be ready (once a run, about 30 ms), then sends it each command, its environment and its
output pipe (SCM_RIGHTS) on a socket that no command inherits, and it starts `/bin/sh` with
posix_spawn - no copy of a big process - which sets the command's CPU-seconds limit and execs the
command. Every process it starts inherits all of the confinement;
none can leave the namespace; when the shell ends, the spawner kills every other process in there
(`kill(-1)` from PID 1 spares only itself), so nothing a command leaves runs on, as before.

What changes for the commands: those of one run share the spawner's namespaces one after another
(never at once: a command started while another runs is cloned as before), so the shell is not PID
1 and `ps` shows the spawner beside it, and a file one command leaves beside its TMPDIR
(`$TMPDIR/..`) is there for the next (nothing it started, and no SysV IPC object: the spawner
removes them); everything outside stays as far away as before. The spawner is in the
sandbox, so the harness takes nothing it says on trust: a reply that is not one of four short forms,
or none in time, and it is killed (its namespace with it) and the command is cloned; a command that
runs too long is killed by the spawner, or with the spawner if it does not answer.

What it cannot do: start where the harness's Python cannot run inside the sandbox (then every
command is cloned, as before); serve hooks, a command with its own folder or variables, or a caller
that wants other pipes than the shell tool's (they are cloned).
"""
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from .reaping import LIVE, wait_for_group

PROGRAM = Path(__file__).with_name("spawner_main.py")
READY_SECONDS = 10  # Python starting inside the sandbox
ANSWER_SECONDS = 5  # a started or ended that takes longer: the spawner is taken for broken
MAX_DEATHS = 3  # spawners of one sandbox that may die before its commands are only cloned


class Broken(OSError):
    """The spawner did not answer as it must."""


class Spawners:
    """A Sandbox's spawners, one per workspace, and the folders that hold their commands'
    TMPDIRs."""

    def __init__(self):
        self.by_workspace, self.roots, self.failed, self.deaths = {}, [], False, 0

    def for_command(self, workspace, start_one):
        """The spawner that takes this command now, or None (the command is cloned). The first
        command of a workspace starts one with `start_one(workspace, root)` and waits until it is
        ready. One that died before it was ever ready, or a third that died (each Ctrl-C kills
        one), means none is started again: the commands are cloned."""
        spawner = None if self.failed else self.by_workspace.get(workspace)
        if spawner is not None and spawner.state == "dead":
            self.deaths += 1
            self.failed, spawner = not spawner.was_ready or self.deaths >= MAX_DEATHS, None
            self.by_workspace.pop(workspace)
        if self.failed:
            return None
        if spawner is None:
            root = tempfile.mkdtemp(prefix="tinyharness-tmp-")
            self.roots.append(root)
            try:
                spawner = self.by_workspace[workspace] = start_one(workspace, root)
            except OSError:
                self.failed = True
                return None
        if spawner.available():
            return spawner
        self.failed = not spawner.was_ready  # it never started: none will
        return None

    def close(self, remove):
        """Kill every spawner and remove the folders with `remove(folder)`."""
        for spawner in self.by_workspace.values():
            spawner.kill()
        self.by_workspace.clear()
        for root in self.roots:
            remove(root)
        self.roots.clear()


class Spawner:
    """The harness's end of one spawner: its process (a child of the harness), the socket to it,
    the folder that holds each command's TMPDIR."""

    def __init__(self, process, control, root):
        self.process, self.control, self.root = process, control, root
        self.state = "starting"  # then "ready", "busy", "ended" (until released), or "dead"
        self.was_ready = False

    @classmethod
    def start(cls, launch, root):
        """Start the spawner with `launch(argv, **popen)` (a sandboxed Popen); it says when it is
        ready (`available`)."""
        ours, theirs = socket.socketpair()
        try:
            # the folder last: `ps` tells one run's spawner from another's
            process = launch([sys.executable, "-I", "-S", "-c", PROGRAM.read_text(),
                              str(theirs.fileno()), root], pass_fds=(theirs.fileno(),),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(process, ours, root)

    def available(self):
        """Whether it can take a command now; one just started is waited for (Python starting
        inside the sandbox, tens of milliseconds, once a run)."""
        if self.state == "starting":
            try:
                if self.receive(1, READY_SECONDS) != b"r":
                    raise Broken("not ready")
                self.state, self.was_ready = "ready", True
            except OSError:
                self.kill()
        return self.state == "ready"

    def new_tmpdir(self):
        """A command's TMPDIR in the spawner's folder, which a command may have made unwritable
        (the folder itself is the harness's: in /tmp, out of the commands' reach)."""
        os.chmod(self.root, 0o700)
        return tempfile.mkdtemp(prefix="tinyharness-tmp-", dir=self.root)

    def run(self, command, env, cwd, cpu_seconds, stopped=None):
        """Start the command; its Spawned, or None when the spawner failed (it is dead now).
        `stopped`: where an interruption leaves it (its sandbox's handle.Stopped)."""
        fields = [command, cwd, str(int(cpu_seconds)), *(f"{k}={v}" for k, v in env.items())]
        if any("\0" in field for field in fields):
            return None  # cloned: Popen says what is wrong with it
        request = b"".join(os.fsencode(field) + b"\0" for field in fields)
        read, write = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            socket.send_fds(self.control, [b"c"], [null, write, write])
            self.control.sendall(struct.pack("!I", len(request)) + request)
            answer = self.receive(1, ANSWER_SECONDS)
            if answer == b"e":
                raise Broken(self.receive_text())  # a command it could not start
            if answer != b"s":
                raise Broken(f"the spawner answered {answer!r}")
        except OSError:
            os.close(read)
            self.kill()
            return None
        finally:
            os.close(write)
            os.close(null)
        self.state = "busy"
        return Spawned(self, command, open(read, "rb"), stopped)

    def ended(self, timeout):
        """The command's exit status once the spawner reports it (TimeoutExpired before)."""
        if self.state == "dead":  # killed meanwhile, and its namespace with it
            return -signal.SIGKILL
        if not readable(self.control, timeout):
            raise subprocess.TimeoutExpired("sh", timeout)
        try:
            if self.receive(1, ANSWER_SECONDS) != b"x":
                raise Broken("not an exit status")
            status = struct.unpack("!i", self.receive(4, ANSWER_SECONDS))[0]
        except OSError:
            self.kill()
            return -signal.SIGKILL
        self.state = "ended"  # ready again once the harness has cleaned up after it (`release`)
        return status

    def end_command(self):
        """Kill the running command and what it started (the spawner, if it does not answer)."""
        try:
            self.control.send(b"k")
            return self.ended(ANSWER_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
            return -signal.SIGKILL

    def kill(self, reap=True):
        """End the spawner, and with it every process of its namespace. `reap=False` leaves it
        unreaped, for its sandbox's stop_all to reap and count (Ctrl-C). Returns None."""
        if self.state != "dead":
            self.state = "dead"
            LIVE.discard(self.process.pid)  # its number may come round to another child of ours
            self.control.close()
            if self.process.poll() is None:  # not reaped: its number is still its group's
                # its group: the spawner, and the two-fork way's process in between, whose death
                # would reach the spawner only a moment later (its parent-death signal)
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait_for_group(self.process.pid)  # a namespace is empty once its PID 1 has ended
            if reap:
                self.process.wait()

    def receive(self, size, timeout):
        data = b""
        while len(data) < size:
            if not readable(self.control, timeout):
                raise Broken("the spawner did not answer in time")
            chunk = self.control.recv(size - len(data))
            if not chunk:
                raise Broken("the spawner ended")
            data += chunk
        return data

    def receive_text(self):
        size = struct.unpack("!I", self.receive(4, ANSWER_SECONDS))[0]
        if size > 4096:
            raise Broken("a reason longer than any it sends")
        return self.receive(size, ANSWER_SECONDS).decode("utf-8", "replace")


class Spawned:
    """A command the spawner started, with the handle every command of the sandbox has
    (sandbox/handle.py): stdout, wait, poll, kill, interrupt."""

    def __init__(self, spawner, command, stdout, stopped=None):
        self.spawner, self.args, self.stdout, self.stopped = spawner, command, stdout, stopped
        self.stdin = self.stderr = self.pid = None
        self.returncode = None

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = self.spawner.ended(timeout)
        return self.returncode

    def poll(self):
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        """The command and everything it started, ended now."""
        if self.returncode is None:
            self.returncode = self.spawner.end_command()

    def interrupt(self):
        """Ctrl-C: the spawner killed with the command, and left unreaped with its sandbox's
        stopped commands (Sandbox.stop_all reaps and counts them)."""
        if self.returncode is None:
            self.returncode = self.spawner.kill(reap=False) or -signal.SIGKILL
            if self.stopped is not None:
                self.stopped.add(self)
            else:
                self.reap()

    def reap(self):
        self.spawner.process.wait()

    def end_namespace(self):
        """Nothing to look for afterwards: the spawner killed all the command left."""

    def release(self):
        """The harness has cleaned up after the command (its TMPDIR removed, the protected paths
        put back): the spawner may take the next. Not before, or that command could swap this
        one's TMPDIR for a link while the harness removes it."""
        if self.spawner.state == "ended":
            self.spawner.state = "ready"


def readable(sock, timeout):
    return bool(select.select([sock], [], [], timeout)[0])
