"""`tinyharness doctor` against the scripted servers in their personalities: every line says OK,
WARN or FAIL with the fix, and the exit code says whether a run can work. In-process (doctor.main)
except one test that checks the command is wired into `tinyharness`."""
import os
import subprocess
import sys

import pytest

from tests.ladder import ROOT
from tinyharness.doctor import main
from tinyharness.fake_ollama import OllamaServer
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
    assert "Ollama 0.12.6" in out and "32768 tokens and sends it as num_ctx" in out
    assert 'report({"word": "ok"}) came back as a real tool call' in out
    assert out.strip().endswith("Verdict: a run can work.")
    chats = [r for r in server.requests if "options" in r]
    assert chats and all(r["options"]["num_ctx"] == 32768 for r in chats)    # probed as a run would talk


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
