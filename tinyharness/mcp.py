"""MCP tool slots: other programs' tools, offered to the model through the same choke point as ours.

The problem. Every tool so far is a Python function in tools.py. Users want the model to reach their
issue tracker, their database, their browser - tools somebody else wrote, in any language. Writing
an adapter for each does not scale.

The mechanism. The Model Context Protocol (MCP) fixes one wire between a harness and a tool server.
Over stdio it is JSON-RPC 2.0, one JSON object per line: the harness starts the server as a child
process, sends `initialize` (the protocol version it speaks, its name), reads the server's answer
(the version the server will speak, what it offers), confirms with the notification
`notifications/initialized`, then asks `tools/list` (page by page, following `nextCursor`) and calls
`tools/call {name, arguments}`. A result is a list of content parts; `isError: true` means the tool
ran and failed, which is ordinary feedback for the model, not a crash. Each tool is offered to the
model as `mcp__<server>__<tool>` with the server's own JSON Schema, and every call goes through the
same hooks, permission prompt, guards, output cap and context policy as a built-in tool: a call asks
the user first unless the configuration marks that tool read-only.

What it cannot do. The harness cannot know what a server's tool really does: "read-only" is the
configuration's word, not a fact, and a server runs with the user's rights, outside the shell
sandbox. A server is code from somewhere: the workspace's `.tinyharness/mcp.json` is trusted only
after the user says so. Only the stdio transport and the tools capability are spoken here (no
resources, prompts, sampling or HTTP transport).

Configuration (`.tinyharness/mcp.json` in the workspace, `~/.config/tinyharness/mcp.json`, or
`--mcp NAME=COMMAND`):

    {"servers": {"notes": {"command": ["python3", "notes_server.py"], "env": {"KEY": "value"},
                           "read_only": ["search", "get"]}}}

`read_only` may be a list of tool names or `true` for all of the server's tools.
"""
import json
import os
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

PROTOCOL_VERSION = "2025-11-25"
# Versions whose tools part we speak: the tools methods and result shapes did not change between them.
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
START_TIMEOUT = 20   # seconds for a server to answer initialize and tools/list
CALL_TIMEOUT = 60    # seconds for one tools/call
MAX_RESULT_CHARS = 6000  # what one result may put into the model's context (head and tail kept)
PREFIX = "mcp__"


class MCPError(Exception):
    """A server that could not be started, broke the protocol, timed out or died."""


def tool_name(server, tool):
    return f"{PREFIX}{server}__{tool}"


def split_name(name):
    """('server', 'tool') for 'mcp__server__tool', else None."""
    if not isinstance(name, str) or not name.startswith(PREFIX) or "__" not in name[len(PREFIX):]:
        return None
    server, tool = name[len(PREFIX):].split("__", 1)
    return server, tool


class Server:
    """One MCP server over stdio: a child process, a reader thread, and requests matched to replies by id."""

    def __init__(self, name, command, env=None, read_only=(), log_dir=None):
        self.name, self.command, self.env = name, list(command), dict(env or {})
        self.read_only = read_only  # True, or a collection of tool names
        self.log_dir = log_dir
        self.process = None
        self.tools = {}            # tool name -> its description from tools/list
        self.version = None
        self.dead = None           # why the server is gone, once it is
        self.list_changed = threading.Event()
        self._next_id = 0
        self._waiting = {}         # request id -> queue for its reply
        self._lock = threading.Lock()
        self.log_path = None

    # --- the process -------------------------------------------------------------------------------
    def start(self, timeout=START_TIMEOUT):
        """Start the child, shake hands, list its tools. Raises MCPError with a readable reason."""
        log_dir = Path(self.log_dir or tempfile.gettempdir())
        self.log_path = log_dir / f"tinyharness-mcp-{self.name}-{os.getpid()}.log"
        log = open(self.log_path, "ab")  # the server's stderr: kept for the user, never shown to the model
        try:
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=log, env={**os.environ, **self.env}, start_new_session=True)
        except OSError as e:
            raise MCPError(f"cannot start MCP server {self.name!r} ({shlex.join(self.command)}): {e}") from e
        finally:
            log.close()
        threading.Thread(target=self._read, daemon=True).start()
        self._initialize(timeout)
        self.refresh_tools(timeout)
        return self

    def _read(self):
        """Route each line of the server's stdout: replies to whoever waits for them, notifications to
        flags. A line that is not JSON-RPC (a server printing junk to stdout) is logged and skipped."""
        for raw in self.process.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                self._log(f"not JSON-RPC, ignored: {raw[:200]!r}")
                continue
            if not isinstance(message, dict):
                self._log(f"not a JSON-RPC object, ignored: {raw[:200]!r}")
                continue
            if message.get("method") == "notifications/tools/list_changed":
                self.list_changed.set()
            elif "id" in message and ("result" in message or "error" in message):
                with self._lock:
                    waiting = self._waiting.pop(message["id"], None)
                if waiting:
                    waiting.put(message)
            elif "id" in message and "method" in message:  # a request to us (ping, ...): answer it
                self._send({"jsonrpc": "2.0", "id": message["id"],
                            **({"result": {}} if message["method"] == "ping" else
                               {"error": {"code": -32601, "message": "method not supported by this client"}})})
        self.dead = self.dead or "the server closed its output (it exited or crashed)"
        with self._lock:
            for waiting in self._waiting.values():
                waiting.put(None)
            self._waiting.clear()

    def _log(self, text):
        try:
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(f"[tinyharness] {text}\n")
        except OSError:
            pass

    def _send(self, message):
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except (OSError, ValueError) as e:  # a closed pipe: the server is gone
            self.dead = self.dead or f"the server stopped reading its input ({e})"
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead}") from e

    def request(self, method, params=None, timeout=CALL_TIMEOUT):
        """Send one request; return its `result`. Errors, timeouts and deaths raise MCPError."""
        if self.dead:
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead}")
        with self._lock:
            self._next_id += 1
            number, reply = self._next_id, queue.Queue(1)
            self._waiting[number] = reply
        self._send({"jsonrpc": "2.0", "id": number, "method": method, **({"params": params} if params else {})})
        try:
            message = reply.get(timeout=timeout)
        except queue.Empty:
            with self._lock:
                self._waiting.pop(number, None)
            self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": number, "reason": "timed out"}})
            raise MCPError(f"MCP server {self.name!r} did not answer {method} within {timeout:g} s") from None
        if message is None:
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead}")
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {"message": message["error"]}
            raise MCPError(f"MCP server {self.name!r} answered {method} with an error: "
                           f"{error.get('message', error)} (code {error.get('code')})")
        return message.get("result")

    def notify(self, method, params=None):
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    # --- the protocol ------------------------------------------------------------------------------
    def _initialize(self, timeout):
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "tinyharness", "version": "0.1.0"},
        }, timeout=timeout)
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if version not in SUPPORTED_VERSIONS:
            raise MCPError(f"MCP server {self.name!r} speaks protocol version {version!r}; tinyharness asked for "
                           f"{PROTOCOL_VERSION} and supports {', '.join(SUPPORTED_VERSIONS)}")
        self.version = version
        self.notify("notifications/initialized")

    def refresh_tools(self, timeout=START_TIMEOUT):
        """tools/list, page by page, until the server gives no nextCursor."""
        tools, cursor, seen = {}, None, set()
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else None, timeout=timeout)
            result = result if isinstance(result, dict) else {}
            for tool in result.get("tools") or []:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools[tool["name"]] = tool
            cursor = result.get("nextCursor")
            if not cursor or cursor in seen:  # a server repeating a cursor would loop forever
                break
            seen.add(cursor)
        self.list_changed.clear()
        self.tools = tools

    def call(self, tool, arguments, timeout=CALL_TIMEOUT):
        """(text for the model, is_error)."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, timeout=timeout)
        result = result if isinstance(result, dict) else {}
        return result_text(result), bool(result.get("isError"))

    def is_read_only(self, tool):
        return self.read_only is True or tool in (self.read_only or ())

    def close(self):
        """Close stdin, wait, terminate, wait, kill: a server gets a chance to clean up, never a veto."""
        process, self.process = self.process, None
        if not process:
            return
        for stop in (process.stdin.close, process.terminate, process.kill):
            try:
                stop()
                process.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                continue
            except OSError:
                continue
        self.dead = self.dead or "closed"


def result_text(result):
    """The text parts of a tools/call result, joined; a note for each part that is not text."""
    pieces = []
    for part in result.get("content") or []:
        if isinstance(part, dict) and part.get("type") == "text":
            pieces.append(str(part.get("text", "")))
        elif isinstance(part, dict):
            pieces.append(f"[a {part.get('type', 'unknown')} part was left out: only text reaches the model]")
    if not pieces and result.get("structuredContent") is not None:
        pieces.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return cap("\n".join(pieces))


def cap(text, limit=MAX_RESULT_CHARS):
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


class Slots:
    """All configured servers, seen by the loop as one more set of tools."""

    def __init__(self, servers=(), report=None):
        self.servers = {s.name: s for s in servers}
        self.report = report or (lambda text: print(text, file=sys.stderr, flush=True))
        self.withdrawn = set()

    @classmethod
    def start(cls, configs, report=None, log_dir=None):
        """Start each configured server; one that fails is reported once and left out."""
        slots = cls(report=report)
        for name, config in configs.items():
            server = Server(name, config["command"], config.get("env"), config.get("read_only", ()), log_dir)
            try:
                slots.servers[name] = server.start()
                slots.report(f"[mcp] {name}: {len(server.tools)} tool(s), protocol {server.version}")
            except MCPError as e:
                server.close()
                slots.report(f"[mcp] {e}. Its tools are not offered; the run goes on.")
        return slots

    def live(self):
        return [s for s in self.servers.values() if s.name not in self.withdrawn]

    def schemas(self):
        """OpenAI-style tool schemas for every tool of every live server (re-listed when one said so)."""
        found = []
        for server in self.live():
            if server.list_changed.is_set():
                try:
                    server.refresh_tools()
                except MCPError as e:
                    self.withdraw(server, str(e))
                    continue
            for tool in server.tools.values():
                schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {}
                found.append({"type": "function", "function": {
                    "name": tool_name(server.name, tool["name"]),
                    "description": str(tool.get("description") or f"{tool['name']} from the MCP server {server.name}"),
                    "parameters": {"type": "object", "properties": {}, **schema}}})
        return found

    def owns(self, name):
        parts = split_name(name)
        return bool(parts) and parts[0] in self.servers

    def read_only(self, name):
        server, tool = split_name(name) or (None, None)
        return server in self.servers and self.servers[server].is_read_only(tool)

    def check(self, name, arguments):
        """An ERROR text when the call cannot go to a server, else None."""
        server, tool = split_name(name)
        live = self.servers.get(server)
        if live is None or server in self.withdrawn:
            return f"ERROR: the MCP server {server!r} is not available, so {name} cannot run."
        if tool not in live.tools:
            return f"ERROR: the MCP server {server!r} has no tool {tool!r}. Its tools are: {', '.join(live.tools)}."
        required = (live.tools[tool].get("inputSchema") or {}).get("required") or []
        missing = [key for key in required if key not in arguments]
        if missing:
            return f"ERROR: {name} needs the arguments {', '.join(map(str, missing))}."
        return None

    def call(self, name, arguments, timeout=CALL_TIMEOUT):
        """The result text the model reads. isError becomes an ERROR it can act on; a dead server is
        reported once to the user and its tools withdrawn."""
        problem = self.check(name, arguments)
        if problem:
            return problem
        server_name, tool = split_name(name)
        server = self.servers[server_name]
        try:
            text, is_error = server.call(tool, arguments, timeout)
        except MCPError as e:
            if server.dead:
                self.withdraw(server, str(e))
            return f"ERROR: {e}"
        return f"ERROR: the tool reported an error: {text}" if is_error else (text or "OK: the tool returned no text")

    def withdraw(self, server, why):
        if server.name not in self.withdrawn:
            self.withdrawn.add(server.name)
            self.report(f"[mcp] {why}. Its tools are withdrawn; the run goes on.")
            server.close()

    def close(self):
        for server in self.servers.values():
            server.close()


def parse_flag(text):
    """`--mcp NAME=COMMAND` -> (name, config); COMMAND is split as a shell would split it."""
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise ValueError(f"--mcp wants NAME=COMMAND, e.g. --mcp notes='python3 notes_server.py', not {text!r}")
    if "__" in name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"--mcp: the server name {name!r} must be letters, digits, '-' or single '_'")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise ValueError(f"--mcp {name}: cannot split the command ({e})") from e
    return name, {"command": argv}


def config_files(workspace):
    """The user's own file first, then the workspace's (which may override a server of the same name)."""
    config = Path(os.environ.get("XDG_CONFIG_HOME", ""))
    config = config if config.is_absolute() else Path.home() / ".config"   # the XDG rule: a relative path is ignored
    home = config / "tinyharness" / "mcp.json"
    return [home, Path(workspace) / ".tinyharness" / "mcp.json"]


def load_config(path):
    """{name: config} from one mcp.json; raises ValueError with the file's name on anything malformed."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({e})") from e
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f'{path}: expected {{"servers": {{"name": {{"command": [...]}}}}}}')
    configs = {}
    for name, config in servers.items():
        command = config.get("command") if isinstance(config, dict) else None
        if isinstance(command, str):
            command = shlex.split(command)
        if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)):
            raise ValueError(f"{path}: server {name!r} needs \"command\": a list of strings")
        configs[name] = {"command": command, "env": config.get("env") or {},
                         "read_only": config.get("read_only", ())}
    return configs
