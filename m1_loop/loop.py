"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat."""
import json
import time
from pathlib import Path

from .tools import SCHEMAS, TOOLS, run_tool

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. When the task is done, answer briefly
with what you did."""
CUT = ("[harness] Your last reply was cut off at the length limit (max_tokens={}), so none of its tool calls ran. "
       "Continue with a shorter reply: fewer or smaller tool calls, less text.")
NO_ANSWER = "(The model gave no answer. The [tool] lines above show what it did.)"
VALID_CALL = ('A valid call looks like {"name": "read_file", "arguments": {"path": "notes.txt"}}; the tools are: '
              + ", ".join(TOOLS) + ".")  # said after what was wrong with a call the door could not read


class Stats:
    """What the [stats] line reports: model calls, tool calls, and the server's own token counts."""

    def __init__(self):
        self.turns = self.tool_calls = self.prompt_tokens = self.completion_tokens = self.uncounted = 0
        self.started = time.monotonic()

    def count_turn(self, usage):
        self.turns += 1
        self.uncounted += "prompt_tokens" not in usage and "completion_tokens" not in usage  # some servers send none
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)

    def line(self):
        unknown = self.turns and self.uncounted == self.turns  # "?": a 0 would be a measurement nobody made
        missing = f" usage_missing_turns={self.uncounted}" if self.uncounted and not unknown else ""
        return (f"[stats] turns={self.turns} tool_calls={self.tool_calls} "
                f"prompt_tokens={'?' if unknown else self.prompt_tokens} "
                f"completion_tokens={'?' if unknown else self.completion_tokens} "
                f"seconds={time.monotonic() - self.started:.1f}{missing}")


class Stopped(Exception):
    """The run hit a limit before the model finished: the task is not confirmed complete."""


def system_prompt(workspace):
    """The built-in prompt plus the workspace's INSTRUCTIONS.md, when it has one."""
    extra = Path(workspace) / "INSTRUCTIONS.md"
    if extra.is_file():
        return SYSTEM_PROMPT + "\n\nInstructions from the workspace (INSTRUCTIONS.md):\n" + extra.read_text(errors="replace")
    return SYSTEM_PROMPT


# exercise(m1): Write run_agent: ask the model, run every tool call it asks for and answer each with a tool message paired to the call by the id the server gave it, and repeat until it answers without tool calls; past max_turns raise Stopped.
def run_agent(task, client, workspace, stats, max_turns=8, echo=print, transcript=None):
    """Loop until the model answers without tool calls; return that answer."""
    messages = [{"role": "system", "content": system_prompt(workspace)}, {"role": "user", "content": task}]
    was_cut = False
    for _ in range(max_turns):
        save_transcript(transcript, messages)  # before each model call, so a failed call still leaves the story
        message, usage, finish_reason = client.chat(messages, tools=SCHEMAS)
        stats.count_turn(usage)
        problems, notice = message.pop("_problems", {}), message.pop("_notice", None)  # the door's notes, not sent
        if finish_reason == "length":  # cut off mid-reply: a call in it may be cut too, so none of them runs
            if was_cut:
                raise Stopped(f"the model's reply was cut at the length limit twice (max_tokens={client.max_reply_tokens})")
            was_cut = True
            echo(f"  [harness] the reply was cut at max_tokens={client.max_reply_tokens}: none of it was used")
            messages += [{"role": "assistant", "content": message["content"]},
                         {"role": "user", "content": CUT.format(client.max_reply_tokens)}]
            continue
        messages.append(message)
        if not message.get("tool_calls"):  # no tool calls = the model is done (finish_reason alone is not trusted)
            save_transcript(transcript, messages)
            return message["content"].strip() or NO_ANSWER
        for call in message["tool_calls"]:
            name, arguments, problem = call["function"]["name"], call["function"]["arguments"], problems.get(call["id"])
            shown = json.dumps(json.loads(arguments), ensure_ascii=False, sort_keys=True)  # one line, one spelling
            echo(f"  [tool] {name}({shown})")
            result = (f"ERROR: {problem}. {VALID_CALL}" if problem
                      else run_tool(workspace, name, arguments))
            echo(f"    -> {(result.splitlines() or [''])[0][:160]}")
            stats.tool_calls += 1
            # The one rule of the loop: each result answers its call by the id the server gave that call.
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if notice:  # after all of the turn's results: a message between two of them breaks the pairing
            messages.append({"role": "user", "content": notice})
    save_transcript(transcript, messages)
    raise Stopped(f"reached --max-turns {max_turns}")


def save_transcript(path, messages):
    """Rewritten every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
