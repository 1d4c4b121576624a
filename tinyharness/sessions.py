"""Sessions: the conversation written down as it happens, so it outlives the process.

The problem. A run's messages live in a Python list; when the process ends, or crashes, or the
laptop sleeps, they are gone, and a conversation cannot be picked up tomorrow. `--transcript`
rewrites one JSON file after every turn, which is fine for one run but costs the whole history on
every write, and a crash in the middle of the rewrite can leave half a file.

The mechanism. A session is a JSON Lines file, one event per line, only ever appended to:

    {"format": "tinyharness-session", "version": 1, "id": ..., "folder": ..., "started": ..., "model": ...}
    {"type": "user", "time": ..., "message": {"role": "user", "content": "..."}}
    {"type": "assistant", "time": ..., "message": {...}, "usage": {"prompt_tokens": ...}}
    {"type": "tool", "time": ..., "message": {"role": "tool", "tool_call_id": ..., "content": ...}}
    {"type": "notice", "time": ..., "text": "Interrupted: ..."}        (seen by the user, never sent)
    {"type": "compaction", "time": ..., "summary": {...}, "replaced": [...whole messages...]}
    {"type": "clear", "time": ...}                                      (/clear: start afresh)
    {"type": "end", "time": ..., "reason": "quit"}

The first line says which format and version the rest is in, so a later harness can read (or refuse)
an old file. Each event is written and flushed when it happens: a crash loses at most the line being
written. Appending is cheap (the size of one message), and old lines never change, so a file being
written is always a valid prefix of the final one. Loading replays the events into the message list;
a line that does not parse (a cut last line, a corrupt byte) ends the replay there, with a warning,
and the damaged file is kept beside the repaired one (`ID.jsonl.damaged`) before the session goes on.

Where: `$XDG_DATA_HOME/tinyharness/sessions/`, or `~/.local/share/tinyharness/sessions/` (the XDG
base directory rule), one file per session named by its id (time first, so names sort by age).

What it cannot do. The file holds everything the model saw, secrets included, in clear text in
your home folder (0600, but unencrypted). A flush reaches the operating system, not the disk: a
power cut (as opposed to a crash of the process) can still lose the last events; an fsync per line
would cost a disk write per message. Two processes appending to one session at once interleave
their events; nothing locks the file. The policy's cuts are not events: a resumed session starts
from the whole results and cuts them again the same way.
"""
import datetime
import json
import os
import secrets
from pathlib import Path

FORMAT = "tinyharness-session"
VERSION = 1
MESSAGE_TYPES = ("system", "user", "assistant", "tool")


def json_line(obj):
    """One event as one line of JSON, readable UTF-8 where it can be. Model text can hold a lone
    surrogate, which UTF-8 cannot encode: then the line is written with ASCII escapes, still valid JSON
    that reads back to the same text."""
    line = json.dumps(obj, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(obj)
    return line


class SessionError(Exception):
    """A session that cannot be found or read at all; the message says what to do."""


def sessions_dir():
    """$XDG_DATA_HOME/tinyharness/sessions, or ~/.local/share/tinyharness/sessions."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG rule: a relative path is invalid (it would land in the workspace)
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "tinyharness" / "sessions"


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def new_id():
    """Time first (names sort by age), then random letters (two sessions in one second differ)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


class SessionWriter:
    """Appends events to one session file. `sync(messages)` writes every message added to the history
    since the last sync, so it can be called as often as the loop likes (run_agent's on_update)."""

    def __init__(self, path, header=None, written=0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # it holds everything the model saw
        self.file = open(fd, "a", encoding="utf-8")
        self.written = written   # how many messages of the history are already in the file
        self.usage = {}          # the usage of the latest model call, attached to the next assistant event
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
        self.file.write(json_line(event) + "\n")
        self.file.flush()  # to the operating system at once: a crash of this process loses nothing written

    def event(self, kind, **fields):
        self.write({"type": kind, "time": now(), **fields})

    def sync(self, messages):
        """Write the messages added since the last sync (the history only grows between syncs;
        the context policy rewrites old results in place, which is not an event)."""
        for message in messages[self.written:]:
            role = message.get("role")
            extra = {"usage": self.usage} if role == "assistant" and self.usage else {}
            self.event(role if role in MESSAGE_TYPES else "user", message=message, **extra)
            if role == "assistant":
                self.usage = {}
        self.written = len(messages)

    def notice(self, text):
        self.event("notice", text=text)

    def compaction(self, summary, replaced, messages):
        """The summary and every message it replaced, whole; then the history is `messages`."""
        self.event("compaction", summary=summary, replaced=replaced)
        self.written = len(messages)

    def clear(self, messages):
        self.event("clear")
        self.written = len(messages)

    def end(self, reason):
        self.event("end", reason=reason)

    def close(self):
        self.file.close()


class Session:
    """A session read back: its header, its events, the message list they replay to, and a warning
    when the file was damaged (then `good_lines` is how many lines could be read)."""

    def __init__(self, path, header, events, warning=None, good_lines=0):
        self.path, self.header, self.events, self.warning = Path(path), header, events, warning
        self.good_lines = good_lines

    @property
    def id(self):
        return self.header.get("id") or self.path.stem

    def messages(self):
        """Replay the events into the history the model would see now."""
        messages = []
        for event in self.events:
            kind = event.get("type")
            if kind in MESSAGE_TYPES and isinstance(event.get("message"), dict):
                messages.append(event["message"])
            elif kind == "compaction":
                replaced = len(event.get("replaced") or [])
                messages = messages[:1] + [event["summary"]] + messages[1 + replaced:]
            elif kind == "clear":
                messages = messages[:1]
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
    """A message's text, whether its content is a string or a list of parts (an image beside text)."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def load(path):
    """Read a session file. A line that is not a whole JSON object ends the reading there: everything
    before it is kept and `warning` says what was lost. A file without a readable header is an error."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SessionError(f"cannot read the session {path}: {e.strerror or e}") from None
    lines = data.split(b"\n")
    header, events, warning = None, [], None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            if number == len(lines):
                break  # the newline after the last event
            continue
        try:
            item = json.loads(line.decode("utf-8"))
            if not isinstance(item, dict):
                raise ValueError("not an object")
        except ValueError:
            warning = (f"warning: {path} is damaged at line {number} (a cut or corrupt line, e.g. from a "
                       f"crash); the session goes on from the {len(events)} events before it.")
            return check_header(path, header, Session(path, header or {}, events, warning, number - 1))
        if header is None:
            header = item
        else:
            events.append(item)
    return check_header(path, header, Session(path, header or {}, events, warning, len(events) + 1))


def check_header(path, header, session):
    if not header or header.get("format") != FORMAT:
        raise SessionError(f"{path} is not a tinyharness session (its first line is not a session header)")
    if header.get("version") != VERSION:
        raise SessionError(f"{path} is a session of format version {header.get('version')}; this tinyharness "
                           f"reads version {VERSION}")
    return session


def repair(session):
    """Keep the damaged file as ID.jsonl.damaged and rewrite the readable events, so what is appended
    next is not stuck behind a broken line."""
    damaged = session.path.with_name(session.path.name + ".damaged")
    os.replace(session.path, damaged)
    lines = [json_line(session.header)] + [json_line(e) for e in session.events]
    fd = os.open(session.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return damaged


def reopen(session):
    """A writer that appends to a loaded session (repaired first when it was damaged)."""
    if session.warning:
        repair(session)
    return SessionWriter(session.path, written=len(session.messages()))


def all_sessions(directory=None):
    """Every session file, newest first (the id starts with the time)."""
    folder = Path(directory or sessions_dir())
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.name, reverse=True) if folder.is_dir() else []


def read_header(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            header = json.loads(file.readline())
        return header if isinstance(header, dict) and header.get("format") == FORMAT else None
    except (OSError, ValueError):
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
    matches = [p for p in all_sessions(directory) if p.stem == session_id]
    matches = matches or [p for p in all_sessions(directory) if p.stem.startswith(session_id)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionError(f"no session with the id {session_id!r} in {Path(directory or sessions_dir())}; "
                           "`tinyharness sessions` lists them")
    raise SessionError(f"{session_id!r} starts {len(matches)} session ids; give more of it")


def listing(directory=None, limit=50):
    """The lines `tinyharness sessions` prints: id, folder, started, turns, first task."""
    rows = []
    for path in all_sessions(directory)[:limit]:
        try:
            session = load(path)
        except SessionError:
            continue
        tasks = session.user_tasks()
        first = " ".join((tasks[0] if tasks else "").split())
        first = first if len(first) <= 60 else first[:57] + "..."
        rows.append((session.id, session.header.get("folder", "?"), session.header.get("started", "?"),
                     str(len(tasks)), first))
    return rows


def sessions_command(directory=None, out=print):
    rows = listing(directory)
    if not rows:
        out(f"No sessions yet in {Path(directory or sessions_dir())}.")
        return 0
    head = ("ID", "FOLDER", "STARTED", "TURNS", "FIRST TASK")
    widths = [max(len(row[i]) for row in rows + [head]) for i in range(4)]
    for row in [head] + rows:
        out("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[4])
    return 0


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
    """A new session, or None with a warning when the data folder cannot be written (the work goes on)."""
    try:
        return SessionWriter.start(Path(folder).resolve(), model)
    except OSError as e:
        print(f"warning: cannot write a session in {sessions_dir()} ({e.strerror or e}); going on without one",
              file=err)
        return None
