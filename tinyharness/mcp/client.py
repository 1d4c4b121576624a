"""One MCP server, spoken to: JSON-RPC 2.0 over a child's stdin and stdout, requests matched to
replies.

The problem. An MCP server is a program of somebody else's. The harness must start it, greet it,
learn its tools and call them, while the server may write anything, answer late or never, send
notifications and even requests of its own between our replies, or die mid-call.

The mechanism. `Server` starts the program in a process group of its own and reads its stdout on a
thread: one JSON object per line. Each request gets a number and a queue; the reader routes a reply
to the queue of its id, answers a ping, shows progress notifications (one line a second at most) and
notes `tools/list_changed`; what it cannot route is logged and skipped, never fatal. `start` sends
`initialize`, checks the protocol version, confirms with `notifications/initialized` and lists the
tools page by page (at most MAX_PAGES); `call` sends `tools/call` and turns the result into text
(mcp/results.py). A timeout cancels the request; a death wakes every waiter with the reason; `close`
ends the whole process group. The server's stderr goes to a capped log (Log), never to the model.
mcp/http.py's HttpServer replaces only the transport methods (open, send, close).

What it cannot do. It speaks the tools capability only (no resources, prompts or sampling), and it
cannot know what a tool really does: the server runs with the user's rights.
"""
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..console import warn
from ..filedoor import data_dir, private_folder
from .results import result_text, tool_problem

PROTOCOL_VERSION = "2025-11-25"
# Versions whose tools part we speak: the tools methods and result shapes did not change between
# them.
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
START_TIMEOUT = 20   # seconds for a server to answer initialize and every page of tools/list
CALL_TIMEOUT = 60    # seconds for one tools/call, unless the server's config says `timeout`
MIN_CALL_TIME = 0.5  # seconds a call still gets when the run's time is nearly out
MAX_PAGES = 50       # tools/list pages read; a server that always sends a new cursor stops here
MAX_LINE = 16 << 20  # bytes of one JSON-RPC line; a longer one is dropped
MAX_LOG_BYTES = 1 << 20  # of one server's stderr log
MAX_LOGS_KEPT = 50
PROGRESS_EVERY = 1.0  # seconds between two progress lines of one call
# seconds close waits for the stderr copy: the group is dead, so its pipe ends at once unless a
# process that left the group holds it
DRAIN_WAIT = 2.0
# marks an error reply the transport made up (a POST that failed): no server sent it
TRANSPORT = object()


class MCPError(Exception):
    """A server that could not be started, broke the protocol, timed out or died."""


class Log:
    """A server's stderr and our notes about it: one file, mode 0600, at most MAX_LOG_BYTES."""

    def __init__(self, folder, name):
        self.path, self.size, self.full, self.lock = None, 0, False, threading.Lock()
        self.fd: int | None = None
        try:
            folder = Path(folder)
            private_folder(folder)  # 0700: a server's stderr can quote the conversation
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
                data = (data[:MAX_LOG_BYTES - self.size]
                        + b"\n[tinyharness] the log reached its cap; the rest is dropped\n")
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
    logs = (sorted((p for p in folder.glob("*.log") if p.is_file()), key=lambda p: p.name,
                   reverse=True))
    for old in logs[keep - 1:]:
        try:
            old.unlink()
        except OSError:
            pass


def log_folder():
    """Beside the sessions: $XDG_DATA_HOME/tinyharness/mcp-logs."""
    return data_dir() / "mcp-logs"


class Server:
    """One MCP server over stdio: a child process, a reader thread, and requests matched to replies
    by id. mcp/http.py's HttpServer speaks the same protocol over HTTP; only the transport methods
    differ."""
    transport = "stdio"

    def __init__(self, name, config, log_dir=None, report=None):
        self.name, self.config = name, config
        self.read_only = config.get("read_only", ())  # True, or a collection of tool names
        self.timeout = config.get("timeout", CALL_TIMEOUT)
        self.report = report or warn
        self.log = Log(log_dir or log_folder(), name)
        self.log_path = self.log.path
        self.process = self.drainer = None
        # trust.Trusted of the workspace file it comes from (None: the user's own, a --mcp flag)
        self.trusted = None
        self.tools = {}            # tool name -> its description from tools/list (checked)
        self.version = None
        self.dead = None           # why the server is gone, once it is
        self.list_changed = threading.Event()
        self._next_id = 0
        self._waiting = {}         # request id -> queue for its reply
        self._progress = {}        # progress token -> [tool, time of the last line shown]
        self._lock = threading.Lock()

    # --- the transport: a child process
    # ------------------------------------------------------------
    def open(self, timeout):
        config = self.config
        # the model may have changed server.py since the user trusted the list: check it now
        if self.trusted is not None and (changed := self.trusted.may_start(
                list(strings_of(config)), f"the MCP server {self.name!r}")):
            raise MCPError(changed)
        try:
            self.process = subprocess.Popen(config["command"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            env={**os.environ, **config.get("env", {})},
                                            cwd=config.get("cwd"), start_new_session=True)
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in a command, cwd or env
            raise MCPError(f"cannot start MCP server {self.name!r} "
                           f"({shlex.join(config['command'])}): {e}") from e
        self.drainer = threading.Thread(target=self.log.drain, args=(self.process.stderr,),
                                        daemon=True)
        self.drainer.start()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout):
        """Route each line of the server's stdout. Nothing a server writes ends this thread: a line
        that is not JSON-RPC, or that cannot be routed, is logged and skipped."""
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
                    self.log.note(f"a message that could not be routed ({type(e).__name__}: {e}): "
                                  f"{raw[:200]!r}")
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
                self.log.note("a reply with an id that is not a number or a string, ignored: "
                              f"{str(rid)[:100]}")
                return
            with self._lock:
                waiting = self._waiting.pop(rid, None)
            if waiting:
                waiting.put(message)
        elif isinstance(method, str) and isinstance(rid, (int, str)) and not isinstance(rid, bool):
            self.answer(rid, method)  # a request to us (ping, ...)

    def answer(self, rid, method):
        refusal = {"error": {"code": -32601, "message": "method not supported by this client"}}
        self.send({"jsonrpc": "2.0", "id": rid,
                   **({"result": {}} if method == "ping" else refusal)})

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
        amount = (f"{done:g}" if isinstance(done, (int, float)) and not isinstance(done, bool)
                  else "?")
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
            number, reply = self._next_id, queue.Queue[dict](1)
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
        self.send({"jsonrpc": "2.0", "id": number, "method": method,
                   **({"params": params} if params else {})})
        try:
            return reply.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            self.cancel(number)
            raise MCPError(f"MCP server {self.name!r} did not answer {method} within "
                           f"{timeout:g} s") from None

    def cancel(self, number):
        try:
            self.notify("notifications/cancelled", {"requestId": number, "reason": "timed out"})
        except MCPError:
            pass

    def notify(self, method, params=None):
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def close(self):
        """Close stdin, wait a moment, then end the whole process group: a server gets a chance to
        clean up, never a veto, and a child it forked (holding its output) ends with it."""
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
        self.gone("closed")
        if self.drainer:  # its last lines reach the log before the log closes
            self.drainer.join(DRAIN_WAIT)
        self.log.close()

    # --- the protocol
    # ------------------------------------------------------------------------------
    def start(self, timeout=START_TIMEOUT):
        """Open the transport, shake hands, list the tools. Raises MCPError with a readable
        reason."""
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
            raise MCPError(f"MCP server {self.name!r} speaks protocol version {shown}; tinyharness "
                           f"asked for {PROTOCOL_VERSION} and supports "
                           f"{', '.join(SUPPORTED_VERSIONS)}")
        self.version = version
        self.notify("notifications/initialized")
        self.refresh_tools(max(deadline - time.monotonic(), MIN_CALL_TIME))
        return self

    def refresh_tools(self, timeout=START_TIMEOUT):
        """tools/list, page by page, until the server gives no nextCursor - or MAX_PAGES pages, or
        `timeout` seconds for all of them."""
        deadline = time.monotonic() + timeout
        tools: dict = {}
        cursor, seen = None, set()
        for page in range(MAX_PAGES + 1):
            if page == MAX_PAGES:
                self.report(f"[mcp] {self.name}: tools/list still had more after {MAX_PAGES} "
                            f"pages; the {len(tools)} tool(s) listed so far are offered")
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise MCPError(f"MCP server {self.name!r} did not finish listing its tools within "
                               f"{timeout:g} s")
            result = (self.request("tools/list", {"cursor": cursor} if cursor else None,
                                   timeout=left))
            result = result if isinstance(result, dict) else {}
            listed = result.get("tools")
            for tool in listed if isinstance(listed, list) else []:
                problem = tool_problem(tool, tools)
                if problem:
                    self.report(f"[mcp] {self.name}: {problem}; that tool is skipped")
                else:
                    tools[tool["name"]] = tool
            cursor = result.get("nextCursor")
            # a repeated cursor would loop
            if not isinstance(cursor, str) or not cursor or cursor in seen:
                break
            seen.add(cursor)
        self.list_changed.clear()
        self.tools = tools

    def call(self, tool, arguments, timeout=None, images=None):
        """(text for the model, is_error). `images`: where the pictures of the result go."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments},
                              timeout=self.timeout if timeout is None else timeout,
                              progress_of=tool)
        if not isinstance(result, dict):
            unreadable = ("the server's reply to tools/call is not an object, so the tool's "
                          "result cannot be read")
            return unreadable, True
        content = result.get("content", [])
        if not isinstance(content, list):
            return ("the server's reply to tools/call has a \"content\" that is not a list, so the "
                    "tool's result cannot be read"), True
        return result_text(result, content, tool, images), result.get("isError") is True

    def is_read_only(self, tool):
        return self.read_only is True or tool in (self.read_only or ())


def strings_of(config):
    """The strings of a server's entry that may name a workspace file: command, arguments, cwd, the
    values of env."""
    yield from config.get("command") or []
    yield from (config.get("env") or {}).values()
    if isinstance(config.get("cwd"), str):
        yield config["cwd"]


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def reply_result(name, method, message, dead):
    """The `result` of a reply, or MCPError for an error reply, a dead server or a reply of no
    shape."""
    if message is None:
        raise MCPError(f"MCP server {name!r} is gone: {dead}")
    if "error" in message:
        error = (message["error"] if isinstance(message["error"], dict)
                 else {"message": message["error"]})
        text = error.get("message", error)
        if message.get("transport") is TRANSPORT:
            # ours (mcp/http.py): the message never arrived
            raise MCPError(f"MCP server {name!r} {text}")
        raise MCPError(f"MCP server {name!r} answered {method} with an error: "
                       f"{str(text)[:500]} (code {str(error.get('code'))[:20]})")
    return message.get("result")
