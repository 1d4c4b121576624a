"""The sandbox: what m3's regex cannot stop, the kernel does.

m3 taught, honestly, that a command policy is text matching. `x=rm; $x -rf "$D"`, `find "$D" -delete`,
a script written and then run, `git -c core.fsmonitor=...`, a hard link, `/proc/self/root/...`: the
words never hold `rm -rf`, so no regex sees them. What every one of them has to do in the end is ask
the kernel: open this file for writing, unlink that one, connect a socket, send a signal. This module
makes the kernel say no, at the moment of the system call, whatever the spelling.

Each `shell` command runs in a child process that, after `fork` and before `exec /bin/sh`, confines
itself and everything it will start (the rules are inherited and can never be lifted):

- **no new privileges** (`prctl(PR_SET_NO_NEW_PRIVS)`): a setuid program (`sudo`, `su`) gains nothing;
  running as root, the capability bounding set is emptied too, so uid 0 keeps no capability after exec.
- **Landlock** (Linux 5.13+, unprivileged, through three system calls made with ctypes): the ruleset
  declares every file right the running kernel knows (probed with `landlock_create_ruleset(NULL, 0,
  VERSION)`) and then grants only these:
  write, create, remove, rename: the workspace and a private temporary folder (`TMPDIR`, deleted
  afterwards); read and execute: the system (`/usr`, `/bin`, `/sbin`, `/lib*`, `/opt`, `/proc`, the
  CPU list in `/sys`, `/etc` entry by entry without `shadow`, `gshadow`, `sudoers`, `ssh` and
  `ssl/private`), the Python that runs the harness (so `python3 -m pytest` works from a virtualenv),
  git's settings in the home folder (`~/.gitconfig`, `~/.config/git/{config,ignore,attributes}`: git
  refuses to run when it may not read them; `~/.git-credentials` stays closed),
  the workspace, and each `--sandbox-read PATH`; read and write: `/dev/null`, `/dev/zero`,
  `/dev/full`, `/dev/random`, `/dev/urandom` (no terminal: the command runs in a session of its own,
  without one, so it cannot type into yours with the TIOCSTI ioctl). Nothing else of the user's: not the home
  folder, not a folder beside the workspace. Landlock ABI 4 adds TCP: no rule grants a port, so every
  TCP `connect` and `bind` fails. ABI 6 adds scoping: no signal to a process outside the sandbox
  (`kill -9 <the harness>` fails) and no abstract UNIX socket outside it.
- **a seccomp filter** (a BPF program of about 90 instructions, `prctl(PR_SET_SECCOMP)`), for what
  Landlock does not scope: `socket()` fails for every family but `AF_UNIX`, so UDP, raw sockets and
  netlink are gone too (Landlock alone lets UDP out), and `io_uring_setup` fails, since io_uring can
  open sockets and files without those calls. No process outside can be changed: `prlimit64` on any
  pid but 0 (itself), `setpriority` and `ioprio_set` on anything but itself or for a whole user,
  `sched_setaffinity`, `sched_setscheduler`, `sched_setparam` and `sched_setattr` on another pid all
  fail with EPERM (`prlimit --pid $PPID --nofile=0:0` would take the harness's file descriptors; `renice`
  and `taskset` work on the user's other processes). And no setuid or setgid file: `chmod`, `fchmod`,
  `fchmodat`, `fchmodat2`, `open`, `openat`, `creat`, `mknod`, `mknodat` with either bit in the mode
  fail (as root, `chmod 4755` would leave a program that runs as root for whoever starts it later);
  `openat2`, whose mode sits where BPF cannot read it, answers ENOSYS, and libc falls back to `openat`.
  Why not a network namespace (`unshare(CLONE_NEWUSER | CLONE_NEWNET)`)? It would cut the network just
  as well, but unprivileged user namespaces are switched off on many systems (Ubuntu 24.04's AppArmor
  restricts them, hardened kernels disable them); seccomp needs no privilege and no setup on any
  kernel since 3.5, and costs nothing measurable at run time.
- **resource limits** (`setrlimit`): CPU seconds (the shell timeout, per process), 1 GiB per file
  (`yes > big.txt` stops there), no core files, and a task count (RLIMIT_NPROC, processes and threads).
  In a user namespace of its own the kernel counts the command's tasks alone, so the bound is exactly
  256. Without one it counts every task of the user, so the bound is 256 more than the whole machine
  runs now (one read of /proc/loadavg: an upper bound of the user's), which a fixed number would not
  survive on a busy desktop. The kernel never enforces it for root (uid 0 outside the namespace):
  running as root, a fork bomb is NOT stopped.
- **an allowlist environment**: commands get `PATH`, `HOME`, `LANG`, `LANGUAGE`, `LC_*`, `TERM`, `USER`,
  `LOGNAME`, `SHELL`, `TZ`, and what `--sandbox-env NAME` adds; `TMPDIR` is the private folder, `PWD` the
  workspace. (Not `PYTHONSAFEPATH`: `python -m unittest test_x` must import the workspace's `test_x.py`,
  and whatever a command imports from the workspace runs inside the same sandbox.) Nothing else: a denylist of secret-looking names leaks `DATABASE_URL`,
  `GITHUB_PAT`, `MYSQL_PWD`... `SSH_AUTH_SOCK`, `TMUX`, `STY`, `DBUS_SESSION_BUS_ADDRESS` and any value
  that names a socket never pass, even when asked for.
- **namespaces, where unprivileged user namespaces work** (most distributions; not where AppArmor or a
  hardened kernel switches them off: then one `[sandbox]` line at start says what is shared): a user,
  mount, PID and network namespace of its own. `/tmp`, `/run` and the home folder are empty in it, with
  only what the sandbox grants mounted back (the workspace, the private TMPDIR, a virtualenv, git's
  settings): an SSH agent's socket (`/tmp/ssh-*/agent.*`, `/run/user/UID/...`, `~/.1password/agent.sock`),
  a tmux or screen server's, D-Bus's are not there to connect to, even though `/proc/net/unix` would have
  listed them (in its own network namespace it lists nothing). The command is PID 1 of its PID
  namespace, with a /proc of its own: no process outside can be seen or named, and when it ends the
  kernel ends every process left in the namespace, however it forked.
- **no process left behind**: with a PID namespace the kernel does it (above). Without one, seccomp
  refuses `setsid` and `setpgid`, so everything the command starts stays in its process group, and the
  one `killpg` at its end is exact: the kernel fails a fork that races with a group kill, so even a
  fork-and-exit chain (thousands of generations a second) cannot outrun it, where a sweep of the
  process tree can be outrun. As a second net the harness is a child subreaper
  (`prctl(PR_SET_CHILD_SUBREAPER)`) and walks `/proc` for every descendant and every orphan it adopted
  during the command, and kills them. The price without namespaces: a program that insists on a
  session of its own (a daemon, `setsid`) does not start.
- **`.git` as a whole, and `.tinyharness`**: Landlock grants and never carves, so `.git` cannot be made
  read-only inside a writable workspace, and git runs programs named in it (core.fsmonitor, hooks,
  filters) at the user's next `git`, outside any sandbox. Instead the harness snapshots, before the
  command, everything git reads to run code - `config`, `config.worktree`, `commondir`, `gitdir`,
  `info/attributes`, every `hooks/` folder, at any depth (submodules in `.git/modules/*`, linked
  worktrees in `.git/worktrees/*`), every symbolic link in `.git`, and `.git`'s own identity (its
  inode) - and afterwards puts it back: `.git` moved (`mv .git .git-real` plus a `gitdir:` file) is
  found by its inode and moved back, a `.git` file or link appearing where there was none is removed,
  a changed file is restored, a new hook removed (a new `*.sample` file, which git never runs, may
  stay), a config kept only when every key it gained is harmless (`user.name`, `remote.origin.url`...:
  a key that runs a program, like `core.fsmonitor` or `core.hooksPath`, is never on that list). A
  folder the command made unreadable (`chmod 111 .git/hooks`) is given back to its owner before the
  check and its mode restored after. If the check or the restore fails (no file descriptors left, a
  full disk), the run stops with exit status 1 and the console says what to check: the model is never
  told "all is well". The file tools refuse any path through a `.git` or `.tinyharness` component, at
  any depth, also when a link inside the workspace (`g -> .git`) leads there. The limits of undoing:
  objects, refs and logs are not watched (they run nothing); a `.git` made by the command in a
  sub-folder is not watched (run git there only if you made it); a hook planted and triggered within
  one command (`... > .git/hooks/pre-commit && git commit`) runs before it is undone, but inside the
  sandbox; what is undone is what would run later, outside it.

The model only reads text, and `Permission denied` alone sends a small model looking for another
way (sudo, another path): when a command's output shows a refusal, the result ends with one
`[sandbox]` line saying what the sandbox allows and that the task should say what it needs.

**Fail closed.** On a kernel without Landlock, or with an ABI older than 6 (kernel 6.12; scoping is
the newest rule above), or on an architecture the seccomp filter does not know, `shell` refuses to run
anything and says why; `tinyharness run --sandbox off` runs commands unconfined, with a warning on
every run.

**How the rules get into the child.** `subprocess.Popen(preexec_fn=...)` runs Python in the forked
child before `exec`: the rules are applied there, with everything prepared in the parent (ctypes
functions, the BPF program) so that the child only makes system calls. The caveat: `preexec_fn` is not
safe when the parent has other threads, because `fork` copies only the calling thread and a lock that
another thread held stays locked forever in the child; the code run in the child takes no lock (no
import, no logging, no print). The cleaner way is a helper that applies the rules and then execs the
shell (`python -m tinyharness.sandbox --exec ...`, kept here for that comparison and for use by
hand), but a fresh interpreter costs about 40 ms a command, the `preexec_fn` way 5 to 12 ms
(`python -m benchmarks.sandbox`; most of it is `fork` of the whole harness, which `preexec_fn` forces). To keep the child's part small, the parent also builds the
Landlock ruleset: the child inherits its file descriptor and only calls `landlock_restrict_self`.

**What it still cannot see.** Anything inside the workspace is fair game: a command can delete or
rewrite every file there (use git), including hooks a repository keeps there (`core.hooksPath =
.husky`) and files another tool runs later (a Makefile). Reads of the system are allowed, so a command
sees which programs are installed and the world-readable parts of `/etc`; running as root, root-owned
files there are readable too. `/tmp` itself is closed (empty, with namespaces): a program that ignores
`TMPDIR` fails there. `AF_UNIX` sockets stay open, and Landlock (up to ABI 7) does not check connecting
to a socket file: with namespaces only those outside `/tmp`, `/run` and the home folder are left to
reach; without them every one the user may use (an SSH agent's, tmux's, `/var/run/docker.sock`). The
user's command hooks and MCP servers, and the harness itself (its `view_image` URLs, its model
server), run unconfined. Memory is not capped, CPU only per process by the CPU-seconds limit, and the
disk can still fill with many 1 GiB files; as root, the task limit is not enforced. What the command
prints, and what the model reads in the workspace, may still carry a prompt injection: the kernel stops
what a command does, not what the model believes. And it is Linux only. (The README's sandbox table
names, for each rule, the test that attacks it, and lists what a user can do about each of these.)

**Check it yourself** (the sandbox is on by default):
    tinyharness run --yes "run: x=rm; \\$x -rf ~/some-folder"   -> nothing to delete: home is empty in there
    tinyharness run --yes "run: python3 -c 'import socket; socket.socket(2, 2)'"   -> PermissionError
or without a model (Landlock and seccomp, no namespaces): `python -m tinyharness.sandbox --exec
WORKSPACE -- sh -c 'touch ~/x'`.
"""
import ctypes
import hashlib
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import resource  # POSIX only; this module is imported everywhere, and confines only on Linux
except ImportError:
    resource = None

# --- Landlock: constants from <linux/landlock.h> -------------------------------------------------------
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # every arch
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
MIN_ABI = 6  # scoping (signals, abstract sockets) is the newest right this sandbox relies on

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
ALL_FS_RIGHTS = (1 << 16) - 1  # ABI 5 and later
FILE_ONLY_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file may grant
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ_EXECUTE = EXECUTE | READ_FILE | READ_DIR
DEVICE_RIGHTS = READ_FILE | WRITE_FILE | TRUNCATE  # no ioctl: TIOCSTI on a terminal types into your shell

SYSTEM_READ = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
               "/sys/devices/system/cpu"]
GIT_SETTINGS = [".gitconfig", ".config/git/config", ".config/git/ignore", ".config/git/attributes"]  # in home
ETC_SECRETS = {"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssh", "master.passwd"}
ETC_EXPANDED = {"ssl": {"private"}}  # folders of /etc granted entry by entry, minus these names
NEW_TASKS = 256  # RLIMIT_NPROC: this many processes and threads more than the machine runs now
FILE_BYTES = 1 << 30  # RLIMIT_FSIZE: no file written bigger than 1 GiB
DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]  # no terminal: none is ours


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


# --- seccomp: a BPF program that checks a few system calls' arguments -------------------------------------
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 38, 24, 36
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
EPERM, EACCES, ENOSYS = 1, 13, 38
AF_UNIX = 1
SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
# machine -> (AUDIT_ARCH_*, whether x32 numbers must be refused, {system call: its number})
ARCHITECTURES = {
    "x86_64": (0xC000003E, True, {
        "socket": 41, "io_uring_setup": 425, "prlimit64": 302, "setpriority": 141, "sched_setaffinity": 203,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314, "ioprio_set": 251,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "open": 2, "creat": 85, "openat": 257,
        "openat2": 437, "mknod": 133, "mknodat": 259, "setsid": 112, "setpgid": 109}),
    "aarch64": (0xC00000B7, False, {
        "socket": 198, "io_uring_setup": 425, "prlimit64": 261, "setpriority": 140, "sched_setaffinity": 122,
        "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274, "ioprio_set": 30,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "openat": 56, "openat2": 437, "mknodat": 33,
        "setsid": 157, "setpgid": 154}),
}
# Without a PID namespace, what the command starts must stay in its process group: one kill of the group
# is then exact (the kernel fails a fork that races with it), where a sweep of the process tree can be
# outrun by a fork-and-exit chain. So setsid and setpgid fail there (a daemon that insists on its own
# session does not start).
KEEP_IN_GROUP = [("setsid", None, "always", 0, EPERM), ("setpgid", None, "always", 0, EPERM)]
# (system call, argument, test, errno): the call fails with errno when the test holds for the argument.
#   "not": the argument is anything but the value (a process other than the caller: pid/who 0 is "me");
#   "is": the argument is the value; "bits": it has one of these bits (a mode with setuid or setgid);
#   "always": every call.
CHECKS = [
    ("socket", 0, "not", AF_UNIX, EACCES),            # only AF_UNIX: no TCP, UDP, raw, netlink (Landlock lets UDP out)
    ("io_uring_setup", None, "always", 0, ENOSYS),    # io_uring opens sockets and files without these calls
    ("openat2", None, "always", 0, ENOSYS),           # its mode sits in a struct BPF cannot read; libc falls back
    ("prlimit64", 0, "not", 0, EPERM),                # another process's limits: `prlimit --pid P --nofile=0:0`
    ("setpriority", 0, "is", 2, EPERM),               # PRIO_USER: every process of the user, even with who 0
    ("setpriority", 1, "not", 0, EPERM),              # renice of another process or group
    ("sched_setaffinity", 0, "not", 0, EPERM),        # taskset -p
    ("sched_setscheduler", 0, "not", 0, EPERM),       # chrt -p
    ("sched_setparam", 0, "not", 0, EPERM),
    ("sched_setattr", 0, "not", 0, EPERM),
    ("ioprio_set", 0, "is", 3, EPERM),                # IOPRIO_WHO_USER: every process of the user
    ("ioprio_set", 1, "not", 0, EPERM),               # ionice -p
    ("chmod", 1, "bits", SET_ID_BITS, EPERM),          # a setuid file left in the workspace runs as its owner
    ("fchmod", 1, "bits", SET_ID_BITS, EPERM),
    ("fchmodat", 2, "bits", SET_ID_BITS, EPERM),
    ("fchmodat2", 2, "bits", SET_ID_BITS, EPERM),
    ("open", 2, "bits", SET_ID_BITS, EPERM),           # created with the bits already set
    ("creat", 1, "bits", SET_ID_BITS, EPERM),
    ("openat", 3, "bits", SET_ID_BITS, EPERM),
    ("mknod", 1, "bits", SET_ID_BITS, EPERM),
    ("mknodat", 2, "bits", SET_ID_BITS, EPERM),
]


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def syscall_filter(machine, keep_in_group=False):
    """The BPF program, or None on an architecture it does not know. It reads struct seccomp_data: the
    system call's number at offset 0, the architecture at 4, argument i's low 32 bits at 16 + 8 i (every
    argument checked here is an int, a pid or a mode: the high half does not count). One block per
    checked call; every jump goes forward to one of the four endings."""
    if machine not in ARCHITECTURES:
        return None
    arch, has_x32, numbers = ARCHITECTURES[machine]
    blocks = [[(BPF_LD_W_ABS, 0, 0, 4), (BPF_JEQ_K, 1, 0, arch),    # native? go on : kill (a 32-bit syscall table)
               (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
               (BPF_LD_W_ABS, 0, 0, 0)]]                              # the system call's number, kept in A
    if has_x32:
        blocks.append([(BPF_JGE_K, "ENOSYS", 0, 0x40000000)])         # x32 numbers: as if they did not exist
    for name, arg, test, value, errno_ in CHECKS + (KEEP_IN_GROUP if keep_in_group else []):
        if name not in numbers:
            continue  # aarch64 has no chmod, open, creat, mknod: only the *at forms
        deny = {EPERM: "EPERM", EACCES: "EACCES", ENOSYS: "ENOSYS"}[errno_]
        if test == "always":
            blocks.append([(BPF_JEQ_K, deny, 0, numbers[name])])
            continue
        check = {"not": (BPF_JEQ_K, 0, deny, value), "is": (BPF_JEQ_K, deny, 0, value),
                 "bits": (BPF_JSET_K, deny, 0, value)}[test]
        blocks.append([(BPF_JEQ_K, 0, 3, numbers[name]),              # this call? look at its argument : next block
                       (BPF_LD_W_ABS, 0, 0, 16 + 8 * arg), check,     # refused, or on to the next check
                       (BPF_LD_W_ABS, 0, 0, 0)])                      # the number back in A
    endings = {"ALLOW": SECCOMP_RET_ALLOW, "EPERM": SECCOMP_RET_ERRNO | EPERM,
               "EACCES": SECCOMP_RET_ERRNO | EACCES, "ENOSYS": SECCOMP_RET_ERRNO | ENOSYS}
    program = [instruction for block in blocks for instruction in block]
    program.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))              # no check matched
    ending_at = {}
    for label, action in endings.items():
        ending_at[label] = len(program)
        program.append((BPF_RET_K, 0, 0, action))
    resolved = []
    for i, (code, jt, jf, k) in enumerate(program):
        jt = ending_at[jt] - i - 1 if isinstance(jt, str) else jt
        jf = ending_at[jf] - i - 1 if isinstance(jf, str) else jf
        resolved.append((code, jt, jf, k))
    return resolved


# --- system calls through ctypes ---------------------------------------------------------------------------
libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def syscall(number, *args):
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def prctl(option, *args):
    padded = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args] + [ctypes.c_ulong(0)] * (4 - len(args))
    if libc.prctl(ctypes.c_int(option), *padded) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def landlock_abi():
    """The Landlock ABI version of the running kernel, 0 when it has none (or Landlock is disabled)."""
    if sys.platform != "linux":
        return 0
    try:
        return syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:  # ENOSYS: no Landlock in this kernel; EOPNOTSUPP: built in but switched off
        return 0


def unavailable_reason(abi=None, machine=None):
    """Why this machine cannot run the sandbox, in one paragraph, or None when it can."""
    abi = landlock_abi() if abi is None else abi
    machine = platform.machine() if machine is None else machine
    if sys.platform != "linux":
        missing = f"it needs Linux, and this is {sys.platform}"
    elif abi == 0:
        missing = (f"this kernel ({platform.release()}) has no Landlock, or it is switched off (Landlock came in "
                   "Linux 5.13; check that `lsm=` on the kernel command line includes landlock)")
    elif abi < MIN_ABI:
        missing = (f"this kernel ({platform.release()}) has Landlock ABI {abi}, and the sandbox needs ABI {MIN_ABI} "
                   "(Linux 6.12) to keep signals inside the sandbox; ABI 4 (6.7) is needed to cut TCP")
    elif syscall_filter(machine) is None:
        missing = f"its seccomp filter knows x86_64 and aarch64, not {machine}"
    else:
        return None
    return (f"the shell is sandboxed and the sandbox cannot run here: {missing}. Nothing ran. To run commands "
            "without a sandbox (the command regex is then all that stands between the model and your files), "
            "start tinyharness again with --sandbox off, and read every command before you approve it.")


# --- the rules the child applies to itself -----------------------------------------------------------------
def read_paths(extra=()):
    """The folders and files the sandbox may read and execute, besides the workspace."""
    paths = [p for p in SYSTEM_READ if os.path.exists(p)]
    home = os.path.realpath(os.path.expanduser("~"))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:  # the Python running the harness (a venv too)
        prefix = os.path.realpath(prefix)
        if not Path(home).is_relative_to(prefix):  # never a prefix that holds the whole home folder (or /)
            paths.append(prefix)
    paths += etc_entries("/etc")
    # git stops with "fatal" when it may not read the user's git settings
    paths += [os.path.join(home, name) for name in GIT_SETTINGS]
    return paths + [os.path.abspath(p) for p in extra]


def etc_entries(folder, skip=ETC_SECRETS):
    """/etc entry by entry, without the files that hold secrets: Landlock cannot carve them out of /etc."""
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

    def __init__(self, abi, write, read, cpu_seconds, max_processes, file_bytes=None, isolation=None):
        file_bytes = FILE_BYTES if file_bytes is None else file_bytes
        self.isolation, self.cwd = isolation, write[0]  # the workspace
        self.fs = ALL_FS_RIGHTS if abi >= 5 else FS_RIGHTS_BY_ABI[abi]
        self.attr = RulesetAttr(self.fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                                SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0)
        self.attr_size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        self.grants = [(p, self.fs) for p in write] + [(p, READ_EXECUTE) for p in read] + \
                      [(p, DEVICE_RIGHTS) for p in DEVICES] + [("/etc", READ_DIR)]  # listing /etc, not reading it
        self.limits = [(resource.RLIMIT_CPU, cpu_seconds), (resource.RLIMIT_FSIZE, file_bytes),
                       (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, max_processes)]
        self.filter = syscall_filter(platform.machine(), keep_in_group=isolation is None)
        self.program = (SockFilter * len(self.filter))(*self.filter)
        self.fprog = SockFprog(len(self.filter), self.program)
        self.last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text()) if os.path.exists(
            "/proc/sys/kernel/cap_last_cap") else 40
        self.drop_capabilities = os.geteuid() == 0 or isolation is not None  # a user namespace gives them all
        self.ruleset = None
        self.proc_rule = PathBeneathAttr(READ_EXECUTE & self.fs, -1)

    def build(self):
        """Create the Landlock ruleset and add every grant: in the parent, where it costs no fork time."""
        self.ruleset = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(self.attr), ctypes.c_size_t(self.attr_size),
                               ctypes.c_uint32(0))
        beneath = PathBeneathAttr()
        for path, rights in self.grants:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist here (no /lib32) grants nothing
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= FILE_ONLY_RIGHTS  # a right about folder entries on a file: the kernel says EINVAL
                beneath.allowed_access, beneath.parent_fd = rights & self.fs, fd
                syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(self.ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                        ctypes.byref(beneath), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        return self

    def close(self):
        if self.ruleset is not None:
            os.close(self.ruleset)
            self.ruleset = None

    def apply(self):
        """Confine the calling process for good: in the child, between fork and exec."""
        if self.isolation:
            self.isolation.enter()  # from here on, in the command's PID namespace
            fd = os.open("/proc", os.O_PATH | os.O_CLOEXEC)  # its own /proc: a new inode, so a rule of its own
            self.proc_rule.parent_fd = fd
            syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(self.ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                    ctypes.byref(self.proc_rule), ctypes.c_uint32(0))
            os.close(fd)
            os.chdir(self.cwd)  # the workspace as mounted in here: the old cwd leads under the hidden /tmp
        for which, value in self.limits:
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if self.drop_capabilities:  # root: after exec, uid 0 gets only what the bounding set allows
            for cap in range(self.last_cap + 1):
                prctl(PR_CAPBSET_DROP, cap)
        syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(self.ruleset), ctypes.c_uint32(0))
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.fprog))

    def apply_in_child(self):
        """apply(), or exit 126 with the reason on the command's output: a command never runs unconfined."""
        try:
            self.apply()
        except BaseException as e:
            os.write(2, f"[sandbox] could not confine the command, so it did not run: {e}\n".encode())
            os._exit(126)


# --- namespaces: a private /tmp, /run and home, and a process list of its own ----------------------------------
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
_namespaces_work = None
NOT_ISOLATED = ("[sandbox] user namespaces are switched off here: commands are confined by Landlock and seccomp, but "
                "share /tmp, /run and the process list with you (a socket there, like an SSH agent's, can be "
                "reached), and what they leave running is ended by a sweep, not by the kernel.")


def mount(source, target, fstype, flags, data=None):
    encode = lambda s: None if s is None else os.fsencode(s)
    if libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), target)


def enter_namespaces():
    """unshare a user, mount, PID and network namespace, as the same user inside as outside."""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(ctypes.c_int(NAMESPACES)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the user's mounts


def namespaces_work():
    """Whether this machine lets an unprivileged process make the namespaces (probed once, in a child:
    Ubuntu's AppArmor and hardened kernels switch user namespaces off)."""
    global _namespaces_work
    if _namespaces_work is None:
        _namespaces_work = sys.platform == "linux" and libc is not None and probe_namespaces()
    return _namespaces_work


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
                except BaseException:
                    os._exit(1)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]))
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


class Isolation:
    """What the command sees of the file system, and the process that stands between it and the harness.

    In the child, after fork: new namespaces; /tmp, /run and the home folder become empty tmpfs, and
    what the sandbox grants under them (the private TMPDIR, the workspace, a virtualenv in home, git's
    settings) is bind-mounted back in its place. An SSH agent's socket (/tmp/ssh-*/agent.*,
    /run/user/UID/...), a tmux or screen server's, D-Bus's: none is there to connect to. Then one more fork:
    the command runs as PID 1 of its own PID namespace, with a /proc of its own (no process outside is
    visible, so none can be named), and when it ends - or the process between it and the harness is
    killed - the kernel ends every process in the namespace: nothing is left behind, however it forked."""

    def __init__(self, tmpdir, grants, home):
        self.tmpdir = tmpdir
        hidden = ["/run", "/tmp", os.path.realpath(home)]
        self.hidden = sorted({h for h in hidden if os.path.isdir(h) and h != "/"}, key=len)
        self.binds = []
        for path in dict.fromkeys(os.path.realpath(g) for g in [tmpdir, *grants]):
            if os.path.exists(path) and self.under_hidden(path):
                self.binds.append(path)
        self.binds.sort(key=len)  # a folder before what lies in it: `--sandbox-read /tmp` must not cover the rest
        self.fds = {}

    def under_hidden(self, path):
        return next((h for h in reversed(self.hidden) if path == h or path.startswith(h + "/")), None)

    def enter(self):
        """In the child: the namespaces and the mounts. Returns in the command's PID 1; the process in
        between waits for it and exits with its status, never returning."""
        enter_namespaces()
        # the sources of the bind mounts, opened in the new mount namespace (a bind from a mount of another
        # namespace is EINVAL) and before anything is mounted over them
        self.fds = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in self.binds}
        for top in self.hidden:
            # An empty tmpfs that no Landlock rule names: the folders made on it for the bind mounts grant
            # nothing. (Landlock checks the path as seen, across mounts: a read-only folder bind-mounted
            # inside a writable one would be writable.)
            os.makedirs(top, exist_ok=True)
            mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for path in self.binds:
                if self.under_hidden(path) == top:
                    if os.path.isdir(f"/proc/self/fd/{self.fds[path]}"):
                        os.makedirs(path, exist_ok=True)
                    else:
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
                    # MS_REC would copy the empty tmpfs just mounted inside a grant that holds a hidden folder
                    holds = any(h == path or h.startswith(path + "/") for h in self.hidden)
                    mount(f"/proc/self/fd/{self.fds[path]}", path, None, MS_BIND | (0 if holds else MS_REC))
        command = os.fork()
        if command != 0:
            wait_and_exit(command)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the process in between killed (a timeout): all of this ends
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def wait_and_exit(pid):
    """The process between the harness and the command's namespace: it holds nothing open (Popen waits
    for its error pipe to close), waits for the command and leaves with its status."""
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


# --- the file tools: open beneath the workspace, at the moment of the call -------------------------------
SYS_OPENAT2 = 437  # every arch; Linux 5.6
BENEATH = sys.platform != "win32" and os.open in os.supports_dir_fd  # folders as descriptors: not on Windows
RESOLVE_NO_MAGICLINKS, RESOLVE_BENEATH = 0x02, 0x08
EXDEV = 18


class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def open_beneath(workspace, path, flags, mode=0o666):
    """os.open(workspace/path), except that the kernel refuses, while it resolves the path, any step
    that leaves the workspace: '..' above it, an absolute path, a symbolic link pointing out (even one
    swapped in after the hooks checked the path), /proc/self/root. openat2(RESOLVE_BENEATH) on Linux;
    on other POSIX systems a walk one component at a time that follows no symbolic link at all; on
    Windows (no *at() calls) the plain path, as checked by the hooks just before."""
    if not BENEATH:
        return os.open(os.path.join(workspace, path), flags, mode)
    path = below(workspace, path)
    root = os.open(workspace, getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if sys.platform == "linux":
            try:
                creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE  # else a mode is EINVAL
                how = OpenHow(flags | os.O_CLOEXEC, mode if creates else 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
                return syscall(SYS_OPENAT2, ctypes.c_int(root), ctypes.c_char_p(os.fsencode(path)),
                               ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
            except OSError as e:
                if e.errno == EXDEV:
                    raise PermissionError(e.errno, "the path leads out of the workspace (through '..', an absolute "
                                                   "path or a symbolic link), and the file tools stay inside") from None
                if e.errno != ENOSYS:
                    raise
        return walk_open(root, path, flags, mode)
    finally:
        os.close(root)


def below(workspace, path):
    """An absolute path into the workspace (models copy them from `pwd`) as the part below it, which the
    kernel then resolves beneath the workspace like any relative path; RESOLVE_BENEATH refuses every
    absolute path. Any other path is returned as it is: what leads out is still refused."""
    path = os.fspath(path)
    if os.path.isabs(path):
        for root in dict.fromkeys((os.fspath(workspace), os.path.realpath(workspace))):
            root = root.rstrip(os.sep)  # "/" as the workspace becomes "", so that every path is below it
            if path == root or path.startswith(root + os.sep):
                return path[len(root) + 1:] or "."
    return path


def walk_open(root, path, flags, mode):
    """The portable fallback: each folder opened relative to the last one with O_NOFOLLOW."""
    parts = [p for p in Path(path).parts if p not in ("", ".")]
    if Path(path).is_absolute() or ".." in parts:
        raise PermissionError(EACCES, "the path leads out of the workspace, and the file tools stay inside")
    folder = os.dup(root)
    try:
        for part in parts[:-1]:
            step = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = step
        return os.open(parts[-1] if parts else ".", flags | os.O_NOFOLLOW, mode, dir_fd=folder)
    finally:
        os.close(folder)


# --- the environment ---------------------------------------------------------------------------------------
# An allowlist: a denylist of secret-looking names leaks DATABASE_URL, GITHUB_PAT, MYSQL_PWD, SENTRY_DSN...
ENV_ALLOWED = {"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "USER", "LOGNAME", "SHELL", "TZ"}  # and LC_*
# Never passed, even when asked for: each is a door to a program outside the sandbox (the SSH agent signs
# with your key, `tmux run-shell` and `screen -X` run commands in your terminal, D-Bus starts services).
ENV_NEVER = {"SSH_AUTH_SOCK", "SSH_AGENT_PID", "TMUX", "TMUX_PANE", "STY", "DBUS_SESSION_BUS_ADDRESS",
             "GPG_AGENT_INFO", "XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "TINYHARNESS_API_KEY"}


def env_refusal(name):
    """Why --sandbox-env NAME is refused, or None."""
    if name.upper() in ENV_NEVER:
        return f"{name} is never passed to sandboxed commands: it leads to a program outside the sandbox"
    if not name or "=" in name:
        return f"{name!r} is not a variable name"
    return None


def names_a_socket(value):
    """True when the value is (or lists) a path to a socket, or a D-Bus style `unix:path=` address."""
    if value.startswith(("unix:", "tcp:", "abstract=")):
        return True
    for piece in value.split(os.pathsep):
        if piece.startswith("/"):
            try:
                if stat.S_ISSOCK(os.stat(piece).st_mode):
                    return True
            except (OSError, ValueError):
                pass
    return False


def clean_environment(environ, tmpdir, workspace=None, extra=()):
    """The command's environment: the allowed names (and `extra`, from --sandbox-env) that hold no socket
    path; TMPDIR the private folder; PWD the workspace."""
    allowed = set(ENV_ALLOWED) | set(extra)
    env = {k: v for k, v in environ.items()
           if (k in allowed or k.startswith("LC_")) and k.upper() not in ENV_NEVER and not names_a_socket(v)}
    env.update(TMPDIR=tmpdir)
    if workspace:
        env["PWD"] = workspace
    return env


def tasks_now():
    """How many tasks (processes and threads) the whole machine runs now, from /proc/loadavg ("5/812").
    RLIMIT_NPROC counts the user's tasks, threads included, and we cannot cheaply count only those:
    the machine's total is an upper bound, so `tasks_now() + 256` never stops the first fork."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 4096


# --- processes left behind -----------------------------------------------------------------------------------
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


# --- protected paths inside the workspace ---------------------------------------------------------------------
PROTECTED_TOPS = (".git", ".tinyharness")  # the file tools write nothing through these names, at any depth
# Inside .git, what makes git run a program: its config (core.fsmonitor, core.hooksPath, includes, filters,
# aliases), the per-worktree config, the hooks, the links that make git read config and hooks from
# another folder (commondir, gitdir), info/attributes (which names a filter or diff driver). All of these,
# at any depth: submodules live in .git/modules/*/ and linked worktrees in .git/worktrees/*/, each a git
# folder of its own. What ordinary git work changes and git never runs is not watched: objects, refs, logs.
GIT_WATCHED = {"config", "config.worktree", "commondir", "gitdir", "hooks", "attributes"}
GIT_SKIPPED = {"objects", "refs", "logs", "lfs", "rr-cache"}
GIT_IDENTITY, MODES = ":git-identity", ":modes"  # not paths: the .git folder's inode, and every folder's mode
# git config keys a command may add: none of them runs a program (core.fsmonitor, core.hooksPath,
# core.sshCommand, core.worktree, *.textconv, filter.*, alias.*, include.* ... are not here, so adding one is undone)
HARMLESS_CONFIG = {"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
                   "core.ignorecase", "core.precomposeunicode", "core.symlinks", "user.name", "user.email",
                   "init.defaultbranch", "branch.*.remote", "branch.*.merge", "remote.*.url", "remote.*.fetch"}


class RestoreFailed(BaseException):
    """The harness could not check or put back the protected paths after a command. Not an Exception:
    no tool-level `except Exception` may turn it into a result the model reads; the run stops (exit 1)
    and the message tells the user what may be left."""


def protected_path(path):
    """The protected name a workspace-relative path goes through, or None: what the file tools refuse.
    Any component counts, not only the first (`sub/.git/hooks/x`, `.git/modules/a/hooks/x`), and a path
    that IS `.git` (a file `gitdir: elsewhere` makes git read another folder's config)."""
    for part in Path(path).parts:
        if part.lower() in PROTECTED_TOPS:  # .GIT is .git on a case-insensitive file system
            return part
    return None


def snapshot(workspace, contents=None, fix=False):
    """{relative path: ("file", sha256, mode) | ("link", target) | ("dir",)} for .tinyharness and what git
    reads to run code under .git, plus the .git folder's identity and every folder's mode. `contents`, when
    given, receives each file's bytes (the state to put back: the user's own files). `fix`: first give
    back to the owner any folder or file the command made unreadable (`chmod 111 .git/hooks` would hide
    a planted hook from the check, not from git). After the command only digests are taken, in chunks:
    a 1 GiB file planted there costs time, not the harness's memory."""
    seen, modes = {}, {}
    tiny = Path(workspace, ".tinyharness")
    seen[".tinyharness"] = state_of(tiny, ".tinyharness", contents, fix)
    if seen[".tinyharness"] == ("dir",):
        walk(tiny, ".tinyharness", seen, modes, contents, fix, everything=True)
    git = Path(workspace, ".git")
    seen[".git"] = state_of(git, ".git", contents, fix)
    if seen[".git"] == ("dir",):
        info = os.lstat(git)
        seen[GIT_IDENTITY] = (info.st_dev, info.st_ino)
        walk(git, ".git", seen, modes, contents, fix, everything=False)
    seen[MODES] = modes
    return {k: v for k, v in seen.items() if v is not None}


def walk(folder, key, seen, modes, contents, fix, everything):
    """Record the watched entries under `folder` (all of them when `everything`: .tinyharness, a hooks
    folder). A folder that cannot be listed even after `fix` cannot be checked: RestoreFailed."""
    if fix:
        give_back(folder, 0o700)
    modes[key] = stat.S_IMODE(os.lstat(folder).st_mode)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise RestoreFailed(f"could not list {key}: {e.strerror}") from None
    for entry in entries:
        child = f"{key}/{entry.name}"
        if entry.is_symlink():  # a link anywhere in .git may lead git's reads elsewhere: always watched
            seen[child] = ("link", os.readlink(entry.path))
        elif entry.is_dir(follow_symlinks=False):
            if not everything and entry.name in GIT_SKIPPED:
                continue
            inner = everything or entry.name == "hooks"
            if inner:
                seen[child] = ("dir",)
            walk(Path(entry.path), child, seen, modes, contents, fix, inner)
        elif everything or entry.name in GIT_WATCHED:
            seen[child] = state_of(Path(entry.path), child, contents, fix)


def give_back(path, bits):
    """chmod u+bits when the command took them away (the harness owns what its commands made)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISLNK(info.st_mode) and info.st_mode & bits != bits:
            os.chmod(path, stat.S_IMODE(info.st_mode) | bits)
    except OSError:
        pass  # what still cannot be read is reported by the reader


def state_of(path, key, contents=None, fix=False):
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_file():
        if fix:
            give_back(path, 0o400)
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
                if contents is not None:
                    contents[key] = contents.get(key, b"") + chunk
        if contents is not None:
            contents.setdefault(key, b"")
        return ("file", digest.hexdigest(), path.lstat().st_mode)
    if path.is_dir():
        return ("dir",)
    return ("other",) if os.path.lexists(path) else None  # a FIFO or socket planted there: a change


def config_keys(data):
    """{section.key: value} of a git config file, enough to tell harmless keys from the rest."""
    keys, section = {}, ""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head = line[1:line.find("]")] if "]" in line else line[1:]
            name, _, sub = head.partition(" ")
            section = name.lower() + (".*" if sub.strip() else "")
            continue
        key, _, value = line.partition("=")
        keys.setdefault(f"{section}.{key.strip().lower()}", []).append(value.strip())
    return keys


def config_is_harmless(before, after):
    old = config_keys(before or b"")
    return all(k in HARMLESS_CONFIG or old.get(k) == v for k, v in config_keys(after).items())


def harmless_new_hook(key, old, new):
    """git init makes .git, and .git/hooks full of *.sample files; git never runs those. (What it
    puts in .git is judged like everything else in there: a config with only harmless keys stays.)"""
    if key == ".git" and old is None and new == ("dir",):
        return True
    if old is not None or new is None or not key.startswith(".git/"):
        return False
    parts = key.split("/")
    in_hooks = "hooks" in parts[1:-1]
    return (parts[-1] == "hooks" and new == ("dir",)) or (in_hooks and key.endswith(".sample") and new[0] == "file")


def restore(workspace, before, contents):
    """Undo every change under the protected paths (`before` and `contents` from snapshot); return what
    was undone, one line each. First .git itself: the folder it was (moved back if the command moved it,
    whatever was put in its place removed), or no .git if there was none. The harness runs with all the
    user's rights here, so it never works through a link the command may have planted: a path with a
    symbolic link on its way is left alone (the link itself is a change, and is undone). Raises
    RestoreFailed when it cannot check or put back (the caller stops the run)."""
    try:
        before, undone = put_git_back(workspace, before)
        after = snapshot(workspace, fix=True)
        for key in sorted(set(before) | set(after), key=len, reverse=True):  # the deepest first
            old, new = before.get(key), after.get(key)
            if key.startswith(":") or old == new or harmless_new_hook(key, old, new) or \
                    harmless_config(workspace, key, old, new, contents):
                continue
            if no_link_on_the_way(workspace, key):
                remove(Path(workspace, key))
            undone.append(f"{key} ({'created' if old is None else 'deleted' if new is None else 'changed'})")
        for key in sorted(before, key=len):  # the shallowest first: folders before what they hold
            path = Path(workspace, key)
            if not key.startswith(":") and before[key] != state_of(path, key) and no_link_on_the_way(workspace, key):
                put_back(path, before[key], contents.get(key))
        for key, mode in sorted(before.get(MODES, {}).items(), key=lambda kv: -len(kv[0])):  # chmod 111 undone
            path = Path(workspace, key)
            if no_link_on_the_way(workspace, key) and path.is_dir() and not path.is_symlink() and \
                    stat.S_IMODE(path.lstat().st_mode) != mode:
                os.chmod(path, mode)
        return undone
    except OSError as e:
        raise RestoreFailed(f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")) from None


def put_git_back(workspace, before):
    """(the snapshot to compare with, what was undone) after making .git the folder it was. The command
    may have moved it (`mv .git .git-real`) and put a `gitdir: .git-real` file or another folder in its
    place: the original is found by its inode, anywhere in the workspace, and moved back."""
    identity = before.get(GIT_IDENTITY)
    git = Path(workspace, ".git")
    if identity is None or is_folder(git, identity):
        return before, []
    original = find_folder(workspace, identity)
    if original is None:
        if git.is_dir() and not git.is_symlink():  # deleted, and a new repository made: judged as new
            return {k: v for k, v in before.items() if k != ".git" and not k.startswith(".git/")}, \
                   [".git (deleted and made again: the new one is checked as new)"]
        if os.path.lexists(git):
            remove(git)
        return {k: v for k, v in before.items() if k != ".git" and not k.startswith(".git/")}, \
               [".git (deleted by the command; only its settings and hooks are watched, so it cannot be put back)"]
    if os.path.lexists(git):
        remove(git)
    os.rename(original, git)
    return before, [f".git (moved to {Path(original).relative_to(workspace).as_posix()}; moved back)"]


def is_folder(path, identity):
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) == identity


def find_folder(workspace, identity, budget=200_000):
    """The folder with this (device, inode) under the workspace, or None (looked for in `budget` entries)."""
    for top, dirs, _ in os.walk(workspace):
        for name in dirs:
            budget -= 1
            path = os.path.join(top, name)
            if is_folder(path, identity):
                return path
        if budget < 0:
            break
    return None


def harmless_config(workspace, key, old, new, contents):
    """A git config that only gained harmless keys (git init, git config user.name) stays."""
    if not key.startswith(".git/") or Path(key).name != "config" or not new or new[0] != "file" or \
            (old and old[0] != "file"):
        return False
    path = Path(workspace, key)
    if path.stat().st_size > 1 << 20 or not no_link_on_the_way(workspace, key):
        return False
    return config_is_harmless(contents.get(key) if old else None, path.read_bytes())


def no_link_on_the_way(workspace, key):
    """True when every folder between the workspace and `key` is a real folder, not a symbolic link."""
    path = Path(workspace)
    for part in Path(key).parts[:-1]:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return not path.exists() and not path.is_symlink()  # missing: put_back will make real folders
    return True


def remove(path):
    if path.is_symlink() or not path.is_dir():
        if os.path.lexists(path):
            path.unlink()
    else:
        shutil.rmtree(path)


def put_back(path, state, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    if state[0] == "dir":
        if path.is_symlink() or path.exists() and not path.is_dir():
            remove(path)
        path.mkdir(exist_ok=True)
    elif state[0] == "link":
        remove(path)
        path.symlink_to(state[1])
    elif state[0] == "file":
        remove(path)
        path.write_bytes(data)
        os.chmod(path, state[2] & 0o7777)


# --- running one command ------------------------------------------------------------------------------------------
class Sandbox:
    """How `shell` runs commands: `Sandbox()` confines them, `Sandbox(enabled=False)` does not.
    `extra_read`: more paths the commands may read (--sandbox-read); `file_bytes`: the largest file."""

    def __init__(self, enabled=True, extra_read=(), file_bytes=FILE_BYTES, extra_env=(), isolate=None):
        self.enabled, self.extra_read, self.file_bytes = enabled, list(extra_read), file_bytes
        self.extra_env = list(extra_env)  # --sandbox-env: more variable names passed on
        self._abi, self._isolate = None, isolate  # isolate: None = namespaces where they work

    @property
    def isolated(self):
        """Whether commands get namespaces: a private /tmp, /run and home, and a PID namespace."""
        if self._isolate is None:
            self._isolate = namespaces_work()
        return self._isolate

    @property
    def abi(self):
        if self._abi is None:
            self._abi = landlock_abi()
        return self._abi

    def problem(self):
        """Why commands cannot run sandboxed here (one paragraph), or None."""
        return unavailable_reason(self.abi) if self.enabled else None

    def rules(self, workspace, tmpdir, timeout):
        read = [workspace, *read_paths(self.extra_read)]
        isolation = Isolation(tmpdir, [workspace, *read], os.path.expanduser("~")) if self.isolated else None
        # RLIMIT_NPROC counts the user's tasks in the command's user namespace when it has one: then 256
        # is the command's own bound; without one, every task of the user counts (see tasks_now)
        return Rules(self.abi, [workspace, tmpdir], read, cpu_seconds=max(1, int(timeout) + 1),
                     max_processes=NEW_TASKS if isolation else tasks_now() + NEW_TASKS, file_bytes=self.file_bytes,
                     isolation=isolation)

    def env(self, tmpdir, workspace):
        return clean_environment(os.environ, tmpdir, workspace, self.extra_env)

    def start(self, workspace, command, timeout, **popen):
        """Start the command (confined when enabled); return (process, finish) where finish() ends
        what it left behind, removes its TMPDIR, undoes changes to protected paths and returns notes."""
        if not self.enabled:
            process = subprocess.Popen(command, shell=True, cwd=workspace, start_new_session=True, **popen)
            return process, lambda timed_out=False: []
        become_subreaper()
        adopted_before = child_lister()(os.getpid())
        contents = {}
        before = snapshot(workspace, contents)
        tmpdir = tempfile.mkdtemp(prefix="tinyharness-tmp-")
        workspace = os.path.realpath(workspace)
        rules = self.rules(workspace, tmpdir, timeout)
        try:
            rules.build()
            process = subprocess.Popen(["/bin/sh", "-c", command], cwd=workspace, start_new_session=True,
                                       env=self.env(tmpdir, workspace), preexec_fn=rules.apply_in_child, **popen)
        except BaseException:
            remove_tmpdir(tmpdir)
            raise
        finally:
            rules.close()  # the child has its own copy of the descriptor, and closes it at exec

        def finish(timed_out=False):
            left = end_everything(process.pid, adopted_before)
            remove_tmpdir(tmpdir)
            notes = [f"[sandbox] ended {left} process{'es' * (left != 1)} the command left running outside its "
                     "process group"] \
                if left and not timed_out else []  # a timeout's message says so already
            try:
                undone = restore(workspace, before, contents)
            except RestoreFailed as e:  # never a note for the model: the user must know, and the run stops
                raise RestoreFailed(what_is_left(workspace, e)) from None
            if undone:
                notes.append("[sandbox] protected paths were changed and have been put back: " + ", ".join(undone)
                             + ". .git (its hooks, config and links) and the harness's own settings are for the user "
                             "to change.")
            return notes
        return process, finish


def what_is_left(workspace, error):
    return (f"the sandbox could not check or put back the protected paths of {workspace} after a shell command "
            f"({error}), so the run was stopped. They may still hold what the command left there: a git hook or "
            "setting that runs a program at your next git command. Before you run git in that folder, check .git "
            "(is it a folder?), .git/hooks, .git/config, .git/config.worktree, .git/commondir, .git/info/attributes, "
            ".git/modules/*/hooks and .git/modules/*/config, and .tinyharness/.")


def workspace_problem(workspace, home=None, environ=None):
    """Why the harness must not run with this folder as its workspace, in one sentence, or None. The
    commands may write anything in the workspace, so it must not hold what runs or configures things
    outside the sandbox later: the home folder (dotfiles, ~/.ssh, the harness's trust store), the XDG
    config and data folders, or the harness's own code and the Python it runs on (a planted
    `tinyharness/__init__.py` or a `.pth` file would run at the next launch, unconfined)."""
    environ = os.environ if environ is None else environ
    home = os.path.realpath(home or os.path.expanduser("~"))
    workspace = os.path.realpath(workspace)
    guarded = [("your home folder", home),
               ("your config folder (XDG_CONFIG_HOME)", xdg(environ, "XDG_CONFIG_HOME", home, ".config")),
               ("your data folder (XDG_DATA_HOME)", xdg(environ, "XDG_DATA_HOME", home, ".local/share")),
               ("tinyharness's own code", os.path.dirname(os.path.realpath(__file__))),
               ("the Python environment tinyharness runs from", os.path.realpath(sys.prefix))]
    for what, path in guarded:
        if path == workspace or path.startswith(workspace.rstrip(os.sep) + os.sep):
            return (f"the workspace {workspace} contains {what} ({path}), and shell commands may change anything in "
                    "the workspace, including what runs outside the sandbox later; start tinyharness in a project "
                    "folder that holds neither" + (" (install tinyharness outside it: pipx, or a virtualenv elsewhere)"
                                                   if "tinyharness" in what or "Python" in what else ""))
    return None


def xdg(environ, name, home, default):
    value = environ.get(name, "")
    return os.path.realpath(value if os.path.isabs(value) else os.path.join(home, default))


REFUSALS = ("Permission denied", "Operation not permitted", "Errno 13", "Errno 1]")
HINT = ("[sandbox] this command ran in the sandbox: it may write only in the workspace and $TMPDIR, read only the "
        "system and the workspace (the home folder, /tmp and /run may look empty), open no network connection and signal no process outside, so a refusal above may "
        "be the sandbox's. Do not look for a way around it; if the task needs more, say so in your answer.")


def hint_for(output):
    """The sandbox's one-line explanation, for an output that shows a refusal; None otherwise. A small
    model that reads only 'Permission denied' tries sudo, or another path; this tells it why."""
    return HINT if any(word in output for word in REFUSALS) else None


def remove_tmpdir(tmpdir):
    try:
        os.rmdir(tmpdir)  # most commands leave it empty: 2 ms cheaper than rmtree
    except OSError:
        shutil.rmtree(tmpdir, ignore_errors=True)


HELPER_USAGE = "usage: python -m tinyharness.sandbox --exec WORKSPACE [--read PATH]... [--tmp DIR] -- PROGRAM [ARGS...]"


def helper_main(argv):
    """`python -m tinyharness.sandbox --exec WORKSPACE [--read PATH]... [--tmp DIR] -- PROGRAM ARGS...`:
    apply the rules to this process, then exec PROGRAM in WORKSPACE (the other way to get the rules into
    a child). --tmp: a private folder made by the caller, who removes it; without it, TMPDIR is the
    workspace (never the shared /tmp: that would open every other user's and program's files there)."""
    if len(argv) < 4 or argv[0] != "--exec" or "--" not in argv:
        print(HELPER_USAGE, file=sys.stderr)
        return 2
    split = argv.index("--")
    options, program = argv[1:split], argv[split + 1:]
    workspace = os.path.realpath(options[0])
    value = lambda name: [options[i + 1] for i, o in enumerate(options[:-1]) if o == name]
    tmpdir = os.path.realpath((value("--tmp") or [workspace])[-1])
    problem = unavailable_reason()
    if problem or not program:
        print(f"error: {problem or 'no program to run'}", file=sys.stderr)
        return 1
    Rules(landlock_abi(), [workspace, tmpdir], [workspace, *read_paths(value("--read"))], cpu_seconds=600,
          max_processes=tasks_now() + NEW_TASKS).build().apply()
    os.chdir(workspace)
    os.execvpe(program[0], program, clean_environment(os.environ, tmpdir, workspace))


if __name__ == "__main__":
    sys.exit(helper_main(sys.argv[1:]))
