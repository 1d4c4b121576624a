"""A run never dies of its own bookkeeping: a session, transcript or trust-store write that fails (a
full disk, a read-only file or folder, a removed folder) warns once on stderr, saying what was not
saved, and the run finishes its task with exit 0."""
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ladder import ROOT, calls, run_on_terminal, tool_call
from tinyharness.testing import ScriptedServer

SCRIPT = [calls(tool_call("list_dir", path=".")), "Done: the folder holds notes.txt."]


@pytest.fixture
def place(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")
    return workspace, tmp_path / "data"


def env_for(data):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(data), XDG_CONFIG_HOME=str(Path(data) / "config"),
               HOME=str(data), TERM="dumb", PYTHONIOENCODING="utf-8")
    return env


def tinyharness(workspace, data, *args, stdin="", file_size=None, tty=None):
    """`tinyharness ARGS`; `tty`: the answers typed at a terminal of its own (a pty)."""
    def limit():  # a disk that fills: every write past FILE_SIZE bytes fails with EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    if tty is not None:
        return run_on_terminal([sys.executable, "-m", "tinyharness", *args], workspace, stdin, tty, 60, env_for(data),
                               preexec_fn=limit if file_size else None)
    return subprocess.run([sys.executable, "-m", "tinyharness", *args], cwd=workspace, input=stdin, text=True,
                          capture_output=True, env=env_for(data), timeout=60,
                          preexec_fn=limit if file_size else None)


def warnings(stderr):
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_a_full_disk_under_the_session_warns_once_and_the_run_finishes(place):
    workspace, data = place
    with ScriptedServer(SCRIPT) as srv:
        done = tinyharness(workspace, data, "run", "--base-url", srv.base_url, "what is here?", file_size=1500)
    assert done.returncode == 0, done.stderr
    assert "Done: the folder holds notes.txt." in done.stdout and "Traceback" not in done.stderr
    [warning] = warnings(done.stderr)
    assert "could not be written (File too large)" in warning and "not saved" in warning
    assert len(srv.requests) == 2  # the task went on to its answer


def test_a_transcript_on_a_full_device_warns_once_and_the_run_finishes(place):
    workspace, data = place
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with ScriptedServer(SCRIPT) as srv:
        done = tinyharness(workspace, data, "run", "--base-url", srv.base_url, "--transcript", "/dev/full", "go")
    assert done.returncode == 0, done.stderr
    [warning] = warnings(done.stderr)
    assert "the transcript /dev/full could not be written (/dev/full is a device, not a regular file" in warning


def test_a_removed_sessions_folder_is_said_once_and_the_run_finishes(place):
    workspace, data = place
    out = data / "out"
    out.mkdir(parents=True)

    def policy(body, index):
        if index == 0:  # the data folder and the transcript's are cleaned away while the run is under way
            shutil.rmtree(data / "tinyharness" / "sessions")
            shutil.rmtree(out)
        return SCRIPT[index]
    with ScriptedServer(policy=policy) as srv:
        done = tinyharness(workspace, data, "run", "--base-url", srv.base_url, "--transcript", str(out / "t.json"), "go")
    assert done.returncode == 0, done.stderr
    said = warnings(done.stderr)
    assert len(said) == 2, said  # one for the session, one for the transcript: each once
    assert any("the file was removed" in w for w in said) and any("transcript" in w for w in said)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_resuming_a_read_only_session_warns_and_the_chat_goes_on(place):
    workspace, data = place
    with ScriptedServer(["Hello."]) as srv:
        tinyharness(workspace, data, "chat", "--base-url", srv.base_url, stdin="hi\n")
    [path] = (data / "tinyharness" / "sessions").glob("*.jsonl")
    path.chmod(0o400)
    before = path.read_bytes()
    with ScriptedServer(["Again."]) as srv:
        done = tinyharness(workspace, data, "chat", "--resume", path.stem, "--base-url", srv.base_url, stdin="more\n")
    assert done.returncode == 0, done.stderr
    assert "Again." in done.stdout and "is read-only" in done.stderr and path.read_bytes() == before


def test_resuming_a_session_on_a_full_disk_warns_and_the_chat_goes_on(place):
    workspace, data = place
    with ScriptedServer(["Hello."]) as srv:
        tinyharness(workspace, data, "chat", "--base-url", srv.base_url, stdin="hi\n")
    [path] = (data / "tinyharness" / "sessions").glob("*.jsonl")
    with ScriptedServer(["Again."]) as srv:
        done = tinyharness(workspace, data, "chat", "--resume", path.stem, "--base-url", srv.base_url,
                           stdin="more\n", file_size=path.stat().st_size + 10)
    assert done.returncode == 0, done.stderr
    assert "Again." in done.stdout and len(warnings(done.stderr)) == 1 and "not saved whole" in done.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders")
def test_trusting_with_a_read_only_data_folder_holds_for_the_run_and_says_so(place):
    workspace, data = place
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps(
        {"pre_tool_use": [{"matcher": "shell", "command": "true"}]}))
    (data / "tinyharness").mkdir(parents=True)
    (data / "tinyharness").chmod(0o500)
    try:
        with ScriptedServer(SCRIPT) as srv:
            done = tinyharness(workspace, data, "run", "--base-url", srv.base_url, "go", tty="y\n")
    finally:
        (data / "tinyharness").chmod(0o700)
    assert done.returncode == 0, done.stderr
    assert "holds for this run only" in done.stderr and "Done:" in done.stdout


def test_trusting_on_a_full_disk_holds_for_the_run_and_says_so(place):
    workspace, data = place
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps(
        {"pre_tool_use": [{"matcher": "shell", "command": "true"}]}))
    store = data / "tinyharness" / "trusted.json"
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps({f"/x/{i}": "0" * 64 for i in range(40)}))  # bigger than the limit below
    with ScriptedServer(SCRIPT) as srv:
        done = tinyharness(workspace, data, "run", "--no-session", "--base-url", srv.base_url, "go", tty="y\n",
                           file_size=1000)
    assert done.returncode == 0, done.stderr
    assert "holds for this run only" in done.stderr and "Done:" in done.stdout


def test_a_session_refused_at_its_start_is_one_warning_and_the_work_goes_on(tmp_path, monkeypatch):
    """A new session whose lock is refused (SessionError, not an OSError: it has no strerror) is
    one warning naming why, as a full disk is, and the work goes on without one."""
    import io

    from tinyharness import sessions
    from tinyharness.sessions import writer

    def refused(fd, path):
        os.close(fd)
        raise writer.SessionError("the session is open in process 1")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(writer, "lock", refused)
    err = io.StringIO()
    assert sessions.start_or_warn(tmp_path, "m", err) is None
    assert "open in process 1); going on without one" in err.getvalue(), err.getvalue()
