"""Landlock: an unprivileged process takes file and network rights away from itself, for good.

The problem: a command may spell "delete that folder" in endless ways, but each spelling ends in a
system call on a path. Landlock (Linux 5.13+, no privilege needed) checks those calls in the kernel.
The mechanism, in three system calls: `landlock_create_ruleset` names the rights the ruleset handles
(every one this kernel knows: anything handled and not granted is denied), `landlock_add_rule`
grants some of them beneath a folder (or on a file) opened with O_PATH, and `landlock_restrict_self`
puts the process, and everything it starts afterwards, under the ruleset; nothing can lift it. Each
kernel release adds rights, so the running kernel is asked its ABI version first
(`landlock_create_ruleset(NULL, 0, VERSION)`): ABI 2 moving files between folders (REFER), 3
truncation, 4 TCP bind and connect (no rule grants a port, so every one fails), 5 ioctl on devices,
6 scoping (no signal to a process outside, no abstract UNIX socket outside).

What it cannot do: it grants and never carves (a folder granted writable cannot have a read-only
hole, hence the protected paths in sandbox/git.py); up to ABI 7 it does not check UDP, `socket()`
itself, or connecting to a socket file (hence seccomp and the namespaces); it sees paths as they are
resolved, so a grant covers whatever is mounted beneath it.
"""
import ctypes
import sys

from .syscalls import syscall

# every arch
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
MIN_ABI = 6  # scoping (signals, abstract sockets) is the newest right this sandbox relies on

# constants from <linux/landlock.h>
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
ALL_FS_RIGHTS = (1 << 16) - 1  # ABI 5 and later
# what a rule on a file may grant
FILE_ONLY_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi():
    """The Landlock ABI version of the running kernel, 0 when it has none (or Landlock is
    disabled)."""
    if sys.platform != "linux":
        return 0
    try:
        return syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:  # ENOSYS: no Landlock in this kernel; EOPNOTSUPP: built in but switched off
        return 0


def handled(abi):
    """(file rights, the ruleset's attributes, their size) for a kernel of this ABI: every right it
    knows is handled, so that whatever no rule grants is denied. An older kernel reads a shorter
    struct."""
    fs = ALL_FS_RIGHTS if abi >= 5 else FS_RIGHTS_BY_ABI[abi]
    attr = RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                       SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0)
    return fs, attr, 24 if abi >= 6 else 16 if abi >= 4 else 8


def create_ruleset(attr, size):
    """A new ruleset, as a file descriptor."""
    return (syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                    ctypes.c_uint32(0)))


def add_path_rule(ruleset, beneath):
    """Grant `beneath.allowed_access` under the folder (or on the file) open as
    `beneath.parent_fd`."""
    syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
            ctypes.byref(beneath), ctypes.c_uint32(0))


def restrict_self(ruleset):
    """Put the calling process (and all it starts later) under the ruleset, for good."""
    syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
