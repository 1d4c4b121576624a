"""Session files are input: hand-edited or foreign shapes, FIFOs, two writers, text that UTF-8 cannot
hold, sizes. `sessions`, `view` and `chat --resume` answer each with a sentence, never a traceback or
a hang."""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ladder import ROOT
from tinyharness import cli, sessions, view
from tinyharness.testing import ScriptedServer

HEADER = {"format": "tinyharness-session", "version": 1, "id": "20260101-000000-abcdef", "folder": "/tmp/ws",
          "started": "2026-01-01T00:00:00+00:00", "model": "m"}
USER = {"type": "user", "time": "t", "message": {"role": "user", "content": "first task"}}
DEEP = "[" * 100000 + "]" * 100000


def header(**changes):
    return json.dumps({**HEADER, **changes})


def event(**changes):
    return json.dumps({**USER, **changes})


def message(**changes):
    return event(message={"role": "user", "content": "x", **changes})


def assistant(**changes):
    return json.dumps({"type": "assistant", "message": {"role": "assistant", "content": None, **changes}})


# (name, first line, later lines, the header is bad: `sessions` skips the file with a note)
SHAPES = [
    ("id is a number", header(id=5), [event()], True),
    ("folder is null", header(folder=None), [event()], True),
    ("folder is a list", header(folder=["/tmp"]), [event()], True),
    ("model is an object", header(model={}), [event()], True),
    ("version is text", header(version="1"), [event()], True),
    ("header is a list", "[1, 2]", [event()], True),
    ("header is a string", '"tinyharness-session"', [event()], True),
    ("header nested too deep", DEEP, [event()], True),
    ("empty file", "", [], True),
    ("started is a number", header(started=5), [event()], True),
    ("event is a number", header(), ["5"], False),
    ("event type is a number", header(), [event(type=5)], False),
    ("message is null", header(), [event(message=None)], False),
    ("content is a number", header(), [message(content=5)], False),
    ("a text part's text is a number", header(), [message(content=[{"type": "text", "text": 5}])], False),
    ("an image part's url is a number", header(), [message(content=[{"type": "image_url", "image_url": {"url": 5}}])],
     False),
    ("tool_calls is true", header(), [event(), assistant(tool_calls=True)], False),
    ("a tool call is a string", header(), [event(), assistant(tool_calls=["x"])], False),
    ("arguments are an object", header(), [event(), assistant(tool_calls=[
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}])], False),
    ("compaction summary is a string", header(), [event(), json.dumps({"type": "compaction", "summary": "x",
                                                                       "replaced": []})], False),
    ("subagent messages is a number", header(), [event(), json.dumps({"type": "subagent", "messages": 5})], False),
    ("event nested too deep", header(), [event(), DEEP], False),
    ("a byte that is not UTF-8", header(), [event(), '{"type": "notice", "text": "\xff"}'], False),
    ("usage is text", header(), [event(), json.dumps({"type": "assistant", "usage": "lots", "message": {
        "role": "assistant", "content": "hi"}})], False),
    ("role is not the event's", header(), [event(message={"role": "assistant", "content": "x"})], False),
]


def write(folder, name, first, rest):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    data = "\n".join([first, *rest]) + "\n" if first else b""
    if name == "20260101-000000-bbbbbb":  # the byte that is not UTF-8 goes in raw
        path.write_bytes(data.encode("utf-8").replace("\xff".encode("utf-8"), b"\xff"))
    else:
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    data = tmp_path / "data"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for key, value in {"XDG_DATA_HOME": data, "XDG_CONFIG_HOME": tmp_path / "config", "HOME": tmp_path}.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(workspace)
    return data / "tinyharness" / "sessions"


def main(argv, capsys, stdin=""):
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        status = cli.main(argv)
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def test_there_are_at_least_twenty_three_shapes():
    assert len(SHAPES) >= 23


@pytest.mark.parametrize("name, first, rest, bad_header", SHAPES, ids=[s[0] for s in SHAPES])
def test_each_shape_gets_a_sentence_from_sessions_view_and_resume(home, capsys, name, first, rest, bad_header):
    good = write(home, "20260101-000000-aaaaaa", header(), [event()])
    path = write(home, "20260101-000000-bbbbbb" if "UTF-8" in name else "20260101-000001-bbbbbb", first, rest)
    status, out, err = main(["sessions"], capsys)
    assert status == 0 and good.stem in out  # one bad file never hides the others
    if bad_header:
        assert path.stem not in out and f"note: skipped {path.name}: " in err
    else:
        assert path.stem in out
    status, out, err = main(["view", str(path), "-o", str(home.parent / "page.html")], capsys)
    if bad_header:
        assert status == 1 and err.startswith("error: ")
    else:
        assert status == 0 and "damaged at line" in (home.parent / "page.html").read_text()
    with ScriptedServer(["Resumed fine."], strict=True) as srv:
        status, out, err = main(["chat", "--resume", path.stem, "--yes", "--base-url", srv.base_url], capsys, "go on\n")
    if bad_header:
        assert status == 1 and "is not a usable tinyharness session" in err and not srv.requests
    else:
        assert status == 0 and "damaged at line" in err and "Resumed fine." in out
        assert not srv.rejected  # what was kept replays to a history a strict server takes
        assert Path(str(path) + ".damaged").exists()


def test_a_fifo_among_the_sessions_is_skipped_not_waited_for(home, tmp_path):
    write(home, "20260101-000000-aaaaaa", header(), [event()])
    os.mkfifo(home / "20260101-000001-ffffff.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(home.parent.parent)}
    done = subprocess.run([sys.executable, "-m", "tinyharness", "sessions"], capture_output=True, text=True,
                          env=env, timeout=30)
    assert done.returncode == 0 and "20260101-000000-aaaaaa" in done.stdout
    assert "skipped 20260101-000001-ffffff.jsonl" in done.stderr and "not a regular file" in done.stderr
    done = subprocess.run([sys.executable, "-m", "tinyharness", "view", str(home / "20260101-000001-ffffff.jsonl")],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 1 and "not a regular file" in done.stderr


def test_a_fifo_named_hooks_json_is_a_usage_error_not_a_hang(home, tmp_path):
    workspace = Path.cwd()
    (workspace / ".tinyharness").mkdir()
    os.mkfifo(workspace / ".tinyharness" / "hooks.json")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tinyharness", "run", "--base-url", "http://127.0.0.1:9/v1", "hi"],
                          capture_output=True, text=True, env=env, timeout=30, cwd=workspace)
    assert done.returncode == 2 and "hooks.json is not a regular file" in done.stderr


def test_a_second_writer_is_refused_with_the_first_ones_pid(home):
    path = write(home, "20260101-000000-aaaaaa", header(folder=str(Path.cwd().resolve())), [event()])
    session, writer = sessions.resume(path)  # this process holds the session, as a running chat would
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with ScriptedServer(["never"]) as srv:
            done = subprocess.run([sys.executable, "-m", "tinyharness", "chat", "--resume", path.stem, "--base-url",
                                   srv.base_url], input="hi\n", capture_output=True, text=True, env=env, timeout=30)
        assert done.returncode == 1 and not srv.requests
        assert f"is open in process {os.getpid()}" in done.stderr
    finally:
        writer.close()
    assert path.read_text().count("\n") == 2  # nothing interleaved


def test_view_writes_a_lone_surrogate_the_harness_itself_saved(home, capsys):
    writer = sessions.SessionWriter.start(Path.cwd(), "m")
    writer.sync([{"role": "system", "content": "s"}, {"role": "user", "content": "go"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "write_file",
                                                                   "arguments": '{"path": "\udcff"}'}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "bad \udcff name"}])
    writer.close()
    status, out, err = main(["view", str(writer.path)], capsys)
    assert status == 0
    page = writer.path.with_suffix(".html").read_bytes()
    assert b"bad \\udcff name" in page


def test_view_measures_a_session_without_usage_once_not_at_every_call(home, monkeypatch):
    """The page's token estimate grows with the history: summed again at each call it is quadratic."""
    writer = sessions.SessionWriter.start(Path.cwd(), "m")
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    for i in range(300):
        history += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 500}]
    writer.sync(history)
    writer.close()
    measured = []
    real = view.json_chars
    monkeypatch.setattr(view, "json_chars", lambda messages: measured.append(len(messages)) or real(messages))
    view.render(writer.path)
    assert sum(measured) <= 2 * len(history)  # each message measured a bounded number of times


def test_view_takes_the_id_that_sessions_prints(home, capsys):
    path = write(home, "20260101-000000-aaaaaa", header(), [event()])
    status, out, _ = main(["sessions"], capsys)
    listed = out.splitlines()[1].split()[0]
    status, out, err = main(["view", listed], capsys)
    assert status == 0 and out.strip() == str(path.with_suffix(".html"))
