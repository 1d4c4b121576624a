"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat."""
import json
import time
from pathlib import Path

from .hooks import NEEDS_PERMISSION, ask_user, pre_tool_use
from .tools import SCHEMAS, SHELL_TIMEOUT, canonical, check_call, parse_arguments, run_tool

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. When the task is done, answer briefly
with what you did."""


class Stats:
    """What the [stats] line reports: model calls, tool calls, and the server's own token counts."""

    def __init__(self):
        self.turns = self.tool_calls = self.prompt_tokens = self.completion_tokens = 0
        self.started = time.monotonic()

    def count_turn(self, usage):
        self.turns += 1
        self.prompt_tokens += usage.get("prompt_tokens") or 0
        self.completion_tokens += usage.get("completion_tokens") or 0

    def line(self):
        return (f"[stats] turns={self.turns} tool_calls={self.tool_calls} prompt_tokens={self.prompt_tokens} "
                f"completion_tokens={self.completion_tokens} seconds={time.monotonic() - self.started:.1f}")


class Stopped(Exception):
    """The run hit a limit before the model finished: the task is not confirmed complete."""


def system_prompt(workspace):
    """The built-in prompt plus the workspace's INSTRUCTIONS.md, when it has one."""
    extra = Path(workspace) / "INSTRUCTIONS.md"
    if extra.is_file():
        return SYSTEM_PROMPT + "\n\nInstructions from the workspace (INSTRUCTIONS.md):\n" + extra.read_text(errors="replace")
    return SYSTEM_PROMPT


def run_agent(task, client, workspace, stats, max_turns=8, echo=print, transcript=None, shell_timeout=SHELL_TIMEOUT,
              approve=ask_user):
    """Loop until the model answers without tool calls; return that answer."""
    messages = [{"role": "system", "content": system_prompt(workspace)}, {"role": "user", "content": task}]
    for turn in range(max_turns):
        message, usage, _ = client.chat(messages, tools=SCHEMAS)
        stats.count_turn(usage)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:  # no tool calls = the model is done (finish_reason alone is not trusted)
            save_transcript(transcript, messages)
            return message.get("content") or ""
        for number, call in enumerate(calls, 1):
            run_tool_call(call, f"call_{turn + 1}_{number}", workspace, messages, stats, echo, shell_timeout, approve)
        save_transcript(transcript, messages)
    raise Stopped(f"reached --max-turns {max_turns}")


def run_tool_call(call, spare_id, workspace, messages, stats, echo, shell_timeout, approve):
    """Run one call and append its result, paired to the call by the id the server gave it."""
    function = call.setdefault("function", {})
    name, arguments = function.get("name"), function.get("arguments")
    # The call stays in the history, so it must stay sendable: Ollama's /v1 answers 400 to every later
    # request once a past call carries broken JSON. Keep the parsed arguments ({} if they did not parse),
    # and give a call the server sent without an id one of ours, so its result can still be paired.
    function["arguments"] = canonical(parse_arguments(arguments)[0])
    call["id"] = call.get("id") or spare_id
    echo(f"  [tool] {name}({function['arguments']})")
    stats.tool_calls += 1
    result = checked_run(workspace, name, arguments, shell_timeout, approve)
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


def checked_run(workspace, name, arguments, shell_timeout, approve):
    """The choke point: every call passes here after it is parsed and before it runs. The hooks come
    first, so a blocked call never reaches the user; then writes and commands need the user's yes."""
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
    reason = pre_tool_use(workspace, name, arguments)
    if reason:
        return f"BLOCKED: {reason}"
    if name in NEEDS_PERMISSION and not approve(f"Allow {name}({canonical(arguments)})? [y/N] "):
        return f"DENIED: the user did not allow this {name} call, so it did not run."
    return run_tool(workspace, name, arguments, shell_timeout)


def save_transcript(path, messages):
    """Rewritten after every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
