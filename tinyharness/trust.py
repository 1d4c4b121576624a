"""Trust: files in a workspace that make the harness run code (hooks, MCP servers) need the user's
yes.

A repository you clone can carry `.tinyharness/hooks.json`; if the harness ran it on sight, cloning
would be enough to run a stranger's code. So the first time such a file is seen - and again whenever
its bytes change - the user is asked, and the answer is remembered by the file's SHA-256 in the
user's data folder. `--yes` approves the model's calls; it never answers this question, because the
person who wrote the file is not the model and not the user. The question says in words that what
the file lists runs: MCP servers unconfined (the sandbox confines the model's shell commands, not
them); command hooks in the sandbox, but for those whose entry says "sandbox": false, which it names
- a hook that runs the tests unconfined runs whatever test files the model wrote. A settings file
that holds only permission rules runs nothing: its question says which calls it lets run without
asking (`does`), never that it runs commands.

`--trust` answers the questions of a run's start for CI (AtStart): each file is named on stderr,
as it is then, for that run only; a change the model makes later is asked about as ever.

The yes covers more than the file's own bytes: the model can write anywhere in the workspace, so a
trusted `.mcp.json` that starts `python server.py` would run whatever the model later put in
server.py. The fingerprint therefore takes in every workspace file the config names
(trusted_files.py): a change to any of them asks again, and the question lists them.

Checked where it is used. The model works during the run, so a yes checked only at the start would
cover a script the model rewrites a minute later. `ensure_trusted` returns what the user trusted (a
`Trusted`: the digest of each named file as shown); before every start of an unconfined hook
(hooks/commands.py) and of a workspace MCP server (mcp/client.py), the files that entry names are
looked up and digested again (only those: a few reads, not a walk of the workspace) and compared by
content. A file changed, or created since under a name the entry names, stops that start: at a
terminal the question is put again, naming the file and showing it; with no terminal the start is
refused and said in one line (a hook's call is then blocked, as by a failing hook; a server is not
started). Never run unasked. Hooks that run in the sandbox are not checked: running the model's
latest code confined is what they are for (a test hook imports the tests the model just wrote),
and the sandbox bounds what that code can do.

What it cannot cover: code those
files import or read from elsewhere in the workspace (a planted `json.py` beside server.py is
imported first). For that, review the workspace before you trust it, or keep the server in your own
config, which starts it outside the workspace (mcp/config.py, outside_the_workspace).
"""
import hashlib
import json
import os
import threading
from pathlib import Path

from . import filedoor

# the files are the workspace's: ESC, U+009B, U+202E are shown, not obeyed
from .console import printable, warn
from .filedoor import private_folder
from .trusted_files import combined, digests, entry_digest, named_files, names_in, workspace_of

# one question at a time: hooks of one event start together, each on a thread of its own
ASKING = threading.Lock()


UNCONFINED = ("These commands run unconfined: outside the sandbox that confines the model's shell "
              "commands, with all your rights (your files, your keys, the network). They can also "
              "run code the model wrote in this workspace (a hook that runs the tests imports the "
              "workspace's test files). Trust this file only if you would run these commands "
              "yourself, in this folder, after the model has worked in it.")


def store_path():
    base = Path(os.environ.get("XDG_DATA_HOME", ""))
    # the XDG rule: ignore a relative path (in the workspace the model could write it)
    if not base.is_absolute():
        base = Path.home() / ".local" / "share"
    return base / "tinyharness" / "trusted.json"


def fingerprint(path):
    """The SHA-256 of the file, and of every workspace file it names when it names any (the same
    value as before for a file that names none, so that an earlier yes still holds)."""
    return look(path).fingerprint()


def look(path):
    """The list at PATH as it is now, with the digest of each workspace file it names (a Trusted,
    not trusted by anybody yet). OSError when the door refuses the list."""
    data = config_bytes(path)
    return Trusted(path, data, digests(named_files(path, data), workspace_of(path)))


class Trusted:
    """What a yes covered: the list's bytes and the digest of each workspace file it named, as the
    user saw them. `ask`: the prompt that puts the question again, at a terminal."""

    def __init__(self, path, data, named, ask=None):
        self.path, self.data, self.digests, self.ask = path, data, named, ask

    def fingerprint(self):
        digest = hashlib.sha256(self.data).hexdigest()
        if not self.digests:
            return digest
        return hashlib.sha256(f"{digest}\n{combined(self.digests)}".encode()).hexdigest()

    def changed(self, strings):
        """The workspace files `strings` (an entry's command, arguments...) name now whose content
        is not what was trusted, or that did not exist then; sorted."""
        workspace = workspace_of(self.path)
        return [name for name in names_in(strings, self.path)
                if entry_digest(name, workspace) != self.digests.get(name)]

    def may_start(self, strings, what):
        """None when what `strings` name is as the user trusted it; else why `what` is not started,
        in one line. At a terminal the question is put again, naming the changed files; a yes
        covers them as they are now (and is remembered)."""
        with ASKING:
            changed = self.changed(strings)
            if not changed:
                return None
            names = ", ".join(changed)[:300]
            if self.ask is None or not at_a_terminal():
                return (f"{what} was not started: {names} changed since you trusted "
                        f"{self.path} (the model or a command may have written it), and there is "
                        "no terminal to ask at")
            if self.ask_again(changed, what):
                return None
            return f"{what} was not started: you did not trust {names} as changed"

    def ask_again(self, changed, what):
        workspace = workspace_of(self.path)
        print(printable(f"{', '.join(changed)[:300]} changed since you trusted {self.path}, and "
                        f"{what} runs it UNCONFINED, with all your rights. As it is now:\n"
                        + preview(changed, workspace)))
        if not self.ask("Run it as it is now, and trust it from now on? [y/N] "):
            return False
        self.digests.update(digests(changed, workspace))
        try:
            remember(self.path, self)
        except OSError:  # the yes holds for this run (the store's trouble was said at the start)
            pass
        return True


def at_a_terminal():
    """Whether a question can be put to somebody: the process has a terminal."""
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0)
                         | getattr(os, "O_CLOEXEC", 0)))
        return True
    except OSError:
        return False


def preview(names, workspace, room=1500):
    """The first `room` characters of the changed files (a folder is named, not shown)."""
    shown = []
    for name in names:
        try:
            data, _ = filedoor.read_bytes(name, room, workspace)
        except OSError as e:
            data = f"[{e.strerror or e}]".encode()
        shown.append(f"--- {name}\n{data[:room].decode('utf-8', errors='replace')}")
        room -= len(data)
        if room <= 0:
            break
    return "\n".join(shown)


def config_bytes(path):
    """The file's bytes, through the door: a link at its name, a FIFO or a device is refused
    (DoorError)."""
    data, size = filedoor.read_bytes(os.path.abspath(path), filedoor.CONFIG_CAP,
                                      workspace_of(path))
    return data if size <= filedoor.CONFIG_CAP else data + f"\n[{size} bytes]".encode()


def _load():
    try:
        data = json.loads(store_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def is_trusted(path):
    return trusted_now(path) is not None


def trusted_now(path):
    """A Trusted for the list as it is now when the user trusted it so, else None (no question)."""
    try:
        seen = look(path)
    # a link at the list's name, a FIFO: the door refused it, and nothing is trusted through it
    except OSError:
        return None
    return seen if _load().get(str(Path(path).resolve())) == seen.fingerprint() else None


def remember(path, seen=None):
    """Store the yes: the fingerprint of what the user saw (`seen`), or of the list as it is now."""
    data = _load()
    data[str(Path(path).resolve())] = (seen or look(path)).fingerprint()
    store = store_path()
    private_folder(store.parent)
    # whole or not at all (a new file renamed over the old), 0600: which projects you trust is yours
    filedoor.write_bytes(store, json.dumps(data, indent=1).encode("utf-8"))


class AtStart:
    """--trust: the trust questions of a run's start are answered yes without asking (for CI, where
    nobody is at a terminal and piped input never answers), each file named on stderr and not
    remembered. Once the start is over (`over()`), a file the model changed is asked about as
    ever, by the real prompt `ask`, which refuses without a terminal: --trust covers the files as
    they were when the run began, never what the model makes of them."""

    def __init__(self, ask):
        self.ask, self.starting = ask, True

    def __call__(self, question):
        return True if self.starting else self.ask(question)

    def over(self):
        self.starting = False


def ensure_trusted(path, what, ask, note=UNCONFINED, does=None):
    """A Trusted (true) when the file is trusted (already, or the user says y now), else False; the
    Trusted checks each later start against what was trusted (may_start). `ask` is the permission
    prompt, never the --yes one. `note`: what running it means (a hooks file names which hooks run
    unconfined); `does`: what the file does, when it runs nothing (a settings file with only
    permission rules changes what runs without asking)."""
    try:
        seen = look(path)  # what the question shows is what the yes covers
    except OSError as e:
        warn(f"{path} was not read, so nothing it lists runs: {e}")
        return False
    seen.ask = ask
    if _load().get(str(Path(path).resolve())) == seen.fingerprint():
        return seen
    if isinstance(ask, AtStart) and ask.starting:
        named = named_files(path, seen.data)
        warn(f"[trust] --trust: {path} ({what}) is trusted as it is now, for this run"
             + (f", with the files it names: {', '.join(named)[:600]}" if named else "")
             + "; a change the model makes to them is asked about again.")
        return seen
    text = seen.data.decode("utf-8", errors="replace")
    preview = text if len(text) < 1500 else text[:1500] + "\n[...]"
    print(printable(f"This workspace has {what} ({path}); "
                    f"{does or 'it runs commands on your machine'}:\n{preview}"))
    print(printable(note))
    named = named_files(path, text.encode())
    if named:
        print(printable("Your yes also covers the workspace files it names, as they are now: "
                        + ", ".join(named)[:600] + ". If the model changes one, you are asked "
                        "again. Code they import from elsewhere in the workspace is not covered: "
                        "look before you trust."))
    if ask(f"Trust this file and {'use its rules' if does else 'run what it lists'}? [y/N] "):
        try:
            remember(path, seen)
        # a read-only or full data folder: the yes holds for this run, the store says why not
        except OSError as e:
            warn(f"warning: {store_path()} could not be written ({e.strerror or e}): your yes to "
                 f"{path} holds for this run only, and you will be asked again next time.")
        return seen
    return False
