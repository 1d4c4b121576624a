"""Opening a file beneath the workspace: the file tools' check, made by the kernel at the moment of
the call.

The problem: the file tools (read_file, write_file and the rest) run in the harness, outside the
sandbox. A check of the path string before opening it is a race: `..` above the workspace, an
absolute path, a symbolic link that points out (or is swapped in between the check and the open),
`/proc/self/root/...` all lead elsewhere. The mechanism: `openat2` with RESOLVE_BENEATH (Linux 5.6+)
makes the kernel refuse, while it resolves the path, any step that leaves the folder it starts from;
RESOLVE_NO_MAGICLINKS refuses `/proc/PID/fd`-style links. On other POSIX systems, a walk one
component at a time that follows no symbolic link at all.

What it cannot do: on Windows (no *at() calls) it is the plain path, as checked by the hooks just
before. It does not say which paths inside the workspace are off limits: `.git` and `.tinyharness`
are refused by name (sandbox/git.py, protected_path).
"""
import ctypes
import os
import sys
from pathlib import Path

from .syscalls import EACCES, ENOSYS, EXDEV, syscall

SYS_OPENAT2 = 437  # every arch; Linux 5.6
# folders as descriptors: not on Windows
BENEATH = sys.platform != "win32" and os.open in os.supports_dir_fd
RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH = 0x02, 0x04, 0x08


class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def open_beneath(workspace, path, flags, mode=0o666, no_links=False):
    """os.open(workspace/path), except that the kernel refuses, while it resolves the path, any step
    that leaves the workspace: '..' above it, an absolute path, a symbolic link pointing out (even
    one swapped in after the hooks checked the path), /proc/self/root. openat2(RESOLVE_BENEATH) on
    Linux; on other POSIX systems a walk one component at a time that follows no symbolic link at
    all; on Windows (no *at() calls) the plain path, as checked by the hooks just before. no_links:
    no symbolic link at all on the way, even one that stays inside (filedoor.py: the harness's own
    writes)."""
    if not BENEATH:
        return os.open(os.path.join(workspace, path), flags, mode)
    path = below(workspace, path)
    root = os.open(workspace, getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if sys.platform == "linux":
            try:
                # else a mode is EINVAL
                creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE
                resolve = (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
                           | (RESOLVE_NO_SYMLINKS if no_links else 0))
                how = OpenHow(flags | os.O_CLOEXEC, mode if creates else 0, resolve)
                return syscall(SYS_OPENAT2, ctypes.c_int(root), ctypes.c_char_p(os.fsencode(path)),
                               ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
            except OSError as e:
                if e.errno == EXDEV:
                    raise PermissionError(e.errno, "the path leads out of the workspace (through "
                                                   "'..', an absolute path or a symbolic link), "
                                                   "and the file tools stay inside") from None
                if e.errno != ENOSYS:
                    raise
        return walk_open(root, path, flags, mode)
    finally:
        os.close(root)


def below(workspace, path):
    """An absolute path into the workspace (models copy them from `pwd`) as the part below it, which
    the kernel then resolves beneath the workspace like any relative path; RESOLVE_BENEATH refuses
    every absolute path. Any other path is returned as it is: what leads out is still refused."""
    path = os.fspath(path)
    if os.path.isabs(path):
        for root in dict.fromkeys((os.fspath(workspace), os.path.realpath(workspace))):
            # "/" as the workspace becomes "", so that every path is below it
            root = root.rstrip(os.sep)
            if path == root or path.startswith(root + os.sep):
                return path[len(root) + 1:] or "."
    return path


def walk_open(root, path, flags, mode):
    """The portable fallback: each folder opened relative to the last one with O_NOFOLLOW."""
    parts = [p for p in Path(path).parts if p not in ("", ".")]
    if Path(path).is_absolute() or ".." in parts:
        raise PermissionError(EACCES, "the path leads out of the workspace, and the file tools "
                                      "stay inside")
    folder = os.dup(root)
    try:
        for part in parts[:-1]:
            step = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = step
        return os.open(parts[-1] if parts else ".", flags | os.O_NOFOLLOW, mode, dir_fd=folder)
    finally:
        os.close(folder)
