"""One clone instead of two forks: the command starts as PID 1 of its new namespaces.

The problem: with namespaces (sandbox/namespaces.py), a command used to cost two forks of the
harness. `subprocess.Popen` forks; the child unshares a user, mount, PID, network and IPC namespace;
a new PID namespace takes effect only for the next child, so it forks again, and the process in
between waits. A fork copies the page tables of everything the process holds - the harness with
`requests` loaded holds tens of MiB - so each fork, and each exit, costs milliseconds: the two forks
were most of what the sandbox added to a command (benchmarks/sandbox.py).

The mechanism: `clone3()` makes the child in its new namespaces at once, so it is already PID 1 of
its PID namespace: one copy of the harness, no process in between. `CloneStart` is a
`subprocess.Popen` whose `_execute_child` clones instead of forking; everything else (pipes, wait,
kill, returncode) is Popen's own. The system call is made with the interpreter lock held (a ctypes
`PyDLL`) and between `PyOS_BeforeFork()` and `PyOS_AfterFork_*()`, as `os.fork()` does. The parent
writes the child's uid and gid maps (a process may not write its own here), then lets it go on: it
mounts its file system view, applies Landlock, seccomp and the limits, and execs.

What it cannot do: run where clone3 is missing (Linux before 5.3) or refused (a container's seccomp
profile): then the first command finds out, and every command goes the two-fork way (`works`).
Be safe beside other threads: the C library's fork takes its allocator's and loader's locks
first, a raw clone3 cannot, and a child could wait forever on one that another thread held at
that instant; so only a harness with one thread clones (sandbox/__init__.py, `launch`), and one
running parallel calls or hooks together forks, as before. The child asks for SIGKILL when the
thread that cloned it ends (PR_SET_PDEATHSIG; the only thread, which waits for it): as PID 1 it
takes its namespace with it, so a killed harness leaves nothing of it.
"""
import ctypes
import inspect
import os
import select
import signal
import subprocess
import sys

# the same number on every architecture (system calls added since Linux 5.3 share one table)
SYS_CLONE3 = 435
SIGCHLD = int(signal.SIGCHLD)  # the signal the parent gets when the child ends, as after fork()
PR_SET_PDEATHSIG = 1
# loaded here, not in the child: the child takes no lock (the loader's) before it execs
if sys.platform == "linux":  # a statement, not an expression: mypy then knows LIBC is there
    LIBC = ctypes.CDLL(None, use_errno=True)
else:
    LIBC = None
_state: dict[str, bool | None] = {"works": None}  # None until the first clone says
NEEDED = ("args", "env", "pass_fds", "start_new_session", "p2cread", "p2cwrite", "c2pread",
          "c2pwrite", "errread", "errwrite")


class CloneArgs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("flags", "pidfd", "child_tid", "parent_tid",
                                                     "exit_signal",
                                                     "stack", "stack_size", "tls", "set_tid",
                                                     "set_tid_size", "cgroup")]


def works():
    """False once clone3 has been refused here; None while untried; True once it made a child."""
    return _state["works"]


def clone(flags):
    """fork(), into new namespaces: the child's pid in the parent, 0 in the child. OSError when
    refused."""
    # PyDLL: the interpreter lock stays held across the call
    locked = ctypes.PyDLL(None, use_errno=True)
    locked.syscall.restype = ctypes.c_long
    args = CloneArgs(flags=flags, exit_signal=SIGCHLD)
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = (locked.syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args),
                          ctypes.c_size_t(ctypes.sizeof(args))))
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
        return 0
    code = ctypes.get_errno()
    ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(code, os.strerror(code), "clone3")
    return pid


def write_id_maps(pid):
    """The child's user namespace maps our own uid and gid to themselves (setgroups denied
    first)."""
    uid, gid = os.geteuid(), os.getegid()
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


class CloneStart(subprocess.Popen):
    """Popen that starts `args` as PID 1 of new namespaces, confined by `rules`
    (sandbox/rules.py, Rules)."""

    def __init__(self, args, rules, flags, **popen):
        self._rules, self._flags = rules, flags
        super().__init__(args, **popen)

    def _execute_child(self, *args, **kwargs):
        try:  # Popen's private method: a Python whose names differ goes the two-fork way
            # (typeshed knows no private names: the two ignores; this Python's are checked here)
            private = subprocess.Popen._execute_child  # type: ignore[attr-defined]
            given = inspect.signature(private).bind(self, *args, **kwargs).arguments
            given = {name: given[name] for name in NEEDED}
            given["close"] = self._close_pipe_fds  # type: ignore[attr-defined]
        except (TypeError, KeyError, AttributeError) as e:
            _state["works"] = False
            raise OSError(38, "this Python's Popen is not the one sandbox_clone knows: "
                              f"{e}") from None
        pid = clone_and_start(self._flags, given, self._rules)
        _state["works"] = True
        self.pid, self._child_created = pid, True
        given["close"](*(given[name] for name in ("p2cread", "p2cwrite", "c2pread", "c2pwrite",
                                                  "errread", "errwrite")))


    def end_namespace(self):
        """Once it is killed, the kernel ends every process of its PID namespace (it is their PID
        1), and none can leave it: nothing to look for afterwards."""
        if self.returncode is None:  # not reaped: the number is still this process's
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def clone_and_start(flags, given, rules):
    """Clone the child, write its id maps, let it go on, and return its pid once it has exec'd."""
    ready_read, ready_write = os.pipe()
    exec_read, exec_write = os.pipe()  # close-on-exec: at its end, the child has exec'd
    try:
        pid = clone(flags)
    except OSError:
        _state["works"] = False
        for fd in (ready_read, ready_write, exec_read, exec_write):
            os.close(fd)
        raise
    if pid == 0:
        os.close(ready_write)
        os.close(exec_read)
        in_the_child(given, rules, ready_read)  # never returns
    os.close(ready_read)
    os.close(exec_write)
    try:
        write_id_maps(pid)
        os.write(ready_write, b"go")
        # As Popen does: return once the child has exec'd, so that it holds none of our descriptors
        # (another command's pipe it still held would keep that pipe open) when the caller goes on.
        # `ready` stays open until then: the child sees it closed only if we died (in_the_child).
        while os.read(exec_read, 512):
            pass
    except OSError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(ready_write)
        os.close(exec_read)
    return pid


def in_the_child(given, rules, ready):
    """PID 1 of the new namespaces: standard streams, a session, the rules, exec. Never returns."""
    try:
        # killed when the thread that cloned us ends (the harness killed): PID 1, so the whole
        # namespace with us. That thread waits for us (sandbox/rules.py, `die_with`).
        if LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if os.read(ready, 2) != b"go":  # the parent could not write our id maps: nothing may run
            os._exit(126)
        # its end still open, or the parent died before the prctl above and no signal will come
        if select.select([ready], [], [], 0)[0]:
            os._exit(126)
        os.close(ready)
        for fd, target in ((given["p2cread"], 0), (given["c2pwrite"], 1), (given["errwrite"], 2)):
            if fd == target:
                os.set_inheritable(fd, True)
            elif fd != -1:
                os.dup2(fd, target)
        if given["start_new_session"]:
            os.setsid()
        # Python ignores them; a shell's commands expect the default
        for name in ("SIGPIPE", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        rules.apply(cloned=True)
        for fd in given["pass_fds"]:
            os.set_inheritable(fd, True)
        keep = sorted({0, 1, 2, *given["pass_fds"]})
        for low, high in zip(keep, keep[1:]
                             + [os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 20]):
            os.closerange(low + 1, high)
        argv = given["args"]
        os.execve(argv[0], argv, os.environ if given["env"] is None else given["env"])
    except BaseException as e:  # noqa: BLE001 - the child exits, whatever stopped it
        try:
            os.write(2, "[sandbox] could not confine the command, so it did not run: "
                        f"{e}\n".encode())
        finally:
            os._exit(126)
