"""Armour for the hooks: what a guard needs to hold against hostile input. Read it after the lesson
(hooks.py), when a model, or a prompt injection, surprises you.

- Text too long to judge (`length_guard`, the first hook): resolving a megabyte of path takes minutes,
  and a long command is a script better kept in a file. It is refused unread, never waved through.
- A hard-linked file (`hard_links`): the same file under other names, perhaps outside the workspace,
  where no path check can see them.
- A regex that backtracks (`then`): a rule like `git[^;]*push` rescans the rest of the command for every
  `git`, and nothing times the judging out (`(\\w+|:)\\s*\\(\\)...` took four minutes on 200,000 characters).
  The lesson's own rule (hooks.py:recursive_delete) stays plain: past the length guard it never reads
  more than 10,000 characters, which even a rescan for every `rm` judges in a fraction of a second.
- The command policy's catalogue beyond the recursive deletes (`MORE_RULES`): sudo, mkfs, devices,
  shell start-up files, force pushes, downloads run unread, fork bombs, credentials, data sent away.
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


# The rest of the command policy (hooks.py:recursive_delete, its lesson, judges first):
# each rule is (a regex over what a command would do, what the model is told when it fires).
MORE_RULES = [
    (r"\b(sudo|doas|pkexec)\b|(^|[;&|(]\s*)su\b", "running as another user (sudo, su): more rights than you were given"),
    (r"\bmkfs\b", "formatting a file system (mkfs): it erases a whole disk"),
    (r"(\bof=|>)\s*/dev/(?!null\b|stdout\b|stderr\b|tty\b|fd/)", "writing straight to a device (dd of=/dev/sda): it can wreck a disk"),
    (r"\.(bashrc|bash_profile|bash_login|profile|zshrc|zprofile|zshenv|zlogin|cshrc|kshrc)\b|config\.fish",
     "touching a shell start-up file (~/.bashrc, ~/.profile): what is written there runs in every future shell"),
    (then(r"\bgit\b", then(r"\bpush\b", r"\s(-[a-zA-Z]*f|--force|\+)")), "a force push: it overwrites history others share"),
    (r"\|\s*(sudo\s+)?([^\s|]*/)?(ba|da|z|k|fi)?sh\b", "piping text into a shell (curl ... | sh): it runs commands nobody has read"),
    (then(r"\b(?:(?:ba|da|z|k)?sh|source|eval)\b", r"(<\(|\$\()\s*(curl|wget)\b", within=r"[^;&\n]"),
     "running what a download returns (sh -c \"$(curl ...)\"): commands nobody has read"),
    (r"(\b\w+|:)\s*\(\)\s*\{[^{}]*(?<!\w)\1\s*\|\s*\1", "a fork bomb: it starts copies of itself until the machine stops"),
    (r"\b(pkill|killall)\b|" + then(r"\bkill\b", r"\s-1\b"), "killing processes by name or all at once: they may not be yours"),
    (r"\b(setsid|nohup|disown)\b", "a process that outlives the command (setsid, nohup): the timeout could not stop it"),
    (r"\.ssh\b|\.gnupg\b|\.aws/credentials|\.netrc\b", "reading keys or credentials (~/.ssh): secrets must not reach the model"),
    (r"\b(nc|ncat|netcat|socat)\b|/dev/(tcp|udp)/|"
     + then(r"\b(?:curl|wget)\b", r"(\s-[dFT]\s*@|--data(-\w+)?\s+@|--upload-file|--post-file)", within="."),
     "sending data over the network (nc, /dev/tcp, curl -d @file): files could leave the machine"),
]
