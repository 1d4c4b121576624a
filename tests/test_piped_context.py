"""Piped input is context (issue 39, finding 2): `cat log | tinyharness run "explain this"` sends the log.

Each run is the real command line in a process of its own (its standard input a real pipe), against the
scripted server; what is checked is the first request the server received, the files, and stderr.
"""
import os
import subprocess

from tests.ladder import FINAL, ROOT, calls, command, run_stage, sessions_home, tool_call, tool_results
from tinyharness.piped import CAP
from tinyharness.testing import ScriptedServer

LOG = "y\nINFO starting\nERROR disk full at /var/lib/db\n"  # a log whose first line is y


def run(workspace, script, task, stdin, code=0):
    with ScriptedServer(script=script) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, task, stdin=stdin, in_process=False)
    assert result.returncode == code and "Traceback" not in result.stderr, (result.stdout, result.stderr)
    return result, server


def first_task(server):
    return [m["content"] for m in server.requests[0]["messages"] if m["role"] == "user"][0]


def test_the_piped_text_goes_to_the_model_with_the_task(workspace):
    result, server = run(workspace, ["The disk is full."], "explain this", LOG)
    task = first_task(server)
    assert task.startswith("explain this\n\n") and task.endswith(LOG)
    assert f"Piped to standard input ({len(LOG)} bytes):\n{LOG}" in task
    assert f"[input] the {len(LOG)} bytes piped to standard input go to the model with the task" in result.stderr


def test_a_piped_y_approves_nothing(workspace):
    """Before: the log's first line answered the permission prompt, and the command ran."""
    script = [calls(tool_call("shell", command="echo ran > marker.txt")), "I could not run it."]
    result, server = run(workspace, script, "explain this", LOG, code=3)
    assert not (workspace / "marker.txt").exists()
    assert tool_results(server.requests[1])["call_1"].startswith("DENIED: ")
    assert "ERROR disk full" in first_task(server)


def test_piped_input_is_capped_and_the_cut_said(workspace):
    piped = "".join(f"{i:07d} " + "x" * 92 + "\n" for i in range(1500))  # 150,000 bytes
    result, server = run(workspace, ["ok"], "summarise", piped)
    task = first_task(server)
    assert piped[:CAP] in task and piped[:CAP + 1] not in task
    assert task.endswith(f"[standard input held more than {CAP // 1024} KiB; only its first {CAP // 1024} KiB "
                         "are here]")
    assert (f"[input] more than {CAP // 1024} KiB came on standard input: only its first {CAP // 1024} KiB go "
            "to the model with the task") in result.stderr


def test_run_dash_still_takes_the_task_itself_from_stdin(workspace):
    _, server = run(workspace, ["ok"], "-", "fix the tests\n")
    assert first_task(server) == "fix the tests\n"


def test_nothing_piped_adds_nothing(workspace):
    result, server = run(workspace, ["ok"], "say hi", "")
    assert first_task(server) == "say hi" and "[input]" not in result.stderr


def test_a_pipe_that_sends_nothing_is_not_waited_for(workspace):
    """An inherited pipe nobody writes to (a script's Popen with stdin=PIPE left open): the run goes on without
    it after a short wait, and says so, instead of hanging."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=sessions_home(), PYTHONIOENCODING="utf-8")
    with ScriptedServer(script=["ok"]) as server:
        process = subprocess.Popen(command(FINAL, "--base-url", server.base_url, "say hi"), cwd=workspace,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env)
        try:
            out = process.stdout.read()  # ends when the run ends, though its stdin is still open
            err = process.stderr.read()   # a few lines: the pipe never fills
            assert process.wait(timeout=60) == 0, err
        finally:
            process.stdin.close()
            if process.poll() is None:
                process.kill()
    assert "nothing came on it in 3 s: the run goes on without it" in err
    assert out.rstrip().endswith("ok") and first_task(server) == "say hi"
