"""A user's existing files, found where their tools keep them (tinyharness only): MCP servers in .mcp.json
(Claude Code's project scope) and .vscode/mcp.json (VS Code's shape and variables), hooks and permission
rules in .claude/settings.json and .claude/settings.local.json - each behind the trust question that names it."""
import json
import os
import sys
from pathlib import Path

import pytest

from tests.ladder import FINAL, ROOT, calls, run_stage, tool_call, tool_results
from tinyharness import mcp
from tinyharness.testing import ScriptedServer

SERVER = [sys.executable, str(ROOT / "tests" / "mcp_server.py")]


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def home(tmp_path):
    return {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def ws(tmp_path):
    """The workspace: beside the data folder, never holding it."""
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


# --- MCP servers -----------------------------------------------------------------------------------

def test_vs_code_variables_and_env_file_are_read_as_vs_code_reads_them(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("TOKEN", "t0k")
    write(tmp_path / ".env", "# secrets\nexport API_KEY='from-file'\nMODE=file\n")
    path = write(tmp_path / ".vscode" / "mcp.json", {"inputs": [{"id": "tok", "type": "promptString"}], "servers": {
        "notes": {"type": "stdio", "command": "python3", "args": ["${workspaceFolder}/srv.py", "${userHome}/x"],
                  "envFile": "${workspaceFolder}/.env", "env": {"MODE": "env", "T": "${env:TOKEN}"}},
        "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}}}})
    configs = mcp.load_config(path, tmp_path)
    assert configs["notes"]["command"] == ["python3", f"{tmp_path}/srv.py", f"{tmp_path}/me/x"]
    assert configs["notes"]["env"] == {"API_KEY": "from-file", "MODE": "env", "T": "t0k"}  # env wins over envFile
    assert configs["web"]["headers"] == {"Authorization": "Bearer t0k"}


def test_an_input_variable_is_a_clear_error_never_sent_as_it_is(ws, home):
    path = write(ws / ".vscode" / "mcp.json", {"servers": {
        "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${input:tok}"}}}})
    with pytest.raises(ValueError, match=r"\$\{input:tok\} is a VS Code input variable.*\$\{env:NAME\}"):
        mcp.load_config(path, ws)
    done = run_stage(FINAL, ws, "go", env=home)
    assert done.returncode == 2 and "${input:tok}" in done.stderr and str(path) in done.stderr


def test_mcp_json_and_vscode_mcp_json_are_found_trusted_each_by_name_and_used(ws, home):
    workspace = ws
    claude = write(workspace / ".mcp.json", {"mcpServers": {"claude": {"command": SERVER[0], "args": SERVER[1:]}}})
    vscode = write(workspace / ".vscode" / "mcp.json", {"servers": {
        "code": {"type": "stdio", "command": SERVER[0], "args": SERVER[1:], "env": {"W": "${workspaceFolder}"}}}})
    script = [calls(tool_call("mcp__claude__echo", text="a"), tool_call("mcp__code__echo", text="b")), "Done."]
    with ScriptedServer(script) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, "--yes", "go", stdin="y\ny\n", env=home)
    assert done.returncode == 0, done.stderr
    assert f"This workspace has an MCP server list ({claude})" in done.stdout
    assert f"This workspace has an MCP server list ({vscode})" in done.stdout
    assert sorted(tool_results(server.requests[1]).values()) == ["echo: a", "echo: b"]


def test_an_untrusted_mcp_json_names_the_file_and_starts_nothing(ws, home):
    path = write(ws / ".mcp.json", {"mcpServers": {"x": {"command": "/nonexistent/server"}}})
    done = run_stage(FINAL, ws, "go", stdin="", env=home)
    assert done.returncode == 2 and f"{path} was not trusted" in done.stderr


def test_mcp_list_says_which_file_each_server_came_from(ws, home):
    import subprocess
    tmp_path = ws
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "/nonexistent/a"}}})
    write(tmp_path / ".vscode" / "mcp.json", {"servers": {"b": {"type": "stdio", "command": "/nonexistent/b"}}})
    done = subprocess.run([sys.executable, "-m", "tinyharness", "mcp", "list"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, **home, "PYTHONPATH": str(ROOT)}, timeout=60)
    lines = done.stdout.splitlines()
    assert lines[lines.index("a  [stdio] /nonexistent/a") + 1] == \
        f"  NOT trusted yet: {tmp_path / '.mcp.json'} (run or chat asks once; until then it is never started)"
    assert lines[lines.index("b  [stdio] /nonexistent/b") + 1].startswith(
        f"  NOT trusted yet: {Path(tmp_path) / '.vscode' / 'mcp.json'}")
