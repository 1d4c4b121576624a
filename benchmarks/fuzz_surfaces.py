"""The surface fuzzer: hostile input on every surface the harness reads besides model replies.

    python -m benchmarks.fuzz --surface terminal|sessions|mcp|ollama|hooks|viewer|all --runs N [--seed 1]

Each run picks (seeded) one hostile input for the surface and drives the real command line with it:

- terminal: a text full of escape sequences (OSC 0 title, OSC 52 clipboard, CSI 2J, C1 U+009B, bidi
  overrides, a lone surrogate, NUL, BS, CR) reaches every console print path - a server's error body,
  an error event in a stream, an Ollama error line, `doctor`, the model's answer and tool lines,
  `sessions`, `chat --resume` of another folder's session, the trust prompt's preview - with a real
  pseudo-terminal as stdin, stdout and stderr;
- sessions: a session file the harness wrote, then damaged (a value replaced by one of the wrong
  type at a random place, a cut, bytes that are not UTF-8, deep nesting, a FIFO) through `sessions`,
  `view` and `chat --resume` (against the strict scripted server);
- viewer: a session whose every text is an XSS payload, rendered by `view`;
- mcp: an MCP server that answers oddly (endless paging, wrong types, an id that is a list, odd tool
  names, a flood on stderr, a child holding stdout, lines that are not JSON);
- ollama: Ollama's native /api/chat answering oddly (`tool_calls: true`, NaN, deep nesting, wrong
  types, error lines, a reply that trickles one byte at a time);
- hooks: a workspace hooks.json (trusted) of odd shapes, and hooks that print hostile text, leave a
  child behind, flood, or sleep.

Then it prints `surface S: R runs, C crashes, H hangs, L lost, I injected`:

- crash: an exit code outside 0/1/2/3, or a traceback;
- hang: the run took longer than --limit seconds;
- lost: what should be kept was not - a run's session file missing, damaged or without its end; a
  damaged session's bytes kept neither in place nor in its .damaged copy, or a resumed session the
  strict server refuses; a page missing what the user typed;
- injected: a control byte, C1 code or bidi control reached the terminal (or stdout/stderr) raw, or
  the viewer's page holds a tag, an attribute or a URL that could run or load something.
"""
import contextlib
import hashlib
import html.parser
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.fuzz_common import CONTRACT_EXITS, Hang, run_main, time_limit
from tinyharness.sessions import writer as session_writer

ROOT = Path(__file__).resolve().parents[1]
SURFACES = ("terminal", "sessions", "viewer", "mcp", "ollama", "hooks")
UNSAFE_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

SEQUENCES = ["\x1b]0;pwned\x07", "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b[2J", "\x1b[H", "\u009b31m", "\u202e", "\u2066",
             "\u200f", "\x00", "\x08" * 4, "\r", "\x1bP+q\x1b\\", "\u0085", "\x7f", "\x1b]8;;http://x\x07link\x1b]8;;\x07",
             "\udcff", "\x1b[6n", "\x1bc"]
WORDS = ["All good: the task completed successfully.", "rm -rf ~", "ok", "é中👍", "path/to/file.txt"]


def hostile_text(rng):
    parts = [rng.choice(SEQUENCES + WORDS) for _ in range(rng.randint(2, 7))]
    return "".join(parts) + rng.choice(SEQUENCES)


def is_injected(data):
    """Raw terminal control in output bytes: C0 (not LF/TAB), DEL, C1, bidi controls."""
    text = data.replace(b"\r\n", b"\n").decode("utf-8", errors="replace")
    return bool(UNSAFE_TEXT.search(text))


# --- Running the command line ------------------------------------------------------------------------

def base_env(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"),
               HOME=str(home), TERM="dumb", PYTHONIOENCODING="utf-8", TMPDIR=str(home))
    return env


def run_cli(args, cwd, env, limit, stdin=b"", on_pty=False, module="tinyharness"):
    """(outcome, exit code, output bytes) of `tinyharness ARGS` (or `python -m MODULE ARGS`, a stage);
    outcome "ok", "crash" or "hang". On a pty all three streams are the terminal; else stdin is a pipe
    and stdout+stderr are read together."""
    command = [sys.executable, "-m", module, *args]
    if on_pty:
        master, slave = os.openpty()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                                   start_new_session=True)
        os.close(slave)
        if stdin:
            os.write(master, stdin)
        reader = master
    else:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.stdin.write(stdin)
            process.stdin.close()
        except OSError:
            pass
        reader = process.stdout.fileno()
    received, deadline, outcome = bytearray(), time.monotonic() + limit, "ok"
    while True:
        if time.monotonic() > deadline:
            outcome = "hang"
            break
        ready, _, _ = select.select([reader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(reader, 65536)
            except OSError:
                chunk = b""
            if chunk:
                received += chunk
                continue
            if process.poll() is not None or on_pty:
                break
        elif process.poll() is not None and not on_pty:
            continue
        elif process.poll() is not None:
            break
    with contextlib.suppress(OSError):
        os.killpg(process.pid, 9)  # the run's group: whatever it left behind goes too
    code = process.wait()
    if on_pty:
        os.close(master)
    else:
        process.stdout.close()
    if outcome == "ok" and (code not in CONTRACT_EXITS or b"Traceback (most recent call last)" in received):
        outcome = "crash"
    return outcome, code, bytes(received)


def session_lost(home, expect_end=True):
    """Why the run's session was not kept (missing, damaged, no end event), or None."""
    sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None
    from tinyharness import sessions
    folder = home / "data" / "tinyharness" / "sessions"
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        return "no session file"
    try:
        session = sessions.load(files[-1])
    except sessions.SessionError as e:
        return str(e)
    if session.warning:
        return session.warning
    if expect_end and (not session.events or session.events[-1].get("type") != "end"):
        return "the session has no end event"
    return None


# --- A server that says what it is told --------------------------------------------------------------

class Hostile(ThreadingHTTPServer):
    """Answers each request with `plan(path, body, count)` -> (status, content type, [chunks], pause)."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.plan, self.count = None, 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def answer(self, body):
        self.server.count += 1
        status, kind, chunks, pause = self.server.plan(self.path, body, self.server.count)
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            if pause is None:
                self.send_header("Content-Length", str(sum(map(len, chunks))))
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
                if pause:
                    time.sleep(pause)
        except OSError:
            pass

    def do_GET(self):
        self.answer({})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self.answer(json.loads(raw or b"{}"))
        except ValueError:
            self.answer({})


def js(obj):
    return json.dumps(obj).encode()


def completion(content=None, calls=()):
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, (n, a) in enumerate(calls)]
    return {"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


def ollama_routes(path, chat):
    """Ollama's native routes, with /api/chat answered by CHAT (a function of the request count)."""
    if path == "/api/version":
        return 200, "application/json", [js({"version": "0.12.10"})], None
    if path == "/api/tags":
        return 200, "application/json", [js({"models": [{"name": "qwen3:8b", "model": "qwen3:8b"}]})], None
    if path == "/api/show":
        return 200, "application/json", [js({"capabilities": ["completion", "tools"], "model_info": {
            "general.architecture": "qwen3", "qwen3.context_length": 8192}})], None
    if path == "/api/chat":
        return chat()
    return 404, "application/json", [js({"error": "not found"})], None


# --- Surface: terminal ---------------------------------------------------------------------------------

TERMINAL_PATHS = ("error-body", "stream-error", "ollama-error", "doctor", "answer", "sessions", "resume", "trust")
STAGE_TERMINAL_PATHS = ("error-body", "answer")  # what a stage prints of a server's words: its error line, the reply


def stage_terminal_run(stage):
    """The terminal surface of one stage (`--surface terminal --stage mK`): a server's error body or a
    reply full of escape sequences, printed by `python -m mK` on a pseudo-terminal."""
    def run(rng, server, home, workspace, limit):
        text = hostile_text(rng)
        path = rng.choice(STAGE_TERMINAL_PATHS)
        error = rng.choice([{"error": {"message": text}}, {"error": text}, {"message": text},
                            {"detail": [{"msg": text}]}])

        def plan(url_path, body, count):
            if path == "answer":
                reply = completion(calls=[("list_dir", json.dumps({"path": text}))]) if count == 1 and \
                    stage != "m0_llm" else completion(text)
                return 200, "application/json", [js(reply)], None
            raw = rng.choice([js(error), text.encode("utf-8", "surrogateescape")])
            return 500, rng.choice(["application/json", "text/plain"]), [raw], None
        server.plan, server.count = plan, 0
        args = ["--base-url", server.url + "/v1"]
        if stage not in ("m0_llm", "m1_loop", "m2_tools"):
            args.append("--yes")
        if stage != "m0_llm":
            args += ["--max-turns", "3"]
        outcome, code, screen = run_cli(args + ["task"], workspace, base_env(home), limit, on_pty=True, module=stage)
        return path, outcome, code, screen, None, is_injected(screen)
    return run


def terminal_run(rng, server, home, workspace, limit):
    text = hostile_text(rng)
    path = rng.choice(TERMINAL_PATHS)
    error = rng.choice([{"error": {"message": text}}, {"error": text}, {"message": text}, {"detail": [{"msg": text}]}])

    def plan(url_path, body, count):
        if url_path.startswith("/api/"):
            return ollama_routes(url_path, lambda: (200, "application/x-ndjson", [js({"error": text}) + b"\n"], None))
        if path == "stream-error" and body.get("stream"):
            return 200, "text/event-stream", [b"data: " + js(error) + b"\n\n"], None
        if path == "answer":
            reply = completion(calls=[("list_dir", json.dumps({"path": text}))]) if count == 1 else completion(text)
            return 200, "application/json", [js(reply)], None
        raw = rng.choice([js(error), text.encode("utf-8", "surrogateescape")])
        return 500, rng.choice(["application/json", "text/plain"]), [raw], None
    server.plan, server.count = plan, 0
    base = server.url + "/v1"
    run = ["run", "--base-url", base, "--api", "openai", "--yes", "--max-turns", "3"]
    if path == "error-body":
        args = run + ["--no-stream", "task"]
    elif path == "stream-error":
        args = run + ["--stream", "task"]
    elif path == "answer":
        args = run + [rng.choice(["--stream", "--no-stream"]), "task"]
    elif path == "ollama-error":
        args = ["run", "--base-url", server.url, "--api", "ollama", "task"]
    elif path == "doctor":
        args = ["doctor", "--base-url", base, "--api", "openai"]
    else:
        from tinyharness import sessions
        folder = home / "data" / "tinyharness" / "sessions"
        folder.mkdir(parents=True, exist_ok=True)
        name = "20260101-000000-" + ("abcdef" if rng.random() < 0.5 else text.replace("/", "_").replace("\x00", "")[:60])
        header = {"format": session_writer.FORMAT, "version": 1, "id": name, "folder": "/tmp/" + text,
                  "started": "2026-01-01T00:00:00+00:00", "model": text}
        user = {"type": "user", "message": {"role": "user", "content": text}}
        try:
            (folder / f"{name}.jsonl").write_text(sessions.json_line(header) + "\n" + sessions.json_line(user) + "\n")
        except (OSError, ValueError):
            name = "20260101-000000-abcdef"
            (folder / f"{name}.jsonl").write_text(sessions.json_line({**header, "id": name}) + "\n" +
                                                 sessions.json_line(user) + "\n")
        if path == "sessions":
            args = ["sessions"]
        elif path == "resume":
            args = ["chat", "--resume", name, "--base-url", base]
        else:
            (workspace / ".tinyharness").mkdir(exist_ok=True)
            (workspace / ".tinyharness" / rng.choice(["mcp.json", "hooks.json"])).write_text(
                text, encoding="utf-8", errors="surrogateescape")
            args = run + ["task"]
    outcome, code, screen = run_cli(args, workspace, base_env(home), limit, stdin=b"n\n", on_pty=True)
    return path, outcome, code, screen, None, is_injected(screen)


# --- Surface: sessions ----------------------------------------------------------------------------------

ODD_VALUES = [5, None, [], {}, "x", True, -1, 1e308, "\udcff", ["a"], {"a": 1}, "", "\x1b]0;x\x07"]


def good_session(folder, workspace):
    from tinyharness import sessions
    writer = sessions.SessionWriter.start(workspace, "m", directory=folder)
    writer.sync([{"role": "system", "content": "s"}, {"role": "user", "content": "first task"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "OK: a.txt"},
                 {"role": "assistant", "content": "Done."}])
    writer.usage = {"prompt_tokens": 5}
    writer.event("subagent", messages=[{"role": "user", "content": "child"}])
    writer.compaction({"role": "user", "content": "[summary] s"}, [{"role": "user", "content": "first task"}],
                      [None, None])
    writer.notice("a notice")
    writer.end("quit")
    writer.close()
    return writer.path


def paths_in(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_in(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_in(item, prefix + (index,))


def replaced(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(copy[head], rest, new)
    return copy


def damage(rng, path):
    """Damage a session file in one of several ways; return the kind."""
    data = path.read_bytes()
    lines = data.split(b"\n")[:-1]
    kind = rng.choice(["value", "value", "value", "cut", "bytes", "deep", "fifo", "line", "empty"])
    if kind == "value":
        number = rng.randrange(len(lines))
        item = json.loads(lines[number])
        where = rng.choice(list(paths_in(item)))
        new = rng.choice(ODD_VALUES)
        lines[number] = json.dumps(replaced(item, where, new)).encode()
        kind = f"value {'/'.join(map(str, where)) or 'line'} of line {number + 1} -> {new!r}"
        path.write_bytes(b"\n".join(lines) + b"\n")
    elif kind == "cut":
        path.write_bytes(data[:rng.randrange(len(data))])
    elif kind == "bytes":
        at = rng.randrange(len(data))
        path.write_bytes(data[:at] + bytes(rng.randrange(128, 256) for _ in range(3)) + data[at:])
    elif kind == "deep":
        at = rng.randrange(len(lines))
        lines[at] = b'{"type": "notice", "text": ' + b"[" * 50000 + b"]" * 50000 + b"}"
        path.write_bytes(b"\n".join(lines) + b"\n")
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "line":
        lines.insert(rng.randrange(1, len(lines) + 1), json.dumps(rng.choice(ODD_VALUES)).encode())
        path.write_bytes(b"\n".join(lines) + b"\n")
    else:
        path.write_bytes(b"")
    return kind


def in_process(argv, workspace, limit, stdin=""):
    """(outcome, exit code, output text) of cli.main(argv) in this process."""
    from tinyharness.cli import main
    outcome, code, out, err = run_main(main, argv, workspace, limit, stdin)
    text = out + err
    if outcome == "ok" and b"Traceback" in text:
        outcome = "crash"
    return outcome, code, text


def sessions_run(rng, server, home, workspace, limit):
    from tinyharness.testing import ScriptedServer
    folder = home / "data" / "tinyharness" / "sessions"
    good_session(folder, workspace)
    path = good_session(folder, workspace)
    kind = damage(rng, path)
    original = path.read_bytes() if path.is_file() else None
    worst, code, output = "ok", 0, b""
    lost = None
    with ScriptedServer(["Resumed."], strict=True) as srv:
        for argv in (["sessions"], ["view", str(path), "-o", str(home / "page.html")],
                     ["chat", "--resume", path.stem, "--yes", "--base-url", srv.base_url]):
            outcome, code, text = in_process(argv, workspace, limit, stdin="go on\n")
            output += text
            if outcome != "ok":
                worst = outcome
                break
        if srv.rejected:
            lost = f"the strict server refused the resumed history: {srv.rejected[0]}"
    if original is not None and worst == "ok":
        damaged = path.with_name(path.name + ".damaged")
        kept = path.read_bytes().startswith(original) or (damaged.exists() and damaged.read_bytes() == original)
        if not kept:
            lost = lost or "the damaged session's bytes were kept neither in place nor in .damaged"
    return kind, worst, code, output, lost, is_injected(output)


# --- Surface: viewer -------------------------------------------------------------------------------------

XSS = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "'><svg onload=alert(1)>",
       '<a href="javascript:alert(1)">x</a>', '</pre><iframe src="http://x"></iframe>', '<style>*{}</style>',
       '<meta http-equiv="refresh" content="0;url=http://x">', "data:image/png;base64,\" onerror=\"alert(1)",
       "<!--", "]]>", "\udcff", "\x00", "&lt;script&gt;", "<img src='http://x/y.png'>"]
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "div", "span", "section", "details",
                "summary", "pre", "p", "ul", "li", "b", "img", "svg", "rect", "line", "text"}


class PageCheck(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems = []

    def handle_starttag(self, tag, attrs):
        if tag not in ALLOWED_TAGS:
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                self.problems.append(f"{tag} {name}={value!r}")
            if tag == "img" and name == "src" and not (value or "").startswith("data:image/"):
                self.problems.append(f"img src={value!r}")
            if tag == "meta" and name == "http-equiv" and value not in ("Content-Security-Policy",):
                self.problems.append(f"meta http-equiv={value!r}")


def viewer_run(rng, server, home, workspace, limit):
    from tinyharness import sessions, view

    def x():
        return "".join(rng.choice(XSS) for _ in range(rng.randint(1, 3)))
    folder = home / "data" / "tinyharness" / "sessions"
    writer = sessions.SessionWriter.start(workspace, x(), directory=folder)
    typed = x()
    image = rng.choice(["data:image/png;base64,AAAA", "http://x/a.png", x()])
    writer.sync([{"role": "system", "content": x()},
                 {"role": "user", "content": [{"type": "text", "text": typed}, {"type": "image_url",
                                                                                "image_url": {"url": image}}]},
                 {"role": "assistant", "content": x(), "reasoning": x(), "tool_calls": [
                     {"id": x(), "type": "function", "function": {"name": x(), "arguments": json.dumps({"p": x()})}},
                     {"id": "t", "type": "function", "function": {"name": "task", "arguments": x()}}]},
                 {"role": "tool", "tool_call_id": x(), "content": x() * rng.randint(1, 200)}])
    writer.event("subagent", messages=[{"role": "user", "content": x()}, {"role": "assistant", "content": x()}])
    writer.notice(x())
    writer.end(x())
    writer.close()
    outcome, code, problems = "ok", 0, []
    try:
        with time_limit(limit):
            page = view.render(writer.path)
        check = PageCheck()
        check.feed(page)
        problems = check.problems
        lost = None if view.esc(typed) in page else "the typed message is not on the page"
    except Hang:
        outcome, lost, page = "hang", None, ""
    except Exception:
        outcome, lost, page, code = "crash", None, traceback.format_exc(), 1
    return "xss", outcome, code, page.encode("utf-8", "backslashreplace"), lost, bool(problems)


# --- Surface: mcp ----------------------------------------------------------------------------------------

MCP_SERVER = r'''
import json, os, sys, time
case = json.loads(os.environ["FUZZ_MCP"])
pages = 0
for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    if "id" not in request:
        continue
    method = request.get("method")
    if method == "initialize":
        result = case.get("init") or {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "f", "version": "1"}}
    elif method == "tools/list":
        pages += 1
        result = case["list"]
        if case.get("endless"):
            result = {**result, "nextCursor": f"page{pages}"}
    elif method == "tools/call":
        result = case["call"]
        if case.get("huge"):
            result = {"content": [{"type": "text", "text": "y" * case["huge"]}]}
        if case.get("fork") and os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        if case.get("sleep"):
            time.sleep(case["sleep"])
    else:
        result = {}
    if case.get("stderr"):
        sys.stderr.write("noise " * case["stderr"])
        sys.stderr.flush()
    reply = {"jsonrpc": "2.0", "id": case.get("id", request["id"]) if method == case.get("odd_id_on") else request["id"],
             "result": result}
    if case.get("raw") and method == case.get("raw_on"):
        sys.stdout.write(case["raw"] + "\n")
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
'''


def mcp_case(rng):
    text = hostile_text(rng)
    tool = {"name": "echo", "description": "echo", "inputSchema": {"type": "object", "properties": {}}}
    list_ = {"tools": [tool]}
    call = {"content": [{"type": "text", "text": "fine"}]}
    kind = rng.choice(["endless", "content5", "required5", "id-list", "names", "stderr", "fork", "not-json",
                       "hostile-text", "schema-list", "tools5", "sleep", "huge"])
    case = {"list": list_, "call": call}
    if kind == "endless":
        case["endless"] = True
    elif kind == "content5":
        case["call"] = {"content": 5}
    elif kind == "required5":
        case["list"] = {"tools": [{**tool, "inputSchema": {"type": "object", "required": 5}}]}
    elif kind == "id-list":
        case.update(odd_id_on=rng.choice(["tools/list", "tools/call"]), id=[1, 2])
    elif kind == "names":
        names = ["a b", "\x1b]0;x\x07", "n" * 309, "", "ok__x", "é"]
        case["list"] = {"tools": [{**tool, "name": n} for n in rng.sample(names, 3)]}
    elif kind == "stderr":
        case["stderr"] = 200000
    elif kind == "fork":
        case["fork"] = True
    elif kind == "not-json":
        case.update(raw=rng.choice(["not json", "[1,2", "{\"id\": [", "\x1b[2J", "null"]),
                    raw_on=rng.choice(["initialize", "tools/list", "tools/call"]))
    elif kind == "hostile-text":
        case["call"] = {"content": [{"type": "text", "text": text}]}
        case["list"] = {"tools": [{**tool, "description": text}]}
    elif kind == "schema-list":
        case["list"] = {"tools": [{**tool, "inputSchema": [1, 2]}]}
    elif kind == "tools5":
        case["list"] = {"tools": 5}
    elif kind == "sleep":
        case["sleep"] = 30
    else:
        case["huge"] = 3_000_000  # made by the server: the environment cannot carry it
    return kind, case


def mcp_run(rng, server, home, workspace, limit):
    kind, case = mcp_case(rng)
    script = home / "server.py"
    script.write_text(MCP_SERVER)

    def plan(path, body, count):
        names = [t["function"]["name"] for t in body.get("tools") or [] if t["function"]["name"].startswith("mcp__")]
        if count == 1 and names:
            return 200, "application/json", [js(completion(calls=[(names[0], "{}")]))], None
        return 200, "application/json", [js(completion("Done."))], None
    server.plan, server.count = plan, 0
    env = {**base_env(home), "FUZZ_MCP": json.dumps(case)}
    args = ["run", "--base-url", server.url + "/v1", "--api", "openai", "--yes", "--no-stream", "--max-seconds", "8",
            "--mcp", f"f={sys.executable} {script}", "task"]
    outcome, code, output = run_cli(args, workspace, env, limit)
    lost = session_lost(home) if outcome == "ok" else None
    return kind, outcome, code, output, lost, is_injected(output)


# --- Surface: ollama -------------------------------------------------------------------------------------

DEEP = "[" * 100000 + "]" * 100000


def ollama_reply(rng):
    def frame(message, **top):
        return {"model": "qwen3:8b", "created_at": "2026-01-01T00:00:00Z", "message": message, "done": True,
                "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 2, **top}

    def call(**function):
        return {"role": "assistant", "content": "", "tool_calls": [{"function": function}]}
    kinds = {
        "tool_calls true": lambda: js(frame({"role": "assistant", "content": "", "tool_calls": True})),
        "tool_calls dict": lambda: js(frame({"role": "assistant", "content": "", "tool_calls": {"a": 1}})),
        "deep arguments": lambda: json.dumps(frame(call(name="list_dir", arguments={"p": 1}))).replace(
            '{"p": 1}', DEEP).encode(),
        "NaN arguments": lambda: json.dumps(frame(call(name="list_dir", arguments={"path": float("nan")}))).encode(),
        "Infinity count": lambda: b'{"message": {"role": "assistant", "content": "x"}, "done": true, '
                                  b'"prompt_eval_count": Infinity}',
        "content 5": lambda: js(frame({"role": "assistant", "content": 5})),
        "content list": lambda: js(frame({"role": "assistant", "content": ["a"]})),
        "message string": lambda: js(frame("hello")),
        "message null": lambda: js(frame(None)),
        "name 5": lambda: js(frame(call(name=5, arguments={}))),
        "arguments string": lambda: js(frame(call(name="list_dir", arguments="{\"path\": \".\"}"))),
        "arguments list": lambda: js(frame(call(name="list_dir", arguments=[1]))),
        "function null": lambda: js(frame({"role": "assistant", "content": "", "tool_calls": [{"function": None}]})),
        "thinking 5": lambda: js(frame({"role": "assistant", "content": "x", "thinking": 5})),
        "counts text": lambda: js(frame({"role": "assistant", "content": "x"}, prompt_eval_count="many")),
        "error line": lambda: js({"error": hostile_text(rng)}),
        "garbage": lambda: rng.choice([b"not json", b"\xff\xfe", b"[]", b"null", b"{", b"5"]),
        "hostile text": lambda: js(frame({"role": "assistant", "content": hostile_text(rng)})),
        "deep body": lambda: DEEP.encode(),
    }
    kind = rng.choice(list(kinds) + ["trickle"])
    if kind == "trickle":
        return kind, [bytes([b]) for b in js(frame({"role": "assistant", "content": "slow"}))], 0.2
    return kind, [kinds[kind]() + b"\n"], None


def ollama_run(rng, server, home, workspace, limit):
    kind, chunks, pause = ollama_reply(rng)
    streamed = rng.random() < 0.5
    done = js({"model": "qwen3:8b", "message": {"role": "assistant", "content": "Done."}, "done": True,
               "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 2}) + b"\n"

    def chat():
        if server.chats == 0:
            server.chats += 1
            return 200, "application/x-ndjson" if streamed else "application/json", chunks, pause
        return 200, "application/json", [done], None

    def plan(path, body, count):
        return ollama_routes(path, chat)
    server.plan, server.count, server.chats = plan, 0, 0
    args = ["run", "--base-url", server.url, "--api", "ollama", "--yes", "--max-seconds", "4", "--max-turns", "4",
            "--stream" if streamed else "--no-stream", "task"]
    outcome, code, output = run_cli(args, workspace, base_env(home), limit)
    lost = session_lost(home) if outcome == "ok" else None
    return f"{kind}{' (streamed)' if streamed else ''}", outcome, code, output, lost, is_injected(output)


# --- Surface: hooks --------------------------------------------------------------------------------------

def hooks_case(rng):
    text = hostile_text(rng).replace("\x00", "").replace("'", "")
    printf = "printf '%s' " + json.dumps(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    commands = {
        "hostile output": printf,
        "hostile output, exit 2": printf + "; exit 2",
        "hostile stderr": printf + " >&2; exit 1",
        "background child": "(sleep 30 &) ; echo ok",
        "sleeps": "sleep 40",
        "flood": "head -c 3000000 /dev/zero | tr '\\0' x",
        "not UTF-8": "printf '\\377\\376\\x1b[2J'",
        "claude deny": "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\"}}'",
        "odd json": "echo '{\"decision\": 5}'",
    }
    shapes = {
        "matcher 5": lambda c: {"pre_tool_use": [{"matcher": 5, "command": c}]},
        "matcher null": lambda c: {"pre_tool_use": [{"matcher": None, "command": c}]},
        "matcher list": lambda c: {"pre_tool_use": [{"matcher": ["shell"], "command": c}]},
        "command 5": lambda c: {"pre_tool_use": [{"matcher": ".*", "command": 5}]},
        "command list": lambda c: {"pre_tool_use": [{"matcher": ".*", "command": ["echo", "x"]}]},
        "entries dict": lambda c: {"pre_tool_use": {"matcher": ".*", "command": c}},
        "unknown event": lambda c: {"whenever": [{"matcher": ".*", "command": c}]},
        "top list": lambda c: [c],
        "bad regex": lambda c: {"pre_tool_use": [{"matcher": "(", "command": c}]},
        "ordinary": lambda c: {rng.choice(["pre_tool_use", "post_tool_use", "stop", "user_prompt_submit"]): [
            {"matcher": ".*", "command": c}]},
        "claude shape": lambda c: {"hooks": {"PreToolUse": [{"matcher": ".*", "hooks": [
            {"type": "command", "command": c, "timeout": rng.choice([1, "x", None, -1])}]}]}},
    }
    shape = rng.choice(list(shapes) + ["ordinary"] * 3)
    command = rng.choice(list(commands))
    return f"{shape} / {command}", shapes[shape](commands[command])


def hooks_run(rng, server, home, workspace, limit):
    kind, config = hooks_case(rng)
    hooks = workspace / ".tinyharness" / "hooks.json"
    hooks.parent.mkdir(exist_ok=True)
    hooks.write_text(json.dumps(config))
    store = home / "data" / "tinyharness" / "trusted.json"
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps({str(hooks.resolve()): hashlib.sha256(hooks.read_bytes()).hexdigest()}))

    def plan(path, body, count):
        if count == 1:
            return 200, "application/json", [js(completion(calls=[("list_dir", '{"path": "."}')]))], None
        return 200, "application/json", [js(completion("Done."))], None
    server.plan, server.count = plan, 0
    args = ["run", "--base-url", server.url + "/v1", "--api", "openai", "--yes", "--no-stream", "--max-seconds", "8",
            "--max-turns", "4", "task"]
    outcome, code, output = run_cli(args, workspace, base_env(home), limit)
    lost = session_lost(home) if outcome == "ok" and code != 2 else None
    return kind, outcome, code, output, lost, is_injected(output)


# --- The fuzzer ------------------------------------------------------------------------------------------

RUNNERS = {"terminal": terminal_run, "sessions": sessions_run, "viewer": viewer_run, "mcp": mcp_run,
           "ollama": ollama_run, "hooks": hooks_run}
LIMITS = {"terminal": 20.0, "sessions": 10.0, "viewer": 20.0, "mcp": 30.0, "ollama": 20.0, "hooks": 30.0}


def fuzz_surface(surface, runs, seed=1, limit=None, show=0, say=print, stage=None):
    """Run one surface's fuzzer; return {"runs", "crashes", "hangs", "lost", "injected", "problems"}.
    With a stage (only the terminal surface has one): that stage's console instead of the package's."""
    runner = stage_terminal_run(stage) if stage else RUNNERS[surface]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    rng = random.Random(f"{surface}-{seed}")
    counts = {"crash": 0, "hang": 0, "lost": 0, "injected": 0}
    problems = []
    base = Path(tempfile.mkdtemp(prefix=f"tinyharness-fuzz-{surface}-"))
    server = Hostile()
    saved_env = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME")}
    try:
        for number in range(runs):
            home = base / f"run{number}"
            workspace = home / "ws"
            workspace.mkdir(parents=True)
            (workspace / "notes.txt").write_text("The testing budget is 300 KM.\n")
            os.environ.update(XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"),
                              HOME=str(home))  # the in-process surfaces: this run's own store, never the user's
            kind, outcome, code, output, lost, injected = runner(rng, server, home, workspace,
                                                                 limit or LIMITS[surface])
            tail = output[-1200:].decode("utf-8", "backslashreplace")
            if outcome != "ok":
                counts[outcome] += 1
                problems.append((outcome, kind, code, tail))
            if lost:
                counts["lost"] += 1
                problems.append(("lost", kind, code, lost[:600]))
            if injected:
                counts["injected"] += 1
                problems.append(("injected", kind, code, repr(output[-600:])))
            shutil.rmtree(home, ignore_errors=True)
    finally:
        server.shutdown()
        server.server_close()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(base, ignore_errors=True)
    for outcome, kind, code, detail in problems[:show]:
        say(f"--- {outcome}: {kind}, exit {code}\n{detail}")
    say(f"surface {surface}{' on ' + stage if stage else ''}: {runs} runs, {counts['crash']} crashes, {counts['hang']} hangs, {counts['lost']} lost, "
        f"{counts['injected']} injected")
    return {"runs": runs, "crashes": counts["crash"], "hangs": counts["hang"], "lost": counts["lost"],
            "injected": counts["injected"], "problems": problems}
