"""One handle for a command the sandbox started, whatever started it, and what Ctrl-C stopped.

The problem. A command reaches its caller (the shell tool, a hook) in one of two shapes: a Popen
(started on its own: unconfined, cloned into its namespaces, or forked with the rules applied), or
a Spawned (the run's spawner started it, sandbox/spawner.py). Each is waited for, killed and
interrupted in its own way; a caller that told them apart had to know the sandbox's mechanisms,
and the chat's Ctrl-C, to count and reap what it stopped, read the sandbox's registries (the
spawner's, the MCP servers' process numbers) to tell a command from a process that serves the run.

The mechanism. `Command` wraps a Popen as Spawned wraps the spawner's: `wait(timeout)` (a pidfd:
the end is seen the moment it comes, not at the next poll), `poll`, `kill` (the command's process
group), `interrupt` (Ctrl-C: the group killed and waited for). An interrupted command is left
unreaped (its number stays its own while the sandbox cleans up after it) in its sandbox's
`Stopped`, which `Sandbox.stop_all` reaps and counts: only what this sandbox started, never a
server or a bystander. `unconfined` starts a command with all the user's rights (a hook marked
`"sandbox": false`), registered among the live children at once, so that no confined command's
clean-up beside it takes it for a leftover.

What it cannot do. What a command handed to another session (a daemon the system runs) is not its
to stop; without pidfds (not Linux, a kernel before 5.3) `wait` polls, as Popen does.
"""
import os
import select
import signal
import subprocess
import threading

from .reaping import LIVE, LOCK, wait_for_group
from .rules import stay_between


class Stopped:
    """The commands an interruption killed and left unreaped, until `reap_all`."""

    def __init__(self):
        self.left, self.lock = [], threading.Lock()

    def add(self, handle):
        with self.lock:
            self.left.append(handle)

    def reap_all(self):
        """Reap every command left here; how many there were."""
        with self.lock:
            left, self.left = self.left, []
        for handle in left:
            handle.reap()
        return len(left)


class Command:
    """A command started as a Popen (its stdin, stdout, stderr, pid and args are the Popen's), used
    as the spawner's Spawned is."""

    def __init__(self, process, stopped=None):
        self.process, self.stopped = process, stopped

    def __getattr__(self, name):
        return getattr(self.process, name)

    def wait(self, timeout=None):
        """The exit status, once it ended (TimeoutExpired before): a pidfd (Linux 5.3) is readable
        the moment the process ends, where Popen.wait with a timeout sleeps in growing steps."""
        if self.process.returncode is not None:  # reaped: its number may be another's by now
            return self.process.returncode
        try:
            pidfd = os.pidfd_open(self.process.pid)
        except (AttributeError, OSError):  # not Linux, an old kernel, or reaped already
            code = self.process.wait(timeout=timeout)
        else:
            try:
                if not select.select([pidfd], [], [], timeout)[0]:
                    raise subprocess.TimeoutExpired(self.process.args, timeout)
            finally:
                os.close(pidfd)
            code = self.process.wait()
        LIVE.discard(self.process.pid)  # reaped: no longer a child that runs now
        return code

    def poll(self):
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        """The command's process group, and so all it started, killed now."""
        kill_group(self.process.pid)

    def interrupt(self):
        """Ctrl-C: the group killed; returns once what was killed has ended (the run may exit
        next). Left unreaped for the sandbox's stop_all when it has one to keep it."""
        kill_group(self.process.pid)
        wait_for_group(self.process.pid)
        if self.stopped is not None:
            self.stopped.add(self)
        else:
            self.reap()

    def reap(self):
        self.process.wait()
        LIVE.discard(self.process.pid)


def unconfined(command, cwd, env, **pipes):
    """`sh -c command` with all the user's rights, leading a process group of its own, with a
    process between it and the harness that kills the group if the harness is killed
    (sandbox/rules.py, `stay_between`); its Command."""
    harness = os.getpid()
    with LOCK:
        process = subprocess.Popen(["/bin/sh", "-c", command], cwd=cwd, env={**os.environ, **env},
                                   start_new_session=True,
                                   preexec_fn=lambda: stay_between(harness),  # noqa: PLW1509
                                   **pipes)  # the process between must start in the child itself
        LIVE.add(process.pid)
    return Command(process)


def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # the whole group had already ended
        pass
