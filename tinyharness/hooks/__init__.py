"""Hooks: code at the one choke point every tool call passes, after it is parsed and before it runs.

A sentence in the prompt ("never touch files outside the workspace") is a request the model may
overlook. A hook is a wall: `pre_tool_use` runs every hook on every call; a hook returns None to
allow the call or a reason to block it, and a blocked call never runs (the model reads
`BLOCKED: <reason>` instead). After the hooks, writes and shell commands still need the user's yes.
"""
import os
import re
from pathlib import Path

from .. import asking
from ..imageload import is_url
from ..tools import record

MAX_PATH_CHARS = 4096
MAX_COMMAND_CHARS = 10_000  # longer text is refused unread (length_guard), never waved through


def needs_permission(name, args):
    """Writes and commands change things; a view_image URL is a request the model chose, sent off
    the machine (a URL can carry data out: https://example.com/?q=<secret>), so it asks too. The
    tool's record says which (toolrecord.Tool.asks_for)."""
    tool = record(name)
    return tool is not None and tool.asks_for(args)


def paths(name, args):
    """The workspace paths a call names: its record's path arguments (none for a tool without)."""
    tool = record(name)
    return [args[p] for p in tool.paths] if tool else []


def path_guard(workspace, name, args):
    """File tools stay inside the workspace: each path argument its record names."""
    tool = record(name)
    for path in paths(name, args):
        if tool.urls and is_url(path):
            continue  # not a path: imageload.py downloads it and checks what comes back
        reason = path_refused(workspace, name, path)
        if reason:
            return reason
    return None


def path_refused(workspace, name, path):
    """Why this path is refused, or None. Resolve first (follow '..' and symlinks), then
    compare."""
    if "\x00" in path:
        return "the path contains a NUL byte, which no file name can hold"
    if Path(path).parts[:1] and Path(path).parts[0].startswith("~"):
        return (f"{path!r}: file tools never expand '~' to a home folder, and a folder literally "
                "named '~' would be a trap for a later `rm -r ~`; give a path relative to the "
                "workspace")
    root = Path(workspace).resolve()
    try:
        # where the OS will really go: '..', absolute paths, symlinks
        target = (root / path).resolve()
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (before Python 3.13)
        return f"cannot resolve {path!r}: {e}"
    if not target.is_relative_to(root):  # compares whole parts: 'ws-evil' is not inside 'ws'
        return f"{path!r} leads to {target}, which is outside the workspace {root}"
    if name == "read_file" and hard_links(target) > 1:
        return (f"{path!r} has {hard_links(target)} hard links: the same file under other names, "
                "perhaps outside the workspace, where no path check can see them; read_file "
                "refuses such files")
    return None


def hard_links(path):
    try:
        return os.stat(path).st_nlink if path.is_file() else 1
    except OSError:
        return 1  # missing or unreadable: read_file itself will say what is wrong


# Each rule is a regex over what a command would do (its intent, not one spelling of it) and what
# the model is told when it fires. A regex still only reads text: README.md lists what it cannot
# see. Every rule runs in linear time: a regex engine that backtracks can take minutes on a long
# command (`(\w+|:)\s*\(\)...` took four minutes on 200,000 characters), and nothing times the
# judging out.
SEGMENT = r"[^;&|\n]"  # one character of a single command: ; & | and a new line end it


def then(first, later, within=SEGMENT):
    """A regex for `first`, followed later in the same command by `later`. The gap may not hold
    `first` again, so the match starts at the last `first` before `later` (same verdict) and each
    character is scanned once; `first[^;&|\n]*later` rescans the rest of the command for every
    `first` (`rm rm rm ...` made it quadratic)."""
    return f"{first}(?:(?!{first}){within})*{later}"


COMMAND_RULES = [
    (then(r"\brm\b", r"\s(-[a-zA-Z]*[rR]|--recursive)"),
     "a recursive delete (rm -r): one wrong path and a whole tree is gone, with no undo"),
    ("(?i)" + then(r"\bremove-item\b", r"\s-r", within="."),
     "a recursive delete (Remove-Item -Recurse): one wrong path and a whole tree is gone"),
    (r"\b(sudo|doas|pkexec)\b|(^|[;&|(]\s*)su\b",
     "running as another user (sudo, su): more rights than you were given"),
    (r"\bmkfs\b", "formatting a file system (mkfs): it erases a whole disk"),
    (r"(\bof=|>)\s*/dev/(?!null\b|stdout\b|stderr\b|tty\b|fd/)",
     "writing straight to a device (dd of=/dev/sda): it can wreck a disk"),
    (r"\.(bashrc|bash_profile|bash_login|profile|zshrc|zprofile|zshenv|zlogin|cshrc|kshrc)\b"
     + r"|config\.fish",
     ("touching a shell start-up file (~/.bashrc, ~/.profile): what is written there runs in every "
      "future shell")),
    (then(r"\bgit\b", then(r"\bpush\b", r"\s(-[a-zA-Z]*f|--force|\+)")),
     "a force push: it overwrites history others share"),
    (r"\|\s*(sudo\s+)?([^\s|]*/)?(ba|da|z|k|fi)?sh\b",
     "piping text into a shell (curl ... | sh): it runs commands nobody has read"),
    (then(r"\b(?:(?:ba|da|z|k)?sh|source|eval)\b", r"(<\(|\$\()\s*(curl|wget)\b",
          within=r"[^;&\n]"),
     "running what a download returns (sh -c \"$(curl ...)\"): commands nobody has read"),
    (r"(\b\w+|:)\s*\(\)\s*\{[^{}]*(?<!\w)\1\s*\|\s*\1",
     "a fork bomb: it starts copies of itself until the machine stops"),
    (r"\b(pkill|killall)\b|"
     + then(r"\bkill\b", r"\s-1\b"),
     "killing processes by name or all at once: they may not be yours"),
    (r"\b(setsid|nohup|disown)\b",
     "a process that outlives the command (setsid, nohup): the timeout could not stop it"),
    (r"\.ssh\b|\.gnupg\b|\.aws/credentials|\.netrc\b",
     "reading keys or credentials (~/.ssh): secrets must not reach the model"),
    (r"\b(nc|ncat|netcat|socat)\b|/dev/(tcp|udp)/|"
     + then(r"\b(?:curl|wget)\b", r"(\s-[dFT]\s*@|--data(-\w+)?\s+@|--upload-file|--post-file)",
            within="."),
     "sending data over the network (nc, /dev/tcp, curl -d @file): files could leave the machine"),
]


def command_policy(command):
    """The reason a shell command is refused, or None. The first rule that matches wins."""
    for pattern, why in COMMAND_RULES:
        if re.search(pattern, command):
            return (f"the command looks like {why}. If the task needs it, say so in your answer "
                    "and let the user run it.")
    return None


def length_guard(workspace, name, args):
    """First of the hooks: text too long to judge is refused unread, never waved through. Resolving
    a megabyte of path takes minutes, and a long command is a script better kept in a file."""
    for path in paths(name, args):
        if len(path) > MAX_PATH_CHARS:
            return (f"the path is {len(path):,} characters long; no file system takes a path "
                    f"longer than {MAX_PATH_CHARS:,} characters (Linux's PATH_MAX), so it names "
                    "no file")
    # a script pasted into `python -c`
    if name == "shell" and len(args["command"]) > MAX_COMMAND_CHARS:
        return (f"the command is {len(args['command']):,} characters long, over the "
                f"{MAX_COMMAND_CHARS:,} the command policy reads. Write the script to a file with "
                "write_file, then run that file.")
    return None


def shell_policy(workspace, name, args):
    return command_policy(args["command"]) if name == "shell" else None


PRE_TOOL_USE = [length_guard, path_guard, shell_policy]


def pre_tool_use(workspace, name, args):
    """Run every hook; the first reason blocks. A hook that crashes blocks too: a guard fails
    closed."""
    for hook in PRE_TOOL_USE:
        try:
            reason = hook(workspace, name, args)
        except Exception as e:  # noqa: BLE001 - a hook that fails refuses the call
            reason = (f"the {hook.__name__} hook failed ({type(e).__name__}: {e}), so the call is "
                      "refused")
        if reason:
            return reason
    return None


def ask_user(prompt, on_eof=None):
    """The permission prompt, at the terminal only (asking.py): 'y' or 'yes' approves, 'n' or 'no'
    denies, in any case; 'a' or 'always' approves and allows the rule the question offers from now
    on; anything else asks again. No terminal, or the end of its input, denies: nothing piped to
    standard input is ever taken for an answer. `on_eof` is called when nobody was there to answer
    (a run counts those: cli.nothing_allowed)."""
    return asking.ask(prompt, on_eof)


def approve_everything(prompt, allow_urls=False):
    """--yes: approve whatever the hooks allowed, except a view_image URL: that request leaves the
    machine from the harness itself, outside any sandbox, and a URL can carry data out
    (https://example.com/x.png?d=<secret>), so the user is asked even then, unless `allow_urls`
    (--allow-image-urls: flags.approver binds it, no global holds it)."""
    if prompt.startswith("Allow view_image(") and not allow_urls:
        return ask_user(prompt)
    return True
