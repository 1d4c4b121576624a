"""Sessions: the conversation written down as it happens, so it outlives the process.

The problem. A run's messages live in a Python list; when the process ends, or crashes, or the
laptop sleeps, they are gone, and a conversation cannot be picked up tomorrow. `--transcript`
rewrites one JSON file after every turn, which is fine for one run but costs the whole history on
every write, and a crash in the middle of the rewrite can leave half a file.

The mechanism. A session is a JSON Lines file, one event per line, only ever appended to:

    {"format": "tinyharness-session", "version": 1, "id": ..., "folder": ..., "started": ...,
     "model": ...}
    {"type": "user", "time": ..., "message": {"role": "user", "content": "..."}}
    {"type": "assistant", "time": ..., "message": {...}, "usage": {"prompt_tokens": ...}}
    {"type": "tool", "time": ..., "message": {"role": "tool", "tool_call_id": ..., "content": ...}}
    {"type": "notice", "time": ..., "text": "Interrupted: ..."}      (seen by the user, never sent)
    {"type": "compaction", "time": ..., "summary": {...}, "replaced": [...whole messages...]}
    {"type": "clear", "time": ...}                                      (/clear: start afresh)
    {"type": "end", "time": ..., "reason": "quit"}

The first line says which format and version the rest is in, so a later harness can read (or refuse)
an old file. Each event is written and flushed when it happens: a crash loses at most the line being
written. Appending is cheap (the size of one message), and old lines never change, so a file being
written is always a valid prefix of the final one. Loading replays the events into the message list;
a line that does not parse (a cut last line, a corrupt byte) ends the replay there, with a warning,
and the damaged file is kept beside the repaired one (`ID.jsonl.damaged`) before the session goes
on.

Where: `$XDG_DATA_HOME/tinyharness/sessions/`, or `~/.local/share/tinyharness/sessions/` (the XDG
base directory rule), one file per session named by its id (time first, so names sort by age).

A session file is input like any other: it may be hand-edited, come from another tool or another
version, or be something else under the same name. Only a regular file is opened (a FIFO would block
the reader forever), every field of the header and of each event is checked when it is read (a
`"id": 5`, a null folder, a list where a text belongs, a nesting too deep to parse), and an event
that fails the check is a damaged line like a cut one. A writer holds an exclusive lock (flock) on
the file for its whole life, so a second `chat --resume` of the same session is refused, with the
process id of the one that has it, instead of interleaving its events. A write that fails (a full
disk, a read-only or removed folder) is said once on stderr, with what was not saved; the run goes
on.

Where it lives. Writing (the format's header, opening, locking, appending) is sessions/writer.py;
the checks on every field read back are sessions/checks.py; this module reads, repairs, resumes and
lists sessions, and its names (and theirs) are importable from here.

What it cannot do. The file holds everything the model saw, secrets included, in clear text in your
home folder (0600, in folders the harness makes 0700, but unencrypted). A flush reaches the
operating system, not the disk: a power cut (as opposed to a crash of the process) can still lose
the last events; an fsync per line would cost a disk write per message. The policy's cuts are not
events: a resumed session starts from the whole results and cuts them again the same way.
"""
import io
import json
import os
import sys
from pathlib import Path

from ..console import printable
from ..filedoor import write_text
from .checks import event_problem, header_problem
from .writer import (
    MESSAGE_TYPES,
    SessionError,
    SessionWriter,
    claim,
    json_line,
    open_regular,
    sessions_dir,
)

UNANSWERED = ("ERROR: the session file holds no result for this call (the run ended, or the file "
              "was cut, before it was written); it may or may not have run.")
LINE_CAP = 16 << 20      # bytes of one line (an event with an image is a few MiB): longer is damage
FILE_CAP = 256 << 20     # bytes of a session file that is read; a bigger one is named and left
LIST_LIMIT = 50          # `tinyharness sessions` shows this many, newest first (--all: every one)
WIDTH = 100              # and fits its lines in this many columns


class Session:
    """A session read back: its header, its events, the message list they replay to, and a warning
    when the file was damaged (then `good_lines` is how many lines could be read)."""

    def __init__(self, path, header, events, warning=None, good_lines=0):
        self.path, self.header, self.events, self.warning = Path(path), header, events, warning
        self.good_lines = good_lines

    @property
    def id(self):
        return self.path.stem  # the name `sessions` lists and `--resume` finds

    def messages(self):
        """Replay the events into the history the model would see now. A server refuses a call
        without its result and a result without its call, which a file from elsewhere (or a crash
        between a call and its result) can hold: a result that answers no open call is left out, and
        an open call gets UNANSWERED as its result before the next message."""
        messages: list[dict] = []
        open_calls: list[str] = []  # the ids of calls with no result yet

        def close_calls():
            messages.extend({"role": "tool", "tool_call_id": call_id,
                             "content": UNANSWERED} for call_id in open_calls)
            open_calls.clear()
        for event in self.events:
            kind = event.get("type")
            message = event.get("message")
            if kind == "tool" and isinstance(message, dict):
                if message.get("tool_call_id") in open_calls:
                    open_calls.remove(message["tool_call_id"])
                    messages.append(message)
            elif kind in MESSAGE_TYPES and isinstance(message, dict):
                close_calls()
                # a file from elsewhere: servers want ""
                if kind == "assistant" and message.get("content") is None:
                    message = {**message, "content": ""}
                messages.append(message)
                open_calls[:] = ([c["id"] for c in message.get("tool_calls") or []
                                  if isinstance(c, dict)])
            elif kind == "compaction":
                close_calls()
                replaced = len(event.get("replaced") or [])
                messages = messages[:1] + [event["summary"]] + messages[1 + replaced:]
            elif kind == "clear":
                close_calls()
                messages = messages[:1]
        close_calls()
        return messages

    def user_tasks(self):
        """What the user typed: user messages that the harness did not write."""
        tasks = []
        for event in self.events:
            message = event.get("message") or {}
            if event.get("type") == "user":
                text = message_text(message)
                if not text.startswith("[harness]"):
                    tasks.append(text)
        return tasks


def message_text(message):
    """A message's text, whether its content is a string or a list of parts (an image beside
    text)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return (" ".join(part["text"] for part in content if isinstance(part, dict)
                         and isinstance(part.get("text"), str)))
    return content if isinstance(content, str) else ""


class Damaged:
    """The line a reading stopped at, and why."""

    def __init__(self, number, problem):
        self.number, self.problem = number, problem


def too_big(path, size):
    return SessionError(f"{path} is {size:,} bytes, more than the {FILE_CAP >> 20} MiB a session "
                        "is read up to; it is left as it is")


def read_events(file, path):
    """The header, then each event, of a session file read one line at a time, each line at most
    LINE_CAP bytes. A line that is not a whole JSON object, is longer than the cap, or fails its
    check ends the reading: a Damaged comes last. No usable header: SessionError."""
    header, number = None, 0
    while line := file.readline(LINE_CAP + 1):
        number += 1
        if len(line) > LINE_CAP:
            problem = f"a line of more than {LINE_CAP >> 20} MiB"
        elif not line.strip():
            continue
        else:
            try:
                item = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):  # RecursionError: nested deeper than json goes
                problem = "a cut or corrupt line, e.g. from a crash"
            else:
                problem = header_problem(item) if header is None else event_problem(item)
        if problem and header is None:
            raise SessionError(f"{path} is not a usable tinyharness session: {problem}")
        if problem:
            yield Damaged(number, problem)
            return
        header = header or item
        yield item
    if header is None:
        raise SessionError(f"{path} is not a usable tinyharness session: it is empty")


def parse_file(file, path):
    """A Session from an open session file (binary). A damaged line ends the reading there:
    everything before it is kept and `warning` says what was lost."""
    header = None
    events: list[dict] = []
    for item in read_events(file, path):
        if isinstance(item, Damaged):
            warning = (f"warning: {path} is damaged at line {item.number} ({item.problem}); the "
                       f"session goes on from the {len(events)} events before it.")
            return Session(path, header, events, warning, item.number - 1)
        if header is None:
            header = item
        else:
            events.append(item)
    return Session(path, header, events, None, len(events) + 1)


def parse(data, path):
    """A Session from the bytes of a session file (parse_file)."""
    return parse_file(io.BytesIO(data), path)


def opened(path):
    """A session file open for reading (a regular file only: a FIFO under a session's name is an
    error, not a hang), refused with SessionError when it is bigger than FILE_CAP."""
    try:
        fd = open_regular(path, os.O_RDONLY)
    except OSError as e:
        raise SessionError(f"cannot read the session {path}: {e.strerror or e}") from None
    size = os.fstat(fd).st_size
    if size > FILE_CAP:
        os.close(fd)
        raise too_big(path, size)
    return open(fd, "rb")


def load(path):
    """Read a session file, with the caps of read_events and opened."""
    with opened(path) as file:
        return parse_file(file, Path(path))


def repair(session, fd):
    """Keep the damaged file as ID.jsonl.damaged and rewrite the readable events in place (the same
    file, so the lock held on it stays good), so what is appended next is not stuck behind a broken
    line."""
    damaged = session.path.with_name(session.path.name + ".damaged")
    copy = open_regular(damaged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with open(copy, "wb") as file:  # a megabyte at a time: the damaged line can be a long one
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            offset += file.write(chunk)
    lines = [json_line(session.header)] + [json_line(e) for e in session.events]
    os.ftruncate(fd, 0)
    text = ("\n".join(lines) + "\n").encode("utf-8")
    while text:
        text = text[os.write(fd, text):]  # O_APPEND: at the (new) end, which is the start
    return damaged


def resume(path, err=None):
    """(Session, its writer) for a session to go on with: locked first (SessionError when another
    process has it), then read, then repaired when it was damaged. The caller closes the writer when
    it does not go on."""
    fd = claim(path)
    try:
        if (size := os.fstat(fd).st_size) > FILE_CAP:
            raise too_big(path, size)
        os.lseek(fd, 0, os.SEEK_SET)
        with io.BufferedReader(io.FileIO(fd, "r", closefd=False)) as file:
            session = parse_file(file, Path(path))
        if session.warning:
            try:
                repair(session, fd)
            except OSError as e:
                print(printable(f"warning: the damaged session {path} could not be repaired "
                                f"({e.strerror or e})"),
                      file=err or sys.stderr)
    except BaseException:
        os.close(fd)
        raise
    writer = SessionWriter(session.path, written=len(session.messages()), fd=fd, err=err)
    if not writable(fd):
        writer.failed = "the file is read-only"
        print(printable(f"warning: the session {path} is read-only: what is said from here on is "
                        "not saved in it (--transcript PATH can "
                        "keep a copy elsewhere)."), file=writer.err, flush=True)
    return session, writer


def writable(fd):
    import fcntl
    return (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)


def all_sessions(directory=None):
    """Every session file, newest first (the id starts with the time)."""
    folder = Path(directory or sessions_dir())
    try:
        return (sorted(folder.glob("*.jsonl"), key=lambda p: p.name, reverse=True)
                if folder.is_dir() else [])
    except OSError:
        return []


def read_header(path):
    """The header of a session file when it is usable, else None (only the first line is read, at
    most LINE_CAP bytes of it)."""
    try:
        fd = open_regular(path, os.O_RDONLY)
        with open(fd, "rb") as file:
            line = file.readline(LINE_CAP + 1)
        header = json.loads(line.decode("utf-8", errors="replace")) if len(line) <= LINE_CAP else 0
        return None if header_problem(header) else header
    except (OSError, ValueError, RecursionError):
        return None


def latest_for(folder, directory=None):
    """The newest session started in `folder`, or None."""
    folder = str(Path(folder).resolve())
    for path in all_sessions(directory):
        header = read_header(path)
        if header and header.get("folder") == folder:
            return path
    return None


def find(session_id, directory=None):
    """The session with this id (or a unique start of one)."""
    session_id = session_id.strip()
    session_id = session_id.removesuffix(".jsonl")
    matches = [p for p in all_sessions(directory) if p.stem == session_id]
    matches = (matches
               or [p for p in all_sessions(directory) if session_id
                   and p.stem.startswith(session_id)])
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionError(f"no session with the id {session_id!r} in "
                           f"{Path(directory or sessions_dir())}; `tinyharness sessions` lists "
                           "them")
    raise SessionError(f"{session_id!r} starts {len(matches)} session ids; give more of it")


def home_short(folder):
    """~/x for a folder in the home folder: shorter, and the same for every user."""
    home = os.path.expanduser("~")
    if folder == home or folder.startswith(home.rstrip("/") + "/"):
        return "~" + folder[len(home.rstrip("/")):]
    return folder


def cut_left(text, width):
    return text if len(text) <= width else "..." + text[-(width - 3):]


def cut_right(text, width):
    return text if len(text) <= width else text[:width - 3] + "..."


def listing(directory=None, limit=LIST_LIMIT, folder=None):
    """(rows, skipped, left out): the rows `tinyharness sessions` prints (id, turns, folder, first
    task), the files it could not read as (name, reason), and how many sessions it did not list."""
    rows: list[tuple] = []
    skipped, left_out = [], 0
    for path in all_sessions(directory):
        if folder is not None:
            header = read_header(path)
            if not header or header["folder"] != folder:
                continue
        if limit is not None and len(rows) >= limit:
            left_out += 1
            continue
        try:
            header, turns, first = summary(path)
        except SessionError as e:
            skipped.append((path.name, str(e)))
            continue
        rows.append((path.stem, str(turns), home_short(header["folder"]), " ".join(first.split()),
                     # the last two: for --json
                     header["folder"], header.get("model")))
    return rows, skipped, left_out


def summary(path):
    """(header, how many tasks the user typed, the first of them) of a session file, read a line at
    a time and kept no longer than the line: what the listing shows, and no more."""
    header, turns, first = None, 0, ""
    with opened(path) as file:
        for item in read_events(file, path):
            if isinstance(item, Damaged):
                break
            if header is None:
                header = item
            elif item.get("type") == "user":
                text = message_text(item.get("message") or {})
                if not text.startswith("[harness]"):
                    turns, first = turns + 1, first if turns else text
    return header, turns, first


def sessions_command(directory=None, out=print, show_all=False, here=False, err=None,
                     as_json=False):
    folder = str(Path.cwd().resolve()) if here else None
    rows, skipped, left_out = listing(directory, None if show_all else LIST_LIMIT, folder)
    err = err or (lambda text: print(text, file=sys.stderr))
    for name, reason in skipped:
        err(printable(f"note: skipped {name}: {reason}"))
    if as_json:  # for scripts: one object per session, newest first, nothing else on stdout
        for session_id, turns, _, first, whole_folder, model in rows:
            out(json_line({"id": session_id, "turns": int(turns), "folder": whole_folder,
                           "model": model, "first_task": first}))
        return 0
    if not rows:
        where = f" started in {folder}" if here else ""
        out(printable(f"No sessions{where} yet in {Path(directory or sessions_dir())}."))
        return 0
    head = ("ID", "TURNS", "FOLDER", "FIRST TASK")
    id_width = max(len(printable(r[0])) for r in rows + [head])
    folder_width = min(28, max(len(printable(r[2])) for r in rows + [head]))
    task_width = max(10, WIDTH - id_width - 5 - folder_width - 6)
    for row in [head] + rows:
        cells = [printable(row[0]).ljust(id_width), row[1].rjust(5),
                 cut_left(printable(row[2]), folder_width).ljust(
            folder_width), cut_right(printable(row[3]), task_width)]
        out("  ".join(cells).rstrip())
    if left_out:
        out(f"({left_out} older session{'s' if left_out != 1 else ''} not listed; `tinyharness "
            "sessions --all` lists every one)")
    return 0


class TranscriptWriter:
    """--transcript PATH: the whole history as JSON, rewritten whenever messages were added. A write
    that fails warns once on `err` and the run goes on without it."""

    def __init__(self, path, err=None):
        self.path, self.err, self.failed = path, err or sys.stderr, None

    def sync(self, messages):
        if not self.path or self.failed:
            return
        try:
            # filedoor.py: no link, no FIFO, temp and rename
            write_text(self.path, json.dumps(messages, indent=2))
        except OSError as e:
            self.failed = e.strerror or str(e)
            print(printable(f"warning: the transcript {self.path} could not be written "
                            f"({self.failed}): it is not kept from here on ({len(messages)} "
                            "messages so far); the run goes on."),
                  file=self.err, flush=True)


def keeper(*writers):
    """One on_update for the loop that feeds every writer given (None: none)."""
    live = [w for w in writers if w]
    return (lambda messages: [w.sync(messages) for w in live]) if live else None


class UsageTap:
    """Wraps a client so the session learns each call's usage (the loop passes only messages along).
    Everything else is the client's own: `tap.client.model = ...` changes the model."""

    def __init__(self, client, writer=None):
        self.client, self.writer, self.last_usage = client, writer, {}

    def chat(self, *args, **kwargs):
        reply = self.client.chat(*args, **kwargs)
        self.last_usage = reply[1] if isinstance(reply[1], dict) else {}
        if self.writer:
            self.writer.usage = self.last_usage
        return reply

    def __getattr__(self, name):
        return getattr(self.client, name)


def start_or_warn(folder, model, err):
    """A new session, or None with a warning when the data folder cannot be written (the work goes
    on)."""
    try:
        return SessionWriter.start(Path(folder).resolve(), model)
    except (OSError, SessionError) as e:
        why = getattr(e, "strerror", None) or e  # a SessionError has no strerror
        print(f"warning: cannot write a session in {sessions_dir()} ({why}); going on without one",
              file=err)
        return None
