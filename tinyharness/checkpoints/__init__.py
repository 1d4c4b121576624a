"""Nothing lost: every change the model makes, by a file tool, a command or a hook, can be undone.

The problem. The sandbox keeps commands inside the workspace, but inside it a command may do
anything: `rm -rf .git` (and with it every commit), `rm -rf src`, a file overwritten with nothing,
`git reset --hard` to an old commit and `git gc --prune=now`. The model's own account of what it
did is no record: it is a claim, written after the fact, by the party that made the mistake.

The mechanism. Before every call that may write (write_file, save_note, shell, an MCP tool that
does not only read) and every command hook, the harness records the whole workspace in a store of
its own (recorder.py): content-addressed objects and per-folder trees, as git keeps them, under
`$XDG_DATA_HOME/tinyharness/checkpoints/` (store.py), private and out of the commands' reach. The
user's `.git` is recorded like any folder - read, never written, its index and branches untouched -
so `rm -rf .git`, a reset, a gc that pruned, a truncated pack are all undone by putting the bytes
back. A checkpoint costs what changed, not the workspace's size: the kernel reports which folders
changed (watch.py), and only those are looked at again (scan.py). `tinyharness undo` and chat's
`/undo` and `/rewind N` put the workspace back (restore.py), keeping the files you changed
yourself since; `tinyharness checkpoints` lists what each call changed (commands.py).

What it cannot do. It keeps files, not the world: a command that sent mail, pushed to a remote or
wrote outside the workspace (the sandbox's business) is not undone. Files git ignores are kept
like the rest; files over 256 MiB, FIFOs and unreadable files are left out (said once per run).
`--no-checkpoints` turns it off for a run; so does a store that fails (said once). With
`--sandbox off` a command can reach the store itself.
"""
import contextlib
import json

from ..tools import record


def around(settings, name, arguments=None, ext=None):
    """The context a call runs in: a checkpoint before it and its changes noted after, unless the
    run keeps none (`settings.checkpoints` is None) or the call only reads (the tool's record says
    so; a task's child checkpoints its own calls)."""
    recorder, tool = getattr(settings, "checkpoints", None), record(name)
    if (recorder is None or (tool is not None and not tool.needs_checkpoint())
            or (ext is not None and ext.read_only(name, arguments))):
        return contextlib.nullcontext()
    return recorder.around(label(name, arguments))


def label(name, arguments):
    """How the list names a call: `shell: rm -rf src`, `write_file: a.txt`."""
    if isinstance(arguments, str):  # as the model sent them
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return name
    if isinstance(arguments, dict):
        main = arguments.get("command") or arguments.get("path")
        if isinstance(main, str):
            return f"{name}: {' '.join(main.split())}"
    return name


def recorder_for(workspace, warn, enabled=True):
    """A run's Recorder, or None with --no-checkpoints."""
    if not enabled:
        return None
    from .recorder import Recorder
    return Recorder(workspace, warn)
