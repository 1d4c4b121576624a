"""The `tinyharness` command itself: demo, fake-server, course, help."""
import os
import subprocess
import sys
import time

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


def test_a_pipe_closed_early_is_not_a_traceback():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(f'"{sys.executable}" -m tinyharness course diff m0 m8 | head -n 2', shell=True, cwd=ROOT,
                            capture_output=True, text=True, env=env, timeout=60)
    assert len(result.stdout.splitlines()) == 2
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
