"""`tinyharness doctor` against the scripted servers in their personalities: every line says OK,
WARN or FAIL with the fix, and the exit code says whether a run can work. In-process (doctor.main)
except one test that checks the command is wired into `tinyharness`."""
import os
import socket
import subprocess
import sys
import threading

import pytest

from tests.ladder import ROOT
from tinyharness import doctor as doctor_module
from tinyharness.doctor import main
from tinyharness.testing.fake_ollama import OllamaServer
from tinyharness.testing import ScriptedServer


def doctor(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr().out
    return code, out, {line[6:17].strip(): line[:5].strip() for line in out.splitlines() if line[:4] in ("OK  ", "WARN", "FAIL")}


def test_a_healthy_ollama_passes(capsys):
    with OllamaServer(personality="healthy") as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--model", "qwen3:8b")
    assert code == 0, out
    assert status == {"server": "OK", "api": "OK", "model": "OK", "tools": "OK", "vision": "WARN", "thinking": "OK",
                      "context": "OK", "tool call": "OK", "streaming": "OK", "round trip": "OK"}
    assert "Ollama 0.12.10" in out and "8192 tokens and sends it as num_ctx with truncate: false" in out
    # the window's memory, as arithmetic: qwen3:8b's 36 layers x 8 KV heads x (128 + 128) x 2 bytes a token
    assert "its KV cache: about 1.12 GiB (144 KiB a token x 8192, arithmetic from the model's shape" in out
    assert 'report({"word": "ok"}) came back as a real tool call' in out
    assert out.strip().endswith("Verdict: a run can work (1 WARN line above: read them).")  # vision
    chats = [r for r in server.requests if "options" in r]
    assert chats and all(r["options"]["num_ctx"] == 8192 for r in chats)    # probed as a run would talk


def test_a_missing_model_fails_with_the_pull_command(capsys):
    with OllamaServer(personality="no-model") as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--model", "qwen3:8b")
    assert code == 1
    assert status == {"server": "OK", "api": "OK", "model": "FAIL"}
    assert "Fix: `ollama pull qwen3:8b`" in out and server.requests == []


def test_a_model_without_tools_fails(capsys):
    with OllamaServer(personality="no-tools") as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--model", "gemma3:4b")
    assert code == 1
    assert status["tools"] == "FAIL" and status["vision"] == "OK" and "tool call" not in status
    assert "gemma3:4b cannot call tools" in out and "Fix: choose a model with tool support" in out


def test_no_usage_warns_but_a_run_can_work(capsys):
    with OllamaServer(personality="no-usage") as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--model", "qwen3:8b")
    assert code == 0
    assert status["streaming"] == "WARN" and "reports no token counts" in out


def test_nothing_listening_fails_at_once(capsys):
    with ScriptedServer(script=[]) as server:
        url = server.base_url
    code, out, status = doctor(capsys, "--base-url", url)             # the port was just freed
    assert code == 1 and status == {"server": "FAIL"}
    assert f"nothing answers at {url}" in out and "`ollama serve`" in out


def test_a_host_name_that_does_not_resolve_is_named(capsys):
    code, out, status = doctor(capsys, "--base-url", "http://example.invalid/v1")
    assert code == 1 and status == {"server": "FAIL"}
    assert "the host name 'example.invalid'" in out and "could not be resolved" in out
    assert "nothing answers" not in out and "ollama serve" not in out


def test_ollama_over_v1_warns_about_the_context(capsys):
    with OllamaServer(personality="healthy") as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--api", "openai")
    assert code == 0 and status["api"] == "WARN" and status["context"] == "WARN"
    assert "OLLAMA_CONTEXT_LENGTH=8192" in out and "in force is 4096 (loaded now)" in out


def test_an_openai_style_server_is_probed_over_v1(capsys):
    replies = [{"tool_calls": [{"name": "report", "arguments": {"word": "ready"}}]}, "OK"]
    with ScriptedServer(script=replies) as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url)
    assert code == 0, out
    assert status["server"] == "OK" and status["context"] == "WARN" and status["tool call"] == "OK"
    assert "tools" not in status                         # only Ollama says what a model can do
    assert [r["stream"] if "stream" in r else False for r in server.requests] == [False, True]


def test_a_model_that_answers_in_text_fails_the_probe(capsys):
    with ScriptedServer(script=['{"name": "report"}', "OK"]) as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url)
    assert code == 1 and status["tool call"] == "FAIL" and "--jinja" in out
    assert "--chat_format chatml-function-calling" in out                 # llama-cpp-python's way


def test_every_probe_caps_its_reply(capsys):
    replies = [{"tool_calls": [{"name": "report", "arguments": {"word": "ready"}}]}, "OK"]
    with ScriptedServer(script=replies) as server:
        doctor(capsys, "--base-url", server.base_url)
    caps = [r["max_tokens"] for r in server.requests]
    assert len(caps) == 2 and caps[0] <= 128 and caps[1] <= 64
    with OllamaServer(personality="healthy") as server:
        doctor(capsys, "--base-url", server.base_url, "--model", "qwen3:8b")
    caps = [r["options"]["num_predict"] for r in server.requests if "options" in r]
    assert len(caps) == 2 and max(caps) <= 128


def test_a_reply_cut_at_the_cap_is_its_own_finding(capsys):
    rambling = {"content": "Let me think about this " * 20, "finish_reason": "length"}
    with ScriptedServer(script=[rambling, rambling]) as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url)
    # text instead of a call is a FAIL, cut or not: an unforced run would end with tool_calls=0
    assert code == 1 and status["tool call"] == "FAIL" and status["streaming"] == "WARN"
    assert "the model answered in text (cut at the probe's cap of 128 tokens): 'Let me think" in out and "--jinja" in out
    assert 'cut at the probe\'s cap of 64 tokens' in out and "did not answer" not in out
    assert out.strip().endswith("Verdict: a run will not work until the FAIL lines are fixed.")


def test_a_stream_without_usage_is_a_warn_the_verdict_counts(capsys):
    replies = [{"tool_calls": [{"name": "report", "arguments": {"word": "ready"}}]}, "OK"]
    with ScriptedServer(script=replies, stream_usage=False) as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url)
    assert code == 0 and status["tool call"] == "OK" and status["streaming"] == "WARN"
    assert out.strip().endswith("(2 WARN lines above: read them).")  # the stream's usage, and the context


# --- Three ways of getting no answer, three different lines ------------------------------------------

@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(doctor_module, "ASK_TIMEOUT", 0.5)


def test_a_refused_connection_says_start_the_server(capsys, quick):
    with ScriptedServer(script=[]) as server:
        url = server.base_url
    code, out, status = doctor(capsys, "--base-url", url)
    assert code == 1 and status == {"server": "FAIL"}
    assert "connection was refused" in out and "Fix: start the server" in out and "busy" not in out


def test_a_busy_server_that_accepts_but_does_not_answer_is_called_busy(capsys, quick):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []                                    # connections accepted and never answered

    def accept():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    try:
        code, out, status = doctor(capsys, "--base-url", f"http://127.0.0.1:{listener.getsockname()[1]}/v1")
    finally:
        listener.close()
        for connection in held:
            connection.close()
    assert code == 1 and status == {"server": "FAIL"}
    assert "is busy with another request" in out and "Fix: wait until the other request ends" in out
    assert "nothing answers" not in out and "`ollama serve`" not in out


def test_a_model_that_sends_nothing_in_time_is_called_loading_and_no_second_probe_is_sent(capsys, quick):
    with ScriptedServer(script=[{"content": "late", "delay": 3}]) as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--timeout", "1")
    assert code == 1 and status["server"] == "OK" and status["tool call"] == "FAIL"
    assert "most likely still loading" in out and "run the doctor again in a minute" in out
    assert "busy" not in out and "run without --stream" not in out
    assert "SKIP  streaming" in out and len(server.requests) == 1


@pytest.mark.parametrize("args", [["--context-window", "0"], ["--timeout", "0"], ["--base-url", "notaurl"],
                                  ["--base-url", "ftp://x/v1"], ["--base-url", "http://localhost:99999/v1"]])
def test_bad_flags_are_usage_errors(args, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    assert "usage: tinyharness doctor" in capsys.readouterr().err   # not "nothing answers at notaurl", exit 1


def test_the_doctor_command_is_wired_into_tinyharness():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "tinyharness", "doctor", "--help"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.returncode == 0 and "OK, WARN or FAIL" in result.stdout
    listed = subprocess.run([sys.executable, "-m", "tinyharness", "--help"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert "doctor" in listed.stdout


class OddOllama(OllamaServer):
    """A healthy Ollama but for one native route, which answers `odd` (JSON of another shape)."""

    def __init__(self, route, odd, **kwargs):
        super().__init__(personality="healthy", **kwargs)
        self.route, self.odd = route, odd

    def answer_native(self, handler, method, path, data):
        if path == self.route:
            return handler.send_json(200, self.odd)
        return super().answer_native(handler, method, path, data)


@pytest.mark.parametrize("route, odd, flags", [
    ("/api/tags", ["qwen3:8b"], ()),                                           # a list, not an object
    ("/api/tags", {"models": [{"name": None}, {"name": 7}, {"name": ["qwen3:8b"]}]}, ()),
    ("/api/ps", ["qwen3:8b"], ("--api", "openai")),                            # asked only over /v1
])
def test_a_model_list_of_another_shape_is_a_finding_not_a_traceback(capsys, route, odd, flags):
    with OddOllama(route, odd) as server:
        code, out, status = doctor(capsys, "--base-url", server.base_url, "--model", "qwen3:8b", *flags)
    if route == "/api/tags":
        assert code == 1 and status["model"] == "FAIL", out
        assert "qwen3:8b is not on this server (this server has no models yet)" in out
    else:
        assert status["model"] == "OK" and "context" in status, out
