"""MCP tool slots: other programs' tools, offered to the model through the same choke point as ours.

The problem. Every tool so far is a Python function in tools.py. Users want the model to reach their
issue tracker, their database, their browser - tools somebody else wrote, in any language. Writing
an adapter for each does not scale.

The mechanism. The Model Context Protocol (MCP) fixes one wire between a harness and a tool server:
JSON-RPC 2.0 messages. Over stdio they are one JSON object per line: the harness starts the server
as a child process. Over Streamable HTTP (mcp/http.py) each message is POSTed to the server's URL;
over the older HTTP+SSE (mcp/sse.py) to an address the server names on a stream it keeps open.
Either way the harness sends `initialize` (the protocol version it speaks, its name), reads the
answer (the version the server will speak, what it offers), confirms with the notification
`notifications/initialized`, then asks `tools/list` (page by page, following `nextCursor`) and calls
`tools/call {name, arguments}`. A result is a list of content parts; `isError: true` means the tool
ran and failed, which is ordinary feedback for the model, not a crash. A picture in a result reaches
the model as a picture (after the turn's results, as view_image's do); progress notifications are
shown on stderr. Each tool is offered to the model as `mcp__<server>__<tool>` with the server's own
JSON Schema, and every call goes through the same hooks, permission prompt, guards, output cap and
context policy as a built-in tool: a call asks the user first unless the configuration marks that
tool read-only.

A server is untrusted input. Paging stops after MAX_PAGES pages; every reply is type-checked (a tool
whose schema is malformed is skipped with an `[mcp]` warning; a result that cannot be read becomes
an ERROR text for the model); a line the reader cannot route is logged and skipped; each call ends
by the server's `timeout` and by what is left of the run's --max-seconds, and the starts together
by their `start_timeout` and by --max-seconds; the server runs in a
process group of its own, ended whole at close (Ctrl-C in chat stops the turn's commands, never a
server). Model servers accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`: other names are mapped to
one that does (unique; the server still gets its own name), or skipped with a warning. A server's
stderr goes to a log beside the sessions (mode 0600, capped at 1 MiB, the newest 50 logs kept),
never to the model.

What it cannot do. The harness cannot know what a server's tool really does: "read-only" is the
configuration's word, not a fact, and a server runs with the user's rights, outside the shell
sandbox. A server is code from somewhere: the workspace's `.tinyharness/mcp.json` is trusted
only after the user says so, and each start of one of its servers first compares the workspace
files the server's entry names with what the user trusted (trust.py): one changed since is asked
about again at a terminal, and without one the server does not start. Only the tools capability
is spoken here (no resources, prompts, sampling), and over HTTP no OAuth (a token can go in
`headers`).

Where it lives. This module holds the slots (`Slots`: every configured server seen by the loop as
one set of tools, and the model-facing names); one server spoken to over stdio is mcp/client.py,
over HTTP mcp/http.py, the checks on what a server sends mcp/results.py, the configuration below
mcp/config.py. Their names are importable from here.

Configuration (`.tinyharness/mcp.json` in the workspace, `~/.config/tinyharness/mcp.json`, or
`--mcp NAME=COMMAND`, and the files of other tools mcp/scopes.py finds: `.mcp.json`,
`.vscode/mcp.json`, `~/.claude.json`, Codex's `config.toml`); the shapes Claude Code, Cursor and VS
Code use are read as they are:

    {"servers": {"notes": {"command": ["python3", "notes_server.py"], "env": {"KEY": "${MY_KEY}"},
                           "read_only": ["search", "get"], "timeout": 120},
                 "fs":    {"type": "stdio", "command": "npx",
                           "args": ["-y", "some-server", "${HOME}/notes"]},
                 "docs":  {"type": "http", "url": "https://example.com/mcp",
                           "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
                 "old":   {"command": "old-server", "disabled": true}}}

`mcpServers` may stand for `servers`. `command` is a list, or a program name with its `args` list (a
string without `args` is split as a shell would). `${VAR}` (or `${VAR:-default}`, `${env:VAR}`) in
`command`, `args`, `env`, `cwd`, `url` and `headers` is replaced from the environment; an unset
variable without a default is an error. `read_only` is a list of tool names or `true`; `timeout` is
seconds per call (default 60). Anything malformed stops the run before it starts (exit 2).
"""
import re
import time

# Importable from here as before: the loop, the command line and the tests reach MCP through this
# module.
from ..console import warn
from .client import MIN_CALL_TIME, START_TIMEOUT, MCPError, Server
from .http import HttpServer
from .sse import SseServer

MAX_DESCRIPTION = 2000
PREFIX = "mcp__"
MODEL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def tool_name(server, tool):
    return f"{PREFIX}{server}__{tool}"


def split_name(name):
    """('server', 'tool') for 'mcp__server__tool', else None."""
    if not isinstance(name, str) or not name.startswith(PREFIX) or "__" not in name[len(PREFIX):]:
        return None
    server, tool = name[len(PREFIX):].split("__", 1)
    return server, tool


def model_names(server, tools, report):
    """{model-facing name: the server's tool name}. A name a model server would refuse is mapped to
    one it accepts, unique among this server's; one that cannot be mapped is skipped with a warning.
    Names that need no change go first, so they keep their own."""
    prefix = tool_name(server, "")
    room, names = 64 - len(prefix), {}
    for original in sorted(tools, key=lambda t: not MODEL_NAME.fullmatch(prefix + t)):
        base = re.sub(r"[^A-Za-z0-9_-]", "_", original)[:room]
        if room < 1 or not base:
            report(f"[mcp] {server}: the tool {original[:80]!r} has a name no model server "
                   "accepts; it is skipped")
            continue
        name, number = prefix + base, 2
        while name in names:
            suffix = f"_{number}"
            name, number = prefix + base[:room - len(suffix)] + suffix, number + 1
        if name != prefix + original:
            report(f"[mcp] {server}: the tool {original[:80]!r} is offered to the model as {name}")
        names[name] = original
    return names


class Slots:
    """All configured servers, seen by the loop as one more set of tools."""

    def __init__(self, servers=(), report=None):
        self.servers = {s.name: s for s in servers}
        self.report = report or warn
        self.withdrawn = set()
        self.names = {}  # model-facing name -> (server name, the server's tool name)

    @classmethod
    def start(cls, configs, report=None, log_dir=None, trusted=None, time_left=None):
        """Start each configured server (a disabled one is skipped); one that fails is reported once
        and left out. `trusted`: {name: trust.Trusted} of the servers from a workspace file, each
        checked against what the user trusted before it starts (mcp/client.py). `time_left`: the
        run's seconds, which bound all the starts together as they bound a call."""
        slots = cls(report=report)
        until = None if time_left is None else time.monotonic() + time_left
        for name, config in configs.items():
            if config.get("disabled"):
                continue
            server = make_server(name, config, log_dir, slots.report)
            server.trusted = (trusted or {}).get(name)
            timeout = config.get("start_timeout", START_TIMEOUT)
            if until is not None:
                timeout = min(timeout, max(until - time.monotonic(), MIN_CALL_TIME))
            try:
                slots.servers[name] = server.start(timeout)
            except MCPError as e:
                server.close()
                slots.report(f"[mcp] {e}. Its tools are not offered; the run goes on.")
                continue
            slots.rename([server])
            offered = sum(1 for owner, _ in slots.names.values() if owner == name)
            slots.report(f"[mcp] {name}: {offered} tool(s), protocol {server.version}")
        return slots

    def live(self):
        return [s for s in self.servers.values() if s.name not in self.withdrawn and not s.dead]

    def rename(self, servers=None):
        """Rebuild the model-facing names of these servers' tools (all when None)."""
        for server in servers or list(self.servers.values()):
            self.names = {k: v for k, v in self.names.items() if v[0] != server.name}
            if server.name not in self.withdrawn and not server.dead:
                for name, tool in model_names(server.name, server.tools, self.report).items():
                    self.names[name] = (server.name, tool)

    def schemas(self):
        """OpenAI-style tool schemas for every tool of every live server (re-listed when one said
        so)."""
        for server in self.live():
            if server.list_changed.is_set():
                try:
                    server.refresh_tools()
                except MCPError as e:
                    self.withdraw(server, str(e))
                self.rename([server])
        found = []
        for name, (server_name, tool) in self.names.items():
            server = self.servers[server_name]
            if server_name in self.withdrawn or tool not in server.tools:
                continue
            spec = server.tools[tool]
            schema = spec.get("inputSchema") if isinstance(spec.get("inputSchema"), dict) else {}
            description = spec.get("description")
            description = description if isinstance(description, str) and description.strip() else \
                f"{tool} from the MCP server {server_name}"
            found.append({"type": "function", "function": {
                "name": name, "description": description[:MAX_DESCRIPTION],
                "parameters": {"type": "object", "properties": {}, **schema}}})
        return found

    def owns(self, name):
        return name in self.names or bool((parts := split_name(name)) and parts[0] in self.servers)

    def resolve(self, name):
        """(server name, the server's tool name) for a model-facing name."""
        return self.names.get(name) or split_name(name) or (None, None)

    def read_only(self, name):
        server, tool = self.resolve(name)
        return server in self.servers and self.servers[server].is_read_only(tool)

    def check(self, name, arguments):
        """An ERROR text when the call cannot go to a server, else None."""
        server, tool = self.resolve(name)
        live = self.servers.get(server)
        if live is None or server in self.withdrawn or live.dead:
            return f"ERROR: the MCP server {server!r} is not available, so {name} cannot run."
        if name not in self.names or tool not in live.tools:
            offered = [n for n, (s, _) in self.names.items() if s == server]
            return (f"ERROR: the MCP server {server!r} has no tool {tool!r}. Its tools are: "
                    f"{', '.join(offered)}.")
        required = live.tools[tool].get("inputSchema", {}).get("required", [])
        missing = [key for key in required if key not in arguments]
        if missing:
            return f"ERROR: {name} needs the arguments {', '.join(missing)}."
        return None

    def call(self, name, arguments, timeout=None, time_left=None, images=None):
        """The result text the model reads. isError becomes an ERROR it can act on; a dead server is
        reported once to the user and its tools withdrawn. The call ends by the server's timeout and
        by `time_left` (seconds of the run), whichever comes first."""
        problem = self.check(name, arguments)
        if problem:
            return problem
        server_name, tool = self.resolve(name)
        server = self.servers[server_name]
        timeout = server.timeout if timeout is None else timeout
        if time_left is not None:
            timeout = min(timeout, max(time_left, MIN_CALL_TIME))
        try:
            text, is_error = server.call(tool, arguments, timeout, images)
        except MCPError as e:
            if server.dead:
                self.withdraw(server, str(e))
            return f"ERROR: {e}"
        return (f"ERROR: the tool reported an error: {text}" if is_error
                else (text or "OK: the tool returned no text"))

    def withdraw(self, server, why):
        if server.name not in self.withdrawn:
            self.withdrawn.add(server.name)
            self.report(f"[mcp] {why}. Its tools are withdrawn; the run goes on.")
            server.close()

    def close(self):
        for server in self.servers.values():
            server.close()


def make_server(name, config, log_dir=None, report=None):
    if config.get("type") == "http":
        return HttpServer(name, config, log_dir, report)
    if config.get("type") == "sse":
        return SseServer(name, config, log_dir, report)
    return Server(name, config, log_dir, report)
