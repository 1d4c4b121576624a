"""The user's environment reaches the right server (tinyharness only): OPENAI_BASE_URL and OPENAI_API_KEY as
the OpenAI SDKs read them, OLLAMA_HOST as Ollama's client reads it, after the flag and TINYHARNESS_*."""
import pytest

from tests.ladder import FINAL, run_stage
from tinyharness.doctor import main as doctor_main
from tinyharness.endpoint import api_key, base_url_from_env, ollama_host_url
from tinyharness.testing.fake_ollama import OllamaServer
from tinyharness.testing import ScriptedServer


@pytest.mark.parametrize("value, url", [
    ("127.0.0.1:11500", "http://127.0.0.1:11500"), ("localhost", "http://localhost:11434"),
    ("http://box", "http://box:80"), ("https://box", "https://box:443"), ("http://box:8/x/", "http://box:8/x"),
    ("[::1]:5", "http://[::1]:5"), ("", "http://127.0.0.1:11434")])
def test_ollama_host_is_read_as_ollamas_own_client_reads_it(value, url):
    assert ollama_host_url(value) == url


def test_the_order_is_tinyharness_then_openai_then_ollama_host():
    env = {"OLLAMA_HOST": "h:1", "OPENAI_BASE_URL": "http://o/v1", "TINYHARNESS_BASE_URL": "http://t/v1"}
    assert base_url_from_env("d", env) == ("http://t/v1", "TINYHARNESS_BASE_URL")
    del env["TINYHARNESS_BASE_URL"]
    assert base_url_from_env("d", env) == ("http://o/v1", "OPENAI_BASE_URL")
    del env["OPENAI_BASE_URL"]
    assert base_url_from_env("d", env) == ("http://h:1/v1", "OLLAMA_HOST")
    assert base_url_from_env("d", {}) == ("d", "default")
    assert api_key("--base-url", {"OPENAI_API_KEY": "o", "TINYHARNESS_API_KEY": "t"}) == "t"
    assert api_key("--base-url", {"OPENAI_API_KEY": "o"}) == "o" and api_key("--base-url", {}) is None


def test_openai_base_url_and_key_reach_the_server(tmp_path):
    with ScriptedServer(["Done."]) as server:
        done = run_stage(FINAL, tmp_path, "--api", "openai", "hi",
                         env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-from-env"})
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 1 and server.headers[0].get("Authorization") == "Bearer sk-from-env"


def test_the_flag_wins_over_the_environment(tmp_path):
    with ScriptedServer(["Done."]) as server:
        done = run_stage(FINAL, tmp_path, "--api", "openai", "--base-url", server.base_url, "hi",
                         env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "TINYHARNESS_API_KEY": "mine",
                              "OPENAI_API_KEY": "theirs"})
    assert done.returncode == 0, done.stderr
    assert server.headers[0].get("Authorization") == "Bearer mine"


def test_ollama_host_without_a_scheme_reaches_ollamas_native_api(tmp_path):
    with OllamaServer(script=["Done."]) as server:
        host = server.root_url.removeprefix("http://")
        done = run_stage(FINAL, tmp_path, "hi", env={"OLLAMA_HOST": host})
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 1 and server.requests[0]["messages"][-1]["content"] == "hi"
    assert "options" in server.requests[0]  # the native /api/chat body (num_ctx), not /v1's


def test_doctor_looks_where_ollama_host_points_and_says_so(capsys, monkeypatch):
    with OllamaServer(personality="healthy") as server:
        monkeypatch.setenv("OLLAMA_HOST", server.root_url)
        for name in ("TINYHARNESS_BASE_URL", "OPENAI_BASE_URL"):
            monkeypatch.delenv(name, raising=False)
        code = doctor_main(["--model", "qwen3:8b"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"INFO  endpoint    {server.base_url} (from env OLLAMA_HOST;" in out
    assert f"answers at {server.root_url}" in out


def test_a_bad_ollama_host_is_a_usage_error_that_names_it(tmp_path):
    done = run_stage(FINAL, tmp_path, "hi", env={"OLLAMA_HOST": "http://:x"})
    assert done.returncode == 2 and "(from env OLLAMA_HOST)" in done.stderr
