"""MCP over Streamable HTTP: the transport hosted MCP servers speak (protocol 2025-11-25).

The problem. A stdio server is a child process on this machine. Hosted servers (an issue tracker's,
a documentation site's) live at a URL; there is no process to start and no pipe to read.

The mechanism. Every JSON-RPC message the client sends is one HTTP POST to the server's URL, with
`Accept: application/json, text/event-stream`. A notification is answered `202 Accepted` and nothing
else. A request is answered either with one JSON-RPC reply as `application/json`, or with a stream
of server-sent events (`text/event-stream`): each event's `data:` is one JSON-RPC message - progress
notifications, even requests to the client (ping) - and the stream's last message is the reply. The
server may hand out a session in the `Mcp-Session-Id` header of its answer to `initialize`; every
later POST carries it back, with `MCP-Protocol-Version`, and the client ends the session with a
DELETE when it closes. Headers from the config (an `Authorization` token, say) go with every
request. Everything above the transport - the handshake, paging, checks on every reply, names,
pictures, progress - is mcp/client.py's Server's, unchanged: this class only replaces how a message
travels.

Each request's POST runs on a thread of its own and feeds what it reads into the same routing the
stdio reader uses, so a call is bounded exactly as over stdio: by the server's `timeout` and the
run's time left, checked while the answer trickles in, not only when it ends. A reply is read up to
16 MiB. Redirects are not followed (a POST that moves elsewhere is an error, not a silent resend).

What it cannot do. No OAuth flow (put a token in `headers`), no resuming a broken SSE stream
(`Last-Event-ID`), no GET stream for messages the server sends on its own (a `tools/list_changed`
arrives only inside a reply's stream), and a server that forgets the session (404) is withdrawn
rather than greeted again.
"""
import json
import re
import threading

import requests

from .client import START_TIMEOUT, TRANSPORT, MCPError, Server

MAX_REPLY_BYTES = 16 << 20
CONNECT_TIMEOUT = 10   # seconds to open a connection
NOTIFY_TIMEOUT = 5     # seconds for a notification's 202
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


class HttpServer(Server):
    transport = "http"

    def __init__(self, name, config, log_dir=None, report=None):
        super().__init__(name, config, log_dir, report)
        self.url, self.extra_headers = config["url"], dict(config.get("headers", {}))
        self.session_id = None
        self.http = requests.Session()
        self.open_ = False

    def open(self, timeout):
        self.open_ = True  # nothing to start: the first POST (initialize) is the connection

    def headers(self):
        headers = {**self.extra_headers, "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.version:  # negotiated by initialize; every later request says it
            headers[VERSION_HEADER] = self.version
        return headers

    def post(self, message, read_timeout):
        try:
            return self.http.post(self.url, data=json.dumps(message).encode("utf-8"),
                                  headers=self.headers(),
                                  timeout=(CONNECT_TIMEOUT, read_timeout), stream=True,
                                  allow_redirects=False)
        except (requests.RequestException, ValueError) as e:
            raise MCPError(f"at {self.url} cannot be reached ({reason(e)})") from None

    # --- sending: a request's POST on its own thread; a notification waits for its 202 -----------
    def send(self, message):
        if not self.open_:
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead or 'closed'}")
        if "method" in message and "id" in message:
            threading.Thread(target=self.fetch, args=(message,), daemon=True).start()
        elif message.get("method") == "notifications/cancelled":
            # best effort
            threading.Thread(target=self.deliver, args=(message,), daemon=True).start()
        else:
            self.deliver(message)

    def deliver(self, message):
        """POST a notification (or our reply to the server's request); the server answers 202."""
        try:
            with self.post(message, NOTIFY_TIMEOUT) as response:
                if response.status_code >= 400:
                    self.log.note(f"{message.get('method', 'a reply')} was answered HTTP "
                                  f"{response.status_code}")
        except (MCPError, requests.RequestException) as e:
            self.log.note(f"{message.get('method', 'a reply')} could not be sent: {e}")

    def fetch(self, message):
        """POST one request and route everything its answer carries; whatever goes wrong becomes an
        error reply to that request, so the caller waiting for it learns why."""
        number, method = message["id"], message["method"]
        try:
            with self.post(message, max(self.timeout, START_TIMEOUT) + CONNECT_TIMEOUT) as response:
                if method == "initialize":
                    self.take_session(response.headers.get(SESSION_HEADER))
                for reply in self.messages(response, method):
                    if (isinstance(reply, dict) and "method" not in reply
                        and ("result" in reply or "error" in reply)):
                        # the answer to this POST is this request's, whatever id it says
                        reply = {**reply, "id": number}
                        self.receive(reply)
                        return
                    self.receive(reply)
                raise MCPError("ended its answer without a reply")
        except MCPError as e:
            self.fail(number, str(e))
        except (requests.RequestException, ValueError, OSError) as e:
            self.fail(number, f"broke off its answer ({reason(e)})")

    def fail(self, number, why):
        """The request failed on the way (not an error the server sent): its caller gets
        MCPError(why)."""
        self.receive({"jsonrpc": "2.0", "id": number, "error": {"code": -32000, "message": why},
                      "transport": TRANSPORT})

    def take_session(self, value):
        if value is None:
            return
        if not (0 < len(value) <= 1000 and all(0x21 <= ord(c) <= 0x7e for c in value)):
            raise MCPError(f"sent an {SESSION_HEADER} that is not visible ASCII")
        self.session_id = value

    def messages(self, response, method):
        """The JSON-RPC messages of an answer: one (JSON) or each SSE event's data, as they
        arrive."""
        status = response.status_code
        kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if status == 404 and self.session_id:
            self.dead = self.dead or "the server ended the session (HTTP 404)"
            raise MCPError(f"is gone: {self.dead}")
        if status >= 400 or status == 202 or 300 <= status < 400:
            body = b"".join(limited(response, 4000)) if kind == "application/json" else b""
            error = parse(body)
            if isinstance(error, dict) and isinstance(error.get("error"), dict):
                yield error
                return
            raise MCPError(f"answered {method} with HTTP {status}"
                           f"{' and no reply' if status == 202 else ''}")
        if kind == "application/json":
            yield parse(b"".join(limited(response, MAX_REPLY_BYTES)))
        elif kind == "text/event-stream":
            for data in sse_data(limited(response, MAX_REPLY_BYTES)):
                message = parse(data)
                if message is None:
                    self.log.note(f"an event that is not JSON, ignored: {data[:200]!r}")
                    continue
                yield message
        else:
            raise MCPError(f"answered {method} with Content-Type {kind[:60]!r}, not JSON or an "
                           "event stream")

    def close(self):
        """End the session (DELETE, best effort) and the connection."""
        if self.open_ and self.session_id:
            try:
                self.http.delete(self.url, headers=self.headers(),
                                 timeout=(CONNECT_TIMEOUT, NOTIFY_TIMEOUT)).close()
            except requests.RequestException:
                pass
        self.open_ = False
        self.http.close()
        self.gone("closed")
        self.log.close()


def reason(error):
    """The short cause of a requests error ("Connection refused"), not its nested reprs."""
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(error))
    return found.group(1).strip() if found else type(error).__name__


def limited(response, limit):
    """The body's chunks as they arrive, up to `limit` bytes."""
    size = 0
    for chunk in response.iter_content(chunk_size=None):
        size += len(chunk)
        if size > limit:
            raise MCPError(f"sent an answer longer than {limit} bytes")
        yield chunk


def sse_data(chunks):
    """The `data` of each server-sent event of type "message" (the default), as bytes."""
    for event, data in sse_events(chunks):
        if event in (b"", b"message"):
            yield data


def sse_events(chunks, limit=MAX_REPLY_BYTES):
    """(event type, data) of each server-sent event that has data, as bytes; one event's data is
    at most `limit` bytes (MCPError past it)."""
    pending, event, size = b"", b"", 0
    data: list[bytes] = []
    for chunk in chunks:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if len(pending) > limit:
            raise MCPError(f"sent an event line longer than {limit} bytes")
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:  # a blank line ends an event
                if data:
                    yield event, b"\n".join(data)
                data, event, size = [], b"", 0
                continue
            if line.startswith(b":"):  # a comment (a keep-alive)
                continue
            field, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if field == b"data":
                data.append(value)
                size += len(value)
                if size > limit:
                    raise MCPError(f"sent an event longer than {limit} bytes")
            elif field == b"event":
                event = value
    if data:
        yield event, b"\n".join(data)


def parse(data):
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None
