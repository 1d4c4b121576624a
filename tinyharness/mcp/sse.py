"""MCP over the old HTTP+SSE transport (protocol 2024-11-05), which many hosted servers still speak.

The problem. Claude Code, Cursor and VS Code accept `"type": "sse"`: a server that streams its
messages over one long GET and takes ours by POST at an address it names. Refusing such a server
stopped the whole run over one line of a file that works everywhere else.

The mechanism (as the official SDK's client, mcp/client/sse.py, speaks it). `open` GETs the URL
with `Accept: text/event-stream` and keeps the answer open; a thread reads its events. The first,
`endpoint`, names where to POST (relative to the URL; one on another scheme, host or port is
refused: the messages, with their headers, would go elsewhere). Each message of ours is one POST
there, answered 202 (or 200) and nothing else; every reply, notification and request of the
server's comes as a `message` event on the GET stream and goes to the same routing as stdio's
(mcp/client.Server.receive), so calls are bounded and checked exactly as there. The wait for the
endpoint is the start's time (its `start_timeout`, cut to what the run has: mcp.Slots.start).
`close` never waits on the stream: a server may stay silent on it for ever (no keep-alive), and a
read blocked there would hold a plain close of the response; so the socket is shut first, which
ends that read, and the reader thread is given CLOSE_WAIT seconds. Headers from the config go with
every request.

What it cannot do. No reconnecting: a stream that ends withdraws the server, as a stdio server's
death does. No OAuth (put a token in `headers`). One event's data is read up to 16 MiB. The GET's
answer (its status line and headers) has no time limit of its own beyond the connect timeout: a
server that accepts the connection and never answers it holds the start for ever.
"""
import json
import os
import socket
import threading
from urllib.parse import urljoin, urlparse

import requests

from .client import MCPError, Server
from .http import CONNECT_TIMEOUT, NOTIFY_TIMEOUT, parse, reason, sse_events

CLOSE_WAIT = 2  # seconds `close` waits for the reader thread once the stream's socket is shut



def arriving(response):
    """The body's bytes as they arrive: a chunked body chunk by chunk; another (a stream that ends
    when the connection does) whatever the socket has, never waiting for more than one byte."""
    if "chunked" in response.headers.get("Transfer-Encoding", "").lower():
        yield from response.iter_content(chunk_size=None)
        return
    read = getattr(response.raw, "read1", None)  # urllib3 2
    if read is None:
        yield from response.iter_content(chunk_size=1)
        return
    while data := read(65536):
        yield data


def unblock(response):
    """Shut the stream's socket down (through a duplicate of its descriptor), so a read blocked on
    it returns at once. Closing the response instead waits for that read to end - for ever, on a
    server that says nothing more (the read holds the buffer's lock)."""
    try:
        with socket.socket(fileno=os.dup(response.raw.fileno())) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, AttributeError):
        pass  # no socket left: nothing can block on it


class SseServer(Server):
    transport = "sse"

    def __init__(self, name, config, log_dir=None, report=None):
        super().__init__(name, config, log_dir, report)
        self.url, self.extra_headers = config["url"], dict(config.get("headers", {}))
        self.http, self.stream, self.endpoint = requests.Session(), None, None
        self.ready, self.reader = threading.Event(), None

    def open(self, timeout):
        try:
            self.stream = self.http.get(self.url, stream=True, allow_redirects=False,
                                        headers={**self.extra_headers,
                                                 "Accept": "text/event-stream"},
                                        timeout=(CONNECT_TIMEOUT, None))
        except (requests.RequestException, ValueError) as e:
            raise MCPError(f"MCP server {self.name!r} at {self.url} cannot be reached "
                           f"({reason(e)})") from None
        kind = self.stream.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if self.stream.status_code != 200 or kind != "text/event-stream":
            raise MCPError(f"MCP server {self.name!r} at {self.url} answered the SSE GET with HTTP "
                           f"{self.stream.status_code} ({kind[:60] or 'no Content-Type'}), not an "
                           "event stream")
        self.reader = threading.Thread(target=self._listen, daemon=True)
        self.reader.start()
        if not self.ready.wait(timeout) or self.endpoint is None:
            raise MCPError(f"MCP server {self.name!r} at {self.url} named no endpoint to post to "
                           f"({self.dead or f'none within {timeout:g} s'})")

    def _listen(self):
        """Route each event of the GET stream; nothing the server sends ends it but the stream's
        end."""
        try:
            for event, data in sse_events(arriving(self.stream)):
                if event == b"endpoint" and self.endpoint is None:
                    self.endpoint = self.same_origin(data.decode("utf-8", errors="replace"))
                    self.ready.set()
                elif event in (b"", b"message"):
                    self.route(data)
        except (requests.RequestException, MCPError, OSError, ValueError, AttributeError) as e:
            self.log.note(f"the event stream broke off ({reason(e)})")
        self.ready.set()
        self.gone("the server ended its event stream")

    def same_origin(self, text):
        """The endpoint's full address, or None (said in the log) when it leads elsewhere."""
        endpoint, url = urlparse(urljoin(self.url, text.strip())), urlparse(self.url)
        if (endpoint.scheme, endpoint.netloc) != (url.scheme, url.netloc):
            self.dead = f"its endpoint {text[:100]!r} is on another origin than {self.url}"
            return None
        return endpoint.geturl()

    def route(self, data):
        message = parse(data)
        if message is None:
            self.log.note(f"an event that is not JSON, ignored: {data[:200]!r}")
            return
        try:
            self.receive(message)
        except Exception as e:  # noqa: BLE001 - a hostile message must not end the stream
            self.log.note(f"a message that could not be routed ({type(e).__name__}: {e})")

    def send(self, message):
        if self.endpoint is None or self.stream is None:
            raise MCPError(f"MCP server {self.name!r} is gone: {self.dead or 'closed'}")
        try:
            with self.http.post(self.endpoint, data=json.dumps(message).encode("utf-8"),
                                headers={**self.extra_headers, "Content-Type": "application/json"},
                                timeout=(CONNECT_TIMEOUT, NOTIFY_TIMEOUT),
                                allow_redirects=False) as response:
                status = response.status_code
        except (requests.RequestException, ValueError) as e:
            raise MCPError(f"MCP server {self.name!r} at {self.endpoint} cannot be reached "
                           f"({reason(e)})") from None
        if not 200 <= status < 300:
            raise MCPError(f"MCP server {self.name!r} answered a message with HTTP {status}")

    def close(self):
        """Never waits on the stream: its socket is shut so the reader's read returns, the reader
        is given CLOSE_WAIT seconds, and the response is closed only once nothing reads it."""
        self.gone("closed")
        self.ready.set()
        stream, self.stream = self.stream, None
        if stream is not None:
            unblock(stream)
            if self.reader is not None:
                self.reader.join(CLOSE_WAIT)
            if self.reader is None or not self.reader.is_alive():
                stream.close()
        self.http.close()
        self.log.close()
