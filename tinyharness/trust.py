"""Trust: files in a workspace that make the harness run code (hooks, MCP servers) need the user's yes.

A repository you clone can carry `.tinyharness/hooks.json`; if the harness ran it on sight, cloning
would be enough to run a stranger's code. So the first time such a file is seen - and again whenever
its bytes change - the user is asked, and the answer is remembered by the file's SHA-256 in the
user's data folder. `--yes` approves the model's calls; it never answers this question, because the
person who wrote the file is not the model and not the user. The question says in words that what the
file lists runs: MCP servers unconfined (the sandbox confines the model's shell commands, not them);
command hooks in the sandbox, but for those whose entry says "sandbox": false, which it names - a hook
that runs the tests unconfined runs whatever test files the model wrote.
"""
import hashlib
import json
import os
import sys
from pathlib import Path

from .console import printable  # the files are the workspace's: ESC, U+009B, U+202E are shown, not obeyed


UNCONFINED = ("These commands run unconfined: outside the sandbox that confines the model's shell commands, with "
              "all your rights (your files, your keys, the network). They can also run code the model wrote in this "
              "workspace (a hook that runs the tests imports the workspace's test files). Trust this file only if you "
              "would run these commands yourself, in this folder, after the model has worked in it.")


def store_path():
    base = Path(os.environ.get("XDG_DATA_HOME", ""))
    if not base.is_absolute():  # the XDG rule: ignore a relative path (in the workspace the model could write it)
        base = Path.home() / ".local" / "share"
    return base / "tinyharness" / "trusted.json"


def fingerprint(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _load():
    try:
        data = json.loads(store_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def is_trusted(path):
    return _load().get(str(Path(path).resolve())) == fingerprint(path)


def remember(path):
    data = _load()
    data[str(Path(path).resolve())] = fingerprint(path)
    store = store_path()
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(data, indent=1), encoding="utf-8")


def ensure_trusted(path, what, ask, note=UNCONFINED):
    """True when the file is trusted (already, or the user says y now). `ask` is the permission prompt,
    never the --yes one. `note`: what running it means (a hooks file names which hooks run unconfined)."""
    if is_trusted(path):
        return True
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    preview = text if len(text) < 1500 else text[:1500] + "\n[...]"
    print(printable(f"This workspace has {what} ({path}); it runs commands on your machine:\n{preview}"))
    print(printable(note))
    if ask("Trust this file and run what it lists? [y/N] "):
        try:
            remember(path)
        except OSError as e:  # a read-only or full data folder: the yes holds for this run, the store says why not
            print(printable(f"warning: {store_path()} could not be written ({e.strerror or e}): your yes to {path} "
                            "holds for this run only, and you will be asked again next time."), file=sys.stderr)
        return True
    return False
