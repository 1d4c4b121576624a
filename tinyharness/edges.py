"""Armour for the loop: the edge cases a real model and a real server bring, each behind one name.
Read it after loop.py, when a real model surprises you.

The problem. The loop's lesson fits in a few lines: ask, append, no tool calls means done, run each
call, answer it. Real models and servers add cases, and written inline they drown the lesson (the
loop once grew to 123 lines this way):
- A reply cut at the length limit (finish_reason "length"): a tool call in it may be cut
  mid-argument, so none of it runs; the model is asked for a shorter reply, and a second cut stops
  the run.
- A reply that runs out of the run's time: a limit (exit 3), not a failure. A prompt the server says
  does not fit: cut and retried once (overflow.py).
- An empty answer: one [harness] nudge before it counts as the answer.
- A stop hook of the workspace that says the work is not done: the model reads why and goes on.
- The same call again and again (guards.py's RepeatGuard sees them): a [harness] warning, then a
  stop.
- A token budget the server cannot be held to (it reports no counts): said once, not silent.
- A context that fills up, or that the server cut without a word; a picture that never reached the
  model (the prompt count says so): a warning on stderr.
- The [tool] and -> lines and the transcript: one spelling of the arguments, a file rewritten every
  turn.

The mechanism. Two holders, each made by run_agent for one run. `Edges` decides: a cut reply, an
empty answer, a stop hook's objection, a repeated call, a spent budget (which budgets there are,
and when one is spent, is guards.py's `Budget`) - each one method the loop calls where it arises; a
method that returns True means "the model is asked again". `Report` shows: the [tool] and -> lines
(settings.echo), every warning (settings.warn, the one channel to the user's stderr), the messages
handed on (settings.on_update); it hands each reply's usage and each call to the run's counts
(counts.py's `Stats`, for the [stats] line and the budgets) and keeps the `Record` of what was done,
for the account a stopped run prints. Model access - a prompt that does not fit, the window in
force - is overflow.py's `Model`.

What it cannot do. It handles what it names: a new kind of misbehaviour needs a new name here, and a
line in the loop where it arises. It neither counts nor knows the budgets: a new budget is a line
in guards.LIMITS, not a line here.
"""
import json
from collections import Counter

from .arrival import ArrivalWatch
from .context import ContextWatch, estimate_tokens
from .filedoor import write_text
from .guards import REPEAT_LIMIT, Stopped, brief, repeat_warning
from .toolrecord import parse_arguments
from .tools import names

CUT = ("[harness] Your last reply was cut off at the length limit ({}), so none of its tool calls "
       "ran. Continue with a shorter reply: fewer or smaller tool calls, less text.")
EMPTY = "[harness] Your reply was empty. Answer the task in words, or call a tool."
NO_ANSWER = "(The model gave no answer. The [tool] lines above show what it did.)"
VALID_CALL = ('A valid call looks like {"name": "read_file", "arguments": {"path": "notes.txt"}}; '
              'the tools are: '
              # said after what was wrong with a call the door could not read
              + ", ".join(names()) + ".")
STOP_HOOK = "[harness] A stop hook of this workspace says the task is not done yet: {}"


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


class Report:
    """What one run shows and counts: the [tool] and -> lines, its warnings (one channel,
    settings.warn), the messages handed on, the counts of the [stats] line and the record a stopped
    run prints."""

    def __init__(self, settings, stats):
        self.settings, self.stats = settings, stats
        self.echo, self.warn = settings.echo, settings.warn
        # messages were added (the session appends)
        self.updated = settings.on_update or (lambda messages: None)
        self.record = Record()  # what the run did, for the account a stopped run prints
        # context.py: nearly full, or cut by the server
        self.watch = ContextWatch(settings.context_window)
        self.arrivals = ArrivalWatch()  # did each picture reach the model? The bill says

    def turn(self, usage, messages, tools, window):
        """After a reply: the model call counted; then warned on stderr: a token budget the server's
        counts cannot enforce (once), the context nearly full or cut, a picture that never
        arrived."""
        self.stats.count_turn(usage)
        max_tokens = self.settings.max_tokens
        if (max_tokens and self.stats.uncounted == 1
            and not {"prompt_tokens", "completion_tokens"} & set(usage)):
            self.warn(f"[harness] {self.settings.budget_name('max_tokens')} {max_tokens} cannot be "
                      "enforced: the server reports no token counts for its replies "
                      "(see `tinyharness doctor`).")  # once: a silent budget is no budget
        self.watch.window = window  # the window in force: the server's own, once it said it
        watch_context(self.watch, usage, messages, tools, self.warn)
        # a warning if a new picture never arrived
        arrived = self.arrivals.check(messages, tools, usage)
        if arrived:
            self.warn(arrived)

    def show(self, call):
        """The [tool] line: the arguments in one line, one spelling."""
        shown = (json.dumps(json.loads(call["function"]["arguments"]), ensure_ascii=False,
                            sort_keys=True))
        self.echo(f"  [tool] {call['function']['name']}({shown})")

    def ran(self, call, result):
        """The line under it (the result's first line, at most 160 characters), and the call
        counted."""
        self.echo(f"    -> {(result.splitlines() or [''])[0][:160]}")
        self.stats.tool_calls += 1
        self.record.note(call, result)


class Edges:
    """The loop's control decisions for one run, each behind a name; loop.py calls each where it
    arises. What they show goes through the run's `Report`; the client is asked only for its reply
    limit."""

    def __init__(self, client, report, hands):
        self.client, self.report, self.hands = client, report, hands
        self.was_cut = self.nudged = False

    def check_budget(self, budget, turn):
        """Between turns, the only moment the loop can stop: a command hook's "continue": false
        (hooks/commands.py), then every budget of the run (guards.Budget)."""
        hooks = self.hands.ext.hooks
        ended = hooks.take_ended() if hooks else None
        limit = (ended and f"a {ended[0]} hook ended the run: {ended[1]}") or budget.exceeded(turn)
        if limit:
            raise Stopped(limit, self.report.record.account())

    def cut(self, finish_reason, message, messages):
        """True when the reply was cut at the length limit: a call in it may be cut too, so none of
        it runs, and the model is asked for a shorter reply (the loop asks again). A second cut
        stops the run."""
        if finish_reason != "length":
            return False
        report = self.report
        where = cut_at(self.client.max_reply_tokens, report.stats.last_reply_tokens)
        if self.was_cut:
            raise Stopped(f"the model's reply was cut at the length limit twice ({where})",
                          report.record.account())
        self.was_cut = True
        report.echo(f"  [harness] the reply was cut at {where}: none of it was used")
        messages += [{"role": "assistant", "content": message["content"]},
                     {"role": "user", "content": CUT.format(where)}]
        report.updated(messages)
        return True

    def objection(self, message, messages):
        """True when a stop hook says the work is not done: the model reads why, and goes on."""
        objection = self.hands.stop(message["content"]) if message["content"].strip() else None
        if not objection:
            return False
        messages.append({"role": "user", "content": STOP_HOOK.format(objection)})
        self.report.updated(messages)
        return True

    def nudge(self, message, messages):
        """True when an empty answer got its one [harness] nudge (the loop asks again)."""
        if message["content"].strip() or self.nudged:
            return False
        self.nudged = True
        messages.append({"role": "user", "content": EMPTY})
        self.report.updated(messages)
        return True

    def steer(self, repeats, messages):
        """After all of a turn's results, never between them: a call repeated REPEAT_LIMIT times in
        a row gets a [harness] warning; the same again after a warning stops the run."""
        repeated, report = repeats.end_turn(), self.report
        if repeated and repeats.warnings == 1:
            report.echo(f"  [harness] {brief(repeated)} {REPEAT_LIMIT} times in a row: the model "
                        "is asked for another approach")
            messages.append({"role": "user", "content": repeat_warning(repeated)})
        report.updated(messages)
        if repeated and repeats.warnings > 1:
            save_transcript(report.settings.transcript, messages, report.warn)
            raise Stopped(f"the model made the same call {REPEAT_LIMIT} times in a row again, "
                          f"after a [harness] warning: {brief(repeated)}", report.record.account())


def cut_at(max_tokens, used):
    """Whose limit cut the reply: ours (max_tokens), or a limit of the server's own (its context
    window, a reply cap of its own) when its count of the reply stops short of ours; without a
    count, either."""
    # a stream without usage: the server did not say
    if not isinstance(used, int) or isinstance(used, bool):
        return (f"max_tokens={max_tokens} or a limit of the server's own (no count came with the "
                "reply)")
    if 0 <= used < max_tokens:
        return (f"{used} tokens, under max_tokens={max_tokens} (a limit of the server's own, its "
                "context window or reply cap)")
    return f"max_tokens={max_tokens}"


def garbled(problem):
    """The tool result for a call the door could not read: what was wrong, and what a valid call
    looks like."""
    return f"ERROR: {problem}. {VALID_CALL}"


def watch_context(watch, usage, messages, tools, warn):
    """Warn on stderr when the prompt count says the context is nearly full, or was cut. Without the
    server's count, the harness's own estimate of what it sent stands in, and the warning says so.
    The estimate counts the tool schemas too: an MCP server withdrawn mid-run shrinks the prompt,
    and that drop is ours, not the server's."""
    sent = estimate_tokens(messages + [{"role": "system", "content": json.dumps(list(tools))}])
    counted = usage.get("prompt_tokens")
    warning = watch.check(sent if counted is None else counted, len(messages), sent_tokens=sent)
    if warning:
        warn(warning
             + (" (estimated: the server reported no prompt_tokens)" if counted is None else ""))


def save_transcript(path, messages, warn):
    """Rewritten every turn, so a crash still leaves the story so far; through the door
    (filedoor.py): never through a link the model planted, never into a FIFO. A refusal is said on
    stderr, the run goes on."""
    if path:
        try:
            write_text(path, json.dumps(messages, indent=2))
        except OSError as e:
            warn(f"warning: the transcript is not written: {e.strerror or e}")
