"""SIGTERM (timeout(1), systemd, docker stop) and SIGHUP (a closed terminal) end `tinyharness run` as Ctrl-C
does, sent to a real child while its command runs: the command and all it started are gone, the --json
result is the last line, the exit code is 128 + the signal. And --max-seconds bounds a running command."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ladder import FINAL, ROOT, calls, run_stage, tool_call
from tinyharness import tools
from tinyharness.run_end import Terminated, ending_signals
from tinyharness.sandbox import Sandbox, remove_tmpdir, unavailable_reason
from tinyharness.testing import ScriptedServer

SANDBOXES = ["off"] + (["on"] if unavailable_reason() is None else [])


def own_home(tmp_path):
    home = tmp_path / "home"
    return {"XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"), "HOME": str(home)}


def running_with(marker):
    """Pids whose command line holds MARKER."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def wait_for(condition, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition(), f"never happened (the child's exit code: {proc.poll()})"


def signalled(argv, workspace, env, ready, signum, typed=None):
    """Start `python -m tinyharness ARGV` in WORKSPACE, type TYPED into it (the pipe stays open), wait until
    READY(), send SIGNUM; (exit code, stdout, stderr). The child is killed if it outlives the test."""
    proc = subprocess.Popen([sys.executable, "-m", "tinyharness", *argv], cwd=workspace, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if typed is not None:
            proc.stdin.write(typed)
            proc.stdin.flush()
        wait_for(ready, proc)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_reaps_the_command_and_ends_with_the_result_line(tmp_path, sandbox, signum):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = f"{200 + signum}.{os.getpid()}{len(sandbox)}"  # a sleep no other test starts
    script = [calls(tool_call("shell", command=f"echo started > started.txt; sleep {marker}")), "never read"]
    env = {**os.environ, **own_home(tmp_path), "PYTHONPATH": str(ROOT)}
    with ScriptedServer(script) as server:
        code, out, err = signalled(["run", "--json", "--yes", "--sandbox", sandbox, "--transcript", "t.json",
                                    "--base-url", server.base_url, "sleep"], workspace, env,
                                   lambda: (workspace / "started.txt").exists() and running_with(marker), signum)
    assert code == 128 + signum, err
    assert running_with(marker) == [], "the command outlived the run"
    result = json.loads(out.splitlines()[-1])
    assert result["type"] == "result" and result["exit_code"] == 128 + signum and result["is_error"] is True
    assert result["error"] == f"terminated by {signal.Signals(signum).name}" and result["session_id"]
    assert "Traceback" not in err and f"Terminated ({signal.Signals(signum).name})." in err
    assert json.loads((workspace / "t.json").read_text())[-1]["tool_calls"]  # the transcript was written


def kill_left(marker):
    for pid in running_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class SignalledAtStart(threading.Thread):
    """The shell tool's output reader, with SIGTERM arriving while start() waits for the thread to run (on a
    loaded machine, the moment the run's command has started and the signal comes)."""

    def start(self):
        super().start()
        raise Terminated(signal.SIGTERM)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_signal_as_the_shell_tool_starts_reading_still_ends_the_command(tmp_path, monkeypatch, sandbox):
    marker = f"{230 + len(sandbox)}.{os.getpid()}"
    box, started = Sandbox(enabled=sandbox == "on"), []
    start = box.start
    monkeypatch.setattr(box, "start", lambda *args, **kw: started.append(start(*args, **kw)) or started[-1])
    monkeypatch.setattr(tools, "threading", SimpleNamespace(Thread=SignalledAtStart))
    try:
        with pytest.raises(Terminated):
            tools.shell(str(tmp_path), f"sleep {marker}", timeout=60, sandbox=box)
        assert running_with(marker) == [], "the command outlived the signal"
    finally:
        kill_left(marker)
        box._spawners.close(remove_tmpdir)
        for process, _ in started:  # left unreaped for a chat to count: reaped here
            getattr(getattr(process, "spawner", None), "process", process).wait()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_signal_as_the_command_starts_still_ends_it(tmp_path, monkeypatch, sandbox):
    """SIGTERM while the command starts: in Popen, after the fork and before it keeps the child's number, on a
    loaded machine. Here it comes as the sandbox hands the process over: handled at once, where it used to be
    raised before the shell tool knew the command."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set in the main thread only")
    marker = f"{240 + len(sandbox)}.{os.getpid()}"
    box, started = Sandbox(enabled=sandbox == "on"), []
    start = box.start

    def start_then_signal(*args, **kw):
        started.append(start(*args, **kw))
        os.kill(os.getpid(), signal.SIGTERM)
        return started[-1]
    monkeypatch.setattr(box, "start", start_then_signal)
    try:
        with ending_signals(), pytest.raises(Terminated):
            tools.shell(str(tmp_path), f"sleep {marker}", timeout=60, sandbox=box)
        assert running_with(marker) == [], "the command outlived the signal"
    finally:
        kill_left(marker)
        box._spawners.close(remove_tmpdir)
        for process, _ in started:  # left unreaped for a chat to count: reaped here
            getattr(getattr(process, "spawner", None), "process", process).wait()


def test_max_seconds_bounds_a_running_command(tmp_path):
    script = [calls(tool_call("shell", command="sleep 200")), "never read"]
    with ScriptedServer(script) as server:
        started = time.monotonic()
        done = run_stage(FINAL, tmp_path, "--yes", "--sandbox", "off", "--max-seconds", "1.5", "--base-url",
                         server.base_url, "sleep")
        took = time.monotonic() - started
    assert done.returncode == 3 and "--max-seconds 1.5" in done.stdout, done.stderr
    assert took < 10 and len(server.requests) == 1
    assert "-> ERROR: timed out after 1." in done.stdout  # what was left of 1.5 s, not --shell-timeout 60


def session_events(tmp_path):
    found = sorted((tmp_path / "home" / "data" / "tinyharness" / "sessions").glob("*.jsonl"))
    return [json.loads(line) for line in found[0].read_text().splitlines()] if found else []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_a_chat_its_command_reaped_and_its_session_ended(tmp_path, signum):
    """`chat` ends on SIGTERM and SIGHUP, in a turn's command or at the prompt, as a piped chat ends on
    Ctrl-C: the command and all it started killed, the session's end written, exit 128 + the signal."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = f"{210 + signum}.{os.getpid()}"
    script = [calls(tool_call("shell", command=f"echo started > started.txt; sleep {marker}")), "never read"]
    env = {**os.environ, **own_home(tmp_path), "PYTHONPATH": str(ROOT)}
    name = signal.Signals(signum).name
    with ScriptedServer(script) as server:
        code, out, err = signalled(["chat", "--yes", "--sandbox", SANDBOXES[-1], "--base-url", server.base_url],
                                   workspace, env, lambda: (workspace / "started.txt").exists() and running_with(marker),
                                   signum, typed="sleep, please\n")
    assert code == 128 + signum, err
    assert running_with(marker) == [], "the command outlived the chat"
    assert "Traceback" not in err and f"Terminated ({name})" in err and f"the session ends (exit {128 + signum})" in err
    end = session_events(tmp_path)[-1]
    assert (end["type"], end["reason"]) == ("end", f"terminated by {name}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_at_the_chat_prompt_ends_it_with_its_session_saved(tmp_path, signum):
    """At the prompt, where Ctrl-C only gives a fresh line, SIGTERM and SIGHUP end the chat: the session's
    end written, and under --json the result line last."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, **own_home(tmp_path), "PYTHONPATH": str(ROOT)}
    name = signal.Signals(signum).name
    answered = lambda: any(e.get("message", {}).get("content") == "Hello there." for e in session_events(tmp_path))
    with ScriptedServer(["Hello there."]) as server:   # the pipe stays open after "hi": the chat waits at its prompt
        code, out, err = signalled(["chat", "--json", "--base-url", server.base_url], workspace, env, answered,
                                   signum, typed="hi\n")
    assert code == 128 + signum, err
    assert f"Terminated ({name})" in err and "Traceback" not in err, err
    result = json.loads(out.splitlines()[-1])  # chat --json: the result line last, on this exit too
    assert (result["type"], result["exit_code"], result["is_error"], result["messages"]) == ("result", 128 + signum,
                                                                                            True, 1)
    end = session_events(tmp_path)[-1]
    assert (end["type"], end["reason"]) == ("end", f"terminated by {name}")
