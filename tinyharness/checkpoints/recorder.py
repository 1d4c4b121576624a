"""A run's checkpoints: before each call that may change the workspace, what it held; after it, what
the call changed.

The problem. The model's account of what it changed is a claim; the record must come from the disk,
be taken before the change (a command cannot be asked afterwards what it deleted), and cost little
enough to be taken before every command.

The mechanism. `Recorder.around(label)` wraps a call (the loop wraps every call that is not a read,
extensions.py every command hook). Before: the first time, the store is opened, the watches set and
the whole workspace scanned (files an earlier run read are not read again); later, only what the
watcher reports. The tree's digest is the checkpoint, entered in the run's record with its label
and saved before the call starts. After: the same look gives the new digest and the paths the call
changed; a call that changed nothing leaves no checkpoint. Calls inside a call (a command hook
around a command) share the outer checkpoint. A record whose last checkpoint has no "after" is one
whose harness was killed mid-call: undo takes every difference since as the run's.

What it cannot do. A failure of the store (a full disk) ends checkpoints for the run, said once:
the calls still run, unrecorded. Changes made between calls (by you, by a stop hook) are not the
run's: they are the starting point of the next checkpoint, and an undo keeps them. Two calls at once
(parallel reads) need no checkpoint; anything else runs one at a time here.
"""
import contextlib
import json
import os
import threading
import time

from .scan import Snapshot
from .store import Store, new_run_id, read_all
from .watch import Watcher

LABEL_CHARS = 200
NAMES_KEPT = 200  # paths listed in a checkpoint's record; the count is always whole
SLOW_START = 3  # seconds: a first checkpoint slower than this is said


class Recorder:
    """One run's checkpoints of one workspace (a chat's, across its messages)."""

    def __init__(self, workspace, warn, root=None, watch=True):
        self.workspace, self.warn, self.root, self.watch = workspace, warn, root, watch
        self.lock, self.depth = threading.RLock(), 0
        self.store = self.snapshot = self.watcher = None
        self.failed, self.said = None, set()
        self.record = None

    @contextlib.contextmanager
    def around(self, label):
        """Checkpoint before the body, note what it changed after it."""
        with self.lock:
            self.depth += 1
            outer = self.depth == 1
            try:
                entry = self.guarded(self.before, label) if outer else None
                yield
            finally:
                self.depth -= 1
                if entry is not None:
                    self.guarded(self.after, entry)

    def guarded(self, step, *args):
        """A checkpoint that cannot be made never stops the call: said once, then none for the
        run."""
        if self.failed:
            return None
        try:
            return step(*args)
        except Exception as e:  # noqa: BLE001 - a full disk (OSError) or a bug: the run goes on
            self.failed = str(e) or type(e).__name__
            self.warn(f"[checkpoints] off for the rest of this run: {e}; changes from now on "
                      "cannot be undone")
            return None

    def start(self):
        self.store = Store(self.workspace, self.root).open()
        self.record = {"id": new_run_id(), "workspace": self.store.workspace,
                       "started": time.time(), "pid": os.getpid(), "checkpoints": []}
        self.watcher = Watcher(self.store.workspace) if self.watch else None
        cache = load_cache(self.store)
        self.snapshot = Snapshot(self.store.workspace, self.store, self.watcher, cache=cache)
        started = time.monotonic()
        self.snapshot.scan()
        self.snapshot.changed.clear()
        save_cache(self.store, self.snapshot)
        if time.monotonic() - started > SLOW_START:
            self.warn(f"[checkpoints] the first checkpoint of this run took "
                      f"{time.monotonic() - started:.0f} s ({len(cache)} files known from earlier "
                      "runs); the next ones look only at what changed")

    def look(self):
        """Bring the snapshot up to date: the folders the watcher names, or everything."""
        watcher = self.watcher
        assert self.snapshot is not None, "start() comes first"
        if watcher is not None and watcher.available:
            changes = watcher.changes()
            if watcher.available and not watcher.overflowed:
                added = [new for folder, names in sorted(changes.items())
                         if folder in self.snapshot.folders
                         for new in self.snapshot.look(folder, names, watched=True)]
                for folder in added:
                    self.snapshot.scan(folder)
                for folder, names in self.snapshot.other_names(self.snapshot.changed).items():
                    self.snapshot.look(folder, names)  # a hard link's other names
                self.say_left_out()
                return
            if watcher.broken:
                self.say_once("watch", f"[checkpoints] {watcher.broken}: each checkpoint now "
                                       "looks at every file (slower)")
            watcher.overflowed = False  # the scan below sees what the lost events said
        self.snapshot.scan()
        self.say_left_out()

    def before(self, label):
        if self.snapshot is None:
            self.start()
        else:
            self.look()
        assert self.snapshot is not None and self.store is not None and self.record is not None
        self.snapshot.changed.clear()
        entry = {"n": len(self.record["checkpoints"]) + 1, "time": time.time(),
                 "call": label[:LABEL_CHARS], "before": self.snapshot.digest(), "after": None}
        self.record["checkpoints"].append(entry)
        self.store.save_run(self.record)
        return entry

    def after(self, entry):
        self.look()
        assert self.snapshot is not None and self.store is not None and self.record is not None
        after, changed = self.snapshot.digest(), sorted(self.snapshot.changed)
        self.snapshot.changed.clear()
        if after == entry["before"]:
            self.record["checkpoints"].remove(entry)
        else:
            entry.update(after=after, changed=changed[:NAMES_KEPT], count=len(changed))
        self.store.save_run(self.record)

    def say_left_out(self):
        assert self.snapshot is not None
        for path, why in sorted(self.snapshot.left_out.items()):
            self.say_once(("left", path), f"[checkpoints] not kept, so not restored by undo: "
                                          f"{path} {why}")

    def say_once(self, key, text):
        if key not in self.said:
            self.said.add(key)
            self.warn(text)

    def close(self):
        if self.watcher is not None:
            self.watcher.close()


def load_cache(store):
    """What an earlier run read: path -> [key, digest] (nothing, if it does not read)."""
    try:
        fd = os.open(os.path.join(store.path, "cache.json"), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        return json.loads(read_all(fd))
    except ValueError:
        return {}
    finally:
        os.close(fd)


def save_cache(store, snapshot):
    store.write_file(os.path.join(store.path, "cache.json"),
                     json.dumps(snapshot.files(), separators=(",", ":")).encode("utf-8",
                                                                                "surrogatepass"))
