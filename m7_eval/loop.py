"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat."""
import itertools
import json
import sys
import time
from pathlib import Path

from .context import CONTEXT_WINDOW, ContextWatch, estimate_tokens, sliding_scissors
from .guards import MAX_SECONDS, MAX_TURNS, REPEAT_LIMIT, Budget, Record, RepeatGuard, Stopped, brief, repeat_warning
from .hooks import NEEDS_PERMISSION, ask_user, pre_tool_use
from .llm import LLMError
from .tools import SCHEMAS, SHELL_TIMEOUT, TOOLS, canonical, check_call, run_tool
from .verify import post_tool_use

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. Old tool results may be cut to save room;
keep what you will need later with save_note. When the task is done, answer briefly with what you did."""
CUT = ("[harness] Your last reply was cut off at the length limit (max_tokens={}), so none of its tool calls ran. "
       "Continue with a shorter reply: fewer or smaller tool calls, less text.")
EMPTY = "[harness] Your reply was empty. Answer the task in words, or call a tool."
NO_ANSWER = "(The model gave no answer. The [tool] lines above show what it did.)"
VALID_CALL = ('A valid call looks like {"name": "read_file", "arguments": {"path": "notes.txt"}}; the tools are: '
              + ", ".join(TOOLS) + ".")  # said after what was wrong with a call the door could not read


class Stats:
    """What the [stats] line reports: model calls, tool calls, and the server's own token counts."""

    def __init__(self):
        self.turns = self.tool_calls = self.prompt_tokens = self.completion_tokens = self.uncounted = 0
        self.started = time.monotonic()
        self.cached_tokens = None  # only a server with a prompt cache reports it

    def count_turn(self, usage):
        self.turns += 1
        self.uncounted += "prompt_tokens" not in usage and "completion_tokens" not in usage  # some servers send none
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int):
            self.cached_tokens = (self.cached_tokens or 0) + cached

    def line(self):
        unknown = self.turns and self.uncounted == self.turns  # "?": a 0 would be a measurement nobody made
        missing = f" usage_missing_turns={self.uncounted}" if self.uncounted and not unknown else ""
        cached = "" if self.cached_tokens is None else f" cached_tokens={self.cached_tokens}"  # after the contract's
        return (f"[stats] turns={self.turns} tool_calls={self.tool_calls} "
                f"prompt_tokens={'?' if unknown else self.prompt_tokens} "
                f"completion_tokens={'?' if unknown else self.completion_tokens} "
                f"seconds={time.monotonic() - self.started:.1f}{cached}{missing}")


def system_prompt(workspace):
    """The built-in prompt plus the workspace's INSTRUCTIONS.md, when it has one."""
    extra = Path(workspace) / "INSTRUCTIONS.md"
    if extra.is_file():
        return SYSTEM_PROMPT + "\n\nInstructions from the workspace (INSTRUCTIONS.md):\n" + extra.read_text(errors="replace")
    return SYSTEM_PROMPT


# exercise(m1): Write run_agent: ask the model, run every tool call it asks for and answer each with a tool message paired to the call by the id the server gave it, and repeat until it answers without tool calls; past max_turns raise Stopped.
def run_agent(task, client, workspace, stats, max_turns=MAX_TURNS, echo=print, transcript=None,
              shell_timeout=SHELL_TIMEOUT, approve=ask_user, max_seconds=MAX_SECONDS, scissors=True,
              context_window=CONTEXT_WINDOW):
    """Loop until the model answers without tool calls; return that answer. Raise Stopped, with an
    account of what was done, when a budget runs out or the model keeps repeating itself."""
    messages = [{"role": "system", "content": system_prompt(workspace)}, {"role": "user", "content": task}]
    budget, repeats, record = Budget(max_turns, max_seconds), RepeatGuard(), Record()
    watch = ContextWatch(context_window)
    memory = {}  # what the post_tool_use hooks remember during this run (failing writes per file)
    was_cut = nudged = False
    for turn in itertools.count():
        save_transcript(transcript, messages)  # before each model call, so a failed call still leaves the story
        limit = budget.exceeded(turn)  # between turns: the only moment the loop itself can stop
        if limit:
            raise Stopped(limit, record.account())
        if scissors:  # keep what the scissors return: a result cut once stays cut, the same bytes every turn
            messages = sliding_scissors(messages)
        try:  # what is left of --max-seconds bounds the reply too: a runaway reply is cut short, not waited for
            message, usage, finish_reason = client.chat(messages, tools=SCHEMAS, timeout=budget.seconds_left())
        except LLMError:
            if budget.exceeded(turn):  # the reply ran out of the run's time: a limit (exit 3), not a failure
                raise Stopped(budget.exceeded(turn), record.account()) from None
            raise
        stats.count_turn(usage)
        watch_context(watch, usage, messages)
        problems, notice = message.pop("_problems", {}), message.pop("_notice", None)  # the door's notes, not sent
        if finish_reason == "length":  # cut off mid-reply: a call in it may be cut too, so none of them runs
            if was_cut:
                raise Stopped(f"the model's reply was cut at the length limit twice (max_tokens={client.max_reply_tokens})",
                              record.account())
            was_cut = True
            echo(f"  [harness] the reply was cut at max_tokens={client.max_reply_tokens}: none of it was used")
            messages += [{"role": "assistant", "content": message["content"]},
                         {"role": "user", "content": CUT.format(client.max_reply_tokens)}]
            continue
        messages.append(message)
        if not message.get("tool_calls"):  # no tool calls = the model is done (finish_reason alone is not trusted)
            if message["content"].strip() or nudged:  # an empty answer gets one [harness] nudge
                save_transcript(transcript, messages)
                return message["content"].strip() or NO_ANSWER
            nudged = True
            messages.append({"role": "user", "content": EMPTY})
            continue
        for call in message["tool_calls"]:
            name, arguments, problem = call["function"]["name"], call["function"]["arguments"], problems.get(call["id"])
            shown = json.dumps(json.loads(arguments), ensure_ascii=False, sort_keys=True)  # one line, one spelling
            echo(f"  [tool] {name}({shown})")
            repeats.see(call, problem)
            result = (f"ERROR: {problem}. {VALID_CALL}" if problem
                      else checked_run(workspace, name, arguments, shell_timeout, approve, memory))
            echo(f"    -> {(result.splitlines() or [''])[0][:160]}")
            stats.tool_calls += 1
            record.note(call, result)
            # The one rule of the loop: each result answers its call by the id the server gave that call.
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if notice:  # after all of the turn's results: a message between two of them breaks the pairing
            messages.append({"role": "user", "content": notice})
        repeated = repeats.end_turn()
        if repeated and repeats.warnings == 1:  # after all of this turn's results, never between them
            echo(f"  [harness] {brief(repeated)} {REPEAT_LIMIT} times in a row: the model is asked for another approach")
            messages.append({"role": "user", "content": repeat_warning(repeated)})
        if repeated and repeats.warnings > 1:
            save_transcript(transcript, messages)
            raise Stopped(f"the model made the same call {REPEAT_LIMIT} times in a row again, after a [harness] "
                          f"warning: {brief(repeated)}", record.account())


def watch_context(watch, usage, messages):
    """Warn on stderr when the prompt count says the context is nearly full, or was cut. Without the
    server's count, the harness's own estimate of what it sent stands in, and the warning says so."""
    sent = estimate_tokens(messages)  # our estimate also tells our own cuts apart from the server's
    counted = usage.get("prompt_tokens")
    warning = watch.check(sent if counted is None else counted, len(messages), sent_tokens=sent)
    if warning:
        print(warning + (" (estimated: the server reported no prompt_tokens)" if counted is None else ""),
              file=sys.stderr, flush=True)


# exercise(m3): Write checked_run: check the call, run the pre_tool_use hooks (a reason means BLOCKED), ask before a write or a shell command (a no means DENIED), and only then run the tool.
def checked_run(workspace, name, arguments, shell_timeout, approve, memory):
    """The choke point: every call passes here after it is parsed and before it runs. The hooks come
    first, so a blocked call never reaches the user; then writes and commands need the user's yes.
    After the call ran, the post hooks may add what they found to its result: the model reads it next."""
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
    reason = pre_tool_use(workspace, name, arguments)
    if reason:
        return f"BLOCKED: {reason}"
    if name in NEEDS_PERMISSION and not approve(f"Allow {name}({canonical(arguments)})? [y/N] "):
        return f"DENIED: the user did not allow this {name} call, so it did not run."
    result = run_tool(workspace, name, arguments, shell_timeout)
    return post_tool_use(workspace, name, arguments, result, memory)


def save_transcript(path, messages):
    """Rewritten every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
