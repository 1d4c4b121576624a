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
