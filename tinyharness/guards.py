"""Guards: limits the model cannot talk its way past, and a graceful stop when one is reached.

The problem. A run must end even when the model never says it is done: a budget of model calls, of
seconds, of the server's tokens. Each budget is read in several places - the loop stops between
turns, the shell's command and the model's reply may not outlast the time, a subagent may spend
only what is left of its parent's - and a budget written into each of them separately is a budget
one of them forgets.

The mechanism. `LIMITS` lists every budget once (`Limit`: the settings field that sets it, what
the run has used of it, the words of its stop); `Budget` holds one run's, against its settings and
its counts (counts.Stats). `exceeded` is asked by the loop between turns, `remaining` is what is
left of each (the shell's timeout and the model's reply read the time in it), `for_child` what a
subagent is given (subagents.py). A new budget is its flag, its settings field and a line in
LIMITS. The words are the core's own: a budget is named by its settings field (`max_turns`)
unless the settings name it otherwise (settings.budget_name: the command line names its flag,
`--max-turns`). Each guard watches one timeline and sees nothing else: repeat detection
(`RepeatGuard`) sees the sequence of calls, and only exact repeats: `sleep 5`, `sleep 10`,
`sleep 30` are three different calls to it.

What it cannot do. The budgets are checked between turns, so they cannot end a tool call that never
returns: that is the shell timeout's job (tools.py), inside the call; a reply is bounded by the
time left, given to the door as its timeout. A token budget holds only as well as the server
counts: one that reports no counts cannot be held to it (edges.py says so once).
"""
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .toolrecord import canonical, parse_arguments

MAX_TURNS = 30  # model calls in one run; --max-turns changes it
MAX_SECONDS = 600  # wall-clock seconds for one run, checked between turns; --max-seconds changes it
# identical calls in a row that count as going round in circles (opencode stops at 3 too)
REPEAT_LIMIT = 3


class Stopped(Exception):
    """The run hit a limit before the model finished: the task is not confirmed complete.
    `done` is the account of what the run did, for whoever picks the work up."""

    def __init__(self, reason, done=""):
        super().__init__(reason)
        self.done = done


@dataclass(frozen=True)
class Limit:
    """One budget: the RunSettings field that sets it (None there: no budget), what the run has
    used of it (read from the run's `Budget`), the words of its stop ({name}: what the reader calls
    the field, settings.budget_name; {limit}; {used}), and a subagent's own cap, if it has one (read
    from the settings; it gets the smaller of that and what is left of the parent's)."""
    field: str
    used: Callable[["Budget"], float]
    stop: str = "reached {name} {limit}"
    child_cap: Callable[[Any], float] | None = None


# Every budget of a run, in the order they are checked: a new one is a line here (and its flag and
# its settings field); the loop, the command timeout and the subagents read them all from here.
LIMITS = [
    Limit("max_turns", lambda run: run.turns,
          child_cap=lambda settings: settings.extensions.subagent_max_turns),
    Limit("max_seconds", lambda run: run.seconds(),
          "reached {name} {limit:g} ({used:.1f} s have passed)",
          child_cap=lambda settings: settings.extensions.subagent_max_seconds),
    Limit("max_tokens", lambda run: run.stats.tokens(),
          "the token budget of {name} {limit} was used ({used} tokens by the server's counts)"),
]


class Budget:
    """Counters the model never sees and cannot negotiate with: one run's LIMITS against its
    settings - the model calls it made, the seconds since it started, the counts in its `stats`
    (counts.Stats)."""
    settings: Any
    stats: Any
    turns: int
    started: float

    def __init__(self, settings, stats):
        self.settings, self.stats = settings, stats
        self.turns, self.started = 0, time.monotonic()

    def seconds(self):
        return time.monotonic() - self.started

    def limits(self):
        """[(Limit, the most this run may use)] of the budgets this run has (None: none)."""
        return [(limit, most) for limit in LIMITS
                if (most := getattr(self.settings, limit.field, None)) is not None]

    def exceeded(self, turns):
        """Why the run must stop before model call number turns + 1, or None. Only asked between
        turns; once it says None, that call counts as made."""
        self.turns = turns
        for limit, most in self.limits():
            used = limit.used(self)
            if used >= most:
                name = self.settings.budget_name(limit.field)
                return limit.stop.format(name=name, limit=most, used=used)
        self.turns = turns + 1
        return None

    def remaining(self):
        """{field: what is left} of every budget this run has, never below 0."""
        return {limit.field: max(0, most - limit.used(self)) for limit, most in self.limits()}

    def for_child(self):
        """A subagent's limits, {field: value}: what is left of each of this run's budgets, or the
        child's own cap when that is less."""
        left, settings = self.remaining(), self.settings
        caps = {limit.field: limit.child_cap(settings) for limit in LIMITS if limit.child_cap}
        return {field: min(value for value in (left.get(field), caps.get(field))
                           if value is not None)
                for field in {**left, **caps}}

    def seconds_left(self):
        """What is left of the run's time: the most one model reply may take (the loop passes it to
        chat), and one command (the shell's timeout)."""
        return self.remaining().get("max_seconds", float("inf"))


def signature(call, problem=None):
    """What makes two calls "the same": the name and the canonical arguments (key order and spacing
    do not matter). A call the door could not read keeps {} as its arguments; it counts with what
    was wrong with it (which quotes the text the model sent), so a model that sends the same broken
    call again and again is caught too, and three different broken calls are no repeat."""
    function = call.get("function") or {}
    arguments = canonical(parse_arguments(function.get("arguments"))[0])
    return f"{function.get('name')}({arguments})" + (f" - {problem}" if problem else "")


class RepeatGuard:
    """Counts identical calls in a row, across turns. Exact matching on purpose: a near-repeat it
    misses is caught later by the budget, while a false alarm would stop honest work and has no
    cure."""

    def __init__(self, limit=REPEAT_LIMIT):
        self.limit, self.last, self.streak = limit, None, 0
        self.warnings, self.repeated = 0, None

    def see(self, call, problem=None):
        """Note one call, before it runs; `problem` is what the door found wrong with it, if
        anything."""
        same = signature(call, problem)
        self.streak = self.streak + 1 if same == self.last else 1
        self.last = same
        if self.streak == self.limit:
            self.warnings += 1
            # after a warning the count starts again
            self.repeated, self.last, self.streak = same, None, 0

    def end_turn(self):
        """The call repeated `limit` times, once per warning, or None. Asked after all of a turn's
        results."""
        repeated, self.repeated = self.repeated, None
        return repeated


def brief(call_text, keep=200):
    """A repeated call as messages name it: a long write_file is cut, its start is enough to know
    it."""
    return call_text if len(call_text) <= keep else call_text[:keep] + "...)"


def repeat_warning(repeated, limit=REPEAT_LIMIT):
    """The [harness] message: a user message, because a tool message must answer a call."""
    return (f"[harness] You have called {brief(repeated)} {limit} times in a row with the same "
            "arguments. Doing it again will not give a different result: try a different approach "
            "(another tool, other arguments, or reread the last result), or answer with what you "
            "found and what is blocking you. If the same thing happens again, the harness stops "
            "the run.")

