"""What a run is given: one settings object, and the system prompt it starts from.

The problem. A run has many knobs - four limits, a context policy and window, a sandbox, a permission
prompt, the extensions, three callbacks, a transcript file, a picture - and every one of them has to
reach the loop, and from the loop a subagent. Passed one by one they become a signature of twenty
parameters that every caller spells out in order, and that nobody reads.

The mechanism. `RunSettings` is a frozen dataclass: a caller names only what differs from the CLI's
defaults (`RunSettings(max_turns=8, echo=say)`), the loop reads `settings.max_turns`, and nothing can
change a run's settings while it runs. A subagent gets settings of its own, built from its parent's
field by field (subagents.py), so what the child inherits is written down in one place.

What it cannot do. It checks nothing: a `max_turns` of 0 is the command line's mistake to catch
(cli.py checks the flags). It holds what the run is told, not what it learns on the way: the
server's real context window lives on the client (overflow.py), the counts in `Stats` (edges.py).
"""
import errno
import os
import stat
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .console import printable
from .context import CONTEXT_WINDOW, DEFAULT_POLICY
from .guards import MAX_SECONDS, MAX_TURNS
from .hooks import ask_user
from .tools import SHELL_TIMEOUT

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. Old tool results may be cut to save room;
keep what you will need later with save_note. When the task is done, answer briefly with what you did."""


INSTRUCTION_CAP = 64 * 1024  # bytes read of one instructions file: a prompt, not a place for a whole repository
PROJECT_FILES = ("AGENTS.md", "CLAUDE.md")  # the cross-tool convention first; Claude Code's name when it is missing


def system_prompt(workspace):
    """The built-in prompt plus the workspace's INSTRUCTIONS.md and its AGENTS.md (else CLAUDE.md), when
    it has them, each read by `instructions_file` (no link followed, regular files only, capped)."""
    prompt = SYSTEM_PROMPT
    extra = instructions_file(workspace, "INSTRUCTIONS.md")
    if extra is not None:
        prompt += "\n\nInstructions from the workspace (INSTRUCTIONS.md):\n" + extra
    for name in PROJECT_FILES:
        project = instructions_file(workspace, name)
        if project is not None:
            return prompt + f"\n\nProject instructions from the workspace ({name}):\n" + project
    return prompt


def instructions_file(workspace, name, cap=INSTRUCTION_CAP):
    """The text of the workspace's file NAME, or None when there is none (or it cannot be read: a symbolic
    link, a FIFO, a folder - said on stderr). A workspace file is the model's to write, and a link in its
    place could carry ~/.ssh/id_rsa into the prompt: it is opened without following a link (O_NOFOLLOW),
    without waiting on a FIFO (O_NONBLOCK), and read only if fstat says it is a regular file. At most
    CAP bytes are read; a longer file is cut, and the prompt says so."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.path.join(workspace, name), flags)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP: a symbolic link
        why = "it is a symbolic link" if e.errno == errno.ELOOP else e.strerror
        print(printable(f"warning: {name} was not read ({why}; the harness follows no link for its own files)."),
              file=sys.stderr)
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            print(printable(f"warning: {name} was not read (it is not a regular file)."), file=sys.stderr)
            return None
        data = file.read(cap + 1)
    text = data[:cap].decode("utf-8", errors="replace")
    if len(data) > cap:
        text += f"\n[cut: {name} is longer than {cap} bytes; only its first {cap} bytes were read.]"
    return text


@dataclass(frozen=True)
class RunSettings:
    """Everything a run is told, with the CLI's defaults."""
    # Limits: model calls, wall-clock seconds, the server's token counts (None: no budget), one command.
    max_turns: int = MAX_TURNS
    max_seconds: float = MAX_SECONDS
    max_tokens: Optional[int] = None
    shell_timeout: float = SHELL_TIMEOUT
    # The context: how old tool results are cut before each call (one of context.POLICIES), and the
    # window planned with (the server's own replaces it once an overflow error names it).
    context_policy: str = DEFAULT_POLICY
    context_window: int = CONTEXT_WINDOW
    sandbox: Any = None                        # how shell commands run (sandbox.Sandbox; None = the defaults)
    approve: Callable[[str], bool] = ask_user  # the permission prompt: a question in, yes or no out
    extensions: Any = None                     # extensions.Extensions: MCP tools, the task tool, command hooks
    # Callbacks: each line the run shows; the messages whenever some were added (the session file
    # appends them); a subagent's messages when it ends (the session keeps them).
    echo: Callable[[str], Any] = print
    on_update: Optional[Callable[[list], Any]] = None
    on_subagent: Optional[Callable[[list], Any]] = None
    transcript: Any = None                     # a path rewritten with the messages every turn, or None
    image: Optional[dict] = None               # an image part sent with the task (--image)
