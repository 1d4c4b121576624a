"""Armour for the hooks: what a guard needs to hold against hostile input. Read it after the lesson
(hooks.py), when a model, or a prompt injection, surprises you.

- Text too long to judge (`length_guard`, the first hook): resolving a megabyte of path takes minutes,
  and a long command is a script better kept in a file. It is refused unread, never waved through.
- A hard-linked file (`hard_links`): the same file under other names, perhaps outside the workspace,
  where no path check can see them.
- A regex that backtracks (`then`): a rule like `rm[^;]*-r` rescans the rest of the command for every
  `rm`, and nothing times the judging out (`(\\w+|:)\\s*\\(\\)...` took four minutes on 200,000 characters).
"""
import os

MAX_PATH_CHARS = 4096
MAX_COMMAND_CHARS = 10_000  # longer text is refused unread (length_guard), never waved through
SEGMENT = r"[^;&|\n]"  # one character of a single command: ; & | and a new line end it


def then(first, later, within=SEGMENT):
    """A regex for `first`, followed later in the same command by `later`. The gap may not hold
    `first` again, so the match starts at the last `first` before `later` (same verdict) and each
    character is scanned once; `first[^;&|\n]*later` rescans the rest of the command for every
    `first` (`rm rm rm ...` made it quadratic)."""
    return f"{first}(?:(?!{first}){within})*{later}"


def hard_links(path):
    try:
        return os.stat(path).st_nlink if path.is_file() else 1
    except OSError:
        return 1  # missing or unreadable: read_file itself will say what is wrong


def length_guard(workspace, name, args):
    """First of the hooks: text too long to judge is refused unread, never waved through. Resolving a
    megabyte of path takes minutes, and a long command is a script better kept in a file."""
    if isinstance(args.get("path"), str) and len(args["path"]) > MAX_PATH_CHARS:  # the file tools' argument
        return (f"the path is {len(args['path']):,} characters long; no file system takes a path longer than "
                f"{MAX_PATH_CHARS:,} characters (Linux's PATH_MAX), so it names no file")
    if name == "shell" and len(args["command"]) > MAX_COMMAND_CHARS:  # a script pasted into `python -c`
        return (f"the command is {len(args['command']):,} characters long, over the {MAX_COMMAND_CHARS:,} the "
                "command policy reads. Write the script to a file with write_file, then run that file.")
    return None
