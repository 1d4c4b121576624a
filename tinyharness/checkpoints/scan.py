"""What the workspace holds, as the store's trees: kept up to date by looking again only where
something changed.

The problem. A checkpoint is the whole workspace, but hashing every file before every command is
out of the question (a 50 MiB file costs a tenth of a second, a 10,000-file tree a second).

The mechanism. `Snapshot` holds, for every folder, its entries: kind (file, link, folder), mode,
a stat key (size, mtime, inode, ctime) and the digest of the bytes (a link: its target). A file is
read and kept in the store (store.py) only when its key differs from the one last seen; a file whose
mtime was within two seconds of the moment it was read is read again next time (file times are
coarser than the clock: a second write in the same tick would keep the key). `look(folder, names)`
lists one folder again and reads only the names the watcher (watch.py) reported, or whose key
changed; a new folder is scanned whole, a folder gone is dropped. Each folder's tree digest is kept
until something beneath it changes, so a checkpoint writes the trees on the way to the top and
nothing else. Files are opened beneath the workspace (openat2 RESOLVE_BENEATH, O_NOFOLLOW,
O_NONBLOCK): a link leads nowhere else, a FIFO never hangs.

What it cannot do. Left out: special files (FIFOs, sockets, devices: they hold no bytes); and,
said once per run, files over the size cap (SIZE_CAP), files and folders it may not read, and
whatever the caller's `skip` names. Owners, times, extended attributes and hard links are not
kept: a restored file has its bytes and its mode, and two names of one file come back as two
files (a write through one name is seen under the other too: `linked`).
"""
import os
import stat
import time

from ..sandbox.beneath import open_beneath

SIZE_CAP = 256 << 20  # bytes: a bigger file is left out (said once per run)
RACY_NS = 2_000_000_000
FILE, LINK, FOLDER = "f", "l", "d"


def join(folder, name):
    return f"{folder}/{name}" if folder else name


def changed(before, entry):
    """Whether an entry changed what a tree holds: its kind, mode or bytes (a folder: also its
    identity, a folder replaced by another of the same name). A new stat key alone (a touch)
    is no change."""
    return (before is None or before[:3] != entry[:3]
            or (entry[0] == FOLDER and before[3][2] != entry[3][2]))


class Snapshot:
    """folder -> {name: [kind, mode, digest-or-target, key, racy]}; '' is the workspace."""

    def __init__(self, root, store, watcher=None, skip=None, cache=None):
        self.root, self.store, self.watcher = root, store, watcher
        self.skip = skip or (lambda path: False)
        self.folders, self.digests = {}, {}  # entries, and the tree digest of each settled folder
        self.cache = cache or {}  # path -> [key, digest]: what an earlier run read
        self.left_out = {}  # path -> why
        self.changed = set()  # paths whose entry changed since the caller last emptied it
        self.linked = {}  # inode -> the paths of a file with more than one name

    def other_names(self, paths):
        """{folder: {names}} of the other names of the files among `paths` that have several."""
        inodes = {e[3][2] for p in paths if (e := self.entry_of(p)) and e[0] == FILE}
        others: dict[str, set] = {}
        for inode in inodes & set(self.linked):
            for path in self.linked[inode] - set(paths):
                folder, _, name = path.rpartition("/")
                if folder in self.folders:  # not a folder gone since
                    others.setdefault(folder, set()).add(name)
        return others

    def entry_of(self, path):
        folder, _, name = path.rpartition("/")
        return self.folders.get(folder, {}).get(name)

    # --- looking ------------------------------------------------------------------------------
    def scan(self, folder=""):
        """Look at the folder and everything beneath it (a watch first, then the listing); by a
        list of folders still to look at, not recursion: a tree thousands of folders deep is a
        tree like any other."""
        todo = [folder]
        while todo:
            folder = todo.pop()
            if self.watcher is not None:
                self.watcher.add(folder)
            self.look(folder, ())
            todo += [join(folder, name) for name, entry in self.folders.get(folder, {}).items()
                     if entry[0] == FOLDER]

    def look(self, folder, names, watched=False):
        """List one folder again: read the files in `names` and those whose key changed; scan a new
        folder, drop one that is gone. Returns the new sub-folders it scanned. `watched`: every
        write since the last look is among `names` (the watcher said so), so a file read soon
        after its last write is not read again."""
        old = self.folders.get(folder, {})
        try:
            listing = os.scandir(os.path.join(self.root, folder))
        except OSError as e:
            return self.unlisted(folder, e)
        new, differs = {}, False
        added: list[str] = []  # new sub-folders, filled by note()
        with listing:
            for item in listing:
                path = join(folder, item.name)
                if self.skip(path):
                    continue
                before = old.get(item.name)
                entry = self.entry(path, item, before, item.name in names, watched)
                if entry is None:
                    continue
                new[item.name] = entry
                if changed(before, entry):
                    differs = True
                    self.note(path, before, entry, added)
        for name in set(old) - set(new):
            differs = True
            self.note(join(folder, name), old[name], None, added)
        self.folders[folder] = new
        if differs:
            self.unsettle(folder)
        return added

    def unlisted(self, folder, error):
        if folder:
            self.left_out[folder] = f"could not be listed ({error.strerror})"
        self.drop(folder)
        return []

    def note(self, path, old, new, added):
        """An entry changed: count it, drop a folder that went, remember one that came."""
        self.changed.add(path)
        if old is not None and old[0] == FOLDER and (new is None or new[0] != FOLDER
                                                     or new[3] != old[3]):
            self.drop(path)
        if new is not None and new[0] == FOLDER and (old is None or old[0] != FOLDER
                                                     or old[3] != new[3]):
            added.append(path)

    def drop(self, folder):
        for inner in [f for f in self.folders if f == folder or f.startswith(folder + "/")]:
            for name in self.folders.pop(inner):
                self.changed.add(join(inner, name))
            self.digests.pop(inner, None)
            if self.watcher is not None:
                self.watcher.drop(inner)

    def unsettle(self, folder):
        """The folder's tree, and each above it, must be written again."""
        while True:
            self.digests.pop(folder, None)
            if not folder:
                return
            folder = folder.rpartition("/")[0]

    # --- one entry ------------------------------------------------------------------------------
    def entry(self, path, item, old, touched, watched=False):
        """[kind, mode, digest-or-target, key, racy] for one listed name, or None (left out)."""
        try:
            info = item.stat(follow_symlinks=False)
        except OSError:
            return None
        mode, key = stat.S_IMODE(info.st_mode), [info.st_size, info.st_mtime_ns, info.st_ino,
                                                 info.st_ctime_ns]
        if stat.S_ISDIR(info.st_mode):
            return [FOLDER, mode, None, [0, 0, info.st_ino, 0], False]
        if stat.S_ISLNK(info.st_mode):
            return [LINK, mode, os.fsdecode(os.readlink(os.path.join(self.root, path))), key, False]
        if not stat.S_ISREG(info.st_mode):  # a FIFO, socket or device: no bytes to keep
            return None
        if info.st_nlink > 1:  # a write through another name is reported in that name's folder
            self.linked.setdefault(info.st_ino, set()).add(path)
        if (not touched and old is not None and old[0] == FILE and old[3] == key
                and (watched or not old[4])):
            return [FILE, mode, old[2], key, False]
        cached = self.cache.get(path)
        if not touched and old is None and cached and cached[0] == key:
            return [FILE, mode, cached[1], key, False]
        return self.read(path, mode, key)

    def read(self, path, mode, key):
        """Keep the file's bytes in the store; its entry, or None when it is left out."""
        if key[0] > SIZE_CAP:
            self.left_out[path] = f"is over {SIZE_CAP >> 20} MiB"
            return None
        try:
            fd = open_beneath(self.root, path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as e:
            self.left_out[path] = f"could not be read ({e.strerror})"
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None
            key = [info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns]
            digest = self.store.put_file(fd, info.st_size)
        finally:
            os.close(fd)
        self.left_out.pop(path, None)
        return [FILE, mode, digest, key, time.time_ns() - key[1] < RACY_NS]

    # --- the trees ------------------------------------------------------------------------------
    def digest(self):
        """The workspace's tree digest, writing the trees that changed, deepest first. A folder
        that could not be listed is left out of its parent's tree: its content is not known."""
        if "" in self.digests:
            return self.digests[""]
        unsettled = [f for f in self.folders if f not in self.digests]
        for folder in sorted(unsettled, key=lambda f: f.count("/") + bool(f), reverse=True):
            entries = {}
            for name, entry in self.folders[folder].items():
                inner = self.digests.get(join(folder, name)) if entry[0] == FOLDER else entry[2]
                if inner is not None:
                    entries[name] = [entry[0], entry[1], inner]
            self.digests[folder] = self.store.put_tree(entries)
        return self.digests.get("") or self.store.put_tree({})

    def files(self):
        """path -> [key, digest] of every file: what the next run need not read again."""
        return {join(folder, name): [entry[3], entry[2]]
                for folder, entries in self.folders.items()
                for name, entry in entries.items() if entry[0] == FILE and not entry[4]}
