"""seccomp: a small BPF program the kernel runs on every system call, for what Landlock does not
scope.

The problem: Landlock (up to ABI 7) lets UDP out, does not look at `socket()` itself, and knows
nothing of other processes' limits and priorities or of setuid bits. The mechanism:
`prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program)` installs a classic BPF program (about 90
instructions) that reads each system call's number and arguments and answers allow, or fail with an
errno. It refuses `socket()` for every family but AF_UNIX (so UDP, raw sockets and netlink are gone
too), `io_uring_setup` (io_uring opens sockets and files without those calls), a change to another
process (`prlimit64` on any pid but 0, `setpriority` and `ioprio_set` on anything but itself or for
a whole user, the `sched_set*` calls on another pid: `prlimit --pid $PPID --nofile=0:0`, `renice`,
`taskset`), the kernel's keyrings (`keyctl`, `add_key`, `request_key`: the session keyring the
harness was started in holds Kerberos tickets and cifscreds), SysV IPC where there is no IPC
namespace (sandbox/namespaces.py), and a setuid or setgid bit in a mode (`chmod`, `fchmod*`,
`open*`, `creat`, `mknod*`: as root, `chmod 4755` leaves a program that runs as root for whoever
starts it later). Why not a network namespace instead? It would cut the network as well, but
unprivileged user namespaces are switched off on many systems; seccomp needs no privilege and no
setup on any kernel since 3.5, and costs nothing measurable at run time.

What it cannot do: read memory. An argument that is a pointer (a path, `openat2`'s struct with its
mode) cannot be checked, so `openat2` answers ENOSYS and libc falls back to `openat`, whose mode it
can read. System call numbers differ per architecture: on one not listed here the sandbox does not
run.
"""
import ctypes

from .syscalls import EACCES, ENOSYS, EPERM, prctl

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
AF_UNIX = 1
SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
# machine -> (AUDIT_ARCH_*, whether x32 numbers must be refused, {system call: its number})
ARCHITECTURES = {
    "x86_64": (0xC000003E, True, {
        "socket": 41, "io_uring_setup": 425, "prlimit64": 302, "setpriority": 141,
        "sched_setaffinity": 203,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314, "ioprio_set": 251,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "open": 2, "creat": 85,
        "openat": 257, "openat2": 437, "mknod": 133, "mknodat": 259, "setsid": 112, "setpgid": 109,
        "add_key": 248, "request_key": 249, "keyctl": 250, "shmget": 29, "shmat": 30, "shmctl": 31,
        "shmdt": 67,
        "semget": 64, "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69,
        "msgrcv": 70, "msgctl": 71}),
    "aarch64": (0xC00000B7, False, {
        "socket": 198, "io_uring_setup": 425, "prlimit64": 261, "setpriority": 140,
        "sched_setaffinity": 122,
        "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274, "ioprio_set": 30,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "openat": 56, "openat2": 437, "mknodat": 33,
        "setsid": 157, "setpgid": 154, "add_key": 217, "request_key": 218, "keyctl": 219,
        "shmget": 194,
        "shmctl": 195, "shmat": 196, "shmdt": 197, "semget": 190, "semctl": 191, "semtimedop": 192,
        "semop": 193, "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189}),
}
# Without a PID namespace, what the command starts must stay in its process group: one kill of the
# group is then exact (the kernel fails a fork that races with it), where a sweep of the process
# tree can be outrun by a fork-and-exit chain. So setsid and setpgid fail there (a daemon that
# insists on its own session does not start). SysV IPC is shared too without an IPC namespace: every
# call of it fails there (ids are small numbers, so refusing the *get calls alone would leave shmat
# and msgrcv on a guessed id).
SYSV_IPC = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
            "msgget", "msgsnd", "msgrcv", "msgctl")
KEEP_IN_GROUP = [("setsid", None, "always", 0, EPERM), ("setpgid", None, "always", 0, EPERM),
                 *((name, None, "always", 0, EPERM) for name in SYSV_IPC)]
# (system call, argument, test, errno): the call fails with errno when the test holds for the
# argument. "not": the argument is anything but the value (a process other than the caller: pid/who
# 0 is "me"); "is": the argument is the value; "bits": it has one of these bits (a mode with setuid
# or setgid); "always": every call.
CHECKS = [
    # only AF_UNIX: no TCP, UDP, raw, netlink (Landlock lets UDP out)
    ("socket", 0, "not", AF_UNIX, EACCES),
    # io_uring opens sockets and files without these calls
    ("io_uring_setup", None, "always", 0, ENOSYS),
    # the session keyring it was started in (Kerberos tickets,
    ("keyctl", None, "always", 0, EPERM),
    # cifscreds), the user's keyring: none is read or added to
    ("add_key", None, "always", 0, EPERM),
    ("request_key", None, "always", 0, EPERM),
    # its mode sits in a struct BPF cannot read; libc falls back
    ("openat2", None, "always", 0, ENOSYS),
    # another process's limits: `prlimit --pid P --nofile=0:0`
    ("prlimit64", 0, "not", 0, EPERM),
    # PRIO_USER: every process of the user, even with who 0
    ("setpriority", 0, "is", 2, EPERM),
    ("setpriority", 1, "not", 0, EPERM),              # renice of another process or group
    ("sched_setaffinity", 0, "not", 0, EPERM),        # taskset -p
    ("sched_setscheduler", 0, "not", 0, EPERM),       # chrt -p
    ("sched_setparam", 0, "not", 0, EPERM),
    ("sched_setattr", 0, "not", 0, EPERM),
    ("ioprio_set", 0, "is", 3, EPERM),                # IOPRIO_WHO_USER: every process of the user
    ("ioprio_set", 1, "not", 0, EPERM),               # ionice -p
    # a setuid file left in the workspace runs as its owner
    ("chmod", 1, "bits", SET_ID_BITS, EPERM),
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
    _fields_ = ([("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                 ("k", ctypes.c_uint32)])


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def syscall_filter(machine, keep_in_group=False):
    """The BPF program, or None on an architecture it does not know. It reads struct seccomp_data:
    the system call's number at offset 0, the architecture at 4, argument i's low 32 bits at 16 + 8
    i (every argument checked here is an int, a pid or a mode: the high half does not count). One
    block per checked call; every jump goes forward to one of the four endings."""
    if machine not in ARCHITECTURES:
        return None
    arch, has_x32, numbers = ARCHITECTURES[machine]
    # native? go on : kill (a 32-bit syscall table). A jump: an offset, or an ending's name
    blocks: list[list[tuple]] = [[(BPF_LD_W_ABS, 0, 0, 4), (BPF_JEQ_K, 1, 0, arch),
               (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
               # the system call's number, kept in A
               (BPF_LD_W_ABS, 0, 0, 0)]]
    if has_x32:
        # x32 numbers: as if they did not exist
        blocks.append([(BPF_JGE_K, "ENOSYS", 0, 0x40000000)])
    for name, arg, test, value, errno_ in CHECKS + (KEEP_IN_GROUP if keep_in_group else []):
        if name not in numbers:
            continue  # aarch64 has no chmod, open, creat, mknod: only the *at forms
        deny = {EPERM: "EPERM", EACCES: "EACCES", ENOSYS: "ENOSYS"}[errno_]
        if test == "always":
            blocks.append([(BPF_JEQ_K, deny, 0, numbers[name])])
            continue
        assert arg is not None  # every test but "always" (done above) looks at an argument
        check = {"not": (BPF_JEQ_K, 0, deny, value), "is": (BPF_JEQ_K, deny, 0, value),
                 "bits": (BPF_JSET_K, deny, 0, value)}[test]
        # this call? look at its argument : next block
        blocks.append([(BPF_JEQ_K, 0, 3, numbers[name]),
                       # refused, or on to the next check
                       (BPF_LD_W_ABS, 0, 0, 16 + 8 * arg), check,
                       (BPF_LD_W_ABS, 0, 0, 0)])                      # the number back in A
    endings = {"ALLOW": SECCOMP_RET_ALLOW, "EPERM": SECCOMP_RET_ERRNO | EPERM,
               "EACCES": SECCOMP_RET_ERRNO | EACCES, "ENOSYS": SECCOMP_RET_ERRNO | ENOSYS}
    program = [instruction for block in blocks for instruction in block]
    program.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))              # no check matched
    ending_at = {}
    for label, action in endings.items():
        ending_at[label] = len(program)
        program.append((BPF_RET_K, 0, 0, action))
    return with_offsets(program, ending_at)


def with_offsets(program, ending_at):
    """The program with each jump to a named ending ("ALLOW", "EPERM", ...) made a forward
    offset, as BPF counts it: the instructions skipped after this one."""
    resolved = []
    for i, (code, jt, jf, k) in enumerate(program):
        jt = ending_at[jt] - i - 1 if isinstance(jt, str) else jt
        jf = ending_at[jf] - i - 1 if isinstance(jf, str) else jf
        resolved.append((code, jt, jf, k))
    return resolved


def install(fprog):
    """Put the calling process (and all it starts later) under the program, for good. no_new_privs
    must be set first: without it, only a privileged process may install a filter."""
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog))
