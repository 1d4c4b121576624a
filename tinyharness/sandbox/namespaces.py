"""Namespaces: a private /tmp, /run and home, and a process list of its own, where the kernel allows
them.

The problem: Landlock stops reads and writes, not connecting to a socket file (up to ABI 7), and a
command may start processes that outlive it. An SSH agent's socket (`/tmp/ssh-*/agent.*`,
`/run/user/UID/...`, `~/.1password/agent.sock`), a tmux or screen server's, D-Bus's would be
reachable, and `/proc/net/unix` lists them all. The mechanism, where unprivileged user namespaces
work (most distributions): the child unshares a user, mount, PID, network and IPC namespace of its
own, as the same user inside as outside (the IPC one: no SysV shared memory, message queue or
semaphore of a program outside can be read, written or zeroed, nor a POSIX message queue). `/tmp`,
`/run` and the home folder become empty, with only what the sandbox grants mounted back (the
workspace, the private TMPDIR, a virtualenv, git's settings), and an empty read-only file bound over
each file of the workspace a `Read` deny rule covers (permissions.py); in its own network namespace
`/proc/net/unix` lists nothing. The process that enters them is PID 1 of its PID namespace, with a
/proc of its own: no process outside can be seen or named, and when it ends the kernel ends every
process left in the namespace, however it forked. That process is the run's spawner
(sandbox/spawner.py), which starts the shell commands one after another and ends all each left; a
command it cannot take (a hook, one beside another) enters namespaces of its own.

What it cannot do: run where user namespaces are switched off (Ubuntu 24.04's AppArmor restricts
them, hardened kernels disable them). That is probed once, in a child; without them, one `[sandbox]`
line at start says what is shared (NOT_ISOLATED), and the sandbox relies on Landlock, seccomp and
the process group (sandbox/reaping.py) alone. With them, a socket file outside `/tmp`, `/run` and
the home folder is still there to reach (AF_UNIX sockets stay open for the command's own use).
"""
import copy
import ctypes
import os
import signal
import sys

from .syscalls import libc, prctl

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
MS_RDONLY, MS_REMOUNT = 1, 32
PR_SET_PDEATHSIG = 1
NOT_ISOLATED = ("[sandbox] user namespaces are switched off here: commands are confined by "
                "Landlock and seccomp, but share /tmp, /run and the process list with you (a "
                "socket there, like an SSH agent's, can be reached), and what they leave running "
                "is ended by a sweep, not by the kernel.")


def mount(source, target, fstype, flags, data=None):
    encode = lambda s: None if s is None else os.fsencode(s)
    if (libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags),
                   encode(data)) != 0):
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), target)


def enter_namespaces():
    """unshare a user, mount, PID, network and IPC namespace, as the same user inside as outside."""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(ctypes.c_int(NAMESPACES)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    # Nothing mounted here reaches the user's mounts, with no remount of / as private (a walk over
    # every mount, about 1 ms a command): a mount namespace made together with a user namespace is
    # "less privileged", and the kernel turns its copies of shared mounts into slaves, which receive
    # and never send (mount_namespaces(7), "Restrictions on mount namespaces").
    # tests/test_sandbox.py checks it.


class NamespacesWork:
    """Whether this machine lets an unprivileged process make the namespaces (probed once, in a
    child: Ubuntu's AppArmor and hardened kernels switch user namespaces off). Called like a
    function; the answer is kept in `answer` (None until asked). One per process,
    `namespaces_work`: the answer is the kernel's, the same for every run and thread of the
    process, so keeping it process-wide loses nothing (two threads asking at once both probe and
    find the same). A test sets `answer` to pretend."""

    def __init__(self):
        self.answer: bool | None = None

    def __call__(self):
        if self.answer is None:
            self.answer = sys.platform == "linux" and libc is not None and probe_namespaces()
        return self.answer


namespaces_work = NamespacesWork()


def probe_namespaces():
    pid = os.fork()
    if pid == 0:
        try:
            enter_namespaces()
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k")
            inner = os.fork()  # the first child in the new PID namespace mounts its /proc
            if inner == 0:
                try:
                    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                    os._exit(0)
                except BaseException:  # noqa: BLE001 - a forked child exits, whatever it met
                    os._exit(1)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]))
        except BaseException:  # noqa: BLE001 - a forked child exits, whatever it met
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


class Isolation:
    """What the command sees of the file system, and the process that stands between it and the
    harness.

    In the child, after fork: new namespaces; /tmp, /run and the home folder become empty tmpfs, and
    what the sandbox grants under them (the private TMPDIR, the workspace, a virtualenv in home,
    git's settings) is bind-mounted back in its place. An SSH agent's socket (/tmp/ssh-*/agent.*,
    /run/user/UID/...), a tmux or screen server's, D-Bus's: none is there to connect to. The command
    is cloned straight into the namespaces where clone3 works (sandbox/clone.py, `enter_cloned`);
    else, after unshare, one more fork: the command runs as PID 1 of its own PID namespace, with a
    /proc of its own (no process outside is visible, so none can be named), and when it ends - or
    the process between it and the harness is killed - the kernel ends every process in the
    namespace: nothing is left behind, however it forked."""

    def __init__(self, tmpdir, grants, home, unreadable=()):
        self.tmpdir, self.unreadable = tmpdir, list(unreadable)
        hidden = ["/run", "/tmp", os.path.realpath(home)]
        self.hidden = sorted({h for h in hidden if os.path.isdir(h) and h != "/"}, key=len)
        self.binds = []
        for path in dict.fromkeys(os.path.realpath(g) for g in ([tmpdir] if tmpdir else [])
                                  + list(grants)):
            if os.path.exists(path) and self.under_hidden(path):
                self.binds.append(path)
        # a folder before what lies in it: `--sandbox-read /tmp` must not cover the rest
        self.binds.sort(key=len)
        self.fds = {}

    def with_tmpdir(self, tmpdir):
        """This isolation for one command: the same grants (worked out once a run), and its own
        TMPDIR."""
        one = copy.copy(self)
        one.tmpdir, one.fds = tmpdir, {}
        path = os.path.realpath(tmpdir)
        if self.under_hidden(path) and path not in self.binds:
            one.binds = sorted([*self.binds, path], key=len)
        return one

    def under_hidden(self, path):
        return (next((h for h in reversed(self.hidden) if path == h
                      or path.startswith(h + "/")), None))

    def enter(self):
        """In the child: the namespaces and the mounts. Returns in the command's PID 1; the process
        in between waits for it and exits with its status, never returning."""
        enter_namespaces()
        self.mount_view()
        command = os.fork()
        if command != 0:
            wait_and_exit(command)
        # the process in between killed (a timeout): all of this ends
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)

    def enter_cloned(self):
        """In a child cloned into its namespaces (sandbox/clone.py), already their PID 1: the
        mounts."""
        self.mount_view()
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)

    def mount_view(self):
        """/tmp, /run and home made empty, and what the sandbox grants under them mounted back."""
        # the sources of the bind mounts, opened in the new mount namespace (a bind from a mount of
        # another namespace is EINVAL) and before anything is mounted over them
        self.fds = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in self.binds}
        for top in self.hidden:
            # An empty tmpfs that no Landlock rule names: the folders made on it for the bind mounts
            # grant nothing. (Landlock checks the path as seen, across mounts: a read-only folder
            # bind-mounted inside a writable one would be writable.)
            os.makedirs(top, exist_ok=True)
            mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for path in self.binds:
                if self.under_hidden(path) == top:
                    if os.path.isdir(f"/proc/self/fd/{self.fds[path]}"):
                        os.makedirs(path, exist_ok=True)
                    else:
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
                    # MS_REC would copy the empty tmpfs just mounted inside a grant that holds a
                    # hidden folder
                    holds = any(h == path or h.startswith(path + "/") for h in self.hidden)
                    mount(f"/proc/self/fd/{self.fds[path]}", path, None,
                          MS_BIND | (0 if holds else MS_REC))
        self.bind_empty()

    def bind_empty(self):
        """An empty read-only file bound over each file a Read deny rule covers (permissions.py):
        a command reads nothing there, cannot write, rename, unlink or hard-link it (EBUSY, EXDEV),
        and a link to it leads to the empty file too. A file gone since the run started is
        skipped; any other failure fails the command (closed, not open)."""
        if not self.unreadable:
            return
        empty = os.path.join(self.hidden[0], ".tinyharness-unreadable") if self.hidden else None
        if empty:
            os.close(os.open(empty, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o444))
        for path in self.unreadable:
            try:
                mount(empty or "/dev/null", path, None, MS_BIND)
            except FileNotFoundError:
                continue
            if empty:
                mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def wait_and_exit(pid):
    """The process between the harness and the command's namespace: it holds nothing open (Popen
    waits for its error pipe to close), waits for the command and leaves with its status."""
    os.closerange(3, 1 << 20)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
