"""Which folders of the workspace changed since the last look: the kernel tells (inotify), so a
checkpoint need not look at every file.

The problem. A checkpoint before each command must know what the last command changed. Looking at
every file (one lstat each) costs about 5 ms per thousand files in Python: 50 ms for a 10,000-file
workspace, ten times what the sandbox adds to a command, and paid for a command that changed
nothing.

The mechanism. One inotify descriptor per run (`inotify_init1` through ctypes), a watch on every
folder of the workspace, added before the folder is listed so that nothing changes unseen between
the two. The kernel queues an event for every name created, deleted, moved, written or whose
attributes changed, in a watched folder, from any process (the sandbox's commands included: a bind
mount shares the inodes). `changes()` reads the queue without waiting and returns, per folder, the
names that had events; the scan (scan.py) looks again at those alone. A queue that overflowed
(`overflowed`) makes the caller look at every file once; a watch the kernel refused
(fs.inotify.max_user_watches) is said, and the caller looks at every file from then on.

What it cannot do. inotify does not report writes through a shared memory mapping (mmap), nor a
write through a hard link whose other name lies outside the watched folders; the scan looks at
every file once at the start of each run, which catches what happened between runs. Linux only;
elsewhere `Watcher.available` is False and every checkpoint looks at every file.
"""
import ctypes
import errno
import os
import struct
import sys
import weakref

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK = 0x01000000, 0x02000000, 0x04000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
        | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)

if sys.platform == "linux":  # a statement, not an expression: mypy then knows libc is there
    libc = ctypes.CDLL(None, use_errno=True)
else:
    libc = None


class Watcher:
    """The watches on one workspace's folders. `broken` holds why it can no longer be trusted (the
    caller then looks at every file); `changes()` reads what happened."""

    def __init__(self, root):
        self.root, self.fd, self.broken, self.overflowed = root, -1, None, False
        self.paths, self.watches = {}, {}  # wd -> folder (relative), folder -> wd
        if libc is None or not hasattr(libc, "inotify_init1"):
            self.broken = "inotify is Linux's"
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            self.broken = f"inotify: {os.strerror(ctypes.get_errno())}"
            return
        self.fd = fd
        self._closer = weakref.finalize(self, os.close, fd)  # a run's end, in-process too

    @property
    def available(self):
        return self.broken is None

    def add(self, folder):
        """Watch a folder (relative to the root); False once the kernel refuses one."""
        if self.broken:
            return False
        path = os.fsencode(os.path.join(self.root, folder))
        wd = libc.inotify_add_watch(self.fd, path, MASK)
        if wd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOENT, errno.ENOTDIR):  # gone already: its parent's event says so
                return True
            self.broken = ("the kernel watches no more folders (fs.inotify.max_user_watches)"
                           if code == errno.ENOSPC else f"inotify: {os.strerror(code)}")
            return False
        old = self.paths.get(wd)
        if old is not None and old != folder:  # the same folder, moved: one name now
            self.watches.pop(old, None)
        self.paths[wd], self.watches[folder] = folder, wd
        return True

    def drop(self, folder):
        """Stop watching a folder that is gone (or moved: watched again under its new name)."""
        wd = self.watches.pop(folder, None)
        if wd is not None and self.paths.pop(wd, None) is not None and self.fd >= 0:
            libc.inotify_rm_watch(self.fd, wd)

    def changes(self):
        """{folder: {names with events}} since the last call; a folder's own event counts under its
        parent. Sets `overflowed` when the kernel dropped events."""
        changed: dict[str, set] = {}
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            self.parse(data, changed)
        return changed

    def parse(self, data, changed):
        at = 0
        while at + HEADER.size <= len(data):
            wd, mask, _, length = HEADER.unpack_from(data, at)
            name = data[at + HEADER.size:at + HEADER.size + length].rstrip(b"\0")
            at += HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                self.overflowed = True  # events were lost: the caller looks at everything
                continue
            folder = self.paths.get(wd)
            if folder is None:
                continue  # a folder already dropped
            if mask & IN_IGNORED:
                self.paths.pop(wd, None)
                if self.watches.get(folder) == wd:
                    self.watches.pop(folder)
            if name:
                changed.setdefault(folder, set()).add(os.fsdecode(name))
            elif folder:  # the folder itself: its parent looks again at its name
                parent, _, base = folder.rpartition("/")
                changed.setdefault(parent, set()).add(base)

    def close(self):
        if self.fd >= 0:
            self._closer()
            self.fd = -1
