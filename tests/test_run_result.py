"""`run --json` as a contract (tinyharness only): on every exit - 0, 1, 2 (argparse's errors, the flags'
checks, an untrusted config), 3, 130, 143 and 129 - the last line on standard output is the result, with
session_id, is_error, duration_ms, num_turns, model and usage (null for a count never reported). The
signals here are sent to this process's main thread while it waits for the model (run_end.py turns
SIGTERM and SIGHUP into the Ctrl-C path); tests/test_run_signals.py sends them to a real child."""
import json
import signal
import threading

import pytest

from tests.ladder import FINAL, calls, run_stage, tool_call
from tinyharness.testing import ScriptedServer

FIELDS = {"type", "exit_code", "is_error", "session_id", "duration_ms", "num_turns", "model", "usage", "answer"}


def result_of(done, code):
    """The last line of stdout, checked as the result of an exit with CODE; every line is JSON."""
    assert done.returncode == code, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    result = lines[-1]
    assert FIELDS <= set(result) and result["type"] == "result" and result["exit_code"] == code
    assert result["is_error"] is (code != 0) and isinstance(result["duration_ms"], int)
    assert [line["type"] for line in lines].count("result") == 1
    return result, lines


def run_json(workspace, *args, **kwargs):
    return run_stage(FINAL, workspace, "--json", *args, **kwargs)


def test_a_finished_run_names_its_session_model_turns_and_usage(tmp_path):
    with ScriptedServer([calls(tool_call("list_dir", path=".")), "Done."]) as server:
        done = run_json(tmp_path, "--base-url", server.base_url, "--model", "m1", "go")
    result, lines = result_of(done, 0)
    assert result["session_id"] == lines[0]["session"] and result["session_id"]
    assert result["model"] == "m1" and result["num_turns"] == 2 and result["answer"] == "Done."
    assert result["usage"]["prompt_tokens"] > 0 and result["usage"]["completion_tokens"] > 0


def test_counts_a_server_never_reported_are_null_not_zero(tmp_path):
    with ScriptedServer(["Done."], send_usage=False) as server:
        done = run_json(tmp_path, "--base-url", server.base_url, "--no-stream", "--api", "openai", "go")
    result, _ = result_of(done, 0)
    assert result["usage"]["prompt_tokens"] is None and result["usage"]["completion_tokens"] is None


def test_a_server_that_is_down_ends_with_a_result(tmp_path):
    result, _ = result_of(run_json(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "go"), 1)
    assert result["error"] and result["num_turns"] == 0 and result["usage"]["prompt_tokens"] is None


def test_a_limit_ends_with_a_result(tmp_path):
    with ScriptedServer([calls(tool_call("list_dir", path="."))]) as server:
        done = run_json(tmp_path, "--base-url", server.base_url, "--max-turns", "1", "go")
    result, _ = result_of(done, 3)
    assert "max-turns" in result["stopped"]


@pytest.mark.parametrize("args, said", [
    (("--max-turns", "abc", "go"), "invalid int value: 'abc'"),    # argparse's own error
    (("--max-turns", "0", "go"), "--max-turns must be 1 or more"),  # the flags' check
    (("go", "stray"), "unrecognized arguments: stray"),
    (("--model", "m2", "--api", "nope", "go"), "invalid choice"),
])
def test_a_usage_error_ends_with_a_result_line(tmp_path, args, said):
    result, lines = result_of(run_json(tmp_path, *args), 2)
    assert len(lines) == 1 and said in result["error"] and result["session_id"] is None
    assert result["num_turns"] == 0 and result["usage"] == {"prompt_tokens": None, "completion_tokens": None,
                                                            "cached_tokens": None}
    assert result["model"] == ("m2" if "m2" in args else "qwen3:8b")


def test_an_untrusted_config_ends_with_a_result_line(tmp_path):
    (tmp_path / ".tinyharness").mkdir()
    (tmp_path / ".tinyharness" / "mcp.json").write_text('{"servers": {"x": {"command": "true"}}}')
    result, _ = result_of(run_json(tmp_path, "go", stdin=""), 2)  # EOF answers the trust question: no
    assert "was not trusted" in result["error"]


def signal_main_thread(signum):
    """A policy: the first request sends SIGNUM to the main thread (waiting for this reply), then answers."""
    main = threading.main_thread().ident

    def policy(body, index):
        signal.pthread_kill(main, signum)
        return "too late"
    return policy


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_ends_with_a_result_line_and_its_exit_code(tmp_path, signum, code):
    with ScriptedServer(policy=signal_main_thread(signum)) as server:
        done = run_json(tmp_path, "--base-url", server.base_url, "--transcript", "t.json", "go")
    result, lines = result_of(done, code)
    assert result["session_id"] and result["num_turns"] == 0
    assert json.loads((tmp_path / "t.json").read_text())[-1]["content"] == "go"  # the transcript was flushed
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handlers were put back


def test_the_readme_table_names_every_field_of_the_result(tmp_path):
    from tests.ladder import ROOT
    row = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("  | `result` |"))
    with ScriptedServer(["Done."]) as server:
        result, lines = result_of(run_json(tmp_path, "--base-url", server.base_url, "go"), 0)
    missing = [key for line in lines for key in line if f"`{key}`" not in row and line is result and key != "type"]
    assert missing == [] and all(f"`{key}`" in row for key in result["usage"])


def test_sessions_json_lists_each_session_as_one_object(tmp_path, monkeypatch, capsys):
    from tinyharness.cli import main
    workspace, data = tmp_path / "ws", tmp_path / "data"
    workspace.mkdir()
    with ScriptedServer(["Done."]) as server:
        done = run_json(workspace, "--base-url", server.base_url, "--model", "m3", "first  task", env={
            "XDG_DATA_HOME": str(data)})
    result, _ = result_of(done, 0)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    assert main(["sessions", "--json"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {"id": result["session_id"], "turns": 1, "folder": str(workspace.resolve()),
                                "model": "m3", "first_task": "first task"}


def test_run_continue_and_resume_go_on_with_the_session(tmp_path):
    workspace, env = tmp_path / "ws", {"XDG_DATA_HOME": str(tmp_path / "data")}
    workspace.mkdir()
    with ScriptedServer(["The word is plum.", "You said plum.", "Still plum."]) as server:
        first, _ = result_of(run_json(workspace, "--base-url", server.base_url, "remember plum", env=env), 0)
        again, lines = result_of(run_json(workspace, "--base-url", server.base_url, "--continue", "what word?",
                                          env=env), 0)
        third, _ = result_of(run_json(workspace, "--base-url", server.base_url, "--resume", first["session_id"],
                                      "and now?", env=env), 0)
    assert first["session_id"] == again["session_id"] == third["session_id"]
    sent = [m["content"] for m in server.requests[2]["messages"][1:]]
    assert sent == ["remember plum", "The word is plum.", "what word?", "You said plum.", "and now?"]
    assert [line["type"] for line in lines] == ["start", "user", "assistant", "result"]  # this run's events only
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    refused, _ = result_of(run_json(elsewhere, "--resume", first["session_id"], "hi", env=env), 2)
    assert "was started in" in refused["error"]
