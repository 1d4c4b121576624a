"""Counts: what a run used, kept below the loop so that whoever adds them up needs nothing of the
loop's.

The problem. A run's counts - model calls, tool calls, the server's token counts, which of them
the server ever sent - are read far from the loop: the [stats] line, the --json result line
(run_end.py), a subagent's calls added to its parent's (subagents.py), a chat's messages summed
into one result (chat/json_mode.py), the budgets that stop a run (guards.py). Kept in the loop's
armour, every one of them imported the loop to add up numbers; and each reader that summed two
runs wrote its own sum, so two sums disagreed (one forgot which counts the server had sent, and
--json said null for counts the [stats] line showed).

The mechanism. `Stats` holds one run's counts; `Stats.add` is the one way two runs' counts are
added (a child's into its parent's; `summed`: a chat's messages, for /cost and chat --json), every
field in it;
`Stats.tokens` is what a token budget spends (guards.py). The module imports nothing of the
package: whoever counts needs nothing else.

What it cannot do. It counts what it is told: a model call the loop never counted (a request that
failed) is not in it, and the token counts are the server's own - a server that sends none leaves
them unknown ("?" on the [stats] line, null in --json), never 0.
"""
import time

COUNTED = ("prompt_tokens", "completion_tokens")


class Stats:
    """What the [stats] line reports: model calls, tool calls, and the server's own token counts."""

    def __init__(self):
        self.turns = self.tool_calls = 0
        self.prompt_tokens = self.completion_tokens = self.uncounted = 0
        # the last reply's length as the server counted it: whose limit cut it
        self.last_reply_tokens = None
        self.started = time.monotonic()
        self.cached_tokens = None  # only a server with a prompt cache reports it
        # which counts the server ever sent: one never sent is null in --json, not 0
        self.reported = set()

    def count_turn(self, usage):
        self.turns += 1
        self.reported |= {key for key in COUNTED if key in usage}
        # some servers send none
        self.uncounted += "prompt_tokens" not in usage and "completion_tokens" not in usage
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        self.last_reply_tokens = usage.get("completion_tokens")
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int):
            self.cached_tokens = (self.cached_tokens or 0) + cached

    def add(self, other):
        """Add another run's counts to these (a subagent's to its parent's, a chat's messages to
        the chat's): the one sum, so every total says the same."""
        self.turns += other.turns
        self.tool_calls += other.tool_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.uncounted += other.uncounted
        self.reported |= other.reported
        if other.cached_tokens is not None:
            self.cached_tokens = (self.cached_tokens or 0) + other.cached_tokens
        return self

    def tokens(self):
        """Prompt plus completion, as the server counted them."""
        return self.prompt_tokens + self.completion_tokens

    def usage(self):
        """The token counts for --json: each null when the server never reported it."""
        return {"prompt_tokens": self.prompt_tokens if "prompt_tokens" in self.reported else None,
                "completion_tokens": self.completion_tokens if "completion_tokens" in self.reported
                else None, "cached_tokens": self.cached_tokens}

    def line(self):
        # "?": a 0 would be a measurement nobody made (no answer, no count)
        unknown = self.uncounted == self.turns
        missing = f" usage_missing_turns={self.uncounted}" if self.uncounted and not unknown else ""
        # after the contract's
        cached = "" if self.cached_tokens is None else f" cached_tokens={self.cached_tokens}"
        return (f"[stats] turns={self.turns} tool_calls={self.tool_calls} "
                f"prompt_tokens={'?' if unknown else self.prompt_tokens} "
                f"completion_tokens={'?' if unknown else self.completion_tokens} "
                f"seconds={time.monotonic() - self.started:.1f}{cached}{missing}")


def summed(parts, started=None):
    """One Stats that is the sum of PARTS (each added with Stats.add); its clock from STARTED when
    given (time.monotonic), else from now."""
    total = Stats()
    total.started = total.started if started is None else started
    for part in parts:
        total.add(part)
    return total
