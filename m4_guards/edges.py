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
- An empty answer: one [harness] nudge before it counts as the answer.
- A reply that runs out of the run's time: a limit (exit 3), not a failure.
- The same call again and again (guards.py's RepeatGuard sees them): a [harness] warning, then a stop.
- What a stopped run did (`Record`): calls per tool and files written, for the account it prints.
"""
import json
import os
import time
from collections import Counter

from .guards import REPEAT_LIMIT, Stopped, brief, repeat_warning
from .tools import TOOLS, parse_arguments
from .wire import LLMError

CUT = ("[harness] Your last reply was cut off at the length limit ({}), so none of its tool calls ran. "
       "Continue with a shorter reply: fewer or smaller tool calls, less text.")
EMPTY = "[harness] Your reply was empty. Answer the task in words, or call a tool."
NO_ANSWER = "(The model gave no answer. The [tool] lines above show what it did.)"
VALID_CALL = ('A valid call looks like {"name": "read_file", "arguments": {"path": "notes.txt"}}; the tools are: '
              + ", ".join(TOOLS) + ".")  # said after what was wrong with a call the door could not read


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

    def __init__(self, client, echo, stats, transcript, budget):
        self.client, self.echo, self.stats, self.transcript = client, echo, stats, transcript
        self.budget, self.record = budget, Record()  # guards.py's Budget; what the run did, for a stop's account
        self.nudged = False  # an empty answer got its one [harness] nudge
        self.messages, self.problems = [], {}  # the loop's list, and the door's notes on the last reply's calls
        self.was_cut = False

    def ask(self, messages, tools):
        """The model's next message: client.chat(messages, tools=tools), with the transcript saved before and
        after and the turn counted. A reply cut at the length limit (none of it runs) and a first empty answer
        are not the model's message yet: it is asked again, within the budget."""
        self.messages = messages
        while True:
            save_transcript(self.transcript, messages)  # before each model call, so a failed call leaves the story
            message, usage, finish_reason = self.reply(messages, tools)
            self.stats.count_turn(usage)
            self.problems = message.pop("_problems", {})  # calls the door could not read: never sent back
            if not self.cut(finish_reason, message, messages) and not self.nudge(message, messages):
                save_transcript(self.transcript, messages + [message])
                return message
            limit = self.budget.exceeded(self.stats.turns)
            if limit:
                raise self.stopped(limit, messages)

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

    def reply(self, messages, tools):
        """The model's reply, bounded by what is left of --max-seconds: a runaway reply is cut short, not
        waited for, and a reply that ran out of the run's time is a limit (exit 3), not a failure."""
        try:
            return self.client.chat(messages, tools=tools, timeout=self.budget.seconds_left())
        except LLMError:
            if self.budget.exceeded(self.stats.turns):
                raise Stopped(self.budget.exceeded(self.stats.turns), self.record.account()) from None
            raise

    def stopped(self, limit, messages):
        """A limit met between turns: the transcript as it stands, and the Stopped with the run's account."""
        save_transcript(self.transcript, messages)
        return Stopped(limit, self.record.account())

    def cut(self, finish_reason, message, messages):
        """True when the reply was cut at the length limit: a call in it may be cut too, so none of it runs,
        and the model is asked for a shorter reply (the loop asks again). A second cut stops the run."""
        if finish_reason != "length":
            return False
        where = cut_at(self.client.max_reply_tokens, self.stats.last_reply_tokens)
        if self.was_cut:
            raise Stopped(f"the model's reply was cut at the length limit twice ({where})",
                          self.record.account())
        self.was_cut = True
        self.echo(f"  [harness] the reply was cut at {where}: none of it was used")
        messages += [{"role": "assistant", "content": message["content"]},
                     {"role": "user", "content": CUT.format(where)}]
        return True

    def nudge(self, message, messages):
        """True when an empty answer got its one [harness] nudge (the model is asked again)."""
        if message.get("tool_calls") or message["content"].strip() or self.nudged:
            return False
        self.nudged = True
        messages += [message, {"role": "user", "content": EMPTY}]
        return True

    def problem(self, call):
        """What the door found wrong with a call of the last reply, or None."""
        return self.problems.get(call["id"])

    def show(self, call):
        """The [tool] line (the arguments in one line, one spelling); what the door found wrong with the
        call, or None."""
        shown = json.dumps(json.loads(call["function"]["arguments"]), ensure_ascii=False, sort_keys=True)
        self.echo(f"  [tool] {call['function']['name']}({shown})")
        return self.problem(call)

    def ran(self, call, result):
        """The line under it (the result's first line, at most 160 characters), and the call counted."""
        self.echo(f"    -> {(result.splitlines() or [''])[0][:160]}")
        self.stats.tool_calls += 1
        self.record.note(call, result)

    def steer(self, repeats, messages):
        """After all of a turn's results, never between them: a call repeated REPEAT_LIMIT times in a row
        gets a [harness] warning; the same again after a warning stops the run."""
        repeated = repeats.end_turn()
        if repeated and repeats.warnings == 1:
            self.echo(f"  [harness] {brief(repeated)} {REPEAT_LIMIT} times in a row: "
                      "the model is asked for another approach")
            messages.append({"role": "user", "content": repeat_warning(repeated)})
        if repeated and repeats.warnings > 1:
            save_transcript(self.transcript, messages)
            raise Stopped(f"the model made the same call {REPEAT_LIMIT} times in a row again, after a [harness] "
                          f"warning: {brief(repeated)}", self.record.account())


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


class Record:
    """What the run has done, for the account a stopped run prints: calls per tool, files
    written."""

    def __init__(self):
        self.calls, self.written = Counter(), []

    def note(self, call, result):
        """Note one call after it ran. A file counts as written only when write_file said OK."""
        function = call.get("function") or {}
        name = str(function.get("name"))
        self.calls[name] += 1
        if name == "write_file" and result.startswith("OK: wrote"):
            path = parse_arguments(function.get("arguments"))[0].get("path")
            if path not in self.written:
                self.written.append(path)

    def account(self):
        tools = ", ".join(f"{name} x{count}" for name, count in self.calls.items()) or "none"
        return f"Tool calls: {tools}.\nFiles written: {', '.join(self.written) or 'none'}."
