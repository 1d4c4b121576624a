"""The `tinyharness` command itself: demo, fake-server, course, help."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.ladder import ROOT


def tinyharness(*args, cwd=None, timeout=60, stdin="", env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8", **(env or {})}
    env = {k: v for k, v in env.items() if k not in ("TINYHARNESS_BASE_URL", "TINYHARNESS_MODEL")}
    return subprocess.run([sys.executable, "-m", "tinyharness", *args], cwd=cwd or ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env, input=stdin)


def test_demo_runs_the_notes_task_offline(tmp_path):
    result = tinyharness("demo", "--keep", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})  # kept: read what it wrote
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "REPLAYED" in out
    for turn in range(1, 6):
        assert f"Turn {turn} - the model (replayed)" in out
    assert "Turn 6" not in out
    assert out.count("  [tool] ") == 4 and "[stats] turns=5 tool_calls=4" in out
    workspace = out.split("Workspace: ", 1)[1].split(" (a fresh copy", 1)[0]
    written = open(os.path.join(workspace, "budget.md"), encoding="utf-8").read()
    assert "300 KM" in written and "  | 300 KM" in out
    assert not (ROOT / "examples" / "notes" / "budget.md").exists(), "the demo must work on a copy"


def test_help_explains_every_command():
    result = tinyharness("--help")
    assert result.returncode == 0
    for command in ("run", "demo", "fake-server", "course"):
        assert command in result.stdout


COMMANDS = ["run", "chat", "demo", "doctor", "eval", "view", "sessions", "fake-server",
            *(f"course {action}" for action in ("list", "diff", "quiz", "check", "start", "workspace"))]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_help_that_explains_it(command, capsys):
    # COURSE.md: each command has a --help that explains; a bare usage line and flag list does not.
    from tinyharness.cli import main
    try:
        code = main([*command.split(), "--help"])
    except SystemExit as done:
        code = done.code
    assert code in (0, None)
    blocks = capsys.readouterr().out.split("\n\n")
    assert blocks[0].startswith(f"usage: tinyharness {command}")
    description = blocks[1].strip()
    assert not description.startswith(("positional arguments", "options")) and len(description) > 40, description


def test_no_command_is_a_usage_error():
    assert tinyharness().returncode == 2


def test_fake_server_command_serves_a_script(tmp_path):
    script = tmp_path / "s.json"
    script.write_text('["hello from the script"]')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tinyharness", "fake-server", "--script", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("Scripted model server on http://127.0.0.1:"), line
        base_url = line.split(" on ", 1)[1].split()[0]
        answer = requests.post(base_url + "/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, timeout=10).json()
        assert answer["choices"][0]["message"]["content"] == "hello from the script"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_fake_server_with_missing_script_exits_2(tmp_path):
    result = tinyharness("fake-server", "--script", str(tmp_path / "nope.json"))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_course_diff_m0_m1_shows_the_loop_arriving():
    result = tinyharness("course", "diff", "m0", "m1")
    assert result.returncode == 0
    assert "+++ m1_loop/loop.py" in result.stdout and "\x1b[" not in result.stdout  # no colour into a pipe
    assert "+++ m1_loop/llm.py" not in result.stdout  # carried over byte-identical, so not in the diff


def test_course_list_names_every_stage(tmp_path):
    env_progress = tmp_path / "progress.json"
    result = subprocess.run([sys.executable, "-m", "tinyharness", "course", "list"], cwd=ROOT, capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "TINYHARNESS_PROGRESS": str(env_progress)})
    assert result.returncode == 0
    assert "m0_llm" in result.stdout and "m1_loop" in result.stdout and "quiz not taken" in result.stdout
    assert "After m8: docs/closing.md - what the harness is, and is not" in result.stdout   # the last page
    assert (ROOT / "docs" / "closing.md").is_file()


def test_a_pipe_closed_early_is_not_a_traceback():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(f'"{sys.executable}" -m tinyharness course diff m0 m8 | head -n 2', shell=True, cwd=ROOT,
                            capture_output=True, text=True, env=env, timeout=60)
    assert len(result.stdout.splitlines()) == 2
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


# --- For scripts: --version, run --json, run -, sessions, start-up ----------------------------------

def own_home(tmp_path):
    """A home beside the workspace, never holding it: `run` refuses a workspace that contains home."""
    home = tmp_path.parent / f"{tmp_path.name}-home"
    return {"XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"), "HOME": str(home)}


def test_version_says_the_package_version():
    from tinyharness import __version__
    result = tinyharness("--version")
    assert result.returncode == 0 and result.stdout == f"tinyharness {__version__}\n"


def test_help_and_version_import_neither_requests_nor_the_loop():
    """What keeps `tinyharness --help` near bare Python's start (benchmarks/startup.py measures it)."""
    probe = ("import sys\nfrom tinyharness.cli import main\nfor argv in (['--help'], ['--version']):\n"
             "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
             "print(sorted(m for m in ('requests', 'tinyharness.loop', 'tinyharness.sandbox', 'tinyharness.llm') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout + done.stderr


def test_run_json_writes_only_json_lines_the_events_then_the_result(tmp_path):
    import json
    from tests.ladder import calls, tool_call
    from tinyharness.testing import ScriptedServer
    (tmp_path / "notes.txt").write_text("hi\n")
    with ScriptedServer([calls(tool_call("read_file", path="notes.txt")), "It says hi."]) as srv:
        done = tinyharness("run", "--json", "--base-url", srv.base_url, "read notes.txt", cwd=tmp_path,
                           env=own_home(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # every line is one JSON object
    assert [line["type"] for line in lines] == ["start", "system", "user", "assistant", "tool", "assistant", "result"]
    assert lines[0]["session"] and lines[2]["message"]["content"] == "read notes.txt"
    assert lines[3]["usage"]["prompt_tokens"] > 0 and lines[4]["message"]["content"] == "hi\n"
    result = lines[-1]
    assert result["exit_code"] == 0 and result["answer"] == "It says hi."
    assert result["stats"]["turns"] == 2 and result["stats"]["tool_calls"] == 1
    assert "[tool] read_file" in done.stderr and "[stats]" in done.stderr


def test_run_json_reports_a_stop_and_an_error_in_the_result(tmp_path):
    import json
    from tests.ladder import calls, tool_call
    from tinyharness.testing import ScriptedServer
    with ScriptedServer([calls(tool_call("list_dir", path="."))]) as srv:
        stopped = tinyharness("run", "--json", "--max-turns", "1", "--base-url", srv.base_url, "go", cwd=tmp_path,
                              env=own_home(tmp_path))
    result = json.loads(stopped.stdout.splitlines()[-1])
    assert stopped.returncode == 3 and result["exit_code"] == 3 and "max-turns" in result["stopped"]
    failed = tinyharness("run", "--json", "--base-url", "http://127.0.0.1:9/v1", "go", cwd=tmp_path,
                         env=own_home(tmp_path))
    result = json.loads(failed.stdout.splitlines()[-1])
    assert failed.returncode == 1 and result["exit_code"] == 1 and result["error"] and result["answer"] is None


def test_run_dash_reads_the_task_from_standard_input(tmp_path):
    from tinyharness.testing import ScriptedServer
    with ScriptedServer(["Fine."]) as srv:
        done = tinyharness("run", "--base-url", srv.base_url, "-", cwd=tmp_path, env=own_home(tmp_path),
                           stdin="line one\nline two\n")
    assert done.returncode == 0 and srv.requests[0]["messages"][-1]["content"] == "line one\nline two\n"
    empty = tinyharness("run", "-", cwd=tmp_path, env=own_home(tmp_path), stdin="")
    assert empty.returncode == 2 and "the task is empty" in empty.stderr


def write_sessions(data, count, folder, task="a task " * 30):
    import json
    sessions = data / "tinyharness" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = f"20260101-{i:06d}-abcdef"
        header = {"format": "tinyharness-session", "version": 1, "id": name, "folder": str(folder),
                  "started": "2026-01-01T00:00:00+00:00", "model": "m"}
        user = {"type": "user", "message": {"role": "user", "content": task}}
        (sessions / f"{name}.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(user) + "\n")


def test_sessions_says_how_many_it_left_out_filters_by_folder_and_fits_100_columns(tmp_path):
    here, elsewhere = tmp_path / "here", tmp_path / ("elsewhere-with-a-long-name/" * 4)
    here.mkdir()
    elsewhere.mkdir(parents=True)
    data = Path(own_home(tmp_path)["XDG_DATA_HOME"])
    write_sessions(data, 53, elsewhere)
    write_sessions(data / "x", 0, here)
    listed = tinyharness("sessions", cwd=here, env=own_home(tmp_path))
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and len(lines) == 1 + 50 + 1
    assert lines[-1].startswith("(3 older sessions not listed") and "--all" in lines[-1]
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    assert len(tinyharness("sessions", "--all", cwd=here, env=own_home(tmp_path)).stdout.splitlines()) == 1 + 53
    mine = tinyharness("sessions", "--here", cwd=here, env=own_home(tmp_path))
    assert mine.returncode == 0 and "No sessions started in" in mine.stdout
    there = tinyharness("sessions", "--here", "--all", cwd=elsewhere, env=own_home(tmp_path))
    assert len(there.stdout.splitlines()) == 1 + 53


def test_a_run_given_more_time_lets_one_reply_take_it(monkeypatch):
    """A slow CPU can take longer than the client's own 600 s to read a long prompt: with
    --max-seconds 1800 one reply may wait that long (the run's clock still bounds it), never less than 600."""
    import argparse
    import io
    from tinyharness.console import StreamPrinter
    from tinyharness.flags import client_from_args
    monkeypatch.setenv("TINYHARNESS_API", "openai")
    for max_seconds, wait in ((1800, 1800), (60, 600)):
        args = argparse.Namespace(base_url="http://127.0.0.1:9/v1", model="m", max_reply_tokens=512,
                                  max_seconds=max_seconds, api="openai", think=None, context_window=None)
        client, _ = client_from_args(args, False, StreamPrinter(io.StringIO()))
        assert client.timeout == wait
