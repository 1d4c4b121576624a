"""One record per tool: all the harness knows about a tool, in one place.

The problem. A tool is more than its function. The model needs its schema; parallel reads need to
know it only reads; the path guard, which arguments are paths; the permission prompt, whether it
asks; the context policy, whether a stub may invite the model to call it again; permission rules
and command hooks, what Claude Code calls it. Kept as one table per question in seven modules, a
new tool meant eleven edits, and a table forgotten failed without a sound: a read that never ran in
parallel, a Claude name mapped one way only.

The mechanism. A frozen `Tool` for each tool, written beside its function (tools.py holds the
built-in ones and the lookup, `tools.record`). Each question is a field, and the module that asks
reads the record: no other module lists tool names (tests/test_tool_records.py keeps it so). Adding
a tool is its function plus its record. Here too: `schema`, the shape every tool's schema takes;
how a call's arguments are read (`parse_arguments`) and spelled (`canonical`); and the task tool's
record, whose function needs the loop (subagents.py) while every policy below must know it.

What it cannot do. An MCP server's tools are not records: they come and go while a run goes on, and
the extensions (mcp/) answer for them. A field says what a tool is; what a policy does with it (the
path guard's checks, a rule's path pattern, the prompt's words) stays with the policy.
"""
import json
from collections.abc import Callable
from dataclasses import dataclass

from .imageload import is_url


@dataclass(frozen=True)
class Tool:
    """A tool as the harness sees it. `function(workspace, **the model's arguments, **extras)`
    runs it (None: the task tool, which the extensions run with the loop's own context)."""
    name: str
    function: Callable | None
    schema: dict                # what the model is offered: tools.schema(...)
    reads_only: bool = False    # changes nothing: runs beside other reads, needs no checkpoint
    paths: tuple = ()           # arguments naming a workspace file: guarded, matched by file rules
    asks: bool = False          # the user says yes to each call (writes, commands)
    urls: bool = False          # a path may be an http(s) URL instead: not guarded, and it asks
    rereadable: bool = False    # a stub of its result may invite calling it again
    claude: tuple = ()          # Claude Code's names; a Claude-shaped hook reads the first
    claude_rules: tuple | None = None  # Claude rules that cover it (None: claude)
    verb: str = ""              # its errors: "cannot read notes.txt: ..." (none: a command's words)
    extras: tuple = ()          # what run_tool adds to the model's: timeout, sandbox, images
    checkpointed: bool | None = None   # a checkpoint before each call (None: unless reads_only)

    def asks_for(self, arguments):
        """Does this call ask the user? A URL is a request sent off the machine (it can carry data
        out: https://example.com/?q=<secret>); a path that is not text is taken for one."""
        return self.asks or (self.urls and any(
            not isinstance(arguments.get(p), str) or is_url(arguments[p]) for p in self.paths))

    def runs_beside_reads(self, arguments):
        """May this call run at the same time as other reads? Only a read that asks nobody."""
        return self.reads_only and not self.asks_for(arguments)

    def rule_names(self):
        """The Claude Code permission rule names that cover this tool (Read, Bash, ...)."""
        return self.claude if self.claude_rules is None else self.claude_rules

    def needs_checkpoint(self):
        return (not self.reads_only) if self.checkpointed is None else self.checkpointed


def schema(name, description, **params):
    """The JSON schema the model sees: every parameter is a required string."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(params),
                       "properties": {k: {"type": "string", "description": v}
                                      for k, v in params.items()}}}}


def parse_arguments(arguments):
    """(the arguments as a dict, what was wrong with them or None). Servers in the OpenAI style send
    a JSON string; some send an object, which is just as good."""
    if isinstance(arguments, dict):
        return arguments, None
    if arguments in (None, ""):
        return {}, None
    try:
        value = json.loads(arguments)
    except (ValueError, TypeError) as e:
        return {}, f"the arguments are not valid JSON ({e}): {str(arguments)[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {str(arguments)[:200]!r}"
    return value, None


def canonical(arguments):
    """One spelling for the same arguments: what the [tool] line shows and what the history
    keeps."""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


# A whole agent on a sub-task (subagents.py), offered with --subagents. It needs the running loop,
# which the loop hands it through the extensions, so its record holds no function. It does not ask
# (each call of the child asks for itself), nor needs a checkpoint (the child's calls take theirs).
TASK = Tool("task", None, {"type": "function", "function": {
    "name": "task",
    "description": ("Hand a self-contained sub-task to a helper agent that starts with a fresh, "
                    "empty context and the same tools. Only its final answer comes back, not the "
                    "files it read, so use it for searches or chores whose details you do not need "
                    "to keep. The description is all the helper knows: name the files, the goal "
                    "and what to report."),
    "parameters": {"type": "object",
                   "properties": {"description": {
                       "type": "string", "description": "the whole sub-task, self-contained"}},
                   "required": ["description"]}}},
    claude=("Task", "Agent"), claude_rules=(), checkpointed=False)
