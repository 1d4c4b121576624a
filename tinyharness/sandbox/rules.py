"""The rules one command's process applies to itself, between fork and exec, for good.

The problem: a rule applied by the harness to itself would confine the harness; applied after the
shell started, it would come too late. The mechanism: `subprocess.Popen(preexec_fn=...)` runs Python
in the forked child before `exec /bin/sh`, and there the child confines itself and everything it
will start (the rules are inherited and can never be lifted):

- **no new privileges** (`prctl(PR_SET_NO_NEW_PRIVS)`): a setuid program (`sudo`, `su`) gains
  nothing; running as root (or in a user namespace, which gives every capability), the capability
  bounding set is emptied too, so uid 0 keeps no capability after exec.
- **Landlock** (sandbox/landlock.py) grants write, create, remove, rename in the workspace and a
  private temporary folder (`TMPDIR`, deleted afterwards); read and execute: the system (`/usr`,
  `/bin`, `/sbin`, `/lib*`, `/opt`, `/proc`, the CPU list in `/sys`, `/etc` entry by entry without
  `shadow`, `gshadow`, `sudoers`, `ssh` and `ssl/private`), the Python that runs the harness (so
  `python3 -m pytest` works from a virtualenv), git's settings in the home folder (`~/.gitconfig`,
  `~/.config/git/{config,ignore,attributes}`: git refuses to run when it may not read them;
  `~/.git-credentials` stays closed), the workspace, and each `--sandbox-read PATH`; read and write:
  `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom` (no terminal: the command
  runs in a session of its own, without one, so it cannot type into yours with the TIOCSTI ioctl).
  Nothing else of the user's.
- **seccomp** (sandbox/seccomp.py), and the namespaces where they work (sandbox/namespaces.py).
- **death with the harness** (`PR_SET_PDEATHSIG`): a SIGKILL of the harness runs no handler and
  sweeps nothing, so the process it forked asks the kernel for SIGKILL when the harness's thread
  that started it ends (`die_with`; that thread waits for it: a hook's, or the main one for the
  spawner). With namespaces that process is the command's PID 1, or the one between it and the
  harness (whose end kills PID 1, whose end ends the namespace); without, a process stays between
  the harness and the command's group (`stay_between`) and kills the whole group once the harness
  is gone.
- **resource limits** (`setrlimit`): CPU seconds (the shell timeout, per process), 1 GiB per file
  (`yes > big.txt` stops there), no core files, and a task count (RLIMIT_NPROC, processes and
  threads). In a user namespace of its own the kernel counts the command's tasks alone, so the bound
  is exactly 256. Without one it counts every task of the user, so the bound is 256 more than the
  whole machine runs now (one read of /proc/loadavg: an upper bound of the user's), which a fixed
  number would not survive on a busy desktop.

Everything is prepared in the parent (the read list, the ctypes functions, the BPF program, even the
Landlock ruleset, whose file descriptor the child inherits) so that the child only makes system
calls; and it is prepared once a run (`Rules.for_command`: each command adds only its private TMPDIR
to the ruleset and sets its own limits). The caveat: `preexec_fn` is not safe when the parent has
other threads, because `fork` copies only the calling thread and a lock that another thread held
stays locked forever in the child; the code run in the child takes no lock (no import, no logging,
no print). The cleaner way is a helper that applies the rules and then execs the shell (`python -m
tinyharness.sandbox --exec ...`, kept for that comparison and for use by hand), but a fresh
interpreter costs about 40 ms a command, the `preexec_fn` way 5 to 12 ms (`python -m
benchmarks.sandbox`; most of it is `fork` of the whole harness, which `preexec_fn` forces).

What it cannot do: memory is not capped, CPU only per process by the CPU-seconds limit, and the disk
can still fill with many 1 GiB files. The kernel never enforces the task count for root (uid 0
outside the namespace): running as root, a fork bomb is NOT stopped. Reads of the system are
allowed, so a command sees which programs are installed and the world-readable parts of `/etc`;
running as root, root-owned files there are readable too.
"""
import copy
import os
import platform
import signal
import stat
import sys
from pathlib import Path

try:
    import resource  # POSIX only; this module is imported everywhere, and confines only on Linux
except ImportError:
    resource = None  # type: ignore[assignment]  # Rules exist only where Landlock does

from .landlock import (
    EXECUTE,
    FILE_ONLY_RIGHTS,
    READ_DIR,
    READ_FILE,
    TRUNCATE,
    WRITE_FILE,
    PathBeneathAttr,
    add_path_rule,
    create_ruleset,
    handled,
    restrict_self,
)
from .reaping import become_subreaper, child_lister, is_zombie, tree
from .seccomp import SockFilter, SockFprog, install, syscall_filter
from .syscalls import prctl

READ_EXECUTE = EXECUTE | READ_FILE | READ_DIR
# no ioctl: TIOCSTI on a terminal types into your shell
DEVICE_RIGHTS = READ_FILE | WRITE_FILE | TRUNCATE

SYSTEM_READ = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
               "/sys/devices/system/cpu"]
# in home
GIT_SETTINGS = [".gitconfig", ".config/git/config", ".config/git/ignore", ".config/git/attributes"]
ETC_SECRETS = ({"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh",
                "master.passwd"})
ETC_EXPANDED = {"ssl": {"private"}}  # folders of /etc granted entry by entry, minus these names
NEW_TASKS = 256  # RLIMIT_NPROC: this many processes and threads more than the machine runs now
FILE_BYTES = 1 << 30  # RLIMIT_FSIZE: no file written bigger than 1 GiB
# no terminal: none is ours
DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_PDEATHSIG = 38, 24, 1


def read_paths(extra=()):
    """The folders and files the sandbox may read and execute, besides the workspace."""
    paths = [p for p in SYSTEM_READ if os.path.exists(p)]
    home = os.path.realpath(os.path.expanduser("~"))
    # the Python running the harness (a venv too)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        prefix = os.path.realpath(prefix)
        # never a prefix that holds the whole home folder (or /)
        if not Path(home).is_relative_to(prefix):
            paths.append(prefix)
    paths += etc_entries("/etc")
    # git stops with "fatal" when it may not read the user's git settings
    paths += [os.path.join(home, name) for name in GIT_SETTINGS]
    return paths + [os.path.abspath(p) for p in extra]


def etc_entries(folder, skip=ETC_SECRETS):
    """/etc entry by entry, without the files that hold secrets: Landlock cannot carve them out of
    /etc."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    entries = []
    for name in names:
        if name in skip:
            continue
        path = os.path.join(folder, name)
        if name in ETC_EXPANDED and os.path.isdir(path) and not os.path.islink(path):
            entries += etc_entries(path, ETC_EXPANDED[name])
        else:
            entries.append(path)
    return entries


class Rules:
    """The confinement of one command. The parent builds the Landlock ruleset (a file descriptor the
    child inherits across fork) and everything else it can; the child only makes system calls."""

    def __init__(self, abi, write, read, cpu_seconds, max_processes, file_bytes=None,
                 isolation=None):
        file_bytes = FILE_BYTES if file_bytes is None else file_bytes
        self.isolation, self.cwd = isolation, write[0]  # the workspace
        self.fs, self.attr, self.attr_size = handled(abi)
        # ("/etc", READ_DIR): listing /etc, not reading it
        self.grants = [(p, self.fs) for p in write] + [(p, READ_EXECUTE) for p in read] + \
                      [(p, DEVICE_RIGHTS) for p in DEVICES] + [("/etc", READ_DIR)]
        self.limits = [(resource.RLIMIT_CPU, cpu_seconds), (resource.RLIMIT_FSIZE, file_bytes),
                       (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, max_processes)]
        self.filter = syscall_filter(platform.machine(), keep_in_group=isolation is None)
        self.program = (SockFilter * len(self.filter))(*self.filter)
        self.fprog = SockFprog(len(self.filter), self.program)
        self.last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text()) if os.path.exists(
            "/proc/sys/kernel/cap_last_cap") else 40
        # a user namespace gives them all
        self.drop_capabilities = os.geteuid() == 0 or isolation is not None
        self.ruleset = None
        self.proc_rule = PathBeneathAttr(READ_EXECUTE & self.fs, -1)
        self.owner = os.getpid()  # the harness: its commands die with it

    def build(self):
        """Create the Landlock ruleset and add every grant: in the parent, where it costs no fork
        time."""
        self.ruleset = create_ruleset(self.attr, self.attr_size)
        beneath = PathBeneathAttr()
        for path, rights in self.grants:
            self.grant(path, rights, beneath)
        return self

    def grant(self, path, rights, beneath=None):
        """Add one grant to the ruleset (a path that does not exist here, like /lib32, grants
        nothing)."""
        beneath = PathBeneathAttr() if beneath is None else beneath
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                # a right about folder entries on a file: the kernel says EINVAL
                rights &= FILE_ONLY_RIGHTS
            beneath.allowed_access, beneath.parent_fd = rights & self.fs, fd
            add_path_rule(self.ruleset, beneath)
        finally:
            os.close(fd)

    def for_command(self, tmpdir, cpu_seconds, max_processes, cwd):
        """These rules, built once a run, for one command: its private TMPDIR granted in the same
        ruleset, its own limits and isolation. The TMPDIR of an earlier command stays named in the
        ruleset, by its inode: that folder is gone, and a new one at that path is another inode,
        granted nothing."""
        one = copy.copy(self)
        one.grant(tmpdir, self.fs)
        one.limits = [(which, cpu_seconds if which == resource.RLIMIT_CPU else max_processes
                       if which == resource.RLIMIT_NPROC else value) for which,
                      value in self.limits]
        one.isolation = self.isolation.with_tmpdir(tmpdir) if self.isolation else None
        one.cwd, one.owner = cwd, os.getpid()
        return one

    def close(self):
        if self.ruleset is not None:
            os.close(self.ruleset)
            self.ruleset = None

    def apply(self, cloned=False):
        """Confine the calling process for good: in the child, between fork and exec. `cloned`: the
        child was cloned into its namespaces already (sandbox/clone.py), and only mounts its
        view."""
        if self.isolation:  # from here on, in the command's PID namespace
            self.isolation.enter_cloned() if cloned else self.isolation.enter()
            # its own /proc: a new inode, so a rule of its own
            fd = os.open("/proc", os.O_PATH | os.O_CLOEXEC)
            self.proc_rule.parent_fd = fd
            add_path_rule(self.ruleset, self.proc_rule)
            os.close(fd)
            # the workspace as mounted in here: the old cwd leads under the hidden /tmp
            os.chdir(self.cwd)
        for which, value in self.limits:
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if self.drop_capabilities:  # root: after exec, uid 0 gets only what the bounding set allows
            for cap in range(self.last_cap + 1):
                prctl(PR_CAPBSET_DROP, cap)
        restrict_self(self.ruleset)
        install(self.fprog)  # after no_new_privs, which an unprivileged filter needs

    def apply_in_child(self):
        """apply(), or exit 126 with the reason on the command's output: a command never runs
        unconfined. First it makes sure it dies with the harness (a cloned child does that at its
        start: sandbox/clone.py)."""
        try:
            die_with(self.owner) if self.isolation else stay_between(self.owner)
            self.apply()
        except BaseException as e:  # noqa: BLE001 - the child exits, whatever stopped it
            os.write(2, "[sandbox] could not confine the command, so it did not run: "
                        f"{e}\n".encode())
            os._exit(126)


def die_with(owner, signum=signal.SIGKILL):
    """In a child between fork and exec: `signum` when the thread that started it ends; exit now if
    `owner` (the harness's pid, taken before the fork) is gone already."""
    prctl(PR_SET_PDEATHSIG, int(signum))
    if os.getppid() != owner:  # it died before the line above: no signal will come
        os._exit(1)


def stay_between(owner):
    """In a child between fork and exec that leads its process group (Popen's preexec_fn, after
    setsid): fork. The child returns, to exec the command; this process stays between the harness
    and it, holding nothing open, waits for it and leaves with its status. When the harness dies
    first, it kills its whole group - the command and all it started - and, as a subreaper, what
    left the group (setsid, setpgid, a double fork), then itself. Never returns in this process."""
    watched = {signal.SIGTERM, signal.SIGCHLD}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    die_with(owner, signal.SIGTERM)
    become_subreaper()  # what the command detaches (setsid, setpgid, a double fork) stays below
    command = os.fork()
    if command == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)  # the command gets its signals
        return
    os.closerange(0, 1 << 20)
    while True:
        if signal.sigwait(watched) == signal.SIGTERM:
            # its starting thread ended, or somebody sent SIGTERM: only the harness's end counts
            if os.getppid() != owner:
                end_below()
            continue
        done, status = os.waitpid(command, os.WNOHANG)
        if done:
            leave_as(status)


def end_below():
    """The harness is gone: kill every process below this one - the command's group and what left
    it (setsid, setpgid: still below us; a double fork's orphan: handed back to us, a subreaper),
    again until none is left - then the group, this process included."""
    me = os.getpid()
    for _ in range(100):
        children = child_lister()
        victims = {pid for pid in tree(children(me), children) if not is_zombie(pid)}
        if not victims:
            break
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # the dead below us, collected so that the next look sees the living
        except ChildProcessError:
            pass
    os.killpg(0, signal.SIGKILL)


def leave_as(status):
    """Exit as the command did: with its code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        except (OSError, ValueError):  # SIGKILL: its action cannot be set, nor blocked
            pass
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def tasks_now():
    """How many tasks (processes and threads) the whole machine runs now, from /proc/loadavg
    ("5/812"). RLIMIT_NPROC counts the user's tasks, threads included, and we cannot cheaply count
    only those: the machine's total is an upper bound, so `tasks_now() + 256` never stops the first
    fork."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 4096
