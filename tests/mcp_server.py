"""A small MCP server over stdio for the tests: newline-delimited JSON-RPC, written from the spec.

    python tests/mcp_server.py [--junk] [--version V] [--page-size N] [--crash-at-start]

Tools: echo{text} (read-only in the tests' configs), add{a, b}, fail{} (answers isError: true),
slow{seconds}, crash{} (the process exits mid-call), image{} (a non-text part), grow{} (adds a tool and
sends notifications/tools/list_changed), tool_0 .. tool_4 (padding, so paging has several pages).
--junk prints lines that are not JSON-RPC to stdout between replies; everything it logs goes to stderr.
"""
import argparse
import os
import json
import sys
import threading
import time


def tools(extra):
    base = [
        {"name": "echo", "description": "Echo the text back.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "add", "description": "Add two numbers.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                         "required": ["a", "b"]}},
        {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "slow", "description": "Sleeps.", "inputSchema": {"type": "object",
                                                                   "properties": {"seconds": {"type": "number"}}}},
        {"name": "crash", "description": "Exits.", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "image", "description": "Returns a picture.", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "grow", "description": "Adds a tool.", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "peak", "description": "The most slow calls that ran at once.", "inputSchema": {"type": "object"}},
    ]
    base += [{"name": f"tool_{i}", "description": "padding", "inputSchema": {"type": "object"}} for i in range(5)]
    return base + extra


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--junk", action="store_true")
    parser.add_argument("--version", default=None)
    parser.add_argument("--page-size", type=int, default=4)
    parser.add_argument("--crash-at-start", action="store_true")
    args = parser.parse_args()
    if args.crash_at_start:
        print("cannot start: no database", file=sys.stderr)
        sys.exit(1)
    extra = []
    lock = threading.Lock()
    running, peak = [0], [0]

    def send(message):
        with lock:  # calls are answered from several threads: one whole line at a time
            if args.junk:
                print("Server ready! (a log line on stdout, which the spec forbids)", flush=True)
            print(json.dumps(message), flush=True)

    def call(rid, name, arguments):
        if name == "echo":
            result = {"content": [{"type": "text", "text": f"echo: {arguments.get('text')}"}]}
        elif name == "add":
            result = {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}]}
        elif name == "fail":
            result = {"content": [{"type": "text", "text": "the record is locked"}], "isError": True}
        elif name == "slow":
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(float(arguments.get("seconds", 5)))
            with lock:
                running[0] -= 1
            result = {"content": [{"type": "text", "text": "slept"}]}
        elif name == "peak":
            result = {"content": [{"type": "text", "text": f"peak {peak[0]}"}]}
        elif name == "crash":
            os._exit(3)
        elif name == "image":
            result = {"content": [{"type": "text", "text": "a picture follows"},
                                  {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
        elif name == "grow":
            extra.append({"name": "new_tool", "description": "appeared later", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            result = {"content": [{"type": "text", "text": "grown"}]}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"unknown tool {name}"}})
            return
        send({"jsonrpc": "2.0", "id": rid, "result": result})

    for line in sys.stdin:
        request = json.loads(line)
        print(f"got {request.get('method')}", file=sys.stderr, flush=True)
        if "id" not in request:
            continue  # a notification
        method, params, rid = request["method"], request.get("params") or {}, request["id"]
        if method == "initialize":
            version = args.version or params.get("protocolVersion")
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version, "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "test-server", "version": "1"}}})
        elif method == "tools/list":
            everything = tools(extra)
            start = int(params.get("cursor") or 0)
            page = everything[start:start + args.page_size]
            result = {"tools": page}
            if start + args.page_size < len(everything):
                result["nextCursor"] = str(start + args.page_size)
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/call":  # each call in its own thread, as a real server may answer out of order
            threading.Thread(target=call, args=(rid, params.get("name"), params.get("arguments") or {})).start()
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
