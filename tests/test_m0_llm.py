"""m0: one door to the model. Errors a newcomer meets must read as advice, never as a traceback.

The error cases run on every stage (they all share llm.py) and on `tinyharness run`.
"""
import importlib
import json

import pytest

from tests.ladder import copies, ctrl_c_as_on_a_terminal, run_stage, stages_from, wait_for_the_first_request
from tinyharness.testing import ScriptedServer

ALL = stages_from("m0")


def assert_clean_failure(result, *needles):
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_m0_prints_the_reply_and_sends_the_model(workspace):
    with ScriptedServer(script=["Hello from the model."]) as server:
        result = run_stage("m0_llm", workspace, "--base-url", server.base_url, "--model", "tiny:1b", "Say hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello from the model."
    body = server.requests[0]
    assert body["model"] == "tiny:1b"
    assert body["messages"] == [{"role": "user", "content": "Say hello"}]
    assert "tools" not in body


@pytest.mark.parametrize("stage", ALL)
def test_server_down_gives_advice(stage, workspace):
    result = run_stage(stage, workspace, "--base-url", "http://127.0.0.1:9/v1", "x")
    assert_clean_failure(result, "http://127.0.0.1:9/v1/chat/completions", "ollama serve")


@pytest.mark.parametrize("stage", ALL)
def test_env_selects_model_endpoint_and_key(stage, workspace):
    with ScriptedServer(script=["ok"]) as server:
        result = run_stage(stage, workspace, "x", env={"TINYHARNESS_BASE_URL": server.base_url,
                                                        "TINYHARNESS_MODEL": "env-model:3b",
                                                        "TINYHARNESS_API_KEY": "sekret"})
        assert result.returncode == 0, result.stderr
        assert server.requests[0]["model"] == "env-model:3b"
        assert server.headers[0].get("Authorization") == "Bearer sekret"


@pytest.mark.parametrize("stage", ALL)
def test_default_model_is_qwen3_8b(stage, workspace):
    with ScriptedServer(script=["ok"]) as server:
        run_stage(stage, workspace, "--base-url", server.base_url, "x")
    assert server.requests[0]["model"] == "qwen3:8b"


NOT_FOUND = {"status": 404, "body": {"error": {"message": 'model "qwen9:1b" not found, try pulling it first',
                                               "type": "api_error", "param": None, "code": None}}}


@pytest.mark.parametrize("stage", ALL)
@pytest.mark.parametrize("reply, needles", [
    (NOT_FOUND, ["ollama pull qwen9:1b", "HTTP 404"]),
    ({"status": 500, "body": "llama runner process has terminated"}, ["HTTP 500", "llama runner process has terminated"]),
    ({"status": 400, "body": {"error": {"message": "registry.ollama.ai/library/gemma3 does not support tools"}}},
     ["HTTP 400", "does not support tools"]),
    ({"raw": "<html>502 Bad Gateway</html>"}, ["not a chat completion", "<html>502 Bad Gateway"]),
    ({"raw": '{"object": "list", "data": []}'}, ["choices[0].message"]),
    ({"raw": '{"choices": [{"index": 0}]}'}, ["choices[0].message"]),
    ({"drop": "mid-body"}, ["broke while the answer was being sent"]),
    ({"drop": "before"}, ["closed the connection"]),
], ids=["model-not-pulled", "http-500", "http-400", "not-json", "no-choices", "no-message", "drop-mid-body", "drop-before"])
def test_bad_answers_exit_1_with_a_clear_message(stage, reply, needles, workspace):
    with ScriptedServer(script=[reply]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "--model", "qwen9:1b", "x")
    assert_clean_failure(result, server.base_url, *needles)


@pytest.mark.parametrize("stage", ALL)
def test_odd_characters_in_model_text_print_safely(stage, workspace):
    raw = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "nul:\u0000 lone:\ud800 bell:\u0007 ok:\u0161\u0107 end"}}]})
    with ScriptedServer(script=[{"raw": raw}]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "x")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "nul:" in result.stdout and "ok:\u0161\u0107 end" in result.stdout
    assert "\x00" not in result.stdout and "\x07" not in result.stdout


@pytest.mark.parametrize("stage", ALL)
def test_invalid_utf8_in_the_answer_prints_safely(stage, workspace):
    raw = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "caf\xe9 \xff done"}}]}'
    with ScriptedServer(script=[{"raw": raw}]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "x")
    assert result.returncode == 0, result.stderr
    assert "caf" in result.stdout and "done" in result.stdout


def m0_process(server, stdout, tmp_path):
    import os
    import subprocess
    import sys
    from tests.ladder import import_roots
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=os.pathsep.join(import_roots("m0_llm")), PYTHONIOENCODING="utf-8")  # a learner's copy too
    return subprocess.Popen([sys.executable, "-m", "m0_llm", "--base-url", server.base_url, "hi"], cwd=tmp_path,
                            env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_on_a_terminal)


def test_m0_ctrl_c_exits_130_without_a_traceback(tmp_path):
    import signal
    import subprocess
    with ScriptedServer(script=[{"content": "too late", "delay": 300}]) as server:
        proc = m0_process(server, subprocess.PIPE, tmp_path)
        try:
            wait_for_the_first_request(server, proc)
            proc.send_signal(signal.SIGINT)  # what Ctrl-C does
            _, err = proc.communicate(timeout=120)  # a loaded machine is slow to unwind
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130 and err == "Interrupted.\n", err


def test_m0_a_closed_stdout_is_one_line_not_a_traceback(tmp_path):
    import os
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited
    with ScriptedServer(script=["Hello."]) as server:
        try:
            proc = m0_process(server, write_end, tmp_path)
            _, err = proc.communicate(timeout=60)
        finally:
            os.close(write_end)
    assert proc.returncode == 1 and "Traceback" not in err and "the output was closed" in err, err


@pytest.mark.parametrize("stage", copies("m0", "llm.py", final=False))   # once per distinct copy of the door
def test_the_tools_are_sent_only_when_there_are_some(stage):
    # An empty list is no tools: some servers refuse `"tools": []`, and m0 asks with none at all.
    client_class = importlib.import_module(f"{stage}.llm").Client
    tool = {"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object", "properties": {}}}}
    with ScriptedServer(script=["a", "b", "c"]) as server:
        client = client_class(base_url=server.base_url, model="m")
        for tools in (None, [], [tool]):
            message, _, _ = client.chat([{"role": "user", "content": "hi"}], tools=tools)
            assert message["content"] in ("a", "b", "c")
    sent = [request.get("tools") for request in server.requests]
    assert sent == [None, None, [tool]] and "tools" not in server.requests[1]
