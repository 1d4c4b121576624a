"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat."""
import itertools
import json
import sys
import time
from pathlib import Path

from .context import CONTEXT_WINDOW, DEFAULT_POLICY, POLICIES, ContextWatch, estimate_tokens
from .guards import MAX_SECONDS, MAX_TURNS, REPEAT_LIMIT, Budget, Record, RepeatGuard, Stopped, brief, repeat_warning
from .hooks import ask_user, needs_permission, pre_tool_use
from .tools import SCHEMAS, SHELL_TIMEOUT, canonical, check_call, parse_arguments, run_tool
from .verify import post_tool_use
from .vision import ArrivalWatch, image_followup_message, user_message_with_image

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. Old tool results may be cut to save room;
keep what you will need later with save_note. When the task is done, answer briefly with what you did."""


class Stats:
    """What the [stats] line reports: model calls, tool calls, and the server's own token counts."""

    def __init__(self):
        self.turns = self.tool_calls = self.prompt_tokens = self.completion_tokens = 0
        self.started = time.monotonic()
        self.cached_tokens = None  # only a server with a prompt cache reports it

    def count_turn(self, usage):
        self.turns += 1
        self.prompt_tokens += usage.get("prompt_tokens") or 0
        self.completion_tokens += usage.get("completion_tokens") or 0
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int):
            self.cached_tokens = (self.cached_tokens or 0) + cached

    def line(self):
        cached = "" if self.cached_tokens is None else f" cached_tokens={self.cached_tokens}"  # after the contract's
        return (f"[stats] turns={self.turns} tool_calls={self.tool_calls} prompt_tokens={self.prompt_tokens} "
                f"completion_tokens={self.completion_tokens} seconds={time.monotonic() - self.started:.1f}{cached}")


def system_prompt(workspace):
    """The built-in prompt plus the workspace's INSTRUCTIONS.md, when it has one."""
    extra = Path(workspace) / "INSTRUCTIONS.md"
    if extra.is_file():
        return SYSTEM_PROMPT + "\n\nInstructions from the workspace (INSTRUCTIONS.md):\n" + extra.read_text(errors="replace")
    return SYSTEM_PROMPT


def run_agent(task, client, workspace, stats, max_turns=MAX_TURNS, echo=print, transcript=None,
              shell_timeout=SHELL_TIMEOUT, approve=ask_user, max_seconds=MAX_SECONDS, context_policy=DEFAULT_POLICY,
              context_window=CONTEXT_WINDOW, image=None):
    """Loop until the model answers without tool calls; return that answer. Raise Stopped, with an
    account of what was done, when a budget runs out or the model keeps repeating itself.
    `context_policy` names one of context.POLICIES: how old tool results are cut before each call."""
    first = user_message_with_image(task, image) if image else {"role": "user", "content": task}  # image: from --image
    messages = [{"role": "system", "content": system_prompt(workspace)}, first]
    arrivals = ArrivalWatch()  # did each picture reach the model? The bill says
    budget, repeats, record = Budget(max_turns, max_seconds), RepeatGuard(), Record()
    policy, watch = POLICIES[context_policy], ContextWatch(context_window)
    memory = {}  # what the post_tool_use hooks remember during this run (failing writes per file)
    for turn in itertools.count():
        limit = budget.exceeded(turn)  # between turns: the only moment the loop itself can stop
        if limit:
            raise Stopped(limit, record.account())
        # Keep what the policy returns: a result cut once stays cut, the same bytes every turn (see context.py).
        messages = policy(messages, context_window)
        message, usage, _ = client.chat(messages, tools=SCHEMAS)
        stats.count_turn(usage)
        watch_context(watch, usage, messages)
        arrived = arrivals.check(messages, SCHEMAS, usage)  # a warning if a new picture never arrived
        if arrived:
            print(arrived, file=sys.stderr, flush=True)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:  # no tool calls = the model is done (finish_reason alone is not trusted)
            save_transcript(transcript, messages)
            return message.get("content") or ""
        images = []  # (name, image part) for each picture view_image loads this turn
        for number, call in enumerate(calls, 1):
            repeats.see(call)  # before it runs: running it replaces broken arguments with {}
            run_tool_call(call, f"call_{turn + 1}_{number}", workspace, messages, stats, echo, shell_timeout, approve,
                          memory, images)
            record.note(call, messages[-1]["content"])
        if images:  # after ALL of this turn's results: a message between two of them breaks the pairing
            messages.append(image_followup_message([part for _, part in images], [name for name, _ in images]))
        repeated = repeats.end_turn()
        if repeated and repeats.warnings == 1:  # after all of this turn's results, never between them
            messages.append({"role": "user", "content": repeat_warning(repeated)})
        save_transcript(transcript, messages)
        if repeated and repeats.warnings > 1:
            raise Stopped(f"the model made the same call {REPEAT_LIMIT} times in a row again, after a [harness] "
                          f"warning: {brief(repeated)}", record.account())


def watch_context(watch, usage, messages):
    """Warn on stderr when the server's prompt count says the context is nearly full, or was cut."""
    if isinstance(usage.get("prompt_tokens"), int):  # our own estimate of what we sent tells our cuts apart
        warning = watch.check(usage["prompt_tokens"], len(messages), sent_tokens=estimate_tokens(messages))
        if warning:
            print(warning, file=sys.stderr, flush=True)


def run_tool_call(call, spare_id, workspace, messages, stats, echo, shell_timeout, approve, memory, images):
    """Run one call and append its result, paired to the call by the id the server gave it."""
    function = call.setdefault("function", {})
    name, arguments = function.get("name"), function.get("arguments")
    # The call stays in the history, so it must stay sendable: Ollama's /v1 answers 400 to every later
    # request once a past call carries broken JSON. Keep the parsed arguments ({} if they did not parse),
    # and give a call the server sent without an id one of ours, so its result can still be paired.
    function["arguments"] = canonical(parse_arguments(arguments)[0])
    call["id"] = call.get("id") or spare_id
    echo(f"  [tool] {name}({function['arguments']})")
    stats.tool_calls += 1
    result = checked_run(workspace, name, arguments, shell_timeout, approve, memory, images)
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


def checked_run(workspace, name, arguments, shell_timeout, approve, memory, images):
    """The choke point: every call passes here after it is parsed and before it runs. The hooks come
    first, so a blocked call never reaches the user; then writes, commands and URLs need the user's yes.
    After the call ran, the post hooks may add what they found to its result: the model reads it next."""
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
    reason = pre_tool_use(workspace, name, arguments)
    if reason:
        return f"BLOCKED: {reason}"
    if needs_permission(name, arguments) and not approve(f"Allow {name}({canonical(arguments)})? [y/N] "):
        return f"DENIED: the user did not allow this {name} call, so it did not run."
    result = run_tool(workspace, name, arguments, shell_timeout, images)
    return post_tool_use(workspace, name, arguments, result, memory)


def save_transcript(path, messages):
    """Rewritten after every turn, so a crash still leaves the story so far."""
    if path:
        Path(path).write_text(json.dumps(messages, indent=2), encoding="utf-8")
