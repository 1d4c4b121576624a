"""Text from outside never reaches the terminal raw: every console print path, under a real pty.

Each test starts the real command line with its stdin, stdout and stderr on a pseudo-terminal, feeds
it a hostile text through one path (a server's error body, an error event in a stream, an Ollama
error line, doctor's findings, a session's id, folder and first task, `chat --resume` of a session
from another folder, the trust prompt's preview of a workspace's hooks.json and mcp.json), and reads
every byte the terminal was sent. The payload retitles the window (OSC 0), writes the clipboard
(OSC 52), clears the screen (CSI 2J), opens a CSI with the one-byte C1 code U+009B and reverses the
text with U+202E: none of those bytes may arrive; their visible escapes must.
"""
import json
import os
import select
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.ladder import on_terminal

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = ("\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u009b31mAll good: the task completed "
           "successfully.\u202etxt.exe")
RAW = [b"\x1b", b"\x07", "\u009b".encode(), "\u202e".encode()]
VISIBLE = ["\\x1b]0;pwned\\x07", "\\x1b]52;c;", "\\x1b[2J", "\\x9b31m", "\\u202etxt.exe"]


def assert_clean(screen, expect_visible=True):
    for raw in RAW:
        assert raw not in screen, (raw, screen[-600:])
    if expect_visible:
        text = screen.decode("utf-8", errors="replace")
        assert all(v in text for v in VISIBLE), text[-800:]


def run_on_pty(args, cwd, data_home, answers=b"", timeout=60, env=None):
    """(exit status, every byte the terminal received) of `tinyharness ARGS` with a pty as its terminal;
    `env`: variables set (a value of None: removed) over the test's own."""
    master, slave = os.openpty()
    base = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_") and k != "NO_COLOR"}
    base.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(data_home), XDG_CONFIG_HOME=str(Path(data_home) / "config"),
                HOME=str(data_home), TERM="dumb", PYTHONIOENCODING="utf-8")
    base.update(env or {})
    env = {k: v for k, v in base.items() if v is not None}
    # the pty is the run's controlling terminal too: /dev/tty, where the permission prompts are answered
    process = subprocess.Popen(on_terminal([sys.executable, "-m", "tinyharness", *args], os.ttyname(slave)), cwd=cwd,
                               stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    if answers:
        os.write(master, answers)
    received, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal is closed
                break
            if not chunk:
                break
            received += chunk
        elif process.poll() is not None:
            break
    else:
        process.kill()
        pytest.fail(f"tinyharness {args[0]} did not end: {bytes(received)[-400:]!r}")
    os.close(master)
    return process.wait(timeout=10), bytes(received)


class Hostile(BaseHTTPRequestHandler):
    """Every answer carries the payload: as an HTTP 500 body under /body, as an error event of a stream
    under /stream, and as the error line of Ollama's native /api/chat."""

    def log_message(self, *args):
        pass

    def reply(self, status, obj, kind="application/json"):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/version":
            return self.reply(200, {"version": "0.12.10"})
        if self.path == "/api/tags":
            return self.reply(200, {"models": [{"name": "qwen3:8b", "model": "qwen3:8b"}]})
        self.reply(500, {"error": {"message": PAYLOAD}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path == "/api/show":
            return self.reply(200, {"capabilities": ["completion", "tools"], "model_info": {}})
        if self.path == "/api/chat":
            return self.reply(200, (json.dumps({"error": PAYLOAD}) + "\n").encode(), "application/x-ndjson")
        if self.path.startswith("/stream") and body.get("stream"):
            return self.reply(200, f"data: {json.dumps({'error': {'message': PAYLOAD}})}\n\n".encode(),
                              "text/event-stream")
        self.reply(500, {"error": {"message": PAYLOAD}})


@pytest.fixture(scope="module")
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def place(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws", tmp_path / "data"


@pytest.mark.parametrize("route, flags", [("/body/v1", ["--api", "openai", "--no-stream"]),
                                          ("/stream/v1", ["--api", "openai", "--stream"]),
                                          ("", ["--api", "ollama"])],
                         ids=["http-error-body", "stream-error-event", "ollama-error-line"])
def test_run_error_line_shows_a_server_error_text_escaped(hostile, place, route, flags):
    workspace, data = place
    status, screen = run_on_pty(["run", "--base-url", hostile + route, *flags, "say hi"], workspace, data)
    assert status == 1 and b"error:" in screen
    assert_clean(screen)


def test_doctor_shows_a_server_error_text_escaped(hostile, place):
    workspace, data = place
    status, screen = run_on_pty(["doctor", "--base-url", hostile + "/body/v1", "--api", "openai"], workspace, data)
    assert status != 0 and b"FAIL" in screen
    assert_clean(screen)


def write_session(data, name, folder, task):
    sessions = data / "tinyharness" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / f"{name}.jsonl"
    lines = [{"format": "tinyharness-session", "version": 1, "id": name, "folder": folder,
              "started": "2026-01-01T00:00:00+00:00", "model": "m"},
             {"type": "user", "time": "t", "message": {"role": "user", "content": task}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_sessions_shows_an_id_a_folder_and_a_task_escaped(place):
    workspace, data = place
    write_session(data, "20260101-000000-aaaaaa", "/tmp/" + PAYLOAD, "x")
    write_session(data, "20260101-000001-bbbbbb", "/tmp/x", PAYLOAD)
    write_session(data, "20260101-000002-\x1b]0;pwned\x07\u009b\u202e", "/tmp/y", "y")
    status, screen = run_on_pty(["sessions"], workspace, data)
    assert status == 0 and b"20260101-000002-\\x1b]0;pwned\\x07\\x9b\\u202e" in screen
    assert_clean(screen, expect_visible=False)  # folder and task are cut to fit the width: their ends show
    assert b"\\u202etxt.exe  x" in screen and b"  \\x1b]0;pwned\\x07..." in screen


def test_chat_resume_of_another_folders_session_names_the_folder_escaped(place):
    workspace, data = place
    write_session(data, "20260101-000000-cccccc", "/tmp/" + PAYLOAD, "x")
    status, screen = run_on_pty(["chat", "--resume", "20260101-000000-cccccc", "--base-url", "http://127.0.0.1:9/v1"],
                                workspace, data, answers=b"n\n")
    assert status == 1 and b"belongs to" in screen
    assert_clean(screen)


@pytest.mark.parametrize("name, text", [
    ("hooks.json", json.dumps({"pre_tool_use": [{"matcher": "shell", "command": "true #" + PAYLOAD}]},
                              ensure_ascii=False)),
    ("mcp.json", json.dumps({"servers": {"x": {"command": "true", "args": [PAYLOAD]}}}, ensure_ascii=False))],
    ids=["hooks.json", "mcp.json"])
def test_the_trust_prompt_previews_a_workspace_file_escaped(place, name, text):
    workspace, data = place
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / name).write_text(text, encoding="utf-8")
    # JSON holds ESC only as \u001b (a file with more after the JSON is refused before any preview), but
    # C1 codes and bidi controls stand raw in its strings: the preview must show them escaped
    assert "\x1b" not in text
    expect = ["\\x9b31m", "\\u202etxt.exe"]
    status, screen = run_on_pty(["run", "--base-url", "http://127.0.0.1:9/v1", "say hi"], workspace, data,
                                answers=b"n\n")
    assert status == 2 and b"not trusted" in screen
    assert_clean(screen, expect_visible=False)
    assert all(v in screen.decode("utf-8", errors="replace") for v in expect)


def test_a_hooks_file_that_is_not_json_is_named_escaped(place):
    workspace, data = place
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "hooks.json").write_text("{" + PAYLOAD, encoding="utf-8")
    status, screen = run_on_pty(["run", "--base-url", "http://127.0.0.1:9/v1", "say hi"], workspace, data)
    assert status == 2 and b"error:" in screen
    assert_clean(screen, expect_visible=False)


def test_a_terminal_chat_prints_stats_on_a_line_of_their_own(place):
    from tinyharness.testing import ScriptedServer
    workspace, data = place
    with ScriptedServer(["Hello there, streamed"]) as srv:
        status, screen = run_on_pty(["chat", "--base-url", srv.base_url, "--api", "openai"], workspace, data,
                                    answers=b"hi\n/quit\n", timeout=30)
    assert status == 0 and srv.requests and srv.requests[0].get("stream") is True
    text = screen.decode("utf-8", errors="replace")
    assert "streamed\r\n[stats]" in text, text[-400:]
