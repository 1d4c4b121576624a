"""More hands at the same choke point: MCP tools, the task tool, command hooks, parallel reads.

Season two adds tools the package did not write (MCP servers), a tool that runs a whole agent
(`task`, a subagent) and the user's own policy programs (command hooks). None of them gets a door of
its own: `Extensions` is what the loop asks about every call that is not one of tools.py's - is it
yours, may it run without asking, run it - and what it runs around every call: the command hooks
after the built-in ones (hooks.py) and before the permission prompt, and after the call with the
verification hook. So a blocked call is blocked the same way whoever wrote the tool, and a call that
asks permission asks it the same way.

See mcp.py, subagents.py, cmdhooks.py and parallel.py for each piece's own lesson.
"""
from pathlib import Path

from . import cmdhooks, mcp, trust
from .cmdhooks import Verdict
from .subagents import SUBAGENT_MAX_SECONDS, SUBAGENT_MAX_TURNS, TASK_SCHEMA, TASK_TOOL
from .tools import canonical, parse_arguments
from .vision import is_url

READ_ONLY_TOOLS = ("list_dir", "read_file")


class Extensions:
    def __init__(self, mcp=None, hooks=None, subagents=False, parallel=True,
                 subagent_max_turns=SUBAGENT_MAX_TURNS, subagent_max_seconds=SUBAGENT_MAX_SECONDS):
        self.mcp, self.hooks = mcp, hooks  # hooks: a cmdhooks.CommandHooks, or None
        self.subagents, self.parallel = subagents, parallel
        self.subagent_max_turns, self.subagent_max_seconds = subagent_max_turns, subagent_max_seconds
        self.run_task = None  # set by the loop: runs a child agent with this run's settings

    def for_child(self):
        """The same MCP servers and hooks, without the task tool: a subagent cannot start another (depth 1)."""
        child = Extensions(self.mcp, self.hooks, subagents=False, parallel=self.parallel)
        return child

    def schemas(self):
        """The tools beyond tools.py's, asked every turn (an MCP server may have changed its list)."""
        return (self.mcp.schemas() if self.mcp else []) + ([TASK_SCHEMA] if self.subagents else [])

    def owns(self, name):
        return (self.subagents and name == TASK_TOOL) or bool(self.mcp and self.mcp.owns(name))

    def check(self, name, arguments):
        """(arguments as a dict, None) or (None, an ERROR text), like tools.check_call."""
        arguments, problem = parse_arguments(arguments)
        if problem:
            return None, f"ERROR: {problem}."
        if name == TASK_TOOL:
            description = arguments.get("description")
            if not isinstance(description, str) or not description.strip() or set(arguments) != {"description"}:
                return None, 'ERROR: task takes {"description": "<the whole sub-task, self-contained>"}.'
            return arguments, None
        return (None, problem) if (problem := self.mcp.check(name, arguments)) else (arguments, None)

    def needs_permission(self, name):
        """The task tool does not ask: each call the child makes asks for itself. An MCP tool asks unless
        the configuration says it only reads."""
        return name != TASK_TOOL and not self.mcp.read_only(name)

    def run(self, name, arguments):
        if name == TASK_TOOL:
            return self.run_task(arguments["description"])
        return self.mcp.call(name, arguments)

    def read_only(self, name, arguments):
        """May this call run beside others? Only reads: they cannot change what another call sees."""
        if name in READ_ONLY_TOOLS:
            return True
        if name == "view_image":
            path = parse_arguments(arguments)[0].get("path")
            return isinstance(path, str) and not is_url(path)  # a URL asks permission: never in parallel
        return bool(self.mcp and self.mcp.owns(name) and self.mcp.read_only(name))

    # --- command hooks around every call -----------------------------------------------------------
    def hook(self, event, tool=None, arguments=None, **extra):
        return self.hooks.run(event, tool, arguments, **extra) if self.hooks else Verdict(True)

    def pre_tool_use(self, name, arguments):
        verdict = self.hook("pre_tool_use", name, arguments)
        return None if verdict.allowed else f"{verdict.reason} (a pre_tool_use hook of this workspace)"

    def post_tool_use(self, name, arguments, result):
        verdict = self.hook("post_tool_use", name, arguments, result=result)
        if not verdict.allowed:
            return f"{result}\n[hook] a post_tool_use hook objected: {verdict.reason}"
        return f"{result}\n[hook] {verdict.output}" if verdict.output else result

    def user_prompt_submit(self, task):
        verdict = self.hook("user_prompt_submit", prompt=task if isinstance(task, str) else canonical(task))
        return None if verdict.allowed else verdict.reason

    def stop(self, answer):
        verdict = self.hook("stop", answer=answer)
        return None if verdict.allowed else verdict.reason


    def close(self):
        if self.mcp:
            self.mcp.close()


NONE = Extensions()


class SetupError(ValueError):
    """A hooks or MCP configuration that cannot be used: a usage error, found before the first model call."""


def add_flags(parser):
    """The flags `run` and `chat` share for season two's hands."""
    parser.add_argument("--mcp", action="append", default=[], metavar="NAME=COMMAND",
                        help="start an MCP server over stdio and offer its tools as mcp__NAME__TOOL (repeatable; "
                             "COMMAND is split as a shell would split it). Servers are also read from "
                             ".tinyharness/mcp.json and ~/.config/tinyharness/mcp.json. Each MCP call asks "
                             "permission unless the config marks the tool read-only")
    parser.add_argument("--no-subagents", dest="subagents", action="store_false",
                        help="do not offer the task tool (a sub-task run by a helper agent in a fresh context)")
    parser.add_argument("--subagent-max-turns", type=int, default=SUBAGENT_MAX_TURNS, metavar="N",
                        help="most model calls of one subagent (default %(default)s)")
    parser.add_argument("--subagent-max-seconds", type=float, default=SUBAGENT_MAX_SECONDS, metavar="SECONDS",
                        help="most seconds of one subagent (default %(default)s)")
    parser.add_argument("--no-parallel", dest="parallel", action="store_false",
                        help="run read-only calls of one reply one after the other (default: together)")


def check_flags(args, parser):
    if args.subagent_max_turns < 1:
        parser.error("--subagent-max-turns must be 1 or more")
    if not args.subagent_max_seconds > 0:
        parser.error("--subagent-max-seconds must be more than 0")
    for text in args.mcp:
        try:
            mcp.parse_flag(text)
        except ValueError as e:
            parser.error(str(e))


def from_flags(args, workspace, ask, report):
    """Load the workspace's hooks and the MCP servers (asking trust for the workspace's own files with
    `ask`, the real prompt: --yes never answers it), start the servers. Raises SetupError."""
    hooks = load_hooks(workspace, ask, report)
    configs = {}
    for path in mcp.config_files(workspace):
        if path.is_file():
            workspace_file = Path(workspace) in path.parents
            if workspace_file and not trust.ensure_trusted(path, "an MCP server list", ask):
                raise SetupError(f"{path} was not trusted, so its servers were not started and the run did not "
                                 "start. Trust it when asked, or remove the file.")
            try:
                configs.update(mcp.load_config(path))
            except ValueError as e:
                raise SetupError(str(e)) from None
    for text in args.mcp:
        name, config = mcp.parse_flag(text)
        configs[name] = config
    slots = mcp.Slots.start(configs, report=report) if configs else None
    return Extensions(slots, hooks, subagents=args.subagents, parallel=args.parallel,
                      subagent_max_turns=args.subagent_max_turns, subagent_max_seconds=args.subagent_max_seconds)


def load_hooks(workspace, ask, report):
    try:
        hooks = cmdhooks.load(workspace)
    except cmdhooks.HooksFileError as e:
        raise SetupError(f"{e}. Fix the file or remove it; the run did not start.") from None
    if not hooks:
        return None
    path = Path(workspace) / cmdhooks.HOOKS_FILE
    if not trust.ensure_trusted(path, "a hooks file", ask):
        raise SetupError(f"{cmdhooks.HOOKS_FILE} was not trusted, so the run did not start: its hooks are this "
                         "workspace's policy, and running without them would ignore it. Trust it when asked, or "
                         "remove the file.")
    return cmdhooks.CommandHooks(hooks, workspace, report=report)
