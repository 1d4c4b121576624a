"""Guards: limits the model cannot talk its way past, and a graceful stop when one is reached.

Each guard watches one timeline and sees nothing else. The budgets (`Budget`) are checked by the
loop between turns, so they cannot end a tool call that never returns: that is the shell timeout's
job (tools.py), inside the call. A model reply is bounded too: the loop gives the door what is
left of the time as its timeout. Repeat detection (`RepeatGuard`) sees the sequence of calls, and
only exact repeats: `sleep 5`, `sleep 10`, `sleep 30` are three different calls to it.
"""
import time

from .tools import canonical, parse_arguments

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


class Budget:
    """Counters the model never sees and cannot negotiate with: model calls and wall-clock
    seconds."""

    def __init__(self, max_turns=MAX_TURNS, max_seconds=MAX_SECONDS):
        self.max_turns, self.max_seconds = max_turns, max_seconds
        self.started = time.monotonic()

    def exceeded(self, turns):
        """Why the run must stop before model call number turns + 1, or None. Only asked between
        turns."""
        if turns >= self.max_turns:
            return f"reached --max-turns {self.max_turns}"
        seconds = time.monotonic() - self.started
        if seconds >= self.max_seconds:
            return f"reached --max-seconds {self.max_seconds:g} ({seconds:.1f} s have passed)"
        return None

    def seconds_left(self):
        """What is left of --max-seconds: the most one model reply may take (the loop passes it to
        chat)."""
        return self.max_seconds - (time.monotonic() - self.started)


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

