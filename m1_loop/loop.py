"""The whole agent is a while loop: ask the model, run the tools it asks for, repeat.

Each edge case a real model brings (a reply cut at the length limit, a call the door could not read, the
[tool] lines, the transcript) sits behind a name in edges.py, the loop's armour: read it after this
file."""
from pathlib import Path

from .edges import NO_ANSWER, Edges, Stopped, garbled, save_transcript
from .tools import SCHEMAS, run_tool

SYSTEM_PROMPT = """You are an agent working in a folder on the user's computer (the workspace).
Use the tools to look at and change files; do the work yourself instead of telling the user how.
Read before you answer: never invent what a file says. When the task is done, answer briefly
with what you did."""


def system_prompt(workspace):
    """The built-in prompt plus the workspace's INSTRUCTIONS.md, when it has one."""
    extra = Path(workspace) / "INSTRUCTIONS.md"
    if extra.is_file():
        return SYSTEM_PROMPT + "\n\nInstructions from the workspace (INSTRUCTIONS.md):\n" + extra.read_text(errors="replace")
    return SYSTEM_PROMPT


# exercise(m1): Write run_agent: ask the model, run every tool call it asks for and answer each with a tool message paired to the call by the id the server gave it, and repeat until it answers without tool calls; past max_turns raise Stopped.
def run_agent(task, client, workspace, stats, max_turns=8, echo=print, transcript=None):
    """Loop until the model answers without tool calls; return that answer."""
    messages = [{"role": "system", "content": system_prompt(workspace)}, {"role": "user", "content": task}]
    edges = Edges(client, echo, stats, transcript)  # the edge cases, each behind a name (edges.py)
    for _ in range(max_turns):
        save_transcript(transcript, messages)  # before each model call, so a failed call still leaves the story
        message, usage, finish_reason = client.chat(messages, tools=SCHEMAS)
        stats.count_turn(usage)
        problems = message.pop("_problems", {})  # the door's notes on calls it could not read: never sent back
        if edges.cut(finish_reason, message, messages):  # cut mid-reply: none of it runs, the model is asked again
            continue
        messages.append(message)
        if not message.get("tool_calls"):  # no tool calls = the model is done (finish_reason alone is not trusted)
            save_transcript(transcript, messages)
            return message["content"].strip() or NO_ANSWER
        for call in message["tool_calls"]:
            problem = edges.show(call, problems)  # the [tool] line; what the door could not read, or None
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = garbled(problem) if problem else run_tool(workspace, name, arguments)
            edges.ran(call, result)  # the -> line, and the count
            # The one rule of the loop: each result answers its call by the id the server gave that call.
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    save_transcript(transcript, messages)
    raise Stopped(f"reached --max-turns {max_turns}")
