"""No process left behind: what a command started is ended when it ends.

The problem: `sleep 999 &`, `nohup`, a double fork, a daemon: a command's children outlive it, and
one of them could keep working after the model was told the command is over. With a PID namespace
(sandbox/namespaces.py) the kernel ends them all. Without one, the mechanism is the process group:
seccomp refuses `setsid` and `setpgid`, so everything the command starts stays in its group, and the
one `killpg` at its end is exact: the kernel fails a fork that races with a group kill, so even a
fork-and-exit chain (thousands of generations a second) cannot outrun it, where a sweep of the
process tree can be outrun. As a second net the harness is a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`) and walks `/proc` for every descendant and every orphan it adopted
during the command, and kills them.

What was killed has ended before the harness says so: `wait_for_group` returns once every
process of a killed group has ended (a pidfd each), not when the signal was sent: a Ctrl-C, a
SIGTERM or SIGHUP ends the run only after its command is gone, and a namespace's PID 1 ends only
after the kernel has ended every other process in it. While a command starts, those signals are
held (`SignalsHeld`) until the harness holds the process it must kill.

What it cannot do: without namespaces, a program that insists on a session of its own (a daemon,
`setsid`) does not start. Only the command's own descendants are ended: a process of the user's
started before it is never touched.
"""
import os
import select
import signal
import threading
import time

from .syscalls import prctl

PR_SET_CHILD_SUBREAPER = 36
GONE_SECONDS = 10  # a killed process still there after this is stuck in the kernel: go on
# The children the harness started that run now (sandboxed commands, hooks: several hooks of one
# event run together): a child started after another command began is not that command's leftover,
# and is never killed - nor reaped, which would leave its owner's Popen.wait an exit status 0 it
# never had.
LIVE: set[int] = set()
# held to start a child and register it, and to look for leftovers: never in between
LOCK = threading.Lock()


def become_subreaper():
    """Orphans of our commands come to us, not to init, so we can find and end them."""
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        return True
    except OSError:
        return False


def parents():
    """{pid: parent pid} for every process we can see (the slow way: one file per process)."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    table[int(entry.name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return table


def child_lister():
    """A function pid -> its children, for one look at the process tree. /proc/PID/task/TID/children
    (one file per thread) reads only the tree we care about; without it, the whole /proc is read
    once."""
    if os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return children_from_proc
    table = parents()
    return lambda pid: {p for p, parent in table.items() if parent == pid}


def children_from_proc(pid):
    kids: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids.update(int(p) for p in f.read().split())
        except OSError:
            pass  # the thread or the process ended meanwhile
    return kids


def tree(roots, children):
    found, todo = set(roots), list(roots)
    while todo:
        for child in children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


def end_everything(command_pid, adopted_before):
    """Kill the command's whole tree and every orphan the harness adopted while it ran, again until
    none is left (a process can fork between one look and the kill), then reap the orphans that
    became ours (the command itself is left for Popen.wait). Returns how many of them had left the
    command's process group (setsid, setpgid, a daemon): those the plain group kill would have
    missed."""
    me, escaped = os.getpid(), set()
    for _ in range(100):
        children, others = child_lister(), set(LIVE) - {command_pid}
        found = tree((children(me) - adopted_before - others) | {command_pid}, children)
        victims = {p for p in found if not is_zombie(p)}
        # A dying process hands its children to us before it turns zombie: read ours again AFTER the
        # zombie checks, or one handed over meanwhile would be missed.
        if not victims and children(me) - adopted_before - others <= found:
            break
        for pid in victims:
            if kill_if_still_ours(pid, found | {me}, command_pid):
                escaped.add(pid)
        time.sleep(0.001)
    for pid in child_lister()(me) - adopted_before - {command_pid} - set(LIVE):
        try:
            # a child of ours cannot have been replaced: a zombie, or now dying
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)  # collected, or it stays a zombie for as long as the harness runs
        except (ChildProcessError, ProcessLookupError):
            pass
    return len(escaped - {command_pid})


def kill_if_still_ours(pid, tree_pids, command_pid):
    """SIGKILL the process if it is still in the command's tree; True when it had left the command's
    process group (the plain group kill would have missed it).

    Between the look at /proc and the kill, the process may end and be reaped, and its number given
    to a stranger: with pid_max at 32768 and a busy machine, numbers come round in minutes. So the
    kill goes through a pidfd (it names one process, never its successor), opened before the check
    that the process is still ours: its parent is in the tree, or its group is the command's. A
    process that is being reaped reads as group 0: gone, not escaped."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None  # no pidfd (old kernel or Python): the check alone, with its small window
    try:
        facts = stat_of(pid)
        if facts is None or facts[0] in (b"Z", b"X"):
            return False
        _, parent, group = facts
        if parent not in tree_pids and group != command_pid:
            return False  # its number now belongs to someone else
        if handle is None:
            os.kill(pid, signal.SIGKILL)
        else:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        return group not in (0, command_pid)
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if handle is not None:
            os.close(handle)


def stat_of(pid):
    """(state, parent pid, process group) from /proc/PID/stat, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[1]), int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def is_zombie(pid):
    facts = stat_of(pid)
    return facts is None or facts[0] in (b"Z", b"X")  # gone already counts


def wait_for_group(group, seconds=GONE_SECONDS):
    """Return once no process of the process group `group`, killed just now, runs any more (each a
    zombie or reaped), or after `seconds`. The kernel lets no member of a killed group fork, so one
    look at /proc finds them all. A namespace's PID 1 in the group ends only after every process of
    its namespace has ended, whatever group they are in."""
    deadline = time.monotonic() + seconds
    for pid in group_members(group):
        wait_until_ended(pid, group, deadline)


def group_members(group):
    """The pids of the group's processes that have not ended."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            facts = stat_of(int(entry.name))
            if facts is not None and facts[2] == group and facts[0] not in (b"Z", b"X"):
                found.append(int(entry.name))
    return found


def wait_until_ended(pid, group, deadline):
    """Until the process has ended (not reaped: its zombie stays for whoever waits for it), through
    a pidfd; without one, by looking again. A number that left the group is no longer ours."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None
    try:
        while time.monotonic() < deadline:
            facts = stat_of(pid)
            if facts is None or facts[0] in (b"Z", b"X") or facts[2] != group:
                return
            if handle is not None:
                select.select([handle], [], [], max(0.0, deadline - time.monotonic()))
            else:
                time.sleep(0.005)
    finally:
        if handle is not None:
            os.close(handle)


class SignalsHeld:
    """Ctrl-C, SIGTERM and SIGHUP held from now until `release()`, which hands the first that came
    to its own handler (KeyboardInterrupt; run_end's Terminated). Held while a command starts:
    raised inside Popen, after the fork and before it keeps the child's number, one would lose the
    command to the clean-up, and it would run on. Outside the main thread, or for a signal with no
    Python handler, nothing changes."""

    def __init__(self):
        self.pending, self.handlers = None, {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                if callable(handler := signal.getsignal(number)):
                    signal.signal(number, self.hold)
                    self.handlers[number] = handler

    def hold(self, signum, frame):
        self.pending = self.pending or signum

    def release(self):
        handlers, self.handlers = self.handlers, {}
        for number, handler in handlers.items():
            signal.signal(number, handler)
        if self.pending is not None:
            handlers[self.pending](self.pending, None)
