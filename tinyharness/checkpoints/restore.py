"""Putting the workspace back as a checkpoint found it, without overwriting what you changed since.

The problem. Undo must bring back what a call deleted, overwrote or renamed (bytes, modes, symbolic
links, whole folders, `.git` included) and remove what it created - and must not take back a change
that was yours: a file you edited after the run is not the model's to lose.

The mechanism. Trees are compared (`diff`), skipping every folder whose digest is the same on both
sides, so the work grows with what differs. What the workspace holds now is compared with the
checkpoint. Your changes are what differs between each call's "after" and the next call's "before"
(or now): those paths are named and kept unless `force`. The rest is put back through the
harness's file door (filedoor.open_folder: each folder opened beneath the workspace following no
symbolic link, so a link the model left where a folder was leads nowhere): first what must go,
deepest first (a folder only when empty), then folders, then files and links (a new file beside the
name, its bytes checked against their digest, its mode set, renamed over the name), then the
folders' modes. A folder the model made read-only is opened up for the writes and given its mode
after.

What it cannot do. It restores bytes, modes and links, not owners, times or extended attributes;
two names of one file come back as two files. What the store left out (files over the cap, FIFOs,
unreadable files: said when they were left out) is left as it is. A folder that still holds kept
files is not removed. When the harness was killed mid-call, that call has no "after": every
difference since its checkpoint is taken as the run's (said).
"""
import hashlib
import os
import secrets
import stat

from ..filedoor import open_folder
from ..sandbox.beneath import open_beneath
from .scan import FILE, FOLDER, LINK, join
from .store import CHUNK, write_all


def diff(store, a, b):
    """{path: (entry in a, entry in b)} for every path whose entry differs; None = absent. A pair
    of folders with the same digest is skipped whole; the walk keeps a list, not the stack."""
    changes, todo = {}, [(a, b, "")]
    while todo:
        a, b, prefix = todo.pop()
        if a == b:
            continue
        left = store.get_tree(a) if a else {}
        right = store.get_tree(b) if b else {}
        for name in set(left) | set(right):
            x, y, path = left.get(name), right.get(name), join(prefix, name)
            if x == y:
                continue
            if not (x and y and x[0] == y[0] == FOLDER and x[1] == y[1]):
                changes[path] = (x, y)
            todo.append((x[2] if x and x[0] == FOLDER else None,
                         y[2] if y and y[0] == FOLDER else None, path))
    return changes


def yours(store, timeline, index, now):
    """(paths changed outside the run's calls since checkpoint `index`, whether a call had no
    "after"). `timeline`: every checkpoint of the workspace, oldest first."""
    changed, unknown = set(), False
    for i in range(index, len(timeline)):
        point = timeline[i]
        base = point["before"] if point.get("undone") else point.get("after")
        following = timeline[i + 1]["before"] if i + 1 < len(timeline) else now
        if base is None:
            unknown = True
            continue
        changed |= set(diff(store, base, following))
    return changed, unknown


class Restore:
    """One restore's work, and what it did: restored, removed, kept, failed (path, why)."""

    def __init__(self, workspace, store):
        self.workspace, self.store = workspace, store
        self.restored, self.removed, self.kept, self.failed = [], [], [], []
        self.opened = {}  # folder -> its mode, opened up for the writes

    def run(self, changes, keep=()):
        todo = {p: c for p, c in changes.items() if p not in keep}
        self.kept = sorted(p for p in changes if p in keep)
        for path in sorted(todo, reverse=True):  # deepest first
            now, then = todo[path]
            if now and (then is None or (FOLDER in (now[0], then[0]) and now[0] != then[0])):
                self.attempt(self.remove, path, now)
        for path in sorted(todo):
            now, then = todo[path]
            if then and then[0] == FOLDER and not (now and now[0] == FOLDER):
                self.attempt(self.make_folder, path)
        for path in sorted(todo):
            now, then = todo[path]
            if then and then[0] in (FILE, LINK):
                self.attempt(self.put, path, then)
        self.set_modes(todo)
        return self

    def attempt(self, step, path, *args):
        try:
            step(path, *args)
        except OSError as e:
            self.failed.append((path, e.strerror or str(e)))

    def folder(self, path):
        """(descriptor of path's folder, opened through the door, made writable; the name)."""
        parent = path.rpartition("/")[0]
        if parent and parent not in self.opened:
            self.open_up(parent)
        return open_folder(path, self.workspace, path)

    def open_up(self, folder):
        """Give a folder the model made read-only (or unlistable) its owner's rights for now."""
        fd = open_beneath(self.workspace, folder, getattr(os, "O_PATH", os.O_RDONLY)
                          | os.O_DIRECTORY, no_links=True)
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            self.opened[folder] = mode
            if mode & 0o700 != 0o700:
                os.chmod(f"/proc/self/fd/{fd}", mode | 0o700)
        finally:
            os.close(fd)

    def remove(self, path, now):
        fd, name = self.folder(path)
        try:
            if now[0] == FOLDER:
                os.rmdir(name, dir_fd=fd)  # only when empty: what was kept stays
            else:
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        self.removed.append(path)

    def make_folder(self, path):
        fd, name = self.folder(path)
        try:
            os.mkdir(name, 0o700, dir_fd=fd)
        finally:
            os.close(fd)
        self.opened[path] = 0o700

    def put(self, path, then):
        """A file's bytes (checked against their digest) or a link, beside the name, then renamed
        over it."""
        fd, name = self.folder(path)
        temp = f".{secrets.token_hex(6)}.tinyharness-undo"
        try:
            if then[0] == LINK:
                os.symlink(then[2], temp, dir_fd=fd)
            else:
                self.write(fd, temp, then[2], then[1])
            os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=fd)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)
        self.restored.append(path)

    def write(self, folder, temp, digest, mode):
        source = self.store.open_object(digest)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out, check = None, hashlib.sha256()
        try:
            out = os.open(temp, flags, 0o600, dir_fd=folder)
            while chunk := os.read(source, CHUNK):
                check.update(chunk)
                write_all(out, chunk)
            if check.hexdigest() != digest:
                raise OSError(0, "the store's copy is damaged; left as it is")
            os.fchmod(out, mode)
        finally:
            os.close(source)
            if out is not None:
                os.close(out)

    def set_modes(self, todo):
        """Each folder's mode as the checkpoint had it (deepest first); a folder opened up only for
        the writes gets its own back."""
        modes = dict(self.opened)
        modes.update({p: then[1] for p, (now, then) in todo.items() if then and then[0] == FOLDER})
        for path in sorted(modes, reverse=True):
            try:
                fd = open_beneath(self.workspace, path, getattr(os, "O_PATH", os.O_RDONLY)
                                  | os.O_DIRECTORY, no_links=True)
            except OSError:
                continue
            try:
                if stat.S_IMODE(os.fstat(fd).st_mode) != modes[path]:
                    os.chmod(f"/proc/self/fd/{fd}", modes[path])
            except OSError as e:
                self.failed.append((path, e.strerror))
            finally:
                os.close(fd)
