"""MCP tool slots: other programs' tools, offered to the model through the same choke point as ours.

The problem. Every tool so far is a Python function in tools.py. Users want the model to reach their
issue tracker, their database, their browser - tools somebody else wrote, in any language. Writing
an adapter for each does not scale.

The mechanism. The Model Context Protocol (MCP) fixes one wire between a harness and a tool server:
JSON-RPC 2.0 messages. Over stdio they are one JSON object per line: the harness starts the server as
a child process. Over Streamable HTTP (mcp_http.py) each message is POSTed to the server's URL. Either
way the harness sends `initialize` (the protocol version it speaks, its name), reads the answer (the
version the server will speak, what it offers), confirms with the notification
`notifications/initialized`, then asks `tools/list` (page by page, following `nextCursor`) and calls
`tools/call {name, arguments}`. A result is a list of content parts; `isError: true` means the tool
ran and failed, which is ordinary feedback for the model, not a crash. A picture in a result reaches
the model as a picture (after the turn's results, as view_image's do); progress notifications are
shown on stderr. Each tool is offered to the model as `mcp__<server>__<tool>` with the server's own
JSON Schema, and every call goes through the same hooks, permission prompt, guards, output cap and
context policy as a built-in tool: a call asks the user first unless the configuration marks that
tool read-only.

A server is untrusted input. Paging stops after MAX_PAGES pages; every reply is type-checked (a tool
whose schema is malformed is skipped with an `[mcp]` warning; a result that cannot be read becomes an
ERROR text for the model); a line the reader cannot route is logged and skipped; each call ends by
the server's `timeout` and by what is left of the run's --max-seconds; the server runs in a process
group of its own, ended whole at close (Ctrl-C in chat stops the turn's commands, never a server).
Model servers accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`: other names are mapped to one that
does (unique; the server still gets its own name), or skipped with a warning. A server's stderr goes
to a log beside the sessions (mode 0600, capped at 1 MiB, the newest 50 logs kept), never to the model.

What it cannot do. The harness cannot know what a server's tool really does: "read-only" is the
configuration's word, not a fact, and a server runs with the user's rights, outside the shell
sandbox. A server is code from somewhere: the workspace's `.tinyharness/mcp.json` is trusted only
after the user says so. Only the tools capability is spoken here (no resources, prompts, sampling),
and over HTTP no OAuth (a token can go in `headers`).

Configuration (`.tinyharness/mcp.json` in the workspace, `~/.config/tinyharness/mcp.json`, or
`--mcp NAME=COMMAND`); the shapes Claude Code, Cursor and VS Code use are read as they are:

    {"servers": {"notes": {"command": ["python3", "notes_server.py"], "env": {"KEY": "${MY_KEY}"},
                           "read_only": ["search", "get"], "timeout": 120},
                 "fs":    {"type": "stdio", "command": "npx", "args": ["-y", "some-server", "${HOME}/notes"]},
                 "docs":  {"type": "http", "url": "https://example.com/mcp",
                           "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
                 "old":   {"command": "old-server", "disabled": true}}}

`mcpServers` may stand for `servers`. `command` is a list, or a program name with its `args` list (a
string without `args` is split as a shell would). `${VAR}` (or `${VAR:-default}`, `${env:VAR}`) in
`command`, `args`, `env`, `cwd`, `url` and `headers` is replaced from the environment; an unset
variable without a default is an error. `read_only` is a list of tool names or `true`; `timeout` is
seconds per call (default 60). Anything malformed stops the run before it starts (exit 2).
"""
import base64
import binascii
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PROTOCOL_VERSION = "2025-11-25"
# Versions whose tools part we speak: the tools methods and result shapes did not change between them.
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
START_TIMEOUT = 20   # seconds for a server to answer initialize and every page of tools/list
CALL_TIMEOUT = 60    # seconds for one tools/call, unless the server's config says `timeout`
MIN_CALL_TIME = 0.5  # seconds a call still gets when the run's time is nearly out
MAX_RESULT_CHARS = 6000  # what one result may put into the model's context (head and tail kept)
MAX_PAGES = 50       # tools/list pages read; a server that always sends a new cursor stops here
MAX_LINE = 16 << 20  # bytes of one JSON-RPC line; a longer one is dropped
MAX_LOG_BYTES = 1 << 20  # of one server's stderr log
MAX_LOGS_KEPT = 50
MAX_SCHEMA_CHARS = 20000
MAX_DESCRIPTION = 2000
PROGRESS_EVERY = 1.0  # seconds between two progress lines of one call
PREFIX = "mcp__"
MODEL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
SERVER_NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")  # no "__": it separates server and tool
MAX_SERVER_NAME = 40
TRANSPORT = object()  # marks an error reply the transport made up (a POST that failed): no server sent it
RUNNING = set()  # process ids of live stdio servers: chat's Ctrl-C must not kill them


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


def running_pids():
    return set(RUNNING)


class Log:
    """A server's stderr and our notes about it: one file, mode 0600, at most MAX_LOG_BYTES."""

    def __init__(self, folder, name):
        self.path, self.size, self.full, self.lock = None, 0, False, threading.Lock()
        try:
            folder = Path(folder)
            folder.mkdir(parents=True, exist_ok=True)
            prune(folder)
            self.path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{os.getpid()}.log"
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError:
            self.path, self.fd = None, None  # no log: the server runs anyway, its stderr is dropped

    def write(self, data):
        with self.lock:
            if self.fd is None or self.full:
                return
            if self.size + len(data) > MAX_LOG_BYTES:
                data = data[:MAX_LOG_BYTES - self.size] + b"\n[tinyharness] the log reached its cap; the rest is dropped\n"
                self.full = True
            try:
                os.write(self.fd, data)
                self.size += len(data)
            except OSError:
                self.full = True

    def note(self, text):
        self.write(f"[tinyharness] {text}\n".encode("utf-8", "replace"))

    def drain(self, pipe):
        """Copy a pipe into the log until it closes (on a thread of its own)."""
        try:
            while chunk := pipe.read1(65536):
                self.write(chunk)
        except (OSError, ValueError):
            pass

    def close(self):
        with self.lock:
            if self.fd is not None:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = None


def prune(folder, keep=MAX_LOGS_KEPT):
    logs = sorted((p for p in folder.glob("*.log") if p.is_file()), key=lambda p: p.name, reverse=True)
    for old in logs[keep - 1:]:
        try:
            old.unlink()
        except OSError:
            pass


def log_folder():
    """Beside the sessions: $XDG_DATA_HOME/tinyharness/mcp-logs."""
    from .sessions import sessions_dir
    return sessions_dir().parent / "mcp-logs"


class Server:
    """One MCP server over stdio: a child process, a reader thread, and requests matched to replies by id.
    mcp_http.HttpServer speaks the same protocol over HTTP; only the transport methods differ."""
    transport = "stdio"

    def __init__(self, name, config, log_dir=None, report=None):
        self.name, self.config = name, config
        self.read_only = config.get("read_only", ())  # True, or a collection of tool names
        self.timeout = config.get("timeout", CALL_TIMEOUT)
        self.report = report or (lambda text: print(text, file=sys.stderr, flush=True))
        self.log = Log(log_dir or log_folder(), name)
        self.log_path = self.log.path
        self.process = None
        self.tools = {}            # tool name -> its description from tools/list (checked)
        self.version = None
        self.dead = None           # why the server is gone, once it is
        self.list_changed = threading.Event()
        self._next_id = 0
        self._waiting = {}         # request id -> queue for its reply
        self._progress = {}        # progress token -> [tool, time of the last line shown]
        self._lock = threading.Lock()

    # --- the transport: a child process ------------------------------------------------------------
    def open(self, timeout):
        config = self.config
        try:
            self.process = subprocess.Popen(config["command"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, env={**os.environ, **config.get("env", {})},
                                            cwd=config.get("cwd"), start_new_session=True)
        except OSError as e:
            raise MCPError(f"cannot start MCP server {self.name!r} ({shlex.join(config['command'])}): {e}") from e
        RUNNING.add(self.process.pid)
        threading.Thread(target=self.log.drain, args=(self.process.stderr,), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout):
        """Route each line of the server's stdout. Nothing a server writes ends this thread: a line that
        is not JSON-RPC, or that cannot be routed, is logged and skipped."""
        try:
            while raw := stdout.readline(MAX_LINE):
                if not raw.endswith(b"\n") and len(raw) >= MAX_LINE:
                    self.log.note(f"a line longer than {MAX_LINE} bytes, dropped")
                    while (rest := stdout.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                        pass
                    continue
                try:
                    self.receive(json.loads(raw))
                except (ValueError, RecursionError):
                    self.log.note(f"not JSON-RPC, ignored: {raw[:200]!r}")
                except Exception as e:  # noqa: BLE001 - a hostile line must not end the reader
                    self.log.note(f"a message that could not be routed ({type(e).__name__}: {e}): {raw[:200]!r}")
        except (OSError, ValueError):
            pass
        self.gone("the server closed its output (it exited or crashed)")

    def gone(self, why):
        self.dead = self.dead or why
        with self._lock:
            for waiting in self._waiting.values():
                waiting.put(None)
            self._waiting.clear()

    def receive(self, message):
        """One message from the server: a reply goes to whoever waits for it; a notification or a
        request to us is handled here."""
        if not isinstance(message, dict):
            self.log.note(f"not a JSON-RPC object, ignored: {str(message)[:200]}")
            return
        method, rid = message.get("method"), message.get("id")
        if method == "notifications/tools/list_changed":
            self.list_changed.set()
        elif method == "notifications/progress":
            self.progress(message.get("params"))
        elif method is None and ("result" in message or "error" in message):
            if not isinstance(rid, (int, str)) or isinstance(rid, bool):
                self.log.note(f"a reply with an id that is not a number or a string, ignored: {str(rid)[:100]}")
                return
            with self._lock:
                waiting = self._waiting.pop(rid, None)
            if waiting:
                waiting.put(message)
        elif isinstance(method, str) and isinstance(rid, (int, str)) and not isinstance(rid, bool):
            self.answer(rid, method)  # a request to us (ping, ...)

    def answer(self, rid, method):
        self.send({"jsonrpc": "2.0", "id": rid,
                   **({"result": {}} if method == "ping" else
                      {"error": {"code": -32601, "message": "method not supported by this client"}})})

    def progress(self, params):
        """notifications/progress: one line on stderr per call and second, at most."""
        if not isinstance(params, dict):
            return
        token = params.get("progressToken")
        with self._lock:
            entry = self._progress.get(token) if isinstance(token, (int, str)) else None
            if not entry or time.monotonic() - entry[1] < PROGRESS_EVERY:
                return
            entry[1] = time.monotonic()
        done, total, note = params.get("progress"), params.get("total"), params.get("message")
        amount = f"{done:g}" if isinstance(done, (int, float)) and not isinstance(done, bool) else "?"
        if isinstance(total, (int, float)) and not isinstance(total, bool):
            amount += f"/{total:g}"
        text = f": {note[:200]}" if isinstance(note, str) and note else ""
        self.report(f"[mcp] {self.name}: {entry[0]} in progress ({amount}){text}")

    def send(self, message):
        if self.process is None:
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead or 'closed'}")
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except (OSError, ValueError) as e:  # a closed pipe: the server is gone
            self.dead = self.dead or f"the server stopped reading its input ({e})"
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead}") from e

    def request(self, method, params=None, timeout=CALL_TIMEOUT, progress_of=None):
        """Send one request; return its `result`. Errors, timeouts and deaths raise MCPError.
        `progress_of`: a tool's name, to ask for (and show) progress notifications of this call."""
        if self.dead:
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead}")
        with self._lock:
            self._next_id += 1
            number, reply = self._next_id, queue.Queue(1)
            self._waiting[number] = reply
            if progress_of:
                self._progress[number] = [progress_of, time.monotonic()]
                params = {**(params or {}), "_meta": {"progressToken": number}}
        try:
            message = self.exchange(number, method, params, reply, timeout)
        finally:
            with self._lock:
                self._waiting.pop(number, None)
                self._progress.pop(number, None)
        return reply_result(self.name, method, message, self.dead)

    def exchange(self, number, method, params, reply, timeout):
        """Send a request and wait for its reply (None: the server died)."""
        self.send({"jsonrpc": "2.0", "id": number, "method": method, **({"params": params} if params else {})})
        try:
            return reply.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            self.cancel(number)
            raise MCPError(f"MCP server {self.name!r} did not answer {method} within {timeout:g} s") from None

    def cancel(self, number):
        try:
            self.notify("notifications/cancelled", {"requestId": number, "reason": "timed out"})
        except MCPError:
            pass

    def notify(self, method, params=None):
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def close(self):
        """Close stdin, wait a moment, then end the whole process group: a server gets a chance to clean
        up, never a veto, and a child it forked (holding its output) ends with it."""
        process, self.process = self.process, None
        if process:
            for stop in (process.stdin.close, lambda: kill_group(process.pid, signal.SIGTERM)):
                try:
                    stop()
                    process.wait(timeout=1)
                    break
                except (subprocess.TimeoutExpired, OSError):
                    continue
            kill_group(process.pid, signal.SIGKILL)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            RUNNING.discard(process.pid)
        self.gone("closed")
        self.log.close()

    # --- the protocol ------------------------------------------------------------------------------
    def start(self, timeout=START_TIMEOUT):
        """Open the transport, shake hands, list the tools. Raises MCPError with a readable reason."""
        deadline = time.monotonic() + timeout
        self.open(timeout)
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "tinyharness", "version": "0.1.0"},
        }, timeout=timeout)
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if version not in SUPPORTED_VERSIONS:
            shown = json.dumps(version)[:60] if not isinstance(version, str) else repr(version[:60])
            raise MCPError(f"MCP server {self.name!r} speaks protocol version {shown}; tinyharness asked for "
                           f"{PROTOCOL_VERSION} and supports {', '.join(SUPPORTED_VERSIONS)}")
        self.version = version
        self.notify("notifications/initialized")
        self.refresh_tools(max(deadline - time.monotonic(), MIN_CALL_TIME))
        return self

    def refresh_tools(self, timeout=START_TIMEOUT):
        """tools/list, page by page, until the server gives no nextCursor - or MAX_PAGES pages, or
        `timeout` seconds for all of them."""
        deadline = time.monotonic() + timeout
        tools, cursor, seen = {}, None, set()
        for page in range(MAX_PAGES + 1):
            if page == MAX_PAGES:
                self.report(f"[mcp] {self.name}: tools/list still had more after {MAX_PAGES} pages; "
                            f"the {len(tools)} tool(s) listed so far are offered")
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise MCPError(f"MCP server {self.name!r} did not finish listing its tools within {timeout:g} s")
            result = self.request("tools/list", {"cursor": cursor} if cursor else None, timeout=left)
            result = result if isinstance(result, dict) else {}
            listed = result.get("tools")
            for tool in listed if isinstance(listed, list) else []:
                problem = tool_problem(tool, tools)
                if problem:
                    self.report(f"[mcp] {self.name}: {problem}; that tool is skipped")
                else:
                    tools[tool["name"]] = tool
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen:  # a repeated cursor would loop
                break
            seen.add(cursor)
        self.list_changed.clear()
        self.tools = tools

    def call(self, tool, arguments, timeout=None, images=None):
        """(text for the model, is_error). `images`: where the pictures of the result go."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments},
                              timeout=self.timeout if timeout is None else timeout, progress_of=tool)
        if not isinstance(result, dict):
            return "the server's reply to tools/call is not an object, so the tool's result cannot be read", True
        content = result.get("content", [])
        if not isinstance(content, list):
            return ("the server's reply to tools/call has a \"content\" that is not a list, so the tool's "
                    "result cannot be read"), True
        return result_text(result, content, tool, images), result.get("isError") is True

    def is_read_only(self, tool):
        return self.read_only is True or tool in (self.read_only or ())


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def reply_result(name, method, message, dead):
    """The `result` of a reply, or MCPError for an error reply, a dead server or a reply of no shape."""
    if message is None:
        raise MCPError(f"MCP server {name!r} is gone: {dead}")
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {"message": message["error"]}
        text = error.get("message", error)
        if message.get("transport") is TRANSPORT:
            raise MCPError(f"MCP server {name!r} {text}")  # ours (mcp_http.py): the message never arrived
        raise MCPError(f"MCP server {name!r} answered {method} with an error: "
                       f"{str(text)[:500]} (code {str(error.get('code'))[:20]})")
    return message.get("result")


def tool_problem(tool, listed):
    """Why a tools/list entry cannot be offered, or None."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return "a tools/list entry without a string \"name\""
    name = tool["name"][:80]
    if tool["name"] in listed:
        return f"the tool {name!r} is listed twice"
    schema = tool.get("inputSchema", {"type": "object"})
    if not isinstance(schema, dict):
        return f"the tool {name!r} has an inputSchema that is not an object"
    if schema.get("type", "object") != "object":
        return f"the tool {name!r} takes {json.dumps(schema.get('type'))[:40]}, not an object of arguments"
    if not isinstance(schema.get("properties", {}), dict):
        return f"the tool {name!r} has \"properties\" that are not an object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(key, str) for key in required):
        return f"the tool {name!r} has \"required\" that is not a list of names"
    try:
        size = len(json.dumps(schema, allow_nan=False))
    except (ValueError, TypeError, RecursionError):
        return f"the tool {name!r} has a schema that cannot be sent as JSON"
    if size > MAX_SCHEMA_CHARS:
        return f"the tool {name!r} has a schema of {size} characters (the limit is {MAX_SCHEMA_CHARS})"
    return None


def result_text(result, content, tool="tool", images=None):
    """The parts of a tools/call result as text for the model; a picture goes into `images` (sent after
    the turn's results), or a note says why it did not."""
    pieces, pictures = [], 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif kind == "image":
            pictures += 1
            pieces.append(picture(part, f"{tool} picture {pictures}", images))
        elif kind == "resource" and isinstance(part.get("resource"), dict) \
                and isinstance(part["resource"].get("text"), str):
            pieces.append(part["resource"]["text"])
        elif kind == "resource_link" and isinstance(part.get("uri"), str):
            pieces.append(f"[a link to a resource: {part['uri'][:500]}]")
        else:
            shown = kind if isinstance(kind, str) else "unreadable"
            pieces.append(f"[a {shown[:40]} part was left out: only text and pictures reach the model]")
    if not pieces and result.get("structuredContent") is not None:
        try:
            pieces.append(json.dumps(result["structuredContent"], ensure_ascii=False))
        except (ValueError, TypeError, RecursionError):
            pieces.append("[structured content that cannot be shown]")
    return cap("\n".join(pieces))


def picture(part, name, images):
    """The text for one image part; the picture itself goes into `images` when it can be sent."""
    from .imageload import MAX_IMAGE_BYTES, SENDABLE, sniff
    from .vision import image_part
    if images is None:
        return "[a picture was left out: this caller takes text only]"
    try:
        data = base64.b64decode(part.get("data") if isinstance(part.get("data"), str) else "", validate=True)
    except (binascii.Error, ValueError):
        data = b""
    mime = sniff(data)
    if not data or mime not in SENDABLE:
        return "[a picture was left out: it is not a PNG, JPEG or WebP image in base64]"
    if len(data) > MAX_IMAGE_BYTES:
        return f"[a picture was left out: {len(data)} bytes, the limit is {MAX_IMAGE_BYTES}]"
    images.append((name, image_part(mime, data)))
    return f"[{name}: {mime}, {len(data)} bytes; it is attached after this turn's tool results]"


def cap(text, limit=MAX_RESULT_CHARS):
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def model_names(server, tools, report):
    """{model-facing name: the server's tool name}. A name a model server would refuse is mapped to
    one it accepts, unique among this server's; one that cannot be mapped is skipped with a warning.
    Names that need no change go first, so they keep their own."""
    prefix = tool_name(server, "")
    room, names = 64 - len(prefix), {}
    for original in sorted(tools, key=lambda t: not MODEL_NAME.fullmatch(prefix + t)):
        base = re.sub(r"[^A-Za-z0-9_-]", "_", original)[:room]
        if room < 1 or not base:
            report(f"[mcp] {server}: the tool {original[:80]!r} has a name no model server accepts; it is skipped")
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
        self.report = report or (lambda text: print(text, file=sys.stderr, flush=True))
        self.withdrawn = set()
        self.names = {}  # model-facing name -> (server name, the server's tool name)

    @classmethod
    def start(cls, configs, report=None, log_dir=None):
        """Start each configured server (a disabled one is skipped); one that fails is reported once and
        left out."""
        slots = cls(report=report)
        for name, config in configs.items():
            if config.get("disabled"):
                continue
            server = make_server(name, config, log_dir, slots.report)
            try:
                slots.servers[name] = server.start(config.get("start_timeout", START_TIMEOUT))
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
        """OpenAI-style tool schemas for every tool of every live server (re-listed when one said so)."""
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
            return f"ERROR: the MCP server {server!r} has no tool {tool!r}. Its tools are: {', '.join(offered)}."
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
        return f"ERROR: the tool reported an error: {text}" if is_error else (text or "OK: the tool returned no text")

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
        from .mcp_http import HttpServer  # here: only a configured HTTP server needs it
        return HttpServer(name, config, log_dir, report)
    return Server(name, config, log_dir, report)


# --- configuration -----------------------------------------------------------------------------------

def check_server_name(name, where):
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name) or len(name) > MAX_SERVER_NAME:
        raise ValueError(f"{where}: the server name {str(name)[:60]!r} must be letters, digits, '-' or single '_' "
                         f"(at most {MAX_SERVER_NAME}; '__' separates server and tool in mcp__SERVER__TOOL)")


def parse_flag(text):
    """`--mcp NAME=COMMAND` -> (name, config); COMMAND is split as a shell would split it."""
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise ValueError(f"--mcp wants NAME=COMMAND, e.g. --mcp notes='python3 notes_server.py', not {text!r}")
    check_server_name(name, "--mcp")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise ValueError(f"--mcp {name}: cannot split the command ({e})") from e
    return name, {"type": "stdio", "command": argv, "env": {}, "read_only": (), "timeout": CALL_TIMEOUT}


def config_files(workspace):
    """The user's own file first, then the workspace's (which may override a server of the same name)."""
    config = Path(os.environ.get("XDG_CONFIG_HOME", ""))
    config = config if config.is_absolute() else Path.home() / ".config"   # the XDG rule: a relative path is ignored
    home = config / "tinyharness" / "mcp.json"
    return [home, Path(workspace) / ".tinyharness" / "mcp.json"]


def load_config(path):
    """{name: config} from one mcp.json; raises ValueError with the file's name on anything malformed."""
    path = Path(path)
    try:
        if not path.is_file():
            raise OSError("not a regular file")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({e})") from e
    if not isinstance(data, dict) or not any(isinstance(data.get(key), dict) for key in ("servers", "mcpServers")):
        raise ValueError(f'{path}: expected {{"servers": {{"NAME": {{"command": ...}}}}}} '
                         '(or "mcpServers", as Claude Code and Cursor write it)')
    configs = {}
    for key in ("mcpServers", "servers"):
        block = data.get(key)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ValueError(f'{path}: "{key}" must be an object of servers')
        for name, config in block.items():
            configs[name] = parse_server(name, config, f"{path}: server {name!r}")
    return configs


def parse_server(name, config, where):
    """One server's config, checked and with ${VAR} replaced: {"type", "command"|"url", ...}."""
    check_server_name(name, where.rsplit(":", 1)[0])
    if not isinstance(config, dict):
        raise ValueError(f"{where} must be an object, e.g. {{\"command\": \"python3\", \"args\": [\"server.py\"]}}")
    kind = config.get("type", "http" if "url" in config and "command" not in config else "stdio")
    if kind in ("streamable-http", "streamableHttp"):
        kind = "http"
    if kind not in ("stdio", "http"):
        raise ValueError(f"{where}: \"type\" must be \"stdio\" or \"http\", not {json.dumps(kind)[:40]}"
                         f"{' (the old SSE transport is not supported; servers that have it usually speak http too)' if kind == 'sse' else ''}")
    disabled = config.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ValueError(f"{where}: \"disabled\" must be true or false")
    read_only = config.get("read_only", [])
    if not (read_only is True or read_only is False or
            (isinstance(read_only, (list, tuple)) and all(isinstance(t, str) for t in read_only))):
        raise ValueError(f"{where}: \"read_only\" must be true or a list of tool names")
    timeout = config.get("timeout", CALL_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 86400:
        raise ValueError(f"{where}: \"timeout\" must be a number of seconds above 0")
    checked = {"type": kind, "disabled": disabled, "read_only": read_only or (), "timeout": float(timeout)}
    if kind == "http":
        return {**checked, **http_part(config, where)}
    return {**checked, **stdio_part(config, where)}


def stdio_part(config, where):
    command, args = config.get("command"), config.get("args")
    if args is not None and not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise ValueError(f"{where}: \"args\" must be a list of strings")
    if isinstance(command, str) and command.strip():
        if args is None:
            try:
                command = shlex.split(command)
            except ValueError as e:
                raise ValueError(f"{where}: cannot split \"command\" ({e})") from e
        else:
            command = [command]
    if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command) and command[0]):
        raise ValueError(f"{where} needs \"command\": a program (with \"args\": [...]) or a list of strings")
    argv = [expand(part, where) for part in command + list(args or [])]
    env = config.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        bad = next((k for k, v in env.items() if not isinstance(v, str)), None) if isinstance(env, dict) else None
        raise ValueError(f"{where}: \"env\" must map names to strings"
                         f"{f' ({bad!r} is {json.dumps(env[bad])[:40]})' if bad is not None else ''}")
    if not all(k and "=" not in k and "\0" not in k for k in env):
        raise ValueError(f"{where}: an \"env\" name is empty or holds '=' or NUL")
    cwd = config.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"{where}: \"cwd\" must be a string")
    part = {"command": argv, "env": {k: expand(v, where) for k, v in env.items()}}
    if any("\0" in a for a in argv + list(part["env"].values())):
        raise ValueError(f"{where}: the command or env holds a NUL character")
    return {**part, **({"cwd": expand(cwd, where)} if cwd else {})}


def http_part(config, where):
    url = config.get("url")
    if not isinstance(url, str) or not re.match(r"https?://[^/\s]", expand(url, where)):
        raise ValueError(f"{where}: \"type\": \"http\" needs \"url\": an http:// or https:// address")
    headers = config.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ValueError(f"{where}: \"headers\" must map names to strings")
    headers = {k: expand(v, where) for k, v in headers.items()}
    if any(not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", k) or re.search(r"[\r\n\0]", v) for k, v in headers.items()):
        raise ValueError(f"{where}: a header name is not a token, or a value holds a line break")
    return {"url": expand(url, where), "headers": headers}


VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(text, where):
    """${VAR}, ${VAR:-default} and VS Code's ${env:VAR}, from the environment."""
    def value(match):
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ValueError(f"{where}: ${{{name}}} is used but the variable is not set")
    return VARIABLE.sub(value, text)
