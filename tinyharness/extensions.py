"""More hands at the same choke point: MCP tools, the task tool, command hooks, parallel reads.

Season two adds tools the package did not write (MCP servers), a tool that runs a whole agent
(`task`, a subagent) and the user's own policy programs (command hooks). None of them gets a door of
its own: `Extensions` is what the loop asks about every call that is not one of tools.py's - is it
yours, may it run without asking, run it - and what it runs around every call: the command hooks
after the built-in ones (hooks.py) and before the permission prompt, and after the call with the
verification hook. So a blocked call is blocked the same way whoever wrote the tool, and a call that
asks permission asks it the same way.

The loop is handed an `Extensions` in its settings, as it is handed its client: configuration,
frozen, which no run writes to. What one run learns on the way - its deadline, what its prompt hooks
added, whether a stop hook sent the model back, the ids pairing pre and post hooks - is a `RunHands`
that run_agent makes for that run alone and hands down. The one tool that needs the loop itself,
`task`, gets it with the call: the loop passes its own context (`subagents.Parent`) through the
choke point to `run`, so this module never imports loop.py.

What it cannot do. It adds hands, not judgement: an MCP tool is as safe as its server and the
configuration's word on what only reads, and a command hook is as good as the program the workspace
wrote. See mcp/__init__.py, subagents.py, hooks/commands.py and parallel.py for each piece's own
lesson.
"""
import threading
import time
from dataclasses import dataclass, fields, replace
from itertools import count
from typing import Any

from . import asking, mcp, trust
from .asking import has_terminal
from .checkpoints import around as checkpoint
from .hooks import commands
from .hooks import needs_permission as ours_needs_permission
from .hooks.commands import Verdict
from .hooks.run import confinement_note
from .mcp import config as mcp_config
from .mcp.scopes import SetupError, fill_inputs, server_configs
from .permissions import Rules, allowed_note, fence_commands, from_settings, unused_keys
from .subagents import SUBAGENT_MAX_SECONDS, SUBAGENT_MAX_TURNS, TASK_SCHEMA, TASK_TOOL, run_child
from .toolrecord import canonical, parse_arguments
from .tools import record, schemas

# tool_use_id numbers: unique in the process, so no two calls of a chat share one
_call_numbers = count(1)


@dataclass(frozen=True)
class Extensions:
    """What a run is given beyond tools.py: MCP servers, command hooks, permission rules, the task
    tool and parallel reads. Configuration only, frozen, in RunSettings.extensions: what a run
    learns on the way (its deadline, its hooks' memory) is its `RunHands`, made by run_agent."""
    mcp: Any = None                 # mcp.Slots, or None
    hooks: Any = None               # commands.CommandHooks, or None
    rules: Any = None               # permissions.Rules (--allow, --deny, settings files), or None
    subagents: bool = False
    parallel: bool = True
    subagent_max_turns: int = SUBAGENT_MAX_TURNS
    subagent_max_seconds: float = SUBAGENT_MAX_SECONDS

    def for_child(self):
        """The same MCP servers and hooks, without the task tool: a subagent cannot start another
        (depth 1)."""
        return replace(self, subagents=False)

    def tools(self):
        """The tools a request offers, decided here alone (the loop's requests and the chat's
        summary request): tools.py's, then the extensions', asked anew (an MCP server may have
        changed its list)."""
        return schemas() + self.schemas()

    def rule_for(self, name, arguments):
        """The permission rule that decides this call (deny, then ask, then allow), or None."""
        return self.rules.decide(name, arguments) if self.rules else None

    def by_rules(self, name, arguments, asks):
        """(a DENIED text or None, whether the usual prompt still asks) by the permission rules and
        the settings' defaultMode (permissions.Rules.judge). An ask rule asks the person at the
        terminal itself, so that neither --yes nor an allow rule answers it; with nobody there it
        is a denial that says so."""
        if not self.rules:
            return None, asks
        verdict, said = self.rules.judge(name, arguments or {}, asks)
        if verdict == "ask":
            return asked_by_rule(said, name, arguments, self.rules.workspace), False
        return (said if verdict == "deny" else None), verdict == "usual" and asks

    def schemas(self):
        """The tools beyond tools.py's, asked every turn (an MCP server may have changed its
        list)."""
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
            if (not isinstance(description, str) or not description.strip()
                or set(arguments) != {"description"}):
                return None, ('ERROR: task takes {"description": "<the whole sub-task, '
                              'self-contained>"}.')
            return arguments, None
        return ((None, problem) if (problem := self.mcp.check(name, arguments))
                else (arguments, None))

    def needs_permission(self, name):
        """The task tool does not ask: each call the child makes asks for itself. An MCP tool asks
        unless the configuration says it only reads."""
        return name != TASK_TOOL and not self.mcp.read_only(name)

    def read_only(self, name, arguments):
        """May this call run beside others? Only reads: they cannot change what another call
        sees. Ours: its record says (a view_image URL asks permission: never in parallel)."""
        tool = record(name)
        if tool is not None:
            return tool.runs_beside_reads(parse_arguments(arguments)[0])
        return bool(self.mcp and self.mcp.owns(name) and self.mcp.read_only(name))

    def hook(self, event, tool=None, arguments=None, agent="parent", deadline=None, **extra):
        if not self.hooks:
            return Verdict(True)
        return self.hooks.run(event, tool, arguments, agent=agent, deadline=deadline, **extra)

    def fence(self, sandbox, report):
        """A Read deny rule holds for shell commands too: the sandbox binds the files it covers
        empty (permissions.fence_commands)."""
        fence_commands(sandbox, self.rules, report)

    def close(self):
        if self.mcp:
            self.mcp.close()


def asked_by_rule(rule, name, arguments, workspace):
    """None when the person at the terminal allows a call an ask rule covers, else the DENIED
    text. No "always" is offered: an allow rule would not beat the ask rule."""
    why = f"the rule {rule.text} ({rule.source}) asks"
    if not has_terminal():
        return (f"DENIED: this {name} call did not run: {why}, and there is no terminal to ask at "
                "(--yes and allow rules never answer an ask rule).")
    before, shown = "", canonical(arguments)  # as for_call shows it, without the "always" offer
    if name == "write_file" and isinstance(arguments.get("content"), str):
        before, shown = asking.write_preview(arguments["path"], arguments["content"], workspace)
    if asking.ask(f"[permissions] {why} before this call (--yes does not answer it):\n"
                  f"{before}Allow {name}({shown})? [y/N] "):
        return None
    return f"DENIED: the user did not allow this {name} call ({why}), so it did not run."


NONE = Extensions()  # frozen: a run without extensions shares it and cannot change it


def of(settings):
    """A run's extensions: its settings' own, or none."""
    return settings.extensions or NONE


class RunHands:
    """One run's use of its extensions: what it learns on the way, made by run_agent for that run
    alone (a subagent gets its own). The deadline its hooks and MCP calls end by, whether a stop
    hook sent the model back, what the prompt hooks added, the id that pairs a call's pre and post
    hooks."""

    def __init__(self, settings):
        self.settings, self.ext = settings, of(settings)
        # time.monotonic() when this run's time is out (set as its task starts)
        self.deadline = None
        self.stop_hook_active = False   # the model goes on because a stop hook sent it back
        # what user_prompt_submit/session_start hooks add to the task
        self.prompt_context = ""
        # (thread, tool) -> tool_use_id, from pre_tool_use to post_tool_use
        self._call_ids = {}

    def time_left(self):
        """Seconds until this run's deadline, or None when it has none."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def run(self, name, arguments, images=None, parent=None):
        """`images`: where a picture an MCP tool returned goes (the loop sends it after the turn's
        results). `parent` (subagents.Parent): the running loop's own context, which the task tool
        starts its child from."""
        if name == TASK_TOOL:
            return run_child(arguments["description"], parent)
        return self.ext.mcp.call(name, arguments, time_left=self.time_left(), images=images)

    # --- command hooks around every call
    # -----------------------------------------------------------
    def hook(self, event, tool=None, arguments=None, **extra):
        with checkpoint(self.settings if self.ext.hooks else None, f"{event} hook"):  # it may write
            return (self.ext.hook(event, tool, arguments, agent=self.settings.agent,
                                  deadline=self.deadline, **extra))

    def pre_tool_use(self, name, arguments):
        """None when the call may go on, else why not. A hook that asks puts the call to the
        user."""
        call_id = f"toolu_th_{next(_call_numbers)}"
        self._call_ids[(threading.get_ident(), name)] = call_id
        verdict = self.hook("pre_tool_use", name, arguments, tool_use_id=call_id)
        if not verdict.allowed:
            self._call_ids.pop((threading.get_ident(), name), None)  # no post_tool_use follows
            return (f"{verdict.reason} (a pre_tool_use hook of "
                    f"{'the user' if verdict.own else 'this workspace'})")
        refused = self.confirm(name, arguments, verdict.ask) if verdict.ask else None
        if refused:
            self._call_ids.pop((threading.get_ident(), name), None)
        return refused

    def confirm(self, name, arguments, why):
        """A hook said "ask": the permission prompt decides. A call that asks anyway asks once, as
        usual; one that would not (a read) asks now. Under --yes the prompt says yes, as for every
        call."""
        ext = self.ext
        asks = (ours_needs_permission(name, arguments) if not ext.owns(name)
                else ext.needs_permission(name))
        if ext.hooks:
            ext.hooks.report(f"[hook] a pre_tool_use hook asks you to confirm {name}: {why}")
        if asks:
            return None
        if (self.settings.approve("A hook asks you to confirm: allow "
                                  f"{name}({canonical(arguments)})? [y/N] ")):
            return None
        return f"the user did not confirm the call a hook asked about ({why})"

    def post_tool_use(self, name, arguments, result):
        call_id = self._call_ids.pop((threading.get_ident(), name), "")
        verdict = self.hook("post_tool_use", name, arguments, result=result, tool_use_id=call_id)
        if not verdict.allowed:
            return f"{result}\n[hook] a post_tool_use hook objected: {verdict.reason}"
        return f"{result}\n[hook] {verdict.output}" if verdict.output else result

    def user_prompt_submit(self, task, history=None):
        """A task starts: its clock starts, session_start hooks run when this run opens the session
        (the first of a chat's messages; never a subagent), then user_prompt_submit. None when it
        may go on, else why not; what the hooks printed waits in prompt_context (with_context).
        `history`: the messages the run goes on from; with a user turn in them (--continue,
        --resume, a resumed chat) session_start's source is "resume", after a chat's compaction
        "compact" (settings.opens_session), as in Claude Code."""
        seconds, context = self.settings.max_seconds, []
        self.deadline = None if seconds is None else time.monotonic() + seconds
        if self.settings.opens_session:
            resumed = any(message.get("role") == "user" for message in history or ())
            opens = self.settings.opens_session  # "compact": a chat's first message after one
            source = opens if isinstance(opens, str) else "resume" if resumed else "startup"
            verdict = self.hook("session_start", source=source)
            if not verdict.allowed:
                return verdict.reason
            context += [verdict.output] if verdict.output else []
        verdict = (self.hook("user_prompt_submit", prompt=task if isinstance(task, str)
                             else canonical(task)))
        if not verdict.allowed:
            return verdict.reason
        self.prompt_context = "\n".join(context + ([verdict.output] if verdict.output else []))
        return None

    def with_context(self, message):
        """The task's user message with what the hooks added as context (Claude Code's
        UserPromptSubmit stdout), once."""
        context, self.prompt_context = self.prompt_context, ""
        if not context:
            return message
        note = f"[hook] Context from this workspace's hooks:\n{context}"
        if isinstance(message.get("content"), list):
            return {**message, "content": message["content"] + [{"type": "text", "text": note}]}
        return {**message, "content": f"{message.get('content') or ''}\n\n{note}"}

    def stop(self, answer):
        verdict = self.hook("stop", answer=answer, stop_hook_active=self.stop_hook_active)
        # the next stop tells the hook it already sent it back
        self.stop_hook_active = not verdict.allowed
        return None if verdict.allowed else verdict.reason


def add_flags(parser):
    """The flags `run` and `chat` share for season two's hands."""
    parser.add_argument("--mcp", action="append", default=[], metavar="NAME=COMMAND",
                        help="start an MCP server over stdio and offer its tools as "
                             "mcp__NAME__TOOL (repeatable; COMMAND is split as a shell would split "
                             "it). Servers are also read from the workspace's .mcp.json, "
                             ".vscode/mcp.json and .tinyharness/mcp.json (each trusted first), "
                             "~/.config/tinyharness/mcp.json, ~/.claude.json and "
                             "~/.codex/config.toml (`tinyharness mcp list` shows them). Each MCP "
                             "call asks permission unless the config marks the tool read-only")
    parser.add_argument("--allow", action="append", default=[], metavar="RULE",
                        help="let calls this rule covers run without asking, in Claude Code's "
                             "spelling: 'Bash(npm test:*)' (a command prefix), 'Bash(git status)', "
                             "'Edit(src/**)', 'Read', 'mcp__notes__search' (repeatable; also "
                             "permissions.allow in .claude/settings.json). A chain (;, &&, |) is "
                             "never allowed by a rule")
    parser.add_argument("--ask", action="append", default=[], metavar="RULE",
                        help="always ask at the terminal before calls this rule covers, even under "
                             "--yes or a matching allow rule, e.g. 'Bash(git push:*)' (repeatable; "
                             "also permissions.ask in .claude/settings.json); with no terminal "
                             "such a call is denied")
    parser.add_argument("--deny", action="append", default=[], metavar="RULE",
                        help="never run calls this rule covers, e.g. 'Read(./.env)', 'Bash(git "
                             "push:*)' (repeatable; also permissions.deny in "
                             ".claude/settings.json); deny wins over --allow and --yes, and the "
                             "model reads which rule refused")
    parser.add_argument("--no-subagents", dest="subagents", action="store_false",
                        help="do not offer the task tool (a sub-task run by a helper agent in a "
                             "fresh context)")
    parser.add_argument("--subagent-max-turns", type=int, default=SUBAGENT_MAX_TURNS, metavar="N",
                        help="most model calls of one subagent (default %(default)s)")
    parser.add_argument("--subagent-max-seconds", type=float, default=SUBAGENT_MAX_SECONDS,
                        metavar="SECONDS",
                        help="most seconds of one subagent (default %(default)s)")
    parser.add_argument("--no-parallel", dest="parallel", action="store_false",
                        help="run read-only calls of one reply one after the other (default: "
                             "together)")


def check_flags(args, parser):
    if args.subagent_max_turns < 1:
        parser.error("--subagent-max-turns must be 1 or more")
    if not 0 < args.subagent_max_seconds <= 10 ** 7:  # nan, inf and overflowing clocks fail
        parser.error("--subagent-max-seconds must be more than 0 and at most 10,000,000")
    for text in args.mcp:
        try:
            mcp_config.parse_flag(text)
        except ValueError as e:
            parser.error(str(e))
    # a rule that is not Tool(specifier) is a usage error (one naming a tool we lack is a note,
    # later)
    try:
        for kind in ("allow", "ask", "deny"):
            Rules(".").add(getattr(args, kind, []), kind, f"--{kind}", [])
    except ValueError as e:
        parser.error(str(e))


def from_flags(args, workspace, ask, report, sandbox=None):
    """Load the workspace's hooks and the MCP servers (asking trust for the workspace's own files
    with `ask`, the real prompt: --yes never answers it; --trust answers it while the run starts,
    trust.AtStart), start the servers. The hooks are made with `sandbox`, the run's (they run in
    it). Raises SetupError."""
    ask = trust.AtStart(ask) if getattr(args, "trust", False) else ask
    try:
        return start_extensions(args, workspace, ask, report, sandbox)
    finally:
        if isinstance(ask, trust.AtStart):
            ask.over()  # from here on a changed file is asked about by the real prompt


def start_extensions(args, workspace, ask, report, sandbox=None):
    hooks, rules = load_policy(workspace, ask, report, args, sandbox)
    if not getattr(args, "yes", False) and not rules.allows_any() and not has_terminal():
        report("[permissions] there is no terminal to answer at and neither --yes nor an allow "
               "rule was given: every write and command will be DENIED (nobody is there to answer "
               "the prompt; piped input never answers it). Pass --yes, or allow what may run, "
               "e.g. --allow 'Bash(npm test:*)' --allow 'Edit(src/**)'.")
    configs, checks = {}, {}
    for name, config, source, trusted in server_configs(workspace, args.mcp):
        trusted = trusted or trust.ensure_trusted(source, "an MCP server list", ask)
        if not trusted:
            raise SetupError(f"{source} was not trusted, so its servers were not started and the "
                             "run did not start. Trust it when asked, or remove the file.")
        config = fill_inputs(name, config, report)  # ${input:ID}: asked now, or skipped
        if config is None:
            continue
        configs[name] = config
        if isinstance(trusted, trust.Trusted):  # a workspace file's: checked again at the start
            checks[name] = trusted
    slots = (mcp.Slots.start(configs, report=report, trusted=checks,
                             time_left=getattr(args, "max_seconds", None))
             if configs else None)
    # each knob read from the flag of its name (--subagent-max-turns fills subagent_max_turns)
    knobs = {f.name: getattr(args, f.name) for f in fields(Extensions)
             if f.name not in ("mcp", "hooks", "rules") and hasattr(args, f.name)}
    hands = Extensions(slots, hooks, rules, **knobs)
    for line in rules.unmatched([schema["function"]["name"] for schema in hands.tools()]):
        report(line)  # a rule that matches nothing is said, never silently kept
    return hands


def list_hooks(workspace, out=print):
    """`tinyharness hooks list`: every hooks file (the user's own, then the workspace's), whether it
    is trusted, and each command hook: event, matcher, command, whether it runs in the sandbox and
    where it starts. Nothing is run. 0, or 2 for a file that cannot be used."""
    try:
        files = [(path, hooks, notes) for path, _, hooks, notes in commands.load_files(workspace)]
    except commands.HooksFileError as e:
        out(f"error: {e}")
        return 2
    if not any(any(hooks.values()) for _, hooks, _ in files):
        out("No command hooks are configured (~/.claude/settings.json, "
            "~/.config/tinyharness/hooks.json, .claude/settings.json, .claude/settings.local.json, "
            ".tinyharness/hooks.json).")
        return 0
    placing = commands.CommandHooks({}, workspace)
    for path, hooks, notes in files:
        if not any(hooks.values()):
            continue
        out(f"{path}  "
            + ("(your own file: no trust question)" if commands.is_users(path) else "(trusted)"
                          if trust.is_trusted(path)
                           else "(NOT trusted yet: run or chat asks once; until then none runs)"))
        for event, entries in hooks.items():
            for hook in entries:
                start = placing.start_folder(hook, confined=hook.sandbox)
                where = "in the sandbox" if hook.sandbox else 'UNCONFINED ("sandbox": false)'
                matcher = "*" if hook.matcher.pattern == ".*" else hook.matcher.pattern
                out(f"  {event} [{matcher}] {hook.command[:120]}")
                out(f"    {where}; starts in {'the workspace' if start == workspace else start}; "
                    f"timeout {hook.timeout:g} s")
        for note in notes:
            out(f"  note: {note}")
    return 0


def load_policy(workspace, ask, report, flags=None, sandbox=None):
    """(CommandHooks or None, permissions.Rules): the hooks and permission rules of the workspace's
    files (Claude Code's .claude/settings.json and settings.local.json, our .tinyharness/hooks.json)
    and the --allow/--ask/--deny flags. A file with hooks, allow rules or defaultMode acceptEdits is
    trusted first, each on its own (deny and ask rules, plan and dontAsk only narrow what runs: they
    hold untrusted). The settings keys the harness does not use are named in one line. Raises
    SetupError."""
    notes: list = []
    merged: dict = {}
    rules, unused = Rules(workspace), []
    try:
        for kind in ("allow", "ask", "deny"):
            rules.add(list(getattr(flags, kind, None) or []), kind, f"--{kind}", notes)
        for path, data, hooks, said in commands.load_files(workspace):
            trusted = file_policy(path, data, hooks, said, rules, workspace, ask, flags)
            notes += said
            if path.name.startswith("settings") and (keys := unused_keys(data)):
                unused.append(f"{', '.join(keys)} ({path})")
            for event, entries in hooks.items():
                merged.setdefault(event, []).extend(commands.trusted_as(entries, trusted))
    except SetupError:  # already a whole sentence (a file not trusted): said as it is
        raise
    except (commands.HooksFileError, ValueError) as e:
        raise SetupError(f"{e}. Fix it or remove it; the run did not start.") from None
    if unused:
        notes.append("[settings] tinyharness does not use these settings, and ignores them: "
                     + "; ".join(unused)[:600])
    for note in notes:
        report(note)
    hooks = (commands.CommandHooks(merged, workspace, report=report, sandbox=sandbox)
             if any(merged.values()) else None)
    return hooks, rules


def file_policy(path, data, hooks, said, rules, workspace, ask, flags):
    """Add one hooks or settings file's rules; what the user trusted of it (None: nothing to
    trust, or the user's own file). Its defaultMode is set once its trust is known: one the user
    has not trusted only makes the mode stricter (Rules.set_mode)."""
    own = commands.is_users(path)  # the user's own file: no trust question
    name = path if own else path.relative_to(workspace)
    settings = path.name.startswith("settings")
    allows, _, mode = (from_settings(data, str(name), rules, said) if settings
                       else (False, False, None))
    allowed = allowed_note(data) if allows else ""
    if own and allowed:  # said at start: a file of another tool lets calls run, everywhere
        said.append(f"[permissions] {name} (your own): its allow rules apply here too: "
                    + allowed.removeprefix("it allows these calls without asking: ")[:300])
    trusted = (None if own or not (any(hooks.values()) or allows)
               else trust_question(path, name, hooks, allowed, ask, flags))
    rules.set_mode(mode, str(name), said, own=own, trusted=bool(trusted))
    return trusted


def trust_question(path, name, hooks, allowed, ask, flags):
    """Ask once whether a workspace file with hooks or rules that let calls run is trusted (the
    question says what it can really do: run hooks, which and where, and let which calls run
    unasked); raises SetupError when it is not."""
    if any(hooks.values()):
        note = confinement_note(hooks, getattr(flags, "sandbox", "on") != "off")
        trusted = trust.ensure_trusted(path, "a hooks or settings file", ask,
                                       note + (f"\nIt also says: {allowed}." if allowed else ""))
    else:
        trusted = trust.ensure_trusted(path, "a settings file with permission rules", ask,
                                       f"If you trust it, {allowed}. Nothing in it runs by itself. "
                                       "Trust it only if you would let the model make these "
                                       "calls in this folder unasked.",
                                       does="it changes what runs without asking")
    if trusted is False:
        raise SetupError(f"{name} was not trusted, so the run did not start: its hooks and "
                         "rules are this workspace's policy, and running without them "
                         "would ignore it. Trust it when asked, or remove the file.")
    return trusted
