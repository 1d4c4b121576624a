"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat.

What is display and bookkeeping (the [tool] and -> lines, the counts, the transcript) and each edge case a
real model brings (a reply cut at the length limit, a call the door could not read, an empty answer, a reply
that outlives the run's time, a call repeated again and again) sits in edges.py, the loop's armour, around
the model and the tools: read it after this file."""
from pathlib import Path

from .context import CONTEXT_WINDOW, ContextWatch, sliding_scissors
from .edges import Edges
from .guards import MAX_SECONDS, MAX_TURNS, Budget, RepeatGuard
from .hooks import NEEDS_PERMISSION, ask_user, pre_tool_use
from .tools import SCHEMAS, SHELL_TIMEOUT, canonical, check_call, run_tool

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. Old tool results may be cut to save room;
keep what you will need later with save_note. When the task is done, answer briefly with what you did."""


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
    budget, repeats = Budget(max_turns, max_seconds), RepeatGuard()
    edges = Edges(client, echo, stats, transcript, budget, ContextWatch(context_window))  # edges.py
    while True:
        limit = budget.exceeded(stats.turns)  # between turns: the only moment the loop itself can stop
        if limit:
            raise edges.stopped(limit, messages)  # with the transcript and the account of what was done
        if scissors:  # keep what the scissors return: a result cut once stays cut, the same bytes every turn
            messages = sliding_scissors(messages)
        message = edges.ask(messages, SCHEMAS)  # bounded by the time left; warnings on stderr
        messages.append(message)
        if not message.get("tool_calls"):  # no tool calls = the model is done (finish_reason alone is not trusted)
            return message["content"]
        for call in message["tool_calls"]:
            repeats.see(call, edges.problem(call))  # every call, before it runs
            result = edges.run(call, checked_run, workspace, shell_timeout, approve)
            # The one rule of the loop: each result answers its call by the id the server gave that call.
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        edges.steer(repeats, messages)  # a call repeated again and again: a [harness] warning, then a stop


# exercise(m3): Write checked_run: check the call, run the pre_tool_use hooks (a reason means BLOCKED), ask before a write or a shell command (a no means DENIED), and only then run the tool.
def checked_run(workspace, name, arguments, shell_timeout, approve):
    """The choke point: every call passes here after it is parsed and before it runs. The hooks come
    first, so a blocked call never reaches the user; then writes and commands need the user's yes."""
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
    reason = pre_tool_use(workspace, name, arguments)
    if reason:
        return f"BLOCKED: {reason}"
    if name in NEEDS_PERMISSION and not approve(f"Allow {name}({canonical(arguments)})? [y/N] "):
        return f"DENIED: the user did not allow this {name} call, so it did not run."
    return run_tool(workspace, name, arguments, shell_timeout)
