"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat."""
import json
import time
from pathlib import Path

from .tools import SCHEMAS, run_tool

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


def run_agent(task, client, workspace, stats, max_turns=8, echo=print, transcript=None):
    """Loop until the model answers without tool calls; return that answer."""
    messages = [{"role": "system", "content": system_prompt(workspace)}, {"role": "user", "content": task}]
    for _ in range(max_turns):
        message, usage, _ = client.chat(messages, tools=SCHEMAS)
        stats.count_turn(usage)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:  # no tool calls = the model is done (finish_reason alone is not trusted)
            save_transcript(transcript, messages)
            return message.get("content") or ""
        for call in calls:
            run_tool_call(call, workspace, messages, stats, echo)
        save_transcript(transcript, messages)
    raise Stopped(f"reached --max-turns {max_turns}")


def run_tool_call(call, workspace, messages, stats, echo):
    """Run one call and append its result, paired to the call by the id the server gave it."""
    name, arguments = call["function"]["name"], call["function"].get("arguments")
    echo(f"  [tool] {name}({arguments})")
    stats.tool_calls += 1
    result = run_tool(workspace, name, arguments)
    messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})


def save_transcript(path, messages):
    """Rewritten after every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
