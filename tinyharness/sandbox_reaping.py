"""No process left behind: what a command started is ended when it ends.

The problem: `sleep 999 &`, `nohup`, a double fork, a daemon: a command's children outlive it, and
one of them could keep working after the model was told the command is over. With a PID namespace
(sandbox_namespaces.py) the kernel ends them all. Without one, the mechanism is the process group:
seccomp refuses `setsid` and `setpgid`, so everything the command starts stays in its group, and the
one `killpg` at its end is exact: the kernel fails a fork that races with a group kill, so even a
fork-and-exit chain (thousands of generations a second) cannot outrun it, where a sweep of the process
tree can be outrun. As a second net the harness is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`)
and walks `/proc` for every descendant and every orphan it adopted during the command, and kills them.

What it cannot do: without namespaces, a program that insists on a session of its own (a daemon,
`setsid`) does not start. Only the command's own descendants are ended: a process of the user's
started before it is never touched.
"""
import os
import signal
import time

from .sandbox_syscalls import prctl

PR_SET_CHILD_SUBREAPER = 36


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
    (one file per thread) reads only the tree we care about; without it, the whole /proc is read once."""
    if os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return children_from_proc
    table = parents()
    return lambda pid: {p for p, parent in table.items() if parent == pid}


def children_from_proc(pid):
    kids = set()
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
    """Kill the command's whole tree and every orphan the harness adopted while it ran, again until none
    is left (a process can fork between one look and the kill), then reap the orphans that became ours
    (the command itself is left for Popen.wait). Returns how many of them had left the command's
    process group (setsid, setpgid, a daemon): those the plain group kill would have missed."""
    me, escaped = os.getpid(), set()
    for _ in range(100):
        children = child_lister()
        found = tree((children(me) - adopted_before) | {command_pid}, children)
        victims = {p for p in found if not is_zombie(p)}
        # A dying process hands its children to us before it turns zombie: read ours again AFTER the
        # zombie checks, or one handed over meanwhile would be missed.
        if not victims and children(me) - adopted_before <= found:
            break
        for pid in victims:
            try:
                if os.getpgid(pid) != command_pid:  # left the command's group: the group kill missed it
                    escaped.add(pid)
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.001)
    for pid in child_lister()(me) - adopted_before - {command_pid}:
        try:
            os.kill(pid, signal.SIGKILL)  # a child of ours cannot have been replaced: a zombie, or now dying
            os.waitpid(pid, 0)  # collected, or it stays a zombie for as long as the harness runs
        except (ChildProcessError, ProcessLookupError):
            pass
    return len(escaped - {command_pid})


def is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True  # gone already
