"""When the server says the prompt does not fit: cut old tool results once, try once more, and
learn.

The problem. The context policy plans with a window (--context-window, or the model's length), and
the plan can be wrong: the server was started with a smaller one (llama.cpp's -c, Ollama's num_ctx),
or the harness's token estimate was low. The server then refuses the whole call - and without help
the run ends on a turn it could have finished.

The mechanism. `ask` makes the model call; on a ContextOverflow it cuts old tool results to stubs at
once (context.overflow_cut, in place, so the history keeps the cut) and tries exactly once more. An
error that names the server's window ("maximum context length is N", llama.cpp's n_ctx) is the truth
about the server: `learn_window` keeps it on the client, and `window_in_force` plans with it for the
rest of the run or chat - the policy, the compaction and any subagent on the same client.

`Model` is a run's model access, made by run_agent: the window to plan each turn with, and the ask,
bounded by what is left of --max-seconds (a reply that runs out of the run's time is a limit, exit
3, not a failure). What it says goes through the run's warn line (settings.warn).

What it cannot do. Only tool results are cut: a prompt that is too big without them (a huge task, a
long chat's own words, many tool schemas) fails with the harness's estimate of what is left, and the
user must shorten it (/compact in a chat). A server that refuses without saying why is a plain
error.
"""
import json

from .console import warn as to_stderr
from .context import estimate_tokens, overflow_cut, why_nothing_was_cut
from .guards import Stopped
from .llm import ContextOverflow, LLMError


class Model:
    """One run's access to the model: the client, the window in force, and each reply bounded by the
    time left. `report` (edges.Report): the settings, the warn line and the record a stopped run
    prints."""

    def __init__(self, client, report):
        self.client, self.report = client, report

    def window(self):
        """The window to plan this turn with: the server's own, once it said it (learn_window)."""
        return window_in_force(self.client, self.report.settings.context_window)

    def ask(self, messages, window, budget, turn, tools):
        """The model's reply (`ask`: a prompt that does not fit is cut and retried once), bounded by
        what is left of --max-seconds: a runaway reply is cut short, not waited for, and a reply
        that ran out of the run's time is a limit (exit 3), not a failure."""
        try:
            return ask(self.client, messages, window, budget, tools, self.report.warn)
        except LLMError:
            if budget.exceeded(turn):
                raise Stopped(budget.exceeded(turn), self.report.record.account()) from None
            raise


def ask(client, messages, context_window, budget, tools, warn=to_stderr):
    """One model call. When the server says the prompt does not fit its context, cut old tool
    results at once (in place, so the history keeps the cut: context.overflow_cut) and try once
    more. An overflow that names the server's window teaches it to the rest of the run
    (window_in_force)."""
    try:
        return client.chat(messages, tools=tools, timeout=budget.seconds_left())
    except ContextOverflow as overflow:
        window = learn_window(client, overflow, context_window, warn)
        cut, how = overflow_cut(messages, overflow.prompt_tokens, window)
        stubbed = sum(a is not b for a, b in zip(messages, cut))
        if not stubbed:
            raise LLMError(f"{overflow} (Nothing was retried: "
                           f"{why_nothing_was_cut(messages)}.)") from None
        warn(f"[context] the server says the prompt does not fit its context; cut {stubbed} old "
             f"tool result(s) ({how}) and trying once more.")
    messages[:] = cut
    try:
        return client.chat(messages, tools=tools, timeout=budget.seconds_left())
    except ContextOverflow as overflow:
        learn_window(client, overflow, context_window, warn)
        left = estimate_tokens(messages + [{"role": "system", "content": json.dumps(list(tools))}])
        raise LLMError(f"{overflow} (This was after cutting {stubbed} old tool result(s) ({how}) "
                       "and trying once more; what is left - the system prompt, the task, the "
                       "calls, the stubs, the newest results and the tool schemas - is about "
                       f"{left} tokens by the harness's estimate.)") from None


def window_in_force(client, planned):
    """The window to plan with: the one the server said it has (see learn_window), when it said one
    smaller than `planned`, else `planned` (--context-window, or the model's length)."""
    said = getattr(client, "server_window", None)
    return min(planned, said) if isinstance(said, int) and said > 0 else planned


def learn_window(client, overflow, planned, warn=to_stderr):
    """An overflow error that names the window (llama.cpp's n_ctx, "maximum context length is N") is
    the truth about the server: keep it on the client, for the rest of the run or chat (the policy,
    the compaction, a subagent). Said once on stderr. Returns the window in force now."""
    said = overflow.context_window
    if isinstance(said, int) and said > 0 and said < window_in_force(client, planned):
        client.server_window = said
        warn(f"[context] the server says its context window holds {said} tokens, not the {planned} "
             f"planned: the context policy and compaction use {said} from now on.")
    return window_in_force(client, planned)
