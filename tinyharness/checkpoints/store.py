"""The checkpoint store: every kept byte named by its digest, one record per run, each written so
that a kill at any moment leaves the store readable.

The problem. A checkpoint must hold the whole workspace as it was before a change (a deleted `.git`
comes back whole), yet cost little when almost nothing changed, and live where the model's commands
cannot reach it. The store must also survive the harness being killed half-way through writing it.

The mechanism. The store of a workspace is `$XDG_DATA_HOME/tinyharness/checkpoints/KEY/` (KEY: a
digest of the workspace's real path), its folders 0700 and files 0600: outside the workspace, where
the sandbox lets no command read or write (Landlock grants the workspace and a private TMPDIR only).
A file's bytes are an object named by their SHA-256 (`objects/ab/cdef...`), kept once however many
checkpoints hold them. A folder is a tree object: its entries' names, kinds, modes and digests (a
symbolic link's target inline), as JSON; a checkpoint is one tree digest, and a change writes only
the trees on the way from what changed to the top, as git does. Every object is written to a
temporary name and renamed to its digest; a run's record (`runs/ID.json`: its checkpoints, each the
call it came before, the tree before and after, the paths changed) is rewritten by rename after the
objects it names exist. A SIGKILL leaves the old record or the new one, each naming only whole
objects; a temporary file it leaves is removed by a later run.

What it cannot do. Nothing is fsync'd: a kill of the harness loses nothing, a power cut may lose the
last checkpoints or leave an object short; a restore checks each object's digest and refuses a
damaged one rather than write a wrong byte. The store is not pruned: it grows with what changed
(objects are shared between checkpoints and runs). With `--sandbox off` commands can reach it.
"""
import datetime
import hashlib
import json
import os
import secrets
import stat
import time

RECORD_CAP = 64 * 1024 * 1024  # bytes of one run's record: a forged huge one is skipped
CHUNK = 1 << 20
SMALL = 1 << 20  # a file up to this size is read whole, then written only if the store lacks it
FICLONE = 0x40049409  # ioctl: share the source's blocks (Linux, btrfs and XFS)
STALE_TEMP = 24 * 3600  # a temporary file older than this was left by a killed run


def data_root():
    """$XDG_DATA_HOME/tinyharness/checkpoints, or ~/.local/share/tinyharness/checkpoints."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative path is invalid
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "tinyharness", "checkpoints")


def private_dir(path):
    """Make the folder and any missing one above it 0700; returns the path."""
    if not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent != path:
            private_dir(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    return path


def new_run_id():
    """Time first (records sort by age), then random letters."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


class Store:
    """One workspace's store: objects, trees, the runs' records."""

    def __init__(self, workspace, root=None):
        self.workspace = os.path.realpath(workspace)
        key = hashlib.sha256(os.fsencode(self.workspace)).hexdigest()[:24]
        self.path = os.path.join(root or data_root(), key)
        self.objects = os.path.join(self.path, "objects")
        self.runs = os.path.join(self.path, "runs")
        self.temp = os.path.join(self.path, "tmp")

    def exists(self):
        return os.path.isdir(self.runs)

    def open(self):
        """Make the folders (0700) and name the workspace; remove what a killed run left."""
        for folder in (self.objects, self.runs, self.temp):
            private_dir(folder)
        name = os.path.join(self.path, "workspace")
        if not os.path.exists(name):
            self.write_file(name, os.fsencode(self.workspace) + b"\n")
        self.sweep_temp()
        return self

    def sweep_temp(self):
        cutoff = time.time() - STALE_TEMP
        for entry in os.scandir(self.temp):
            try:
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                pass

    # --- objects --------------------------------------------------------------------------------
    def object_path(self, digest):
        return os.path.join(self.objects, digest[:2], digest[2:])

    def has(self, digest):
        return os.path.exists(self.object_path(digest))

    def new_temp(self):
        """(descriptor, path) of a new private file in the store's tmp folder."""
        path = os.path.join(self.temp, secrets.token_hex(8))
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(path, flags, 0o600), path

    def settle(self, temp, digest):
        """Rename a written temporary file to its digest's name (or drop it: already kept)."""
        final = self.object_path(digest)
        if os.path.exists(final):
            os.unlink(temp)
            return digest
        private_dir(os.path.dirname(final))
        os.replace(temp, final)
        return digest

    def put_bytes(self, data):
        digest = hashlib.sha256(data).hexdigest()
        if self.has(digest):
            return digest
        fd, temp = self.new_temp()
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        return self.settle(temp, digest)

    def put_file(self, fd, size):
        """The digest of what the open file holds, its bytes kept: a small file read whole; a big
        one cloned (a reflink where the file system shares blocks, else a copy in the kernel), then
        hashed from the copy, which nothing else can change."""
        if size <= SMALL:
            return self.put_bytes(read_all(fd))
        out, temp = self.new_temp()
        try:
            copy_into(fd, out)
            digest, at = hashlib.sha256(), 0
            while chunk := os.pread(out, CHUNK, at):
                digest.update(chunk)
                at += len(chunk)
        except BaseException:
            os.close(out)
            os.unlink(temp)
            raise
        os.close(out)
        return self.settle(temp, digest.hexdigest())

    def open_object(self, digest):
        """A descriptor on the object (OSError when it is missing, or not a regular file: a FIFO
        put there never hangs a restore)."""
        return open_regular(self.object_path(digest))

    def get_bytes(self, digest):
        fd = self.open_object(digest)
        try:
            data = read_all(fd)
        finally:
            os.close(fd)
        if hashlib.sha256(data).hexdigest() != digest:
            raise OSError(f"the store's object {digest[:12]} is damaged")
        return data

    # --- trees: a folder's entries {name: [kind, mode, digest-or-target]} -----------------------
    def put_tree(self, entries):
        return self.put_bytes(json.dumps(sorted(entries.items()), separators=(",", ":"))
                              .encode("utf-8", "surrogatepass"))

    def get_tree(self, digest):
        try:
            return {name: entry for name, entry in
                    json.loads(self.get_bytes(digest).decode("utf-8", "surrogatepass"))}
        except (ValueError, TypeError, RecursionError):  # a forged object with the right name
            raise OSError(f"the store's tree {digest[:12]} is damaged") from None

    # --- the runs' records ----------------------------------------------------------------------
    def save_run(self, record):
        """Write the run's record by rename; a run that has nothing to undo leaves none."""
        path = os.path.join(self.runs, record["id"] + ".json")
        if not record["checkpoints"] and not record.get("undos"):
            if os.path.exists(path):
                os.unlink(path)
            return
        fd, temp = self.new_temp()
        try:
            write_all(fd, json.dumps(record, indent=1).encode())
        finally:
            os.close(fd)
        os.replace(temp, path)

    def load_runs(self):
        """Every run's record, oldest first (a file that does not read is skipped)."""
        records: list[dict] = []
        if not os.path.isdir(self.runs):
            return records
        for name in sorted(os.listdir(self.runs)):
            if name.endswith(".json"):
                try:
                    fd = open_regular(os.path.join(self.runs, name))
                    try:
                        records.append(json.loads(read_all(fd, RECORD_CAP)))
                    finally:
                        os.close(fd)
                except (OSError, ValueError, RecursionError):  # a FIFO, a forged or cut record
                    continue
        return records

    def write_file(self, path, data):
        fd, temp = self.new_temp()
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, path)


def copy_into(source, out):
    """Copy a whole file between descriptors: FICLONE (btrfs, XFS: no byte copied), else
    copy_file_range, else read and write."""
    try:
        import fcntl
        fcntl.ioctl(out, FICLONE, source)
        return
    except (ImportError, OSError):
        pass
    os.lseek(source, 0, os.SEEK_SET)
    try:
        while os.copy_file_range(source, out, CHUNK * 8):
            pass
        return
    except (AttributeError, OSError):
        os.lseek(source, 0, os.SEEK_SET)
        os.lseek(out, 0, os.SEEK_SET)
        os.ftruncate(out, 0)
    while chunk := os.read(source, CHUNK):
        write_all(out, chunk)


def read_all(fd, cap=None):
    parts, size = [], 0
    while chunk := os.read(fd, CHUNK):
        parts.append(chunk)
        size += len(chunk)
        if cap is not None and size > cap:
            raise OSError(f"more than {cap:,} bytes")
    return b"".join(parts)


def open_regular(path):
    """A descriptor on PATH if it is a regular file (no link followed, a FIFO opened without
    waiting and refused), else OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def is_private(path):
    """True when nobody but the owner can read the folder or file."""
    return not stat.S_IMODE(os.stat(path).st_mode) & 0o077
