"""A session written down: one JSON line per event, appended and flushed, by one writer at a time.

The problem. A conversation that lives only in memory dies with the process, and a file rewritten
whole after every turn costs the whole history per write and can be left half-written by a crash.
Two harnesses resuming the same session at once would interleave their events into nonsense.

The mechanism. A SessionWriter opens (only) a regular file, 0600 in a folder made 0700 whatever the
umask (private_folder: the conversation is for its user only), takes an exclusive flock for its
whole life (a second writer is refused with the process id of the first), writes the header line
(FORMAT, VERSION) and then appends one line per event, flushed at once: a crash loses at most the
line being written, and the file is always a valid prefix of the final one. `sync` appends the
messages the loop added since the last call. A write that fails is said once on stderr; the run goes
on. StreamWriter sends the same events to an open stream (run --json). The format itself is
described in sessions/__init__.py, which reads these files back.

What it cannot do. A flush reaches the operating system, not the disk (no fsync per line), so a
power cut can still lose the last events; flock is advisory, so only writers that ask are kept out.
"""
import datetime
import errno
import json
import os
import re
import secrets
import stat
import sys
from pathlib import Path

from ..console import printable
from ..filedoor import data_dir, private_folder

FORMAT = "tinyharness-session"
VERSION = 1
MESSAGE_TYPES = ("system", "user", "assistant", "tool")


# what json.dumps(ensure_ascii=False) leaves raw and a line of JSON must not carry: DEL and the C1
# controls (U+009B is ESC [ to a terminal), the bidi controls (a right-to-left override turns what
# follows around), the line and paragraph separators (str.splitlines and JavaScript split at them),
# lone surrogates (UTF-8 cannot encode them). json.dumps escapes C0 itself.
ESCAPED = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")


def json_line(obj):
    """One event as one line of JSON, readable UTF-8 where it can be: every character above escaped
    as JSON's \\uXXXX, so the line is still valid JSON, reads back to the same text, and acts on no
    terminal it is printed to (run --json, chat --json, sessions --json, a session file)."""
    return ESCAPED.sub(lambda found: f"\\u{ord(found.group()):04x}",
                       json.dumps(obj, ensure_ascii=False))


class SessionError(Exception):
    """A session that cannot be found or read at all; the message says what to do."""


def sessions_dir():
    """$XDG_DATA_HOME/tinyharness/sessions, or ~/.local/share/tinyharness/sessions."""
    return data_dir() / "sessions"


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def new_id():
    """Time first (names sort by age), then random letters (two sessions in one second differ)."""
    return (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S-")
            + secrets.token_hex(3))


# --- Opening: regular files only, one writer at a time --------------------------------------------

def open_regular(path, flags, mode=0o600):
    """os.open that never blocks on a FIFO or a device and refuses anything but a regular file."""
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def lock_holder(fd):
    """The process id holding a flock on fd's file, from /proc/locks (Linux), or None."""
    info = os.fstat(fd)
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino} "
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as file:
            for line in file:
                fields = line.split()
                if ("FLOCK" in fields and where in line + " " and fields[4].isdigit()
                    and int(fields[4]) != os.getpid()):
                    return int(fields[4])
    except (OSError, IndexError):
        pass
    return None


def lock(fd, path):
    """Take the session's writer lock, or raise SessionError naming the process that has it."""
    import fcntl  # here: the rest of the module works where fcntl does not exist
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = lock_holder(fd)
        os.close(fd)
        who = f"process {pid}" if pid else "another process"
        raise SessionError(f"the session {Path(path).stem} is open in {who} (a tinyharness chat or "
                           "run); two writers would interleave its events. End that one first, or "
                           "start a new chat"
                           ) from None


def claim(path):
    """An fd for appending to an existing session, locked; read-only when the file cannot be written
    (then the writer says so once and keeps nothing). Raises SessionError."""
    try:
        fd = open_regular(path, os.O_RDWR | os.O_APPEND)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise SessionError(f"cannot open the session {path}: {e.strerror or e}") from None
        try:
            fd = open_regular(path, os.O_RDONLY)
        except OSError as e:
            raise SessionError(f"cannot open the session {path}: {e.strerror or e}") from None
    lock(fd, path)
    return fd


def unwritten_from(messages, written, last):
    """Where the messages not written yet begin: at `written`, unless the history was shortened
    since (the context policy collapses a long run's oldest turns into one line), then right after
    `last`, the newest message written (the loop only adds at the end; a collapse never takes the
    newest turns)."""
    if last is None or 0 < written <= len(messages) and messages[written - 1] is last:
        return min(written, len(messages))
    return next((i + 1 for i in range(len(messages) - 1, -1, -1) if messages[i] is last),
                min(written, len(messages)))


class SessionWriter:
    """Appends events to one session file. `sync(messages)` writes every message added to the
    history since the last sync, so it can be called as often as the loop likes (run_agent's
    on_update). A failed write warns once on `err` and the writer keeps nothing more: the run goes
    on."""

    def __init__(self, path, header=None, written=0, fd=None, err=None):
        self.path = Path(path)
        self.err = err or sys.stderr
        self.failed = None       # why the file stopped being written, once it did
        if fd is None:
            private_folder(self.path.parent)  # 0700, as the folders above it that it makes
            # 0600: everything the model saw
            fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            lock(fd, self.path)
        self.fd = fd
        self.written = written   # how many messages of the history are already in the file
        self.last = None         # the newest of them (unwritten_from)
        # the usage of the latest model call, attached to the next assistant event
        self.usage = {}
        if header:
            self.write(header)

    @classmethod
    def start(cls, folder, model, directory=None):
        """A new session for `folder`: a new file with its header line."""
        session_id = new_id()
        header = {"format": FORMAT, "version": VERSION, "id": session_id, "folder": str(folder),
                  "started": now(), "model": model}
        return cls(Path(directory or sessions_dir()) / f"{session_id}.jsonl", header)

    @property
    def id(self):
        return self.path.stem

    def write(self, event):
        """One line, whole, with os.write (no buffer left to fail again at close)."""
        if self.failed:
            return
        data = (json_line(event) + "\n").encode("utf-8")
        try:
            while data:
                data = data[os.write(self.fd, data):]
            # the file (or its folder) was removed: the write went nowhere
            if os.fstat(self.fd).st_nlink == 0:
                raise OSError(errno.ENOENT, "the file was removed")
        except OSError as e:
            self.failed = e.strerror or str(e)
            kind = event.get("type", "header")
            print(printable(f"warning: the session {self.path} could not be written "
                            f"({self.failed}): this {kind} event and everything after it are not "
                            "saved in it; the run goes on (--transcript PATH can keep a copy "
                            "elsewhere)."), file=self.err, flush=True)

    def event(self, kind, **fields):
        self.write({"type": kind, "time": now(), **fields})

    def sync(self, messages):
        """Write the messages added since the last sync (the context policy's stubs and collapsed
        turns are rewrites of old messages, not events: the file keeps the originals)."""
        for message in messages[unwritten_from(messages, self.written, self.last):]:
            role = message.get("role")
            extra = {"usage": self.usage} if role == "assistant" and self.usage else {}
            self.event(role if role in MESSAGE_TYPES else "user", message=message, **extra)
            if role == "assistant":
                self.usage = {}
        self.written, self.last = len(messages), messages[-1] if messages else None

    def notice(self, text):
        self.event("notice", text=text)

    def compaction(self, summary, replaced, messages):
        """The summary and every message it replaced, whole; then the history is `messages`."""
        self.event("compaction", summary=summary, replaced=replaced)
        self.written, self.last = len(messages), messages[-1] if messages else None

    def clear(self, messages):
        self.event("clear")
        self.written, self.last = len(messages), messages[-1] if messages else None

    def end(self, reason):
        self.event("end", reason=reason)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)  # the lock goes with it
            self.fd = None


class StreamWriter(SessionWriter):
    """The same events, one JSON object per line, on an open text stream instead of a file (run
    --json)."""

    def __init__(self, out):  # no file, no lock: the stream is the caller's
        self.out, self.path, self.err, self.failed, self.fd = out, Path("-"), sys.stderr, None, None
        self.written, self.last, self.usage = 0, None, {}

    def write(self, event):
        self.out.write(json_line(event) + "\n")
        self.out.flush()
