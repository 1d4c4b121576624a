"""Claude Code's output formats for `run`: -p/--print and --output-format text|json|stream-json.

The problem. Scripts written for `claude -p` read its output by Claude Code's field names: the
answer in `result`, how the run ended in `subtype` and `is_error`, the first stream-json line a
`system`/`init` event naming the session, the folder, the model, the tools and the MCP servers, then
`assistant` and `user` messages made of content blocks (text, tool_use, tool_result). `run --json`
speaks tinyharness's own, older shape (the session file's events, `answer`, no `subtype`): a
Claude user's jq filter or the Claude Agent SDK's message parser finds nothing it knows there.

The mechanism. `choose` reads the flags: --output-format, or -p alone (print mode: the answer only,
as `claude -p` prints it). With any of them standard output belongs to this writer alone - the tool
lines, warnings and questions go to standard error, as with --json. `ClaudeLines` has JsonLines'
three calls (sync, event, result): it turns each message the loop adds - OpenAI's shape: content and
tool_calls, then one `tool` message per result - into Claude's (text and tool_use blocks in an
`assistant` message, a tool_result block in a `user` message; a result that starts with ERROR,
BLOCKED or DENIED is `is_error`, and a DENIED one is listed in `permission_denials`), and at the end
writes the result object: `success`, `error_max_turns` (--max-turns stopped it) or
`error_during_execution` (any other limit, a server's failure, an interrupt, a run where nothing was
allowed), with the error's words in `errors`. stream-json writes every line, json the result
object alone, text the answer alone. A run that ends before it could write (a usage error, a signal
during set-up) still ends json and stream-json with a result object (`missing_result`). Every line
is JSON with ASCII escapes: a control, C1 or bidi character in model text or a file name arrives as
\\uXXXX, never raw on a terminal.

What it cannot do. There is no price for a local model: `total_cost_usd` is 0. `duration_api_ms`
is the time spent waiting for model replies, measured here. A count the server never reported is
null, not 0 (tinyharness's rule: a 0 would be a measurement nobody made), and
`cache_creation_input_tokens` is never known. Tool names are tinyharness's own (`shell`,
`read_file`, ...), not Claude's (`Bash`, `Read`); MCP servers that failed to start are not listed in
`init`; a subagent's own messages are not streamed (its answer is the task tool's result); a
streamed reply is not sent as partial `stream_event` lines; `--verbose` changes nothing.
"""
import json
import os
import sys
import time
import uuid

from .console import printable, warn

FORMATS = ("text", "json", "stream-json")
FAILED = ("ERROR", "BLOCKED", "DENIED")  # a tool result that starts so did not do what was asked


def claude_json(obj):
    """One line of JSON with every non-ASCII character (C1, bidi, separators, lone surrogates) and
    DEL escaped as \\uXXXX: valid JSON that reads back to the same text; json.dumps escapes C0."""
    return json.dumps(obj, ensure_ascii=True).replace("\x7f", "\\u007f")


def choose(args, parser):
    """Which format the run writes (None: the plain run), said by --output-format or by -p alone
    (text); a usage error for --json beside --output-format. When chosen, `args.json` is set:
    standard output is for this writer alone, as it is for --json's lines."""
    fmt = args.output_format or ("text" if args.print and not args.json else None)
    if args.output_format and args.json:
        parser.error("give --json (tinyharness's own lines) or --output-format (Claude Code's), "
                     "not both")
    args.json = args.json or bool(fmt)
    return fmt


class ApiClock:
    """Wraps a client to add up the seconds its replies took (duration_api_ms); everything else,
    attributes set included, is the client's own."""

    def __init__(self, client):
        object.__setattr__(self, "client", client)
        object.__setattr__(self, "seconds", 0.0)

    def chat(self, *args, **kwargs):
        started = time.monotonic()
        try:
            return self.client.chat(*args, **kwargs)
        finally:
            object.__setattr__(self, "seconds", self.seconds + time.monotonic() - started)

    def __getattr__(self, name):
        return getattr(self.client, name)

    def __setattr__(self, name, value):
        setattr(self.client, name, value)


def claude_usage(usage):
    """OpenAI's counts (prompt_tokens includes the cached ones) as Claude's (input_tokens does
    not); a count never reported stays null."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    cached = usage.get("cached_tokens")
    details = usage.get("prompt_tokens_details")
    if cached is None and isinstance(details, dict):
        cached = details.get("cached_tokens")
    cached = cached if isinstance(cached, int) else None
    return {"input_tokens": prompt - (cached or 0) if isinstance(prompt, int) else None,
            "output_tokens": completion if isinstance(completion, int) else None,
            "cache_read_input_tokens": cached}


def tool_input(arguments):
    """A call's arguments as the object tool_use wants; text that is not a JSON object is kept
    whole under `arguments` (the model sent it so; the run answered it with an ERROR)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def text_blocks(content):
    """A message's content as Claude's text blocks: a string, or OpenAI's parts (a picture is named,
    not sent)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif isinstance(part, dict):
            blocks.append({"type": "text", "text": f"[{part.get('type', 'part')}]"})
    return blocks


class Converter:
    """The run's messages, as the loop adds them, in Claude's shapes. `written`: how many messages
    of the history are already done (a --continue run's history is not sent again); the first user
    message of the run is the task, which Claude does not echo either."""

    def __init__(self, model, session_id):
        self.model, self.session_id = model, session_id
        self.written, self.last, self.task_seen, self.usage = 0, None, False, {}
        self.calls, self.denials = {}, []  # tool_use_id -> (name, input); the calls DENIED

    def new(self, messages):
        """The Claude messages for what was added since the last call."""
        found = []
        # here, not at the top: `tinyharness --help` stays clear of the sessions and the sandbox
        from .sessions.writer import unwritten_from
        for message in messages[unwritten_from(messages, self.written, self.last):]:
            role = message.get("role")
            if role == "assistant":
                found.append(self.assistant(message))
            elif role == "tool":
                found.append(self.tool_result(message))
            elif role == "user" and self.task_seen:
                found.append(self.wrap("user", {"role": "user",
                                                "content": text_blocks(message.get("content"))}))
            self.task_seen = self.task_seen or role == "user"
        self.written, self.last = len(messages), messages[-1] if messages else None
        return found

    def wrap(self, kind, message):
        return {"type": kind, "message": message, "parent_tool_use_id": None,
                "session_id": self.session_id, "uuid": str(uuid.uuid4())}

    def assistant(self, message):
        blocks = text_blocks(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            name, given = str(function.get("name")), tool_input(function.get("arguments"))
            self.calls[call.get("id")] = (name, given)
            blocks.append({"type": "tool_use", "id": call.get("id"), "name": name, "input": given})
        body = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                "model": self.model, "content": blocks,
                "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
                "stop_sequence": None, "usage": claude_usage(self.usage)}
        self.usage = {}
        return self.wrap("assistant", body)

    def tool_result(self, message):
        content, call_id = str(message.get("content") or ""), message.get("tool_call_id")
        if content.startswith("DENIED") and call_id in self.calls:
            name, given = self.calls[call_id]
            self.denials.append({"tool_name": name, "tool_use_id": call_id, "tool_input": given})
        block = {"type": "tool_result", "tool_use_id": call_id, "content": content,
                 "is_error": content.startswith(FAILED)}
        return self.wrap("user", {"role": "user", "content": [block]})


def subtype(result):
    """Claude's name for how the run ended."""
    if result.get("exit_code") == 0:
        return "success"
    stopped = str(result.get("stopped") or "")
    return "error_max_turns" if stopped.startswith("reached --max-turns") else \
        "error_during_execution"


def result_object(result, usage, turns, seconds, api_seconds, session_id, denials=()):
    """The last line: Claude's result fields, from the run's result (cli.start_run's dict)."""
    code = result.get("exit_code", 1)
    obj = {"type": "result", "subtype": subtype(result), "is_error": code != 0,
           "duration_ms": int(seconds * 1000), "duration_api_ms": int(api_seconds * 1000),
           "num_turns": turns}
    if isinstance(result.get("answer"), str):
        obj["result"] = result["answer"]
    errors = [str(result[key]) for key in ("stopped", "error") if result.get(key)]
    if code != 0:
        obj["errors"] = errors or [f"exit code {code}"]
    return {**obj, "session_id": session_id, "total_cost_usd": 0, "usage": claude_usage(usage),
            "permission_denials": list(denials), "uuid": str(uuid.uuid4()), "exit_code": code}


class ClaudeLines:
    """JsonLines' three calls (cli.py), writing Claude Code's format FMT on `out`."""

    def __init__(self, out, fmt, tap, session_id, model, ending, init=None):
        self.out, self.fmt, self.tap, self.ending = out, fmt, tap, ending
        self.clock = tap.client = ApiClock(tap.client)  # the time the replies took
        self.events = Converter(model, session_id)
        if fmt == "stream-json":
            self.write({"type": "system", "subtype": "init", **(init or {}),
                        "session_id": session_id, "model": model, "uuid": str(uuid.uuid4())})

    @classmethod
    def for_run(cls, fmt, args, tap, session, hands):
        """The writer of a run: its init names the folder, the tools, the MCP servers, the mode."""
        servers = (hands.mcp.servers.values() if hands.mcp else [])
        init = {"cwd": os.getcwd(),
                "tools": [schema["function"]["name"] for schema in hands.tools()],
                "mcp_servers": [{"name": s.name, "status": "failed" if s.dead else "connected"}
                                for s in servers],
                "permissionMode": "bypassPermissions" if args.yes else "default",
                "apiKeySource": "none", "slash_commands": [], "output_style": "default",
                "agents": [], "skills": [], "plugins": []}
        return cls(args.json_out, fmt, tap, session.id if session else None, args.model,
                   args.ending, init)

    def write(self, obj):
        self.out.write(claude_json(obj) + "\n")
        self.out.flush()

    def sync(self, messages):
        self.events.usage = self.tap.last_usage  # the latest call's usage, beside its answer
        for message in self.events.new(messages):
            if self.fmt == "stream-json":
                self.write(message)

    def event(self, kind, **fields):
        """A subagent's messages, a notice: not part of Claude's stream."""

    def result(self, result, stats):
        self.ending.written = True  # before writing: a closed output must not get a second try
        if self.fmt == "text":
            return self.text(result)
        seconds = time.monotonic() - stats.started
        self.write(result_object(result, stats.usage(), stats.turns, seconds, self.clock.seconds,
                                 self.events.session_id, self.events.denials))

    def text(self, result):
        """--output-format text: the answer alone on standard output; why it stopped on stderr."""
        if result.get("answer") is not None:
            self.out.write(printable(result["answer"]) + "\n")
            self.out.flush()
        if result.get("stopped"):
            warn(f"Stopped: {result['stopped']}. The task is NOT confirmed complete.")
            if result.get("done"):
                warn(result["done"])


def format_in(argv):
    """The --output-format a command line asks for (either spelling), or None."""
    argv = argv[:argv.index("--")] if "--" in argv else argv
    for i, arg in enumerate(argv):
        if arg.startswith("--output-format="):
            return arg.split("=", 1)[1]
        if arg == "--output-format" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def missing_result(argv, code, started, ending, out=None):
    """The result object of a json or stream-json run that ended before it could write its own (a
    usage error, a signal during set-up); nothing when one was written or none was asked for."""
    if ending.written or argv[:1] != ["run"] or format_in(argv) not in ("json", "stream-json"):
        return
    error = (ending.usage_error
             or {2: "usage error (see standard error)", 130: "interrupted"}.get(code)
             or (f"terminated ({code})" if code > 128 else "failed"))
    obj = result_object({"exit_code": code, "error": error}, {}, 0, time.monotonic() - started, 0,
                        None)
    try:
        (out or sys.stdout).write(claude_json(obj) + "\n")
        (out or sys.stdout).flush()
    except (OSError, ValueError):  # the output is closed: nobody is there to read it
        pass
    ending.written = True
