"""Armour for the loop: the edge cases a real model brings, each behind one name. Read it after the
lesson (loop.py), when a real model surprises you.

The loop's lesson fits in a few lines: ask, append, no tool calls means done, run each call, answer it.
Real models and servers add cases the lesson must not drown in:
- A reply cut at the length limit (finish_reason "length"): a tool call in it may be cut mid-argument,
  so none of it runs; the model is asked for a shorter reply, and a second cut stops the run.
- A call the door could not read (wire.py's `_problems`): the model gets the reason and a valid
  example instead of a crash or a silent `{}`.
- The [tool] lines, the transcript and the [stats] line: one spelling of the arguments, a file rewritten
  every turn, and only the counts the server really made.
"""
import json
import time
from pathlib import Path

from .tools import TOOLS

CUT = ("[harness] Your last reply was cut off at the length limit ({}), so none of its tool calls ran. "
       "Continue with a shorter reply: fewer or smaller tool calls, less text.")
NO_ANSWER = "(The model gave no answer. The [tool] lines above show what it did.)"
VALID_CALL = ('A valid call looks like {"name": "read_file", "arguments": {"path": "notes.txt"}}; the tools are: '
              + ", ".join(TOOLS) + ".")  # said after what was wrong with a call the door could not read


class Stopped(Exception):
    """The run hit a limit before the model finished: the task is not confirmed complete."""


class Stats:
    """What the [stats] line reports: model calls, tool calls, and the server's own token counts."""

    def __init__(self):
        self.turns = self.tool_calls = self.prompt_tokens = self.completion_tokens = self.uncounted = 0
        self.last_reply_tokens = None  # the last reply's length as the server counted it: whose limit cut it
        self.started = time.monotonic()

    def count_turn(self, usage):
        self.turns += 1
        self.uncounted += "prompt_tokens" not in usage and "completion_tokens" not in usage  # some servers send none
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.last_reply_tokens = usage.get("completion_tokens")

    def line(self):
        unknown = self.turns and self.uncounted == self.turns  # "?": a 0 would be a measurement nobody made
        missing = f" usage_missing_turns={self.uncounted}" if self.uncounted and not unknown else ""
        return (f"[stats] turns={self.turns} tool_calls={self.tool_calls} "
                f"prompt_tokens={'?' if unknown else self.prompt_tokens} "
                f"completion_tokens={'?' if unknown else self.completion_tokens} "
                f"seconds={time.monotonic() - self.started:.1f}{missing}")


class Edges:
    """The loop's edge cases for one run, each behind a name; loop.py calls each where it arises."""

    def __init__(self, client, echo, stats, transcript):
        self.client, self.echo, self.stats, self.transcript = client, echo, stats, transcript
        self.was_cut = False

    def cut(self, finish_reason, message, messages):
        """True when the reply was cut at the length limit: a call in it may be cut too, so none of it runs,
        and the model is asked for a shorter reply (the loop asks again). A second cut stops the run."""
        if finish_reason != "length":
            return False
        where = cut_at(self.client.max_reply_tokens, self.stats.last_reply_tokens)
        if self.was_cut:
            raise Stopped(f"the model's reply was cut at the length limit twice ({where})")
        self.was_cut = True
        self.echo(f"  [harness] the reply was cut at {where}: none of it was used")
        messages += [{"role": "assistant", "content": message["content"]},
                     {"role": "user", "content": CUT.format(where)}]
        return True

    def show(self, call, problems):
        """The [tool] line (the arguments in one line, one spelling); what the door found wrong with the
        call, or None."""
        shown = json.dumps(json.loads(call["function"]["arguments"]), ensure_ascii=False, sort_keys=True)
        self.echo(f"  [tool] {call['function']['name']}({shown})")
        return problems.get(call["id"])

    def ran(self, call, result):
        """The line under it (the result's first line, at most 160 characters), and the call counted."""
        self.echo(f"    -> {(result.splitlines() or [''])[0][:160]}")
        self.stats.tool_calls += 1


def cut_at(max_tokens, used):
    """Whose limit cut the reply: ours (max_tokens), or a limit of the server's own (its context window, a
    reply cap of its own) when its count of the reply stops short of ours; without a count, either."""
    if not isinstance(used, int) or isinstance(used, bool):  # a stream without usage: the server did not say
        return f"max_tokens={max_tokens} or a limit of the server's own (no count came with the reply)"
    if 0 <= used < max_tokens:
        return (f"{used} tokens, under max_tokens={max_tokens} (a limit of the server's own, its context window "
                "or reply cap)")
    return f"max_tokens={max_tokens}"


def garbled(problem):
    """The tool result for a call the door could not read: what was wrong, and what a valid call looks like."""
    return f"ERROR: {problem}. {VALID_CALL}"


def save_transcript(path, messages):
    """Rewritten every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
