"""Subagents: a sub-task in a fresh context, and only its conclusion comes back.

The problem. A task like "find where the budget is defined" can take fifteen tool calls of listing
and reading. Every one of those results lands in the conversation and stays there (or is cut to a
stub later): the main run pays for the search in context for the rest of its life, and a small
model's window fills with pages it no longer needs.

The mechanism. The `task{description}` tool starts a new loop - the same `run_agent`, with the same
tools, hooks, permission prompt, guards and verification - whose context is only the system prompt
and the description. It runs to its own end under its own turn and time budget - never more than
what is left of each of the parent run's budgets (its turns, time, tokens, and any budget added to
guards.LIMITS later), because the user set those for the whole run - and returns **only its final
answer plus a one-line account** (turns, tool calls, files written) as the result of the parent's
call. "Files written" is what changed in the workspace while the child ran (its files are listed
before and after, by size and modification time), so a file written by `shell` or an MCP tool counts
as well as one written by write_file. The parent's context never sees the child's tool results. The
child cannot start a child of its own (the `task` tool is withheld from it: depth 1), so one
careless description cannot fan out into a tree of runs. A child stopped by a limit says so: its
result starts with "NOT confirmed complete", and the parent's model reads that.

How it reaches the loop. The loop is handed to the child, never imported: when the model calls
`task`, the running loop passes its own context - itself (`loop.run_agent`), its client, workspace,
stats and settings, a `Parent` - through the choke point to `run_child`. So this module sits below
loop.py and extensions.py, the child's settings are derived here from the parent's with
`dataclasses.replace` (`child_settings`: what it does NOT inherit is written down in one place, and
a new run knob reaches the child without a line here; its budgets are what the parent's
`guards.Budget.for_child` leaves it, so a new budget needs no line here either), and nothing is set
on the extensions while a run is under way: the child's run makes its own per-run state, as every
run does.

What it cannot do. The child knows only what the description says: a parent that writes "fix it"
gets a child that does not know what "it" is. The child's answer is a claim, not evidence - the
same rule as m6: check the files, not the words. Children run one at a time, never in parallel
(two children writing the same file would race). In a workspace of more than WATCH_LIMIT files the
listing is skipped and only write_file's writes are counted.
"""
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .counts import Stats
from .guards import Budget, Stopped
from .settings import RunSettings, system_prompt
from .toolrecord import TASK

TASK_TOOL = TASK.name
SUBAGENT_MAX_TURNS = 12      # --subagent-max-turns
SUBAGENT_MAX_SECONDS = 300   # --subagent-max-seconds

# files listed before and after a child; past this, write_file's OK results only
WATCH_LIMIT = 20000
SKIPPED_FOLDERS = {".git"}   # the harness's own repository bookkeeping is not the child's work

# The task tool's record (its schema, its Claude names) is toolrecord.TASK, beside every other
# tool's: the policies below must know it, and run_child, its function, needs the loop.
TASK_SCHEMA = TASK.schema


def account(turns, tool_calls, files_written):
    files = ", ".join(files_written) if files_written else "none"
    return f"[subagent] turns={turns} tool_calls={tool_calls} files written: {files}"


def result_for_parent(answer, turns, tool_calls, files_written, stopped=None):
    """What the parent's model reads: the child's conclusion and a one-line account, nothing
    else."""
    line = account(turns, tool_calls, files_written)
    if stopped:
        return (f"NOT confirmed complete: the helper agent was stopped ({stopped}).\n"
                f"{answer.strip() or '(it gave no answer)'}\n{line}")
    return f"{answer.strip() or '(the helper agent gave an empty answer)'}\n{line}"


@dataclass(frozen=True)
class Parent:
    """The run that starts a child, as the child needs it: the loop to run (the parent's own), the
    client, the workspace, the stats (the child's calls count in them, because the user pays for
    them all), the settings (the child inherits some) and the budget (guards.Budget: the child may
    not outlast what is left of it; None: one made from the settings and stats)."""
    loop: Callable
    client: Any
    workspace: str
    stats: Any
    settings: RunSettings
    budget: Any = None


def child_limits(parent):
    """{settings field: value} of every budget for a child: what is left of each of the parent's
    (guards.Budget.remaining), or the child's own cap (its subagent turns and seconds) when less.
    Nothing left: the child stops before its first call. Every budget is set here, none
    inherited."""
    budget = parent.budget or Budget(parent.settings, parent.stats)
    return budget.for_child()


def child_settings(parent):
    """The parent's settings, but: the child's own limits, the parent's hands without the task tool,
    no session start (its hooks ran for the parent), its lines shown indented under the parent's,
    and no transcript, picture or session callbacks (the child's messages go to the parent's
    on_subagent when it ends). Everything else - the sandbox, the permission prompt, the context
    policy and window, the command timeout, the warn line, any knob added later that is no budget -
    it inherits."""
    inherited = parent.settings
    return replace(inherited, **child_limits(parent), extensions=inherited.extensions.for_child(),
                   agent="subagent",
                   opens_session=False, echo=lambda line: inherited.echo("  |" + line),
                   on_update=None, on_subagent=None, transcript=None, image=None)


def run_child(description, parent):
    """Run the sub-task in a fresh loop (`parent.loop`) and return what the parent's model reads.
    The child's model calls count in the parent's [stats], because the user pays for them all."""
    stats, echo = Stats(), parent.settings.echo
    messages = [{"role": "system", "content": system_prompt(parent.workspace, parent.settings)}]
    echo(f"  | subagent started: {description.splitlines()[0][:120]}")
    answer, stopped = "", None
    settings = child_settings(parent)
    before = snapshot(parent.workspace)
    try:
        answer = (parent.loop(description, parent.client, parent.workspace, settings, stats,
                              messages))
    except Stopped as e:
        stopped = str(e)
    finally:
        parent.stats.add(stats)  # counts.Stats.add: the one sum
        if parent.settings.on_subagent:
            parent.settings.on_subagent(messages)
    after = snapshot(parent.workspace) if before is not None else None
    written = changed_files(before, after) if after is not None else files_written(messages)
    echo(f"  | subagent {'stopped' if stopped else 'done'}: "
         f"{account(stats.turns, stats.tool_calls, written)}")
    return result_for_parent(answer, stats.turns, stats.tool_calls, written, stopped)


def snapshot(workspace):
    """{relative path: (size, modification time)} of the workspace's files, or None past
    WATCH_LIMIT."""
    found = {}
    folders = [workspace]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_FOLDERS:
                        folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    found[os.path.relpath(entry.path, workspace)] = (info.st_size, info.st_mtime_ns)
            except OSError:
                continue
            if len(found) > WATCH_LIMIT:
                return None
    return found


def changed_files(before, after):
    """The files that are new or changed between two snapshots, sorted."""
    return sorted(path for path, seen in after.items() if before.get(path) != seen)


def files_written(messages):
    """The paths of write_file calls whose result said OK, in order, each once."""
    results = ({m.get("tool_call_id"): m.get("content", "") for m in messages
                if m.get("role") == "tool"})
    written = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            if (call["function"]["name"] == "write_file"
                and str(results.get(call["id"], "")).startswith("OK: wrote")):
                path = json.loads(call["function"]["arguments"]).get("path")
                if path not in written:
                    written.append(path)
    return written
