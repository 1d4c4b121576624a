"""Subagents: a sub-task in a fresh context, and only its conclusion comes back.

The problem. A task like "find where the budget is defined" can take fifteen tool calls of listing
and reading. Every one of those results lands in the conversation and stays there (or is cut to a
stub later): the main run pays for the search in context for the rest of its life, and a small
model's window fills with pages it no longer needs.

The mechanism. The `task{description}` tool starts a new loop - the same `run_agent`, with the same
tools, hooks, permission prompt, guards and verification - whose context is only the system prompt
and the description. It runs to its own end under its own turn and time budget and returns **only
its final answer plus a one-line account** (turns, tool calls, files written) as the result of the
parent's call. The parent's context never sees the child's tool results. The child cannot start a
child of its own (the `task` tool is withheld from it: depth 1), so one careless description cannot
fan out into a tree of runs. A child stopped by a limit says so: its result starts with
"NOT confirmed complete", and the parent's model reads that.

What it cannot do. The child knows only what the description says: a parent that writes "fix it"
gets a child that does not know what "it" is. The child's answer is a claim, not evidence - the
same rule as m6: check the files, not the words. Children run one at a time, never in parallel
(two children writing the same file would race).
"""

TASK_TOOL = "task"
SUBAGENT_MAX_TURNS = 12      # --subagent-max-turns
SUBAGENT_MAX_SECONDS = 300   # --subagent-max-seconds

TASK_SCHEMA = {"type": "function", "function": {
    "name": TASK_TOOL,
    "description": ("Hand a self-contained sub-task to a helper agent that starts with a fresh, empty context "
                    "and the same tools. Only its final answer comes back, not the files it read, so use it "
                    "for searches or chores whose details you do not need to keep. The description is all "
                    "the helper knows: name the files, the goal and what to report."),
    "parameters": {"type": "object",
                   "properties": {"description": {"type": "string",
                                                  "description": "the whole sub-task, self-contained"}},
                   "required": ["description"]}}}


def account(turns, tool_calls, files_written):
    files = ", ".join(files_written) if files_written else "none"
    return f"[subagent] turns={turns} tool_calls={tool_calls} files written: {files}"


def result_for_parent(answer, turns, tool_calls, files_written, stopped=None):
    """What the parent's model reads: the child's conclusion and a one-line account, nothing else."""
    line = account(turns, tool_calls, files_written)
    if stopped:
        return (f"NOT confirmed complete: the helper agent was stopped ({stopped}).\n"
                f"{answer.strip() or '(it gave no answer)'}\n{line}")
    return f"{answer.strip() or '(the helper agent gave an empty answer)'}\n{line}"
