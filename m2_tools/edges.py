"""Armour for the loop: the display, the bookkeeping and the edge cases a real model brings, around the
model and the tools. Read it after the lesson (loop.py), when a real model surprises you.

The loop's lesson fits in a few lines: ask, append, no tool calls means done, run each call, answer it.
The loop asks through `Edges.ask` and runs each call through `Edges.run`; everything else happens here:
- A reply cut at the length limit (finish_reason "length"): a tool call in it may be cut mid-argument,
  so none of it runs; the model is asked for a shorter reply, and a second cut stops the run.
- A call the door could not read (wire.py's `_problems`): the model gets the reason and a valid
  example instead of a crash or a silent `{}`.
- The [tool] lines, the transcript and the [stats] line: one spelling of the arguments, a file rewritten
  every turn, and only the counts the server really made.
"""
import json
import os
import time

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
    """One run's display and bookkeeping around the model and the tools: loop.py asks the model with `ask` and
    runs each call with `run`; the [tool] and -> lines, the counts, the transcript and the edge cases are here."""

    def __init__(self, client, echo, stats, transcript, max_turns):
        self.client, self.echo, self.stats, self.transcript = client, echo, stats, transcript
        self.max_turns, self.was_cut = max_turns, False
        self.messages, self.problems = [], {}  # the loop's list, and the door's notes on the last reply's calls

    def ask(self, messages, tools):
        """The model's next message: client.chat(messages, tools=tools), with the transcript saved before and
        after, the turn counted, and a reply cut at the length limit asked again (none of it runs)."""
        self.messages = messages
        while True:
            save_transcript(self.transcript, messages)  # before each model call, so a failed call leaves the story
            message, usage, finish_reason = self.client.chat(messages, tools=tools)
            self.stats.count_turn(usage)
            self.problems = message.pop("_problems", {})  # calls the door could not read: never sent back
            if not self.cut(finish_reason, message, messages):
                save_transcript(self.transcript, messages + [message])
                return message
            if self.stats.turns >= self.max_turns:
                save_transcript(self.transcript, messages)
                raise Stopped(f"reached --max-turns {self.max_turns}")

    def run(self, call, tool, workspace, *more):
        """tool(workspace, name, arguments, *more) for one call, between its [tool] line and its -> line. A call
        the door could not read does not run: its result says what was wrong and what a valid call looks like."""
        problem = self.show(call)
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        result = garbled(problem) if problem else tool(workspace, name, arguments, *more)
        self.ran(call, result)
        answered = {"role": "tool", "tool_call_id": call["id"], "content": result}  # as the loop will answer it
        save_transcript(self.transcript, self.messages + [answered])  # so a stop after this call still keeps it
        return result

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

    def show(self, call):
        """The [tool] line (the arguments in one line, one spelling); what the door found wrong with the
        call, or None."""
        shown = json.dumps(json.loads(call["function"]["arguments"]), ensure_ascii=False, sort_keys=True)
        self.echo(f"  [tool] {call['function']['name']}({shown})")
        return self.problems.get(call["id"])

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
    """Rewritten every turn, so a crash still leaves the story so far. Private (0600, whatever the
    umask or the mode the file had): it holds everything the model read."""
    if path:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(descriptor, "w", encoding="utf-8") as file:
            if os.path.isfile(path):
                os.fchmod(descriptor, 0o600)
            file.write(json.dumps(messages, indent=2))
