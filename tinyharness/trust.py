"""Trust: files in a workspace that make the harness run code (hooks, MCP servers) need the user's
yes.

A repository you clone can carry `.tinyharness/hooks.json`; if the harness ran it on sight, cloning
would be enough to run a stranger's code. So the first time such a file is seen - and again whenever
its bytes change - the user is asked, and the answer is remembered by the file's SHA-256 in the
user's data folder. `--yes` approves the model's calls; it never answers this question, because the
person who wrote the file is not the model and not the user. The question says in words that what
the file lists runs: MCP servers unconfined (the sandbox confines the model's shell commands, not
them); command hooks in the sandbox, but for those whose entry says "sandbox": false, which it names
- a hook that runs the tests unconfined runs whatever test files the model wrote.

The yes covers more than the file's own bytes: the model can write anywhere in the workspace, so a
trusted `.mcp.json` that starts `python server.py` would run whatever the model later put in
server.py. The fingerprint therefore takes in every workspace file the config names (named.py): a
change to any of them asks again, and the question lists them. What it cannot cover: code those
files import or read from elsewhere in the workspace (a planted `json.py` beside server.py is
imported first). For that, review the workspace before you trust it, or keep the server in your own
config, which starts it outside the workspace (mcp_config.outside_the_workspace).
"""
import hashlib
import json
import os
from pathlib import Path

from . import filedoor
# the files are the workspace's: ESC, U+009B, U+202E are shown, not obeyed
from .console import printable, warn
from .named import named_digest, named_files, workspace_of



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
    data = config_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    named = named_files(path, data)
    if not named:
        return digest
    both = f"{digest}\n{named_digest(named, workspace_of(path))}"
    return hashlib.sha256(both.encode()).hexdigest()


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
    try:
        return _load().get(str(Path(path).resolve())) == fingerprint(path)
    # a link at the list's name, a FIFO: the door refused it, and nothing is trusted through it
    except OSError:
        return False


def remember(path):
    data = _load()
    data[str(Path(path).resolve())] = fingerprint(path)
    store = store_path()
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(data, indent=1), encoding="utf-8")


def ensure_trusted(path, what, ask, note=UNCONFINED):
    """True when the file is trusted (already, or the user says y now). `ask` is the permission
    prompt, never the --yes one. `note`: what running it means (a hooks file names which hooks run
    unconfined)."""
    if is_trusted(path):
        return True
    try:
        text = config_bytes(path).decode("utf-8", errors="replace")
    except OSError as e:
        warn(f"{path} was not read, so nothing it lists runs: {e}")
        return False
    preview = text if len(text) < 1500 else text[:1500] + "\n[...]"
    print(printable(f"This workspace has {what} ({path}); it runs commands on your "
                    f"machine:\n{preview}"))
    print(printable(note))
    named = named_files(path, text.encode())
    if named:
        print(printable("Your yes also covers the workspace files it names, as they are now: "
                        + ", ".join(named)[:600] + ". If the model changes one, you are asked "
                        "again. Code they import from elsewhere in the workspace is not covered: "
                        "look before you trust."))
    if ask("Trust this file and run what it lists? [y/N] "):
        try:
            remember(path)
        # a read-only or full data folder: the yes holds for this run, the store says why not
        except OSError as e:
            warn(f"warning: {store_path()} could not be written ({e.strerror or e}): your yes to "
                 f"{path} holds for this run only, and you will be asked again next time.")
        return True
    return False
