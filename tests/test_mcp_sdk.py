"""Our MCP client against a server built with the official Python SDK - only when asked (`-m sdk`),
because CI does not install the SDK: `python -m benchmarks.mcp_sdk` installs it into a cache folder
and runs this file with that interpreter's server."""
import os
import subprocess
import sys

import pytest

from tests.ladder import ROOT
from tinyharness import mcp

pytestmark = pytest.mark.sdk


def sdk_python():
    """An interpreter that has the SDK: MCP_SDK_PYTHON, or this one if it can import it."""
    candidate = os.environ.get("MCP_SDK_PYTHON") or sys.executable
    found = subprocess.run([candidate, "-c", "import mcp.server.mcpserver"], capture_output=True).returncode == 0
    if not found:
        pytest.skip("the official MCP SDK (pip install 'mcp>=2') is not installed; set MCP_SDK_PYTHON")
    return candidate


def test_tools_from_a_server_built_with_the_official_sdk():
    reports = []
    slots = mcp.Slots.start({"sdk": {"command": [sdk_python(), str(ROOT / "tests" / "sdk_mcp_server.py")],
                                     "read_only": True}}, report=reports.append)
    try:
        assert reports == ["[mcp] sdk: 2 tool(s), protocol 2025-11-25"]
        assert {s["function"]["name"] for s in slots.schemas()} == {"mcp__sdk__add", "mcp__sdk__shout"}
        assert slots.call("mcp__sdk__add", {"a": 2, "b": 40}) == "42"
        assert slots.call("mcp__sdk__shout", {"text": "hi"}) == "HI"
        assert slots.call("mcp__sdk__add", {"a": "x", "b": 1}).startswith("ERROR: the tool reported an error")
    finally:
        slots.close()
