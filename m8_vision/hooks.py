"""Hooks: code at the one choke point every tool call passes, after it is parsed and before it runs.

A sentence in the prompt ("never touch files outside the workspace") is a request the model may
overlook. A hook is a wall: `pre_tool_use` runs every hook on every call; a hook returns None to
allow the call or a reason to block it, and a blocked call never runs (the model reads
`BLOCKED: <reason>` instead). After the hooks, writes and shell commands still need the user's yes.
"""
import re
import sys
from pathlib import Path

from .fences import MORE_RULES, hard_links, length_guard
from .imageload import is_url

FILE_TOOLS = ("list_dir", "read_file", "write_file", "view_image")
NEEDS_PERMISSION = ("write_file", "shell")


def needs_permission(name, args):
    """Writes and commands change things; a view_image URL is a request the model chose, sent off the
    machine (a URL can carry data out: https://example.com/?q=<secret>), so it asks too."""
    return name in NEEDS_PERMISSION or (name == "view_image" and is_url(args["path"]))


# exercise(m3): Write path_guard: return a reason to block a file tool whose path, once resolved (following '..' and symlinks), is not inside the resolved workspace, or that holds a NUL byte, starts with '~' or is a hard-linked file to read.
def path_guard(workspace, name, args):
    """File tools stay inside the workspace. Resolve first (follow '..' and symlinks), then compare."""
    if name not in FILE_TOOLS:
        return None
    path = args["path"]
    if name == "view_image" and is_url(path):
        return None  # not a path: imageload.py downloads it and checks what comes back
    if "\x00" in path:
        return "the path contains a NUL byte, which no file name can hold"
    if Path(path).parts[:1] and Path(path).parts[0].startswith("~"):
        return (f"{path!r}: file tools never expand '~' to a home folder, and a folder literally named '~' "
                "would be a trap for a later `rm -r ~`; give a path relative to the workspace")
    root = Path(workspace).resolve()
    try:
        target = (root / path).resolve()  # where the OS will really go: '..', absolute paths, symlinks
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (before Python 3.13)
        return f"cannot resolve {path!r}: {e}"
    if not target.is_relative_to(root):  # compares whole parts: 'ws-evil' is not inside 'ws'
        return f"{path!r} leads to {target}, which is outside the workspace {root}"
    if name == "read_file" and hard_links(target) > 1:
        return (f"{path!r} has {hard_links(target)} hard links: the same file under other names, perhaps "
                "outside the workspace, where no path check can see them; read_file refuses such files")
    return None


# The command policy: regexes over what a command would do, its shape, not one spelling of it (a regex
# still only reads text: README.md lists what it cannot see). The lesson's rule first, then the armour's.
COMMAND_RULES = MORE_RULES  # fences.py: sudo, mkfs, devices, start-up files, force pushes, `curl ... | sh`, ...


# exercise(m3): Write recursive_delete: return why a shell command looks like a recursive delete, or None: rm with a flag holding r or R (or --recursive) anywhere after it in the same command, or Remove-Item with -Recurse in any case.
def recursive_delete(command):
    """The lesson's rule. A substring ("rm -rf") misses `rm -r -f`, `rm -fr` and `rm --recursive`;
    a regex over the shape - the word, then such a flag in any order or grouping - does not."""
    if re.search(r"\brm\b[^;&|\n]*\s(-[a-zA-Z]*[rR]|--recursive)", command):  # [^;&|\n]: the same command
        return "a recursive delete (rm -r): one wrong path and a whole tree is gone, with no undo"
    if re.search(r"(?i)\bremove-item\b.*\s-r", command):  # PowerShell: -Recurse, or its short form -r
        return "a recursive delete (Remove-Item -Recurse): one wrong path and a whole tree is gone"
    return None


def command_policy(command):
    """The reason a shell command is refused, or None: the first rule that matches wins."""
    why = recursive_delete(command) or next((why for rule, why in COMMAND_RULES if re.search(rule, command)), None)
    if why:
        return f"the command looks like {why}. If the task needs it, say so in your answer and let the user run it."
    return None


def shell_policy(workspace, name, args):
    return command_policy(args["command"]) if name == "shell" else None


PRE_TOOL_USE = [length_guard, path_guard, shell_policy]


def pre_tool_use(workspace, name, args):
    """Run every hook; the first reason blocks. A hook that crashes blocks too: a guard fails closed."""
    for hook in PRE_TOOL_USE:
        try:
            reason = hook(workspace, name, args)
        except Exception as e:
            reason = f"the {hook.__name__} hook failed ({type(e).__name__}: {e}), so the call is refused"
        if reason:
            return reason
    return None


def ask_user(prompt):
    """The permission prompt: 'y' or 'yes' (any case) approves; anything else, or end of input, denies."""
    try:
        answer = input(prompt)
    except EOFError:  # nobody there to answer: that is a no
        answer = ""
        print()
    else:
        if not sys.stdin.isatty():
            print(answer)  # a terminal shows what the user typed; a pipe does not, so show it here
    return answer.strip().lower() in ("y", "yes")


def approve_everything(prompt):
    """--yes: approve whatever the hooks allowed."""
    return True
