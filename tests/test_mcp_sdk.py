"""Our MCP client against a server built with the official Python SDK - only when asked (`-m sdk`),
because CI does not install the SDK: `python -m benchmarks.mcp_sdk` installs it into a cache folder
and runs this file with that interpreter's server, over stdio and over Streamable HTTP."""
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.ladder import ROOT
from tinyharness import mcp

pytestmark = pytest.mark.sdk
SERVER = str(ROOT / "tests" / "sdk_mcp_server.py")


@pytest.fixture(autouse=True)
def own_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def sdk_python():
    """An interpreter that has the SDK: MCP_SDK_PYTHON, or this one if it can import it."""
    candidate = os.environ.get("MCP_SDK_PYTHON") or sys.executable
    found = subprocess.run([candidate, "-c", "import mcp.server.mcpserver"], capture_output=True).returncode == 0
    if not found:
        pytest.skip("the official MCP SDK (pip install 'mcp>=2') is not installed; set MCP_SDK_PYTHON")
    return candidate


def check(slots, reports):
    assert reports == ["[mcp] sdk: 2 tool(s), protocol 2025-11-25"]
    assert {s["function"]["name"] for s in slots.schemas()} == {"mcp__sdk__add", "mcp__sdk__shout"}
    assert slots.call("mcp__sdk__add", {"a": 2, "b": 40}) == "42"
    assert slots.call("mcp__sdk__shout", {"text": "hi"}) == "HI"
    assert slots.call("mcp__sdk__add", {"a": "x", "b": 1}).startswith("ERROR: the tool reported an error")


def test_tools_from_a_server_built_with_the_official_sdk():
    reports = []
    slots = mcp.Slots.start({"sdk": {"command": [sdk_python(), SERVER], "read_only": True}}, report=reports.append)
    try:
        check(slots, reports)
    finally:
        slots.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("answers", ["sse", "json"])
def test_the_official_sdks_streamable_http_server(answers):
    python, port = sdk_python(), free_port()
    server = subprocess.Popen([python, SERVER, "--http", str(port)] + (["--json"] if answers == "json" else []),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # uvicorn takes a moment to listen
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode(errors="replace")
                time.sleep(0.1)
        reports = []
        slots = mcp.Slots.start({"sdk": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "read_only": True}},
                                report=reports.append)
        try:
            check(slots, reports)
        finally:
            slots.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
