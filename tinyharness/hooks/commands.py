"""Command hooks: the user's own policy, as programs the harness runs at its choke points.

The problem. The hooks in hooks.py are Python inside the harness: to add a rule ("never touch
migrations/", "run the linter after every write", "log every command to the audit file") a user
would have to edit the harness. People already know a convention from Claude Code and Codex: a hook
is a command, it gets the event as JSON on stdin, and its exit code decides. Many already have such
hooks written for Claude Code; they should run here unchanged.

The mechanism. `.tinyharness/hooks.json` in the workspace lists commands per event, in our shape or
in Claude Code's settings shape (both may sit in one file; `{"hooks": {...}}` around them is
optional); the "hooks" of Claude Code's `.claude/settings.json` and `.claude/settings.local.json`
run too, and the user's own (`~/.claude/settings.json`, `$XDG_CONFIG_HOME/tinyharness/hooks.json`:
no trust question, and started in their file's folder, never the workspace; `tinyharness hooks list`
shows them all):

    {"pre_tool_use": [{"matcher": "shell|write_file", "command": "python3 .tinyharness/policy.py"}],
     "post_tool_use": [{"matcher": "write_file", "command": "ruff check --quiet .", "timeout": 20}],
     "PreToolUse": [{"matcher": "Bash",
                     "hooks": [{"type": "command", "command": "...", "timeout": 60}]}]}

Events, ours and Claude Code's name for each (a Claude name fires for the agent Claude fires it
for):

    pre_tool_use        PreToolUse        before a call; may block it (parent and subagent)
    post_tool_use       PostToolUse       after a call; stdout is added to the result the model
                                          reads
    user_prompt_submit  UserPromptSubmit  before a task/message; may refuse it; stdout is added as
                                          context
    stop                Stop              the model wants to end; a block sends it back to work
                        SubagentStop      the same, for a subagent only (Stop: the main agent only)
    session_start       SessionStart      once, before the first task; stdout is added as context
    pre_compact         PreCompact        before chat summarises its history

`matcher` is a regular expression that must match the whole tool name (absent, "" or "*": every
tool). Claude Code's tool names match too: Bash = shell, Write/Edit/MultiEdit = write_file, Read =
read_file and view_image, LS/Glob = list_dir, Task = task, Edit = save_note; `mcp__server__tool` is
the same in both. The command runs with `/bin/sh -c` in the workspace, in the sandbox of shell
commands unless its entry says `"sandbox": false` (hooks/run.py), with `CLAUDE_PROJECT_DIR` set to
the workspace, and reads one JSON object on stdin: ours (`event`, `tool_name`, `tool_input`,
`workspace`, `session_id`, `agent`: "parent" or "subagent", `result`, `prompt`, `answer`) and Claude
Code's beside them (`hook_event_name`, `tool_input.file_path` (absolute) and `.command`,
`tool_response`, `tool_use_id`, `transcript_path`, `cwd`, `stop_hook_active`). A hook written in
Claude's shape gets Claude's names where the two differ (`tool_name: "Bash"`, `hook_event_name:
"PreToolUse"`; ours in `tinyharness_tool_name`).

Deciding. Exit 2 blocks, and the hook's stderr is the reason the model reads. Exit 0 with empty
stdout allows. Exit 0 with a JSON object decides by its fields: `{"decision": "block", "reason":
...}` blocks; Claude's `{"hookSpecificOutput": {"permissionDecision": "deny"|"ask"|"allow",
"permissionDecisionReason": ...}}`: deny blocks; ask puts the call to the user's permission prompt
(even a read that never asks; under --yes that prompt answers yes, as it does for every call the
hooks let through; with nobody at the terminal it is a no); allow lets it pass the hook - the
permission prompt still asks as usual (a hook narrows what runs, it never widens what the user
approves); any other decision, or `updatedInput` (rewriting a call is not supported), blocks.
`"continue": false` ends the run (the loop stops before its next model call, exit 3) with its
`stopReason` said; `systemMessage` is shown to the user. Plain text with exit 0 from a
`pre_tool_use` or `stop` hook is no objection, as in Claude Code: shown to the user, not given to
the model (hooks/decide.py). `post_tool_use` and `pre_compact` stdout is text for the model (or the
summary request); `user_prompt_submit`/`session_start` stdout is context added to the task (or
Claude's `additionalContext`); `session_start`'s `source` is `startup`, or `resume` for a run that
goes on with a session (--continue, --resume). `stop_hook_active` is true when the model is already
going on because a stop hook sent it back, so a guarded Claude Stop hook lets it stop the second
time.

Fail closed. Claude Code lets a hook that crashes, times out or exits with another code proceed - a
guard that fails opens the door. Here any other exit code, a command that cannot start, a timeout or
JSON that cannot be read blocks the call, and the user sees which hook decided and why. Each hook
runs in a process group of its own (confined: a PID namespace of its own), bounded by its `timeout`
(default 30 s) and by what is left of the run's --max-seconds; when it ends or times out the whole
group is killed, so a background child it left holding its output neither keeps the call waiting nor
outlives it.

What it cannot do. A hooks file in a workspace is code that runs on your machine: a cloned
repository could ship one. The first time a workspace's hooks file is seen, or after it changed, the
user is asked to trust it (trust.py), the question naming each hook that runs unconfined - and
`--yes`, which approves the model's calls, does not answer that question. Before each start of an
unconfined hook the workspace files its command names are compared with what was trusted: one the
model changed (or created) since is asked about again at a terminal, and without one the call is
refused. A hook sees the call, not
what the call will do: `pre_tool_use` on `shell` reads the same text the regex policy reads, with
the same blind spots. Unconfined, a child that calls `setsid` leaves the group and survives.
Claude's `prompt`, `http` and `agent` hooks (an LLM or a URL decides) are skipped with a warning
when the file is loaded.
"""
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..console import warn
from ..filedoor import CONFIG_CAP, read_config
from ..tools import NOTES_FILE, record
from .decide import Verdict, verdict_of
from .run import cannot_start, run_command, tool_folders

EVENTS = ("pre_tool_use", "post_tool_use", "user_prompt_submit", "stop", "pre_compact",
          "session_start")
# Claude Code's event name -> (ours, the agents it fires for: Claude's Stop is the main agent's
# only)
CLAUDE_EVENTS = {"PreToolUse": ("pre_tool_use", None), "PostToolUse": ("post_tool_use", None),
                 "UserPromptSubmit": ("user_prompt_submit", {"parent"}),
                 "Stop": ("stop", {"parent"}),
                 "SubagentStop": ("stop", {"subagent"}), "PreCompact": ("pre_compact", None),
                 "SessionStart": ("session_start", {"parent"})}
CLAUDE_NAME = ({ours: claude for claude, (ours, _) in CLAUDE_EVENTS.items()
                if claude != "SubagentStop"})
# Claude Code's events that never fire here: accepted with a note, so a copied settings block loads.
CLAUDE_ONLY_EVENTS = ("Notification", "SessionEnd", "PermissionRequest", "SubagentStart",
                      "PostToolUseFailure")
HOOKS_FILE = Path(".tinyharness") / "hooks.json"
# Claude Code's project settings, then ours: each file's hooks run, each file trusted on its own.
HOOK_FILES = (Path(".claude") / "settings.json", Path(".claude") / "settings.local.json",
              HOOKS_FILE)
# Claude Code's hooks that are not a command: warned about, skipped
SKIPPED_TYPES = ("prompt", "http", "agent")
HOOK_TIMEOUT = 30  # seconds; a hook that hangs blocks, it never waits forever
# seconds a hook still gets when the run's time is nearly out (it blocks if it needs more)
MIN_TIMEOUT = 0.5


@dataclass
class Hook:
    matcher: re.Pattern
    command: str
    timeout: float = HOOK_TIMEOUT
    claude: bool = False          # written in Claude Code's shape: it reads Claude's names
    claude_event: str = ""        # the name the file used, sent as hook_event_name
    agents: set | None = None  # None: every agent; else {"parent"} or {"subagent"}
    # runs confined as a shell command (hooks/run.py); "sandbox": false in its entry
    sandbox: bool = True
    # the folder of the user's own file it came from ("": the workspace's)
    home: str = ""
    # what the user trusted of its workspace file (trust.Trusted), checked before it starts
    # unconfined; None: the user's own file
    trusted: object = None


class HooksFileError(ValueError):
    """The hooks file exists but cannot be used: the run must not start as if it had no policy."""


def load(workspace):
    """{event: [Hook]} from the workspace's hooks file; {} when there is none."""
    return load_with_notes(workspace)[0]


def load_with_notes(workspace):
    """({event: [Hook]}, [notes for the user about entries that never fire here]) of every hooks
    file."""
    hooks: dict = {}
    notes: list = []
    for _, _, found, said in load_files(workspace):
        for event, entries in found.items():
            hooks.setdefault(event, []).extend(entries)
        notes += said
    return hooks, notes


def user_files():
    """[(path, Claude settings?)] of the user's own hooks files: Claude Code's user settings, then
    ours."""
    config = Path(os.environ.get("XDG_CONFIG_HOME", ""))
    # the XDG rule: a relative path is ignored
    config = config if config.is_absolute() else Path.home() / ".config"
    return [(Path.home() / ".claude" / "settings.json", True),
            (config / "tinyharness" / "hooks.json", False)]


def is_users(path):
    """Whether PATH is one of the user's own hooks files (no trust question; its hooks start in its
    folder)."""
    return any(Path(path) == own for own, _ in user_files())


def load_files(workspace):
    """[(path, the file's JSON, {event: [Hook]}, notes)] for each hooks file there is: the user's
    own (user_files: their hooks start in the file's folder, never the workspace), then the
    workspace's, Claude Code's project settings (their "hooks") before ours."""
    loaded = []
    for path, claude_settings in user_files():
        if not os.path.lexists(path):
            continue
        try:
            whole, hooks, notes = load_file(path, claude_settings, own=True)
        except HooksFileError as e:
            raise HooksFileError(str(e).replace(str(HOOKS_FILE), str(path))) from None
        for hook in (hook for entries in hooks.values() for hook in entries):
            hook.home = str(path.parent)
        loaded.append((path, whole, hooks,
                       [note.replace(str(path.relative_to(path.parent.parent)), str(path))
                                            for note in notes]))
    for name in HOOK_FILES:
        path = Path(workspace) / name
        if not os.path.lexists(path):
            continue
        try:
            loaded.append((path, *load_file(path, claude_settings=name != HOOKS_FILE)))
        except HooksFileError as e:  # the checks below name ours: say which file it was
            raise HooksFileError(str(e).replace(str(HOOKS_FILE), str(name))) from None
    return loaded


def load_file(path, claude_settings=False, own=False):
    """(the file's JSON, {event: [Hook]}, notes) of one file. `own`: the user's, outside any
    workspace, read where its links lead (a dotfiles manager links them), through the door all the
    same (no FIFO)."""
    if not path.is_file():
        raise HooksFileError(f"{HOOKS_FILE}: not a regular file")
    try:  # the harness's one door: no link leading out, no FIFO
        data, size = read_config(path, own)
        if size > CONFIG_CAP:
            raise ValueError(f"it is {size:,} bytes, more than the {CONFIG_CAP:,} a hooks or "
                             "settings file may have")
        whole = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise HooksFileError(f"{HOOKS_FILE}: cannot read it as JSON ({e})") from e
    if claude_settings:  # a settings file holds more than hooks (permissions, env, model...)
        data = whole.get("hooks", {}) if isinstance(whole, dict) else None
    else:
        data = whole.get("hooks", whole) if isinstance(whole, dict) else None
    if not isinstance(data, dict):
        raise HooksFileError(f"{HOOKS_FILE}: expected an object of events, e.g. "
                             '{"pre_tool_use": [{"matcher": "shell", "command": "..."}]}')
    hooks: dict = {}
    notes: list = []
    for event, entries in data.items():
        if event in CLAUDE_ONLY_EVENTS:
            notes.append(f"[hook] {HOOKS_FILE}: {event} hooks never fire in tinyharness (no such "
                         "event); they are ignored")
            continue
        if event not in EVENTS and event not in CLAUDE_EVENTS:
            raise HooksFileError(f"{HOOKS_FILE}: unknown event {event!r}; the events are "
                                 f"{', '.join(EVENTS)} (or Claude Code's "
                                 f"{', '.join(CLAUDE_EVENTS)})")
        ours, agents = CLAUDE_EVENTS.get(event, (event, None))
        for entry in entries if isinstance(entries, list) else [entries]:
            hooks.setdefault(ours, []).extend(parse_entry(event, entry, agents, notes))
    name = path.relative_to(path.parent.parent)
    return whole, hooks, [note.replace(str(HOOKS_FILE), str(name)) for note in notes]


def parse_entry(event, entry, agents=None, notes=None):
    """The Hooks of one entry: ours {"matcher", "command", "timeout"} or Claude Code's
    {"matcher", "hooks": [{"type": "command", "command", "timeout"}]}."""
    if not isinstance(entry, dict):
        raise HooksFileError(f"{HOOKS_FILE}: each {event} entry must be an object with \"command\" "
                             "(or Claude Code's \"hooks\": [{\"type\": \"command\", \"command\": "
                             "...}])")
    matcher = compile_matcher(event, entry.get("matcher"))
    claude = event in CLAUDE_EVENTS or "hooks" in entry
    if "hooks" in entry:
        inner = entry["hooks"]
        if not isinstance(inner, list) or not inner:
            raise HooksFileError(f"{HOOKS_FILE}: {event}: \"hooks\" must be a list of "
                                 "{\"type\": \"command\", \"command\": \"...\"}")
        commands = []
        for hook in inner:
            kind = hook.get("type", "command") if isinstance(hook, dict) else hook
            # an LLM or a URL decides in Claude Code: not here
            if kind in SKIPPED_TYPES and notes is not None:
                notes.append(f"[hook] warning: {HOOKS_FILE}: a {event} hook of \"type\": "
                             f"{json.dumps(kind)} is skipped (tinyharness runs only \"type\": "
                             "\"command\" hooks)")
                continue
            if kind != "command":
                raise HooksFileError(f"{HOOKS_FILE}: {event}: only hooks of \"type\": \"command\" "
                                     f"are supported, not {kind!r}")
            commands.append((command_of(event, hook), timeout_of(event, hook),
                             sandbox_of(event, hook, sandbox_of(event, entry))))
    else:
        commands = [(command_of(event, entry), timeout_of(event, entry), sandbox_of(event, entry))]
    claude_event = event if event in CLAUDE_EVENTS else CLAUDE_NAME.get(event, event)
    return [Hook(matcher, command, timeout, claude, claude_event, agents, sandbox)
            for command, timeout, sandbox in commands]


def sandbox_of(event, entry, default=True):
    """`"sandbox": false` runs the hook unconfined; absent, it runs in the sandbox."""
    value = entry.get("sandbox", default) if isinstance(entry, dict) else default
    if not isinstance(value, bool):
        raise HooksFileError(f"{HOOKS_FILE}: {event}: \"sandbox\" must be true or false, not "
                             f"{json.dumps(value)[:60]}")
    return value


def compile_matcher(event, matcher):
    if matcher is None or matcher in ("", "*"):
        return re.compile(".*")
    if not isinstance(matcher, str):
        raise HooksFileError(f"{HOOKS_FILE}: {event}: \"matcher\" must be a string (a regular "
                             f"expression of tool names), not {json.dumps(matcher)[:60]}")
    try:
        return re.compile(matcher)
    except re.error as e:
        raise HooksFileError(f"{HOOKS_FILE}: the matcher {matcher!r} is not a regular expression "
                             f"({e})") from e


def command_of(event, entry):
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HooksFileError(f"{HOOKS_FILE}: each {event} entry needs \"command\": a string")
    return command


def timeout_of(event, entry):
    timeout = entry.get("timeout", HOOK_TIMEOUT)
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
        or not 0 < timeout <= 86400):
        raise HooksFileError(f"{HOOKS_FILE}: {event}: \"timeout\" must be a number of seconds "
                             f"above 0, not {json.dumps(timeout)[:60]}")
    return float(timeout)


class CommandHooks:
    def __init__(self, hooks, workspace, session_id="", report=None, timeout=None,
                 transcript_path="", sandbox=None):
        self.hooks, self.workspace, self.session_id = hooks, str(workspace), session_id
        # the run's sandbox.Sandbox (--sandbox off: every hook unconfined); None: none, and a
        # hook that runs in the sandbox is refused (run_one)
        self.sandbox = sandbox
        self.confined = {}  # a user's hooks folder -> the run's sandbox that may read it too
        self.transcript_path = transcript_path
        self.timeout = timeout        # caps every hook's own timeout (tests); None: each hook's own
        self.report = report or warn  # console.warn: the default of settings.warn, made printable
        self.ended = None  # (event, stopReason) of a "continue": false, until the loop takes it
        self.with_tools = None  # the run's sandbox that may read the user's PATH tools too

    def __bool__(self):
        return any(self.hooks.values())

    def run(self, event, tool=None, arguments=None, agent="parent", deadline=None, **extra):
        """Run every matching hook of `event`, together (as Claude Code does, each with its own
        timeout), so an audit hook sees a call another hook blocks; a block from any of them blocks
        (the first in the file's order is the reason). `deadline` (time.monotonic()) is when the
        run's time is out."""
        chosen = [hook for hook in self.hooks.get(event, [])
                  if not (hook.agents and agent not in hook.agents)
                  and (tool is None or matches(hook.matcher, tool))]
        run = (lambda hook: self.run_one(event, hook, tool, arguments, dict(extra, agent=agent),
                                         deadline))
        if len(chosen) > 1:
            with ThreadPoolExecutor(len(chosen)) as pool:
                verdicts = list(pool.map(run, chosen))
        else:
            verdicts = [run(hook) for hook in chosen]
        if event in ("session_start", "user_prompt_submit") and agent == "parent":
            self.ended = None  # a new task: no end pending from the last one (a chat's)
        outputs, asks = [], []
        for hook, verdict in zip(chosen, verdicts):
            verdict.own = bool(hook.home)
            self.tell(event, hook, tool, verdict)
            outputs += [verdict.output] if verdict.output else []
            asks += [verdict.ask] if verdict.ask else []
        blocked = next((verdict for verdict in verdicts if not verdict.allowed), None)
        return blocked or Verdict(True, output="\n".join(outputs), ask="; ".join(asks))

    def tell(self, event, hook, tool, verdict):
        """What the user sees of one hook's answer: its plain line, its systemMessage, a block, or
        that it ends the run (kept for the loop, take_ended)."""
        name = f"[hook] {event} `{hook.command}`"
        if verdict.shown:
            self.report(f"{name}: {verdict.shown}")
        if verdict.message:
            self.report(f"[hook] {verdict.message}")
        if verdict.stop:
            self.ended = self.ended or (event, verdict.stop)
            self.report(f"{name} ends the run: {verdict.stop}")
        elif not verdict.allowed:
            self.report(f"{name} blocked{' ' + tool if tool else ''}: {verdict.reason}")

    def take_ended(self):
        """(event, stopReason) when a hook said "continue": false since it was last asked, else
        None; asked by the loop between turns (edges.py), which then stops the run."""
        ended, self.ended = self.ended, None
        return ended

    def time_for(self, hook, deadline=None):
        limit = hook.timeout if self.timeout is None else min(hook.timeout, self.timeout)
        if deadline is not None:
            limit = min(limit, max(MIN_TIMEOUT, deadline - time.monotonic()))
        return limit

    def run_one(self, event, hook, tool, arguments, extra, deadline=None):
        payload = self.payload(event, hook, tool, arguments, extra)
        timeout, command = self.time_for(hook, deadline), hook.command
        if hook.sandbox and self.sandbox is None:  # never a default: the run hands its own over
            return Verdict(False, f"the hook `{command}` runs in the sandbox, and none was given "
                                  "to the hooks, so the call is refused", hook=command)
        sandbox, cwd = self.sandbox_for(hook)  # a user's own hook never starts in the workspace
        if refused := cannot_start(hook, sandbox):
            return refused
        env = {"CLAUDE_PROJECT_DIR": self.workspace, **({"PWD": cwd} if hook.home else {})}
        try:
            code, out, err = run_command(command, json.dumps(payload, default=str).encode(), cwd,
                                         env, timeout, sandbox, self.workspace, self.report)
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in the command or its cwd
            return (Verdict(False, f"the hook `{command}` could not run ({e}), so the call is "
                                   "refused", hook=command))
        return verdict_of(event, command, code, out, err, timeout, confined=bool(sandbox))

    def sandbox_for(self, hook):
        """(the sandbox this hook runs in, or None: unconfined ("sandbox": false, or --sandbox off);
        the folder it starts in, start_folder). Confined, the run's sandbox may also read the
        user's PATH tools, and a user's own hooks folder."""
        if not hook.sandbox or not self.sandbox.enabled:
            return None, self.start_folder(hook, confined=False)
        if self.with_tools is None:  # the programs on the user's PATH too (hooks/run.tool_folders)
            self.with_tools = self.sandbox.with_read(tool_folders())
        start = self.start_folder(hook)
        if not hook.home or start != os.path.join(hook.home, "hooks"):
            return self.with_tools, start
        if start not in self.confined:
            # built once a run, as the run's own
            self.confined[start] = self.with_tools.with_read([start])
        return self.confined[start], start

    def start_folder(self, hook, confined=True):
        """Where a hook starts: the workspace; a user's own hook in its file's folder, or confined
        in that folder's `hooks/` (where such scripts live, and all it may read of the home folder),
        else in the home folder."""
        if not hook.home or not confined:
            return hook.home or self.workspace
        scripts = os.path.join(hook.home, "hooks")
        return scripts if os.path.isdir(scripts) else os.path.expanduser("~")

    def payload(self, event, hook, tool, arguments, extra):
        """The JSON on the hook's stdin: our names, and Claude Code's beside them."""
        arguments = arguments if isinstance(arguments, dict) else {}
        extra = dict(extra)
        result = extra.get("result")
        payload = {"event": event, "hook_event_name": hook.claude_event
                   or CLAUDE_NAME.get(event, event),
                   "tool_name": tool, "tool_input": claude_input(tool, arguments, self.workspace),
                   "workspace": self.workspace, "cwd": self.workspace,
                   "session_id": self.session_id,
                   "transcript_path": self.transcript_path, "permission_mode": "default",
                   "stop_hook_active": bool(extra.pop("stop_hook_active", False)), **extra}
        if not hook.claude:
            payload["hook_event_name"] = event
        if tool is not None:
            payload["tinyharness_tool_name"] = tool
            if hook.claude:
                payload["tool_name"] = claude_name(tool)
        if event == "post_tool_use" and result is not None:
            payload["tool_response"] = claude_response(tool, arguments, result, self.workspace)
        if event == "stop" and "answer" in extra:
            payload["last_assistant_message"] = extra["answer"]
        return payload


def trusted_as(hooks, trusted):
    """The hooks, each holding what the user trusted of its file (None: the user's own file)."""
    for hook in hooks:
        hook.trusted = trusted or None
    return hooks


def claude_names(tool):
    """Claude Code's names for one of our tools (its record's); none for an MCP tool."""
    found = record(tool)
    return found.claude if found else ()


def claude_name(tool):
    """What a Claude-shaped hook reads in tool_name: Claude Code's first name for it, or ours."""
    return (*claude_names(tool), tool)[0]


def matches(matcher, tool):
    """Our name or any of Claude Code's names for the tool."""
    return any(matcher.fullmatch(name) for name in (tool, *claude_names(tool)))


def claude_input(tool, arguments, workspace):
    """The call's arguments, plus Claude Code's `file_path` (absolute) for a tool that takes a
    path (its record's first path argument)."""
    shown, found = dict(arguments), record(tool)
    path = arguments.get(found.paths[0]) if found and found.paths else None
    if (isinstance(path, str) and "file_path" not in shown
        and "://" not in path):
        shown["file_path"] = os.path.normpath(os.path.join(workspace, path))
    if tool == "save_note" and "file_path" not in shown:
        shown["file_path"] = os.path.join(workspace, NOTES_FILE)  # where save_note writes
    return shown


def claude_response(tool, arguments, result, workspace):
    """Claude Code's `tool_response`: an object; ours is text, so it carries the text under several
    names."""
    text = str(result)
    failed = text.startswith(("ERROR", "BLOCKED", "DENIED"))
    response = {"output": text, "success": not failed}
    if tool == "shell":
        response.update(stdout=text, stderr="", interrupted=False)
    if isinstance(arguments.get("path"), str):
        response["filePath"] = os.path.normpath(os.path.join(workspace, arguments["path"]))
    return response
