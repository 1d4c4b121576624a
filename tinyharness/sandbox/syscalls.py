"""System calls Python's `os` module does not offer, made through ctypes.

The sandbox needs calls the standard library has no function for: the three Landlock calls,
`prctl` (no new privileges, seccomp, a subreaper), `openat2`, `unshare` and `mount`. ctypes loads
the C library that is already in the process and calls its `syscall()` (any call by number) or the
named wrapper; on failure the C library leaves the reason in `errno`, which ctypes keeps per thread
when asked (`use_errno=True`), and it is raised as `OSError` like any `os` call would.

What it cannot do: check anything. A wrong number or a wrong argument type is not a Python error
but a different system call, or memory read in the wrong place: every number here comes from the
kernel's headers, and every argument is wrapped in the C type the kernel expects. Linux only (the
numbers are Linux's); elsewhere `libc` is None and nothing here may be called.
"""
import ctypes
import os
import sys

EPERM, EACCES, EXDEV, ENOSYS = 1, 13, 18, 38  # errno numbers: the same on every Linux architecture

if sys.platform == "linux":  # a statement, not an expression: mypy then knows libc is there
    libc = ctypes.CDLL(None, use_errno=True)
else:
    libc = None


def syscall(number, *args):
    result = (libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) if isinstance(a, int)
                                                    else a for a in args]))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def prctl(option, *args):
    padded = ([ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
              + [ctypes.c_ulong(0)] * (4 - len(args)))
    if libc.prctl(ctypes.c_int(option), *padded) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
