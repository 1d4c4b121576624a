"""A small MCP server for the tests, written from the spec: newline-delimited JSON-RPC over stdio, or
Streamable HTTP (POST, a JSON or an SSE answer, Mcp-Session-Id) with --http.

    python tests/mcp_server.py [--junk] [--version V] [--page-size N] [--crash-at-start]
                               [--endless-cursor] [--hostile] [--http PORT [--sse]] [--legacy-sse PORT]

Tools: echo{text} (read-only in the tests' configs), add{a, b}, fail{} (answers isError: true),
slow{seconds}, crash{} (the process exits mid-call), image{} (a picture), junk_image{} (an image part
that is not one), grow{} (adds a tool and sends notifications/tools/list_changed), progress{} (sends
progress notifications first), bad_content{} ({"content": 5}), fork{} (leaves a child holding stdout,
then never answers), tool_0 .. tool_4 (padding, so paging has several pages).
--junk prints lines that are not JSON-RPC to stdout between replies; --hostile adds tools with names
and schemas no model server accepts and sends a reply whose id is a list before each real reply;
--endless-cursor makes tools/list hand out a new cursor forever. Everything it logs goes to stderr.
With --http it serves until killed, on 127.0.0.1:PORT (0: a free port, printed as "port N"). --legacy-sse serves
the older HTTP+SSE transport as the official SDK's server does: GET /sse is an event stream whose first event,
`endpoint`, names /messages?session_id=ID; each message POSTed there is answered 202, its reply sent on the stream.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mP4z8AARAwQCgAf7gP9Y167WwAAAABJRU5ErkJggg=="
OBJECT = {"type": "object", "properties": {}}


def base_tools():
    tools = [
        {"name": "echo", "description": "Echo the text back.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "add", "description": "Add two numbers.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                         "required": ["a", "b"]}},
        {"name": "fail", "description": "Always fails.", "inputSchema": OBJECT},
        {"name": "slow", "description": "Sleeps.", "inputSchema": {"type": "object",
                                                                   "properties": {"seconds": {"type": "number"}}}},
        {"name": "crash", "description": "Exits.", "inputSchema": OBJECT},
        {"name": "image", "description": "Returns a picture.", "inputSchema": OBJECT},
        {"name": "junk_image", "description": "Returns an image part that is not a picture.", "inputSchema": OBJECT},
        {"name": "grow", "description": "Adds a tool.", "inputSchema": OBJECT},
        {"name": "peak", "description": "The most slow calls that ran at once.", "inputSchema": {"type": "object"}},
        {"name": "progress", "description": "Reports progress, then answers.", "inputSchema": OBJECT},
        {"name": "bad_content", "description": "Answers content: 5.", "inputSchema": OBJECT},
        {"name": "fork", "description": "Leaves a child holding stdout, never answers.", "inputSchema": OBJECT},
    ]
    return tools + [{"name": f"tool_{i}", "description": "padding", "inputSchema": {"type": "object"}} for i in range(5)]


HOSTILE_TOOLS = [
    {"name": "two words", "description": "a space in the name", "inputSchema": OBJECT},
    {"name": "two_words", "description": "the name the first maps to", "inputSchema": OBJECT},
    {"name": "esc\x1b[2Jname", "description": "an escape sequence in the name", "inputSchema": OBJECT},
    {"name": "x" * 309, "description": "309 characters", "inputSchema": OBJECT},
    {"name": "", "description": "an empty name", "inputSchema": OBJECT},
    {"name": 5, "description": "a number for a name", "inputSchema": OBJECT},
    {"name": "required_five", "description": "required: 5", "inputSchema": {"type": "object", "required": 5}},
    {"name": "schema_list", "description": "a list for a schema", "inputSchema": [1, 2]},
]


class ToolServer:
    """The tools, whatever carries the messages. `send` delivers a message outside the current reply."""

    def __init__(self, args):
        self.args, self.extra, self.lock = args, [], threading.Lock()
        self.running, self.peak = 0, 0

    def tools(self):
        return base_tools() + (HOSTILE_TOOLS if self.args.hostile else []) + self.extra

    def handle(self, request, send):
        """The reply to one request (None for a notification, or when the reply went through `send`)."""
        if not isinstance(request, dict) or "id" not in request:
            return None
        method, params, rid = request.get("method"), request.get("params") or {}, request["id"]
        if method == "initialize":
            version = self.args.version or params.get("protocolVersion")
            return {"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version, "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "test-server", "version": "1"}}}
        if method == "tools/list":
            everything = self.tools()
            start = int(params.get("cursor") or 0)
            size = self.args.page_size
            result = {"tools": everything[start:start + size]}
            if start + size < len(everything) or self.args.endless_cursor:
                result["nextCursor"] = str(start + size)
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        if method == "tools/call":
            result = self.call(params.get("name"), params.get("arguments") or {}, params.get("_meta") or {}, send)
            return None if result is None else {"jsonrpc": "2.0", "id": rid, **result}
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}

    def call(self, name, arguments, meta, send):
        text = lambda t: {"result": {"content": [{"type": "text", "text": t}]}}  # noqa: E731
        if name == "echo":
            return text(f"echo: {arguments.get('text')}")
        if name == "add":
            return text(str(arguments["a"] + arguments["b"]))
        if name == "fail":
            return {"result": {"content": [{"type": "text", "text": "the record is locked"}], "isError": True}}
        if name == "slow":
            with self.lock:
                self.running += 1
                self.peak = max(self.peak, self.running)
            time.sleep(float(arguments.get("seconds", 5)))
            with self.lock:
                self.running -= 1
            return text("slept")
        if name == "peak":
            return text(f"peak {self.peak}")
        if name == "crash":
            os._exit(3)
        if name == "image":
            return {"result": {"content": [{"type": "text", "text": "a picture follows"},
                                           {"type": "image", "data": PNG, "mimeType": "image/png"}]}}
        if name == "junk_image":
            return {"result": {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}}
        if name == "grow":
            self.extra.append({"name": "new_tool", "description": "appeared later", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return text("grown")
        if name == "progress":
            for step in (1, 2):
                send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": meta.get("progressToken"), "progress": step, "total": 2,
                    "message": f"step {step}"}})
                time.sleep(1.1)
            return text("progressed")
        if name == "bad_content":
            return {"result": {"content": 5}}
        if name == "fork":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            print(f"forked {child.pid}", file=sys.stderr, flush=True)
            return None  # never answered; the child holds stdout
        return {"error": {"code": -32602, "message": f"unknown tool {name}"}}


def serve_stdio(server, args):
    lock = threading.Lock()

    def send(message):
        with lock:  # calls are answered from several threads: one whole line at a time
            if args.junk:
                print("Server ready! (a log line on stdout, which the spec forbids)", flush=True)
            if args.hostile and "id" in message:
                print(json.dumps({"jsonrpc": "2.0", "id": [message["id"]], "result": {}}), flush=True)
            print(json.dumps(message), flush=True)

    def answer(request):
        reply = server.handle(request, send)
        if reply is not None:
            send(reply)

    for line in sys.stdin:
        request = json.loads(line)
        print(f"got {request.get('method')}", file=sys.stderr, flush=True)
        if request.get("method") == "tools/call":  # each call in its own thread: a real server may answer out of order
            threading.Thread(target=answer, args=(request,)).start()
        else:
            answer(request)


def serve_http(server, args):
    sessions = set()
    seen = []  # (method, headers) of every POST, for tests that run this in-process

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, status, body=b"", content_type="application/json", headers=()):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers:
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self):
            sessions.discard(self.headers.get("Mcp-Session-Id"))
            seen.append(("DELETE", dict(self.headers)))
            self.reply(200)

        def do_POST(self):
            message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            seen.append((message.get("method"), dict(self.headers)))
            accept = self.headers.get("Accept", "")
            if "application/json" not in accept or "text/event-stream" not in accept:
                return self.reply(406, b'{"error": "accept both"}')
            if message.get("method") == "initialize":
                session = uuid.uuid4().hex
                sessions.add(session)
            else:
                session = self.headers.get("Mcp-Session-Id")
                if session not in sessions:
                    return self.reply(404 if session else 400, b'{"error": "no such session"}')
            if "id" not in message:
                return self.reply(202)
            if not args.sse:
                reply = server.handle(message, lambda m: None)
                return self.reply(200, json.dumps(reply).encode(), headers=[("Mcp-Session-Id", session)])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Mcp-Session-Id", session)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            lock = threading.Lock()

            def event(m):
                with lock:
                    self.wfile.write(b": a comment line\nevent: message\nid: 1\ndata: " + json.dumps(m).encode() + b"\n\n")
                    self.wfile.flush()
            self.wfile.write(b"retry: 1000\n\n")  # a priming event, as the SDK sends
            reply = server.handle(message, event)
            if reply is not None:
                event(reply)

    httpd = ThreadingHTTPServer(("127.0.0.1", args.http), Handler)
    httpd.seen = seen
    return httpd


def serve_legacy_sse(server, port=0, chunked=False):
    """The HTTP+SSE transport (protocol 2024-11-05): a ThreadingHTTPServer, not started. `chunked`: the
    stream in chunked transfer encoding, as servers behind uvicorn send it; else a body that ends with the
    connection."""
    import queue
    streams = {}  # session id -> queue of messages for its GET stream

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            session = uuid.uuid4().hex
            streams[session] = outbox = queue.Queue()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True
            def send(data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
            try:
                send(f"event: endpoint\ndata: /messages?session_id={session}\n\n".encode())
                while True:
                    self.wfile.flush()
                    try:
                        message = outbox.get(timeout=0.2)
                    except queue.Empty:
                        send(b": keep-alive\n\n")  # fails once the client has gone
                        continue
                    send(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")
            except OSError:
                streams.pop(session, None)

        def do_POST(self):
            outbox = streams.get(self.path.partition("session_id=")[2])
            message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if outbox is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            reply = server.handle(message, outbox.put)
            if reply is not None:
                outbox.put(reply)

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def parse(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--junk", action="store_true")
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--endless-cursor", action="store_true")
    parser.add_argument("--version", default=None)
    parser.add_argument("--page-size", type=int, default=4)
    parser.add_argument("--crash-at-start", action="store_true")
    parser.add_argument("--http", type=int, default=None, metavar="PORT")
    parser.add_argument("--sse", action="store_true")
    parser.add_argument("--legacy-sse", type=int, default=None, metavar="PORT")
    return parser.parse_args(argv)


def main():
    args = parse()
    if args.crash_at_start:
        print("cannot start: no database", file=sys.stderr)
        sys.exit(1)
    server = ToolServer(args)
    if args.legacy_sse is not None:
        httpd = serve_legacy_sse(server, args.legacy_sse)
        print(f"port {httpd.server_address[1]}", flush=True)
        return httpd.serve_forever()
    if args.http is None:
        return serve_stdio(server, args)
    httpd = serve_http(server, args)
    print(f"port {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
