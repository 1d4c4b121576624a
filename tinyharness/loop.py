"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat."""
import itertools
import json
import sys
import time
from pathlib import Path

from .extensions import NONE as NO_EXTENSIONS
from .context import (CONTEXT_WINDOW, DEFAULT_POLICY, POLICIES, ContextWatch, cap_chars, cap_on_insert,
                      estimate_tokens, overflow_cut, why_nothing_was_cut)
from .guards import MAX_SECONDS, MAX_TURNS, REPEAT_LIMIT, Budget, Record, RepeatGuard, Stopped, brief, repeat_warning
from .hooks import ask_user, needs_permission, pre_tool_use
from .llm import ContextOverflow, LLMError
from .parallel import batches, run_together
from .subagents import run_child
from .tools import SCHEMAS, SHELL_TIMEOUT, TOOLS, canonical, check_call, run_tool
from .verify import post_tool_use
from .arrival import ArrivalWatch
from .vision import image_followup_message, user_message_with_image

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
        unknown = self.uncounted == self.turns  # "?": a 0 would be a measurement nobody made (no answer, no count)
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


def run_agent(task, client, workspace, stats, max_turns=MAX_TURNS, echo=print, transcript=None,
              shell_timeout=SHELL_TIMEOUT, approve=ask_user, max_seconds=MAX_SECONDS, context_policy=DEFAULT_POLICY,
              context_window=CONTEXT_WINDOW, image=None, messages=None, on_update=None, max_tokens=None,
              sandbox=None, extensions=None, on_subagent=None):
    """Loop until the model answers without tool calls; return that answer. Raise Stopped, with an
    account of what was done, when a budget runs out or the model keeps repeating itself.
    `context_policy` names one of context.POLICIES: how old tool results are cut before each call.
    `messages`: a conversation to continue (chat): the task is added to it, and it is kept up to date
    in place, so the caller still has the whole history when the run ends, stops or is interrupted.
    `on_update(messages)` is called whenever messages were added (the session file appends them).
    `max_tokens` (or None) bounds the prompt and completion tokens of the run, by the server's counts.
    `extensions` (extensions.py): MCP tools, the task tool, command hooks, parallel reads; `on_subagent`
    gets each subagent's messages when it ends (the session keeps them).
    `sandbox`: how shell commands run (sandbox.Sandbox; None = sandboxed, with the defaults)."""
    ext = extensions or NO_EXTENSIONS
    refused = ext.user_prompt_submit(task)
    if refused:
        raise Stopped(f"a user_prompt_submit hook refused the task: {refused}", "Tool calls: none.\nFiles written: none.")
    if ext.subagents:  # the child gets this run's client, settings and hooks, and a fresh context
        parent = {"client": client, "workspace": workspace, "stats": stats, "echo": echo,
                  "settings": {"shell_timeout": shell_timeout, "approve": approve, "context_policy": context_policy,
                               "context_window": context_window, "sandbox": sandbox}}
        ext.run_task = lambda description: run_child(description, parent, ext, on_subagent)
    first = user_message_with_image(task, image) if image else {"role": "user", "content": task}  # image: from --image
    first = ext.with_context(first)  # what a user_prompt_submit hook printed: context, as in Claude Code
    messages = [{"role": "system", "content": system_prompt(workspace)}] if messages is None else messages
    messages.append(first)
    on_update = on_update or (lambda messages: None)
    on_update(messages)
    arrivals = ArrivalWatch()  # did each picture reach the model? The bill says
    budget, repeats, record = Budget(max_turns, max_seconds), RepeatGuard(), Record()
    policy, watch = POLICIES[context_policy], ContextWatch(context_window)
    memory = {}  # what the post_tool_use hooks remember during this run (failing writes per file)
    was_cut = nudged = False
    as_sent = (lambda text: cap_on_insert(text, cap_chars(context_window))) \
        if context_policy in CAPPING_POLICIES and context_window else (lambda text: text)
    for turn in itertools.count():
        save_transcript(transcript, messages)  # before each model call, so a failed call still leaves the story
        limit = budget.exceeded(turn) or tokens_spent(stats, max_tokens)  # between turns: the loop can stop only here
        if limit:
            raise Stopped(limit, record.account())
        window = window_in_force(client, context_window)  # the server's own, once it said it
        watch.window = window
        # Keep what the policy returns: a result cut once stays cut, the same bytes every turn (see context.py).
        messages[:] = policy(messages, window)  # in place: a chat's caller holds this list
        try:  # what is left of --max-seconds bounds the reply too: a runaway reply is cut short, not waited for
            tools = SCHEMAS + ext.schemas()  # asked every turn: an MCP server may have changed its list
            message, usage, finish_reason = ask(client, messages, window, budget, tools)
        except LLMError:
            if budget.exceeded(turn):  # the reply ran out of the run's time: a limit (exit 3), not a failure
                raise Stopped(budget.exceeded(turn), record.account()) from None
            raise
        stats.count_turn(usage)
        if max_tokens and stats.uncounted == 1 and not {"prompt_tokens", "completion_tokens"} & set(usage):
            print(f"[harness] --max-tokens {max_tokens} cannot be enforced: the server reports no token counts "
                  "for its replies (see `tinyharness doctor`).", file=sys.stderr)  # once: a silent budget is no budget
        watch_context(watch, usage, messages, tools)
        arrived = arrivals.check(messages, tools, usage)  # a warning if a new picture never arrived
        if arrived:
            print(arrived, file=sys.stderr, flush=True)
        problems = message.pop("_problems", {})  # the door's notes on calls it could not read, not sent
        if finish_reason == "length":  # cut off mid-reply: a call in it may be cut too, so none of them runs
            if was_cut:
                raise Stopped(f"the model's reply was cut at the length limit twice (max_tokens={client.max_reply_tokens})",
                              record.account())
            was_cut = True
            echo(f"  [harness] the reply was cut at max_tokens={client.max_reply_tokens}: none of it was used")
            messages += [{"role": "assistant", "content": message["content"]},
                         {"role": "user", "content": CUT.format(client.max_reply_tokens)}]
            on_update(messages)
            continue
        messages.append(message)
        on_update(messages)
        if not message.get("tool_calls"):  # no tool calls = the model is done (finish_reason alone is not trusted)
            objection = ext.stop(message["content"]) if message["content"].strip() else None
            if objection:  # a stop hook says the work is not done: the model reads why, and goes on
                messages.append({"role": "user", "content": f"[harness] A stop hook of this workspace says the "
                                                            f"task is not done yet: {objection}"})
                on_update(messages)
                continue
            if message["content"].strip() or nudged:  # an empty answer gets one [harness] nudge
                save_transcript(transcript, messages)
                return message["content"].strip() or NO_ANSWER
            nudged = True
            messages.append({"role": "user", "content": EMPTY})
            on_update(messages)
            continue
        images = []  # (name, image part) for each picture view_image loads this turn

        def run_one(call):  # what one call returns, and the pictures it loaded (a list per call: threads)
            name, arguments, problem = call["function"]["name"], call["function"]["arguments"], problems.get(call["id"])
            if problem:
                return f"ERROR: {problem}. {VALID_CALL}", []
            loaded = []
            return checked_run(workspace, name, arguments, shell_timeout, approve, memory, loaded, sandbox, ext), loaded

        def reads_only(call):
            return ext.parallel and call["id"] not in problems and \
                ext.read_only(call["function"]["name"], call["function"]["arguments"])

        for group in batches(message["tool_calls"], reads_only):  # reads together; a write or command alone
            if len(group) == 1:
                show_call(echo, group[0])  # before it runs: its permission prompt follows the [tool] line
            outcomes = run_together(group, run_one)
            for call, (result, loaded) in zip(group, outcomes):
                if len(group) > 1:
                    show_call(echo, call)
                repeats.see(call, problems.get(call["id"]))
                echo(f"    -> {(result.splitlines() or [''])[0][:160]}")
                stats.tool_calls += 1
                record.note(call, result)
                images += loaded
                # The one rule of the loop: each result answers its call by the id the server gave that call.
                # Stored as the model will be sent it: a policy that caps on insert caps it here already, so
                # the session file never holds more than the model saw (a capped result stays as it is).
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": as_sent(result)})
                on_update(messages)
        if images:  # after ALL of this turn's results: a message between two of them breaks the pairing
            messages.append(image_followup_message([part for _, part in images], [name for name, _ in images]))
        repeated = repeats.end_turn()
        if repeated and repeats.warnings == 1:  # after all of this turn's results, never between them
            echo(f"  [harness] {brief(repeated)} {REPEAT_LIMIT} times in a row: the model is asked for another approach")
            messages.append({"role": "user", "content": repeat_warning(repeated)})
        on_update(messages)
        if repeated and repeats.warnings > 1:
            save_transcript(transcript, messages)
            raise Stopped(f"the model made the same call {REPEAT_LIMIT} times in a row again, after a [harness] "
                          f"warning: {brief(repeated)}", record.account())


CAPPING_POLICIES = ("cap", "batch+cap")  # the context policies that cap a result before the model first sees it


def show_call(echo, call):
    shown = json.dumps(json.loads(call["function"]["arguments"]), ensure_ascii=False, sort_keys=True)
    echo(f"  [tool] {call['function']['name']}({shown})")  # one line, one spelling


def ask(client, messages, context_window, budget, tools=SCHEMAS):
    """One model call. When the server says the prompt does not fit its context, cut old tool results
    at once (in place, so the history keeps the cut: context.overflow_cut) and try once more. An
    overflow that names the server's window teaches it to the rest of the run (window_in_force)."""
    try:
        return client.chat(messages, tools=tools, timeout=budget.seconds_left())
    except ContextOverflow as overflow:
        window = learn_window(client, overflow, context_window)
        cut, how = overflow_cut(messages, overflow.prompt_tokens, window)
        stubbed = sum(a is not b for a, b in zip(messages, cut))
        if not stubbed:
            raise LLMError(f"{overflow} (Nothing was retried: {why_nothing_was_cut(messages)}.)") from None
        print(f"[context] the server says the prompt does not fit its context; cut {stubbed} old tool "
              f"result(s) ({how}) and trying once more.", file=sys.stderr, flush=True)
    messages[:] = cut
    try:
        return client.chat(messages, tools=tools, timeout=budget.seconds_left())
    except ContextOverflow as overflow:
        learn_window(client, overflow, context_window)
        left = estimate_tokens(messages + [{"role": "system", "content": json.dumps(list(tools))}])
        raise LLMError(f"{overflow} (This was after cutting {stubbed} old tool result(s) ({how}) and trying once "
                       f"more; what is left - the system prompt, the task, the calls, the stubs, the newest results "
                       f"and the tool schemas - is about {left} tokens by the harness's estimate.)") from None


def window_in_force(client, planned):
    """The window to plan with: the one the server said it has (see learn_window), when it said one
    smaller than `planned`, else `planned` (--context-window, or the model's length)."""
    said = getattr(client, "server_window", None)
    return min(planned, said) if isinstance(said, int) and said > 0 else planned


def learn_window(client, overflow, planned):
    """An overflow error that names the window (llama.cpp's n_ctx, "maximum context length is N") is
    the truth about the server: keep it on the client, for the rest of the run or chat (the policy,
    the compaction, a subagent). Said once on stderr. Returns the window in force now."""
    said = overflow.context_window
    if isinstance(said, int) and said > 0 and said < window_in_force(client, planned):
        client.server_window = said
        print(f"[context] the server says its context window holds {said} tokens, not the {planned} planned: "
              f"the context policy and compaction use {said} from now on.", file=sys.stderr, flush=True)
    return window_in_force(client, planned)


def tokens_spent(stats, max_tokens):
    """Why the run must stop for --max-tokens (prompt plus completion, as the server counted), or None."""
    spent = stats.prompt_tokens + stats.completion_tokens
    if max_tokens and spent >= max_tokens:
        return f"the token budget of --max-tokens {max_tokens} was used ({spent} tokens by the server's counts)"
    return None


def watch_context(watch, usage, messages, tools=()):
    """Warn on stderr when the prompt count says the context is nearly full, or was cut. Without the
    server's count, the harness's own estimate of what it sent stands in, and the warning says so.
    The estimate counts the tool schemas too: an MCP server withdrawn mid-run shrinks the prompt, and
    that drop is ours, not the server's."""
    sent = estimate_tokens(messages + [{"role": "system", "content": json.dumps(list(tools))}])
    counted = usage.get("prompt_tokens")
    warning = watch.check(sent if counted is None else counted, len(messages), sent_tokens=sent)
    if warning:
        print(warning + (" (estimated: the server reported no prompt_tokens)" if counted is None else ""),
              file=sys.stderr, flush=True)


def checked_run(workspace, name, arguments, shell_timeout, approve, memory, images, sandbox=None, ext=NO_EXTENSIONS):
    """The choke point: every call passes here after it is parsed and before it runs. The hooks come
    first, so a blocked call never reaches the user; then writes, commands and URLs need the user's yes.
    After the call ran, the post hooks may add what they found to its result: the model reads it next.
    A tool from extensions.py (MCP, task) passes the same hooks, prompt and post hooks as ours."""
    ours = not ext.owns(name)
    arguments, problem = check_call(name, arguments) if ours else ext.check(name, arguments)
    if problem and ours and name not in TOOLS and (more := [s["function"]["name"] for s in ext.schemas()]):
        problem = f"{problem[:-1]}, {', '.join(more)}."  # the list the model corrects itself from: all of them
    if problem:
        return problem
    reason = pre_tool_use(workspace, name, arguments) or ext.pre_tool_use(name, arguments)
    if reason:
        return f"BLOCKED: {reason}"
    asks = needs_permission(name, arguments) if ours else ext.needs_permission(name)
    if asks and not approve(f"Allow {name}({canonical(arguments)})? [y/N] "):
        return f"DENIED: the user did not allow this {name} call, so it did not run."
    result = run_tool(workspace, name, arguments, shell_timeout, images, sandbox) if ours else ext.run(name, arguments, images)
    return ext.post_tool_use(name, arguments, post_tool_use(workspace, name, arguments, result, memory))


def save_transcript(path, messages):
    """Rewritten every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
