"""One connection per run: the package's clients keep their connection to the model server open
between turns (llm.KeepAlive), in both dialects, streamed or not; a server that closes it gets one
new connection, not a failed turn. Counted by the scripted servers, which see every connection the
harness opens."""
import pytest

from tests.ladder import calls, run_stage, tool_call
from tinyharness.testing import ScriptedServer
from tinyharness.testing.fake_ollama import OllamaServer

FOUR_TURNS = [calls(tool_call("list_dir", path=".")), calls(tool_call("read_file", path="a.txt")),
              calls(tool_call("list_dir", path=".")), "Done."]


@pytest.mark.parametrize("stream", ["--no-stream", "--stream"])
def test_a_run_of_four_turns_opens_one_connection(tmp_path, stream):
    (tmp_path / "a.txt").write_text("hello\n")
    with ScriptedServer(script=FOUR_TURNS) as server:
        result = run_stage("tinyharness", tmp_path, "--base-url", server.base_url, "--api", "openai",
                           stream, "--no-session", "list and read")
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 4
    assert server.connections_opened == 1, f"{server.connections_opened} connections for 4 requests"


def test_a_connection_the_server_closed_is_opened_again_once(tmp_path):
    # the server hangs up after its second answer (Connection: close); the third request must go
    # out on a new connection, and the run must not fail for it
    script = [calls(tool_call("list_dir", path=".")),
              {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "close": True},
              calls(tool_call("list_dir", path=".")), "Done."]
    with ScriptedServer(script=script) as server:
        result = run_stage("tinyharness", tmp_path, "--base-url", server.base_url, "--api", "openai",
                           "--no-stream", "--no-session", "list")
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 4
    assert server.connections_opened == 2


def test_the_ollama_dialect_keeps_its_connection_too(tmp_path):
    with OllamaServer(script=["Hello."]) as server:
        result = run_stage("tinyharness", tmp_path, "--base-url", server.base_url, "--api", "ollama",
                           "--no-stream", "--no-session", "say hello")
    assert result.returncode == 0, result.stderr
    # the probe at start (/api/show) and the native chat share the one connection
    assert any(r.get("messages") for r in server.requests), "the native chat was never sent"
    assert server.connections_opened == 1, f"{server.connections_opened} connections"


def a_closed_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "all_proxy"])
def test_a_dead_proxy_is_named_not_blamed_on_the_model_server(tmp_path, variable):
    # a user's HTTP_PROXY that no longer answers: the error must name the proxy and where it came
    # from, never its password, and say how to go direct - not "is the model server running?"
    port = a_closed_port()
    with ScriptedServer(script=["Hello."]) as server:
        result = run_stage("tinyharness", tmp_path, "--base-url", server.base_url, "--api", "openai",
                           "--no-session", "say hello",
                           env={variable: f"http://alice:s3cret@127.0.0.1:{port}", "NO_PROXY": "",
                                "no_proxy": ""})
    assert result.returncode == 1, result.stderr
    assert not server.requests, "the request should have gone to the proxy"
    assert f"the proxy http://alice:***@127.0.0.1:{port} (from {variable})" in result.stderr
    assert "NO_PROXY=127.0.0.1" in result.stderr and "s3cret" not in result.stderr
    assert "Traceback" not in result.stderr


def test_no_proxy_lets_the_request_go_direct(tmp_path):
    with ScriptedServer(script=["Hello."]) as server:
        result = run_stage("tinyharness", tmp_path, "--base-url", server.base_url, "--api", "openai",
                           "--no-session", "say hello",
                           env={"HTTP_PROXY": f"http://127.0.0.1:{a_closed_port()}",
                                "NO_PROXY": "127.0.0.1"})
    assert result.returncode == 0, result.stderr
    assert len(server.requests) == 1
