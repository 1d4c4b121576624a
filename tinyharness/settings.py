"""What a run is given: one settings object, and the system prompt it starts from.

The problem. A run has many knobs - four limits, a context policy and window, a sandbox, a
permission prompt, the extensions, three callbacks, a transcript file, a picture - and every one of
them has to reach the loop, and from the loop a subagent. Passed one by one they become a signature
of twenty parameters that every caller spells out in order, and that nobody reads.

The mechanism. `RunSettings` is a frozen dataclass: a caller names only what differs from the CLI's
defaults (`RunSettings(max_turns=8, echo=say)`), the loop reads `settings.max_turns`, and nothing
can change a run's settings while it runs. It is the one carrier: the command line becomes settings
in one place (flags.settings_from_args, which reads each field from the flag of the same name), a
chat derives each message's settings from its own with `dataclasses.replace` (chat/__init__.py), and
so does a subagent from its parent's (subagents.py). A new run knob is two edits: its flag and its
field; a new budget one more, its line in guards.LIMITS, which the loop, the command timeout and the
subagents read. The run's messages name a budget by its field (`max_turns`) unless `budget_name`
says otherwise: the command line names its flag (`--max-turns`).

What it cannot do. It checks nothing: a `max_turns` of 0 is the command line's mistake to catch
(cli.py checks the flags). It holds what the run is told, not what it learns on the way: the
server's real context window lives on the client (overflow.py), the counts in `Stats` (counts.py).
"""
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .console import warn
from .context import CONTEXT_WINDOW, DEFAULT_POLICY
from .guards import MAX_SECONDS, MAX_TURNS
from .hooks import ask_user
from .instructions import gather
from .tools import SHELL_TIMEOUT

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. Old tool results may be cut to save room;
keep what you will need later with save_note. When the task is done, answer briefly with what you \
did."""


def field_name(field):
    """A budget as the core names it: its settings field (`max_turns`)."""
    return field


def system_prompt(workspace, settings=None):
    """The built-in prompt plus the instruction files (instructions.py: INSTRUCTIONS.md, the
    user's own ~/.codex/AGENTS.md and ~/.claude/CLAUDE.md, then AGENTS.md, CLAUDE.md and
    CLAUDE.local.md from the project root down to the workspace, with CLAUDE.md's @imports), each
    read through filedoor.py (no link leading out, no FIFO, 64 KiB for them all, a cut said) and
    none that a Read deny rule of the run (its `settings.extensions.rules`) covers, as written or
    where its links lead: that one is skipped with a line naming the rule. The main agent's prompt
    says on stderr, in one line, what was read and skipped (a subagent's does not repeat it)."""
    rules = getattr(getattr(settings, "extensions", None), "rules", None)
    say = settings.warn if settings else warn
    parent = getattr(settings, "agent", "parent") == "parent"
    return SYSTEM_PROMPT + gather(workspace, rules, say, summary=parent)


@dataclass(frozen=True)
class RunSettings:
    """Everything a run is told, with the CLI's defaults."""
    # Limits: model calls, wall-clock seconds, the server's token counts (None: no budget; each
    # budget is a line in guards.LIMITS), one command.
    max_turns: int = MAX_TURNS
    max_seconds: float = MAX_SECONDS
    max_tokens: int | None = None
    shell_timeout: float = SHELL_TIMEOUT
    # The context: how old tool results are cut before each call (one of context.POLICIES), and the
    # window planned with (the server's own replaces it once an overflow error names it).
    context_policy: str = DEFAULT_POLICY
    context_window: int = CONTEXT_WINDOW
    # how shell commands run (sandbox.Sandbox; None = the defaults)
    sandbox: Any = None
    # checkpoints.recorder.Recorder: a checkpoint before each call that may write (None: none kept)
    checkpoints: Any = None
    approve: Callable[[str], bool] = ask_user  # the permission prompt: a question in, yes or no out
    # extensions.Extensions (frozen): MCP tools, the task tool, command
    extensions: Any = None
                                               # hooks, permission rules, parallel reads; None =
                                               # none of them
    agent: str = "parent"                      # or "subagent": the command hooks read it
    # session_start hooks run with this run's task (a chat's first only, and its first after a
    # compaction: then "compact", the source they are told)
    opens_session: Any = True
    # Callbacks: each line the run shows (the [tool] lines); each warning it writes to the user (one
    # channel: stderr, made printable); the messages whenever some were added (the session file
    # appends them); a subagent's messages when it ends (the session keeps them).
    echo: Callable[[str], Any] = print
    warn: Callable[[str], Any] = warn
    on_update: Callable[[list], Any] | None = None
    on_subagent: Callable[[list], Any] | None = None
    # a path rewritten with the messages every turn, or None
    transcript: Any = None
    image: dict | None = None               # an image part sent with the task (--image)
    # how the run's messages name a budget's field (a stop, a subagent's stop, a spent command's
    # time): the field itself; the command line names its flag
    budget_name: Callable[[str], str] = field_name
