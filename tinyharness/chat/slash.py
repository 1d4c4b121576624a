"""Chat's looking-glass commands: /cost, /status, /permissions, /mcp, and /model's list.

The problem. Twenty messages into a chat a user wants to know what it has used, what it is talking
to, what may run without asking and which MCP servers are still alive, the questions Claude Code
answers with the same slash commands. Without them the answers are scattered over the first screen
of the chat (the [mcp] and [permissions] lines), the [stats] line of each message, and the command
line that started it.

The mechanism. Each command reads the chat's own state and prints a few lines, asking nothing of
the model: /cost sums the chat's Stats (counts.py, one per message: the server's token counts,
model calls, tool calls); /status names the model (and where it came from: the flag, a variable,
the defaults file, the default, or /model), the endpoint and dialect of the client in use, the
session file, the workspace, the sandbox, and the last prompt's size against the window in force
(the server's count, else the harness's estimate, chat/compact.py); /permissions lists the rules in
force, deny first, each with the file or flag it came from, and whether --yes approves the rest;
/mcp lists the running servers, their state and the names their tools are offered under; `/model`
alone lists the server's models (model_list.py).

What it cannot do. A local model has no price: /cost counts tokens, it bills nothing (a paid
endpoint's prices are its own). /mcp shows the servers that started; one that failed at the start
was named then and is not kept. /status shows the window the harness plans with; the server's own
is known only when it says so (llama.cpp's /props, an overflow error).
"""
from ..counts import summed
from ..extensions import of as extensions_of
from ..hooks import approve_everything
from .compact import estimate_tokens

KINDS = ("deny", "ask", "allow")  # in the order they are asked


def cost(chat):
    """/cost: tokens and calls so far, by the server's counts."""
    stats = chat.conversation.all_stats
    total = summed(stats)  # counts.py: the one sum
    turns, tools = total.turns, total.tool_calls
    prompt, completion = total.prompt_tokens, total.completion_tokens
    unknown, cached = total.uncounted, total.cached_tokens or 0
    chat.say(f"This chat: {count(len(stats), 'message')}, {count(turns, 'model call')}, "
             f"{count(tools, 'tool call')}; "
             f"{prompt} prompt tokens, {completion} completion tokens (the server's counts"
             + (f"; {unknown} calls reported none" if unknown else "") + ")"
             + (f", {cached} of them cached" if cached else "") + ".")
    chat.say("Cost: $0 by the harness's reckoning: a local model has no price, and a paid "
             "endpoint bills by its own prices.")


def count(number, what):
    return f"{number} {what}{'s' * (number != 1)}"


def status(chat):
    """/status: what the chat talks to, where it keeps itself, and how full the window is."""
    conversation, client = chat.conversation, chat.client
    run = conversation.settings.run
    dialect = getattr(client, "dialect", "openai")
    base = (client.url.removesuffix("/api/chat") if dialect == "ollama"
            else client.url.removesuffix("/chat/completions"))
    writer = getattr(conversation.writer, "session", conversation.writer)
    sandbox = run.sandbox
    problem = sandbox.problem() if sandbox is not None and sandbox.enabled else None
    rows = [("model", f"{client.model} (from {getattr(client.model, 'source', '--model')})"),
            ("endpoint", base),
            ("api", "ollama (Ollama's native /api/chat)" if dialect == "ollama"
             else "openai (/v1/chat/completions)"),
            ("session", f"{writer.id} ({writer.path})" if writer else "none (--no-session)"),
            ("workspace", conversation.workspace),
            ("sandbox", ("off" if sandbox is None or not sandbox.enabled else
                         f"on, but it cannot run here: {problem}" if problem else "on")),
            ("context", fullness(conversation))]
    for name, text in rows:
        chat.say(f"{name:<10} {text}")


def fullness(conversation):
    """How much of the window the last prompt took: the server's count, else an estimate."""
    window = conversation.window()
    counted = conversation.tap.last_usage.get("prompt_tokens")
    used = counted if isinstance(counted, int) else estimate_tokens(conversation.messages)
    how = ("the last prompt, as the server counted it" if isinstance(counted, int)
           else "the history, estimated by the harness")
    return (f"{used} of {window} tokens ({used * 100 // max(window, 1)}%): {how}; compacted past "
            f"{conversation.settings.compact_at:.0%}")


def permissions(chat):
    """/permissions: the rules in force, in the order they are asked, with their sources."""
    run = chat.conversation.settings.run
    rules = getattr(extensions_of(run).rules, "rules", None) or []
    if not rules:
        chat.say("No permission rules: each write and command asks (or --yes approves it).")
    else:
        chat.say("Rules in force (a deny rule first, then ask, then allow; a call no rule covers "
                 "asks):")
    ordered = sorted(rules, key=lambda r: KINDS.index(r.kind) if r.kind in KINDS else len(KINDS))
    for rule in ordered:
        chat.say(f"  {rule.kind:<6} {rule.text}  ({rule.source})")
    said_yes = getattr(run.approve, "func", run.approve) is approve_everything
    chat.say("--yes: on (a call the hooks and the rules let through runs without asking)"
             if said_yes else "--yes: off (a call no rule allows asks at the terminal)")


def mcp_state(chat):
    """/mcp: each server that started, its state and its tools as the model sees them."""
    slots = extensions_of(chat.conversation.settings.run).mcp
    if not slots or not slots.servers:
        chat.say("No MCP servers in this chat (`tinyharness mcp list` shows what is configured; a "
                 "server that failed to start was named when the chat began).")
        return
    for name, server in slots.servers.items():
        state = (f"withdrawn: {server.dead or 'its tools failed'}" if name in slots.withdrawn
                 else f"stopped: {server.dead}" if server.dead else "running")
        tools = sorted(model for model, (owner, _) in slots.names.items() if owner == name)
        chat.say(f"{name}  {state}  [{server.transport}] protocol {server.version}, "
                 f"{len(tools)} tool(s)")
        for model_name in tools:
            read_only = server.is_read_only(slots.names[model_name][1])
            chat.say(f"  {model_name}" + ("  (read-only: runs without asking)" if read_only
                                          else ""))


COMMANDS = {"/cost": cost, "/status": status, "/permissions": permissions, "/mcp": mcp_state}
