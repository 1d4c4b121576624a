"""Hooks: code at the one choke point every tool call passes, after it is parsed and before it runs.

A sentence in the prompt ("never touch files outside the workspace") is a request the model may
overlook. A hook is a wall: `pre_tool_use` runs every hook on every call; a hook returns None to
allow the call or a reason to block it, and a blocked call never runs (the model reads
`BLOCKED: <reason>` instead). After the hooks, writes and shell commands still need the user's yes.
"""
import re
import sys
from pathlib import Path

from .fences import MORE_RULES, hard_links, length_guard, then
FILE_TOOLS = ("list_dir", "read_file", "write_file")
NEEDS_PERMISSION = ("write_file", "shell")


# exercise(m3): Write path_guard: return a reason to block a file tool whose path, once resolved (following '..' and symlinks), is not inside the resolved workspace, or that holds a NUL byte, starts with '~' or is a hard-linked file to read.
def path_guard(workspace, name, args):
    """File tools stay inside the workspace. Resolve first (follow '..' and symlinks), then compare."""
    if name not in FILE_TOOLS:
        return None
    path = args["path"]
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


# Each rule is a regex over what a command would do (its intent, not one spelling of it) and what the
# model is told when it fires. A regex still only reads text: README.md lists what it cannot see.
# `then(a, b)`: a, later followed by b in the same command, in linear time (fences.py says why).
COMMAND_RULES = [
    (then(r"\brm\b", r"\s(-[a-zA-Z]*[rR]|--recursive)"),
     "a recursive delete (rm -r): one wrong path and a whole tree is gone, with no undo"),
    ("(?i)" + then(r"\bremove-item\b", r"\s-r", within="."),
     "a recursive delete (Remove-Item -Recurse): one wrong path and a whole tree is gone"),
    *MORE_RULES,  # fences.py: sudo, mkfs, devices, start-up files, force pushes, pipes into a shell, ...
]


def command_policy(command):
    """The reason a shell command is refused, or None. The first rule that matches wins."""
    for pattern, why in COMMAND_RULES:
        if re.search(pattern, command):
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
