"""MCP over Streamable HTTP against tests/mcp_server.py's HTTP mode (standard library, in this process):
POST JSON-RPC, JSON or SSE answers, Mcp-Session-Id, headers from the config, the session ended at close."""
import json
import threading

import pytest

from tests.mcp_server import ToolServer, parse, serve_http
from tinyharness import mcp


@pytest.fixture(autouse=True)
def own_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


@pytest.fixture(params=["json", "sse"])
def http_server(request):
    args = parse(["--http", "0"] + (["--sse"] if request.param == "sse" else []))
    httpd = serve_http(ToolServer(args), args)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    httpd.mode = request.param
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def start(url, **config):
    reports = []
    slots = mcp.Slots.start({"h": {"type": "http", "url": url, **config}}, report=reports.append)
    return slots, reports


def test_handshake_paging_calls_and_the_session(http_server):
    slots, reports = start(http_server.url, headers={"Authorization": "Bearer t0ken"}, read_only=["echo"])
    try:
        assert reports == ["[mcp] h: 17 tool(s), protocol 2025-11-25"]
        assert slots.call("mcp__h__echo", {"text": "over http"}) == "echo: over http"
        assert slots.call("mcp__h__add", {"a": 2, "b": 40}) == "42"
        assert slots.call("mcp__h__fail", {}) == "ERROR: the tool reported an error: the record is locked"
        images = []
        assert slots.call("mcp__h__image", {}, images=images).startswith("a picture follows\n[image picture 1")
        assert len(images) == 1
    finally:
        slots.close()
    seen = http_server.seen
    methods = [method for method, _ in seen]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"] and methods[-1] == "DELETE"
    session = None
    for method, headers in seen:
        assert headers["Authorization"] == "Bearer t0ken"
        if method == "initialize":
            assert "Mcp-Session-Id" not in headers and "MCP-Protocol-Version" not in headers
        else:
            assert headers["Mcp-Session-Id"] == (session or headers["Mcp-Session-Id"])
            assert headers["MCP-Protocol-Version"] == "2025-11-25"
            session = headers["Mcp-Session-Id"]


def test_progress_and_list_changed_arrive_inside_an_sse_answer(http_server):
    if http_server.mode != "sse":
        pytest.skip("a JSON answer carries the reply only")
    slots, reports = start(http_server.url)
    try:
        assert slots.call("mcp__h__progress", {}) == "progressed"
        assert any(r.startswith("[mcp] h: progress in progress (") for r in reports)
        assert slots.call("mcp__h__grow", {}) == "grown"
        assert "mcp__h__new_tool" in {s["function"]["name"] for s in slots.schemas()}
    finally:
        slots.close()


def test_a_slow_answer_is_bounded_and_a_forgotten_session_withdraws_the_server(http_server):
    slots, reports = start(http_server.url, timeout=0.3)
    try:
        assert "did not answer tools/call within 0.3 s" in slots.call("mcp__h__slow", {"seconds": 1})
        slots.servers["h"].session_id = "forgotten"  # as after a restart of the server: it knows no such session
        assert "ended the session (HTTP 404)" in slots.call("mcp__h__echo", {"text": "x"})
        assert slots.schemas() == [] and sum("withdrawn" in r for r in reports) == 1
    finally:
        slots.close()


def test_a_server_that_is_not_there_is_reported_and_the_run_goes_on():
    slots, reports = start("http://127.0.0.1:9/mcp")
    assert slots.schemas() == [] and "cannot be reached" in reports[0] and "Its tools are not offered" in reports[0]


def test_an_http_server_from_mcp_json_through_run(http_server, workspace, tmp_path):
    from tests.ladder import FINAL, calls, run_stage, tool_call, tool_results
    from tinyharness.testing import ScriptedServer
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "mcp.json").write_text(json.dumps(
        {"servers": {"hosted": {"type": "http", "url": http_server.url, "read_only": True}}}))
    with ScriptedServer(script=[calls(tool_call("mcp__hosted__echo", text="hosted")), "Done."]) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "go", tty="y\n",
                           env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    assert list(tool_results(server.requests[1]).values()) == ["echo: hosted"]
