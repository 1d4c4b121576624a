"""Command hooks: the user's own policy, as programs the harness runs at its choke points.

The problem. The hooks in hooks.py are Python inside the harness: to add a rule ("never touch
migrations/", "run the linter after every write", "log every command to the audit file") a user would
have to edit the harness. People already know a convention from Claude Code and Codex: a hook is a
command, it gets the event as JSON on stdin, and its exit code decides.

The mechanism. `.tinyharness/hooks.json` in the workspace lists commands per event:

    {"pre_tool_use":  [{"matcher": "shell|write_file", "command": "python3 .tinyharness/policy.py"}],
     "post_tool_use": [{"matcher": "write_file", "command": "ruff check --quiet ."}],
     "user_prompt_submit": [...], "stop": [...], "pre_compact": [...]}

`matcher` is a regular expression that must match the whole tool name (absent: every tool). The
command runs with `/bin/sh -c` in the workspace and reads one JSON object on stdin: `event`,
`tool_name`, `tool_input`, `workspace`, `session_id` (and `hook_event_name`/`cwd`, the names other
harnesses use). Exit 0 allows; a `post_tool_use` hook's stdout is added to the result the model reads (a
`pre_compact` hook's to the summary request);
for the other events stdout must be empty or a JSON object (`{"decision": "block", "reason": "..."}`
blocks). Exit 2 blocks, and the hook's stderr is the reason the model reads.

Fail closed. Claude Code lets a hook that crashes, times out or exits with another code proceed -
a guard that fails opens the door. Here any other exit code, a command that cannot start, a timeout
or output that cannot be read blocks the call, and the user sees which hook decided and why.

What it cannot do. A hooks file in a workspace is code that runs on your machine: a cloned repository
could ship one. The first time a workspace's hooks file is seen, or after it changed, the user is
asked to trust it (trust.py) - and `--yes`, which approves the model's calls, does not answer that
question. A hook sees the call, not what the call will do: `pre_tool_use` on `shell` reads the same
text the regex policy reads, with the same blind spots.
"""
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

EVENTS = ("pre_tool_use", "post_tool_use", "user_prompt_submit", "stop", "pre_compact")
HOOKS_FILE = Path(".tinyharness") / "hooks.json"
HOOK_TIMEOUT = 30  # seconds; a hook that hangs blocks, it never waits forever
MAX_OUTPUT = 4000  # characters of a hook's stdout/stderr kept for the model


@dataclass
class Verdict:
    allowed: bool
    reason: str = ""   # why it was blocked, for the model
    output: str = ""   # a post_tool_use hook's stdout, for the model
    hook: str = ""     # which command decided, for the user


class HooksFileError(ValueError):
    """The hooks file exists but cannot be used: the run must not start as if it had no policy."""


def load(workspace):
    """{event: [(matcher regex, command)]} from the workspace's hooks file; {} when there is none."""
    path = Path(workspace) / HOOKS_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HooksFileError(f"{HOOKS_FILE}: cannot read it as JSON ({e})") from e
    data = data.get("hooks", data) if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise HooksFileError(f"{HOOKS_FILE}: expected an object of events, e.g. "
                             '{"pre_tool_use": [{"matcher": "shell", "command": "..."}]}')
    hooks = {}
    for event, entries in data.items():
        if event not in EVENTS:
            raise HooksFileError(f"{HOOKS_FILE}: unknown event {event!r}; the events are {', '.join(EVENTS)}")
        hooks[event] = [parse_entry(event, entry) for entry in (entries if isinstance(entries, list) else [entries])]
    return hooks


def parse_entry(event, entry):
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not entry["command"].strip():
        raise HooksFileError(f"{HOOKS_FILE}: each {event} entry needs \"command\": a string")
    matcher = entry.get("matcher") or ".*"
    try:
        return re.compile(".*" if matcher == "*" else matcher), entry["command"]
    except re.error as e:
        raise HooksFileError(f"{HOOKS_FILE}: the matcher {matcher!r} is not a regular expression ({e})") from e


class CommandHooks:
    def __init__(self, hooks, workspace, session_id="", report=None, timeout=HOOK_TIMEOUT):
        self.hooks, self.workspace, self.session_id = hooks, str(workspace), session_id
        self.timeout = timeout
        self.report = report or (lambda text: print(text, file=sys.stderr, flush=True))

    def __bool__(self):
        return any(self.hooks.values())

    def run(self, event, tool=None, arguments=None, **extra):
        """Run every matching hook of `event` in order; the first that blocks decides."""
        outputs = []
        for matcher, command in self.hooks.get(event, []):
            if tool is not None and not matcher.fullmatch(tool):
                continue
            verdict = self.run_one(event, command, tool, arguments, extra)
            if not verdict.allowed:
                self.report(f"[hook] {event} `{command}` blocked{' ' + tool if tool else ''}: {verdict.reason}")
                return verdict
            if verdict.output:
                outputs.append(verdict.output)
        return Verdict(True, output="\n".join(outputs))

    def run_one(self, event, command, tool, arguments, extra):
        payload = {"event": event, "hook_event_name": event, "tool_name": tool, "tool_input": arguments,
                   "workspace": self.workspace, "cwd": self.workspace, "session_id": self.session_id, **extra}
        try:
            done = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(), cwd=self.workspace,
                                  capture_output=True, timeout=self.timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return Verdict(False, f"the hook `{command}` did not finish within {self.timeout:g} s, so the call is "
                                  "refused (a hook that fails must not open the door)", hook=command)
        except OSError as e:
            return Verdict(False, f"the hook `{command}` could not run ({e}), so the call is refused", hook=command)
        try:
            out, err = done.stdout.decode("utf-8").strip(), done.stderr.decode("utf-8").strip()
        except UnicodeDecodeError:
            return Verdict(False, f"the hook `{command}` wrote output that is not UTF-8 text, so the call is refused",
                           hook=command)
        if done.returncode == 2:
            return Verdict(False, err[:MAX_OUTPUT] or f"the hook `{command}` refused it (exit 2, no reason given)",
                           hook=command)
        if done.returncode != 0:
            return Verdict(False, f"the hook `{command}` failed with exit code {done.returncode}"
                                  f"{': ' + err[:500] if err else ''}, so the call is refused", hook=command)
        if event in ("post_tool_use", "pre_compact"):  # their output is text for the model
            return Verdict(True, output=out[:MAX_OUTPUT], hook=command)
        return decision(out, command)


def decision(out, command):
    """Exit 0 with empty stdout allows; a JSON object may still block; anything else is unreadable."""
    if not out:
        return Verdict(True, hook=command)
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return Verdict(False, f"the hook `{command}` printed something that is not a JSON decision "
                              f"({out[:120]!r}), so the call is refused", hook=command)
    if str(data.get("decision", "allow")).lower() in ("block", "deny"):
        return Verdict(False, str(data.get("reason") or f"the hook `{command}` blocked it"), hook=command)
    return Verdict(True, hook=command)
