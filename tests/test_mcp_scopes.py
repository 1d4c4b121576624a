"""MCP files from every scope (issue 39, finding 7), through the real command line.

A `"type": "sse"` server is spoken to over the old HTTP+SSE transport (one that cannot be reached is skipped with
a line, never the whole run); a VS Code `${input:ID}` is asked for at the terminal and its server skipped
headless; servers added with `claude mcp add` (~/.claude.json: the user scope and this workspace's local scope)
and Codex's `~/.codex/config.toml` are the user's own (no trust question, started in their file's folder, never
the workspace); `tinyharness mcp list` names every file it looked at.
"""
import json
import os
import subprocess
import sys
import threading

import pytest

from tests.ladder import FINAL, ROOT, calls, run_stage, tool_call, tool_results
from tests.mcp_server import ToolServer, parse, serve_legacy_sse
from tinyharness.testing import ScriptedServer

SERVER = [sys.executable, str(ROOT / "tests" / "mcp_server.py")]


@pytest.fixture
def me(tmp_path):
    """A home folder of the test's own, and the environment that names it."""
    home = tmp_path / "me"
    home.mkdir()
    return home, {"HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"),
                  "CODEX_HOME": str(home / ".codex")}


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def run(ws, env, script, *args, tty=None):
    with ScriptedServer(script) as server:
        done = run_stage(FINAL, ws, "--base-url", server.base_url, *args, "go", tty=tty, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done, list(tool_results(server.requests[1]).values()) if len(server.requests) > 1 else []


@pytest.fixture(params=[False, True], ids=["plain", "chunked"])
def sse_server(request):
    httpd = serve_legacy_sse(ToolServer(parse([])), chunked=request.param)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/sse"
    httpd.shutdown()
    httpd.server_close()


def test_an_sse_server_is_used_and_one_out_of_reach_is_skipped_never_the_whole_run(ws, me, sse_server):
    write(ws / ".mcp.json", {"mcpServers": {"old": {"type": "sse", "url": sse_server},
                                            "gone": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}})
    script = [calls(tool_call("mcp__old__echo", text="over sse"), tool_call("mcp__old__add", a=2, b=3)), "Done."]
    done, results = run(ws, me[1], script, "--trust", "--yes")
    assert done.returncode == 0, done.stderr
    assert results == ["echo: over sse", "5"]
    assert "[mcp] old: 17 tool(s), protocol 2025-11-25" in done.stderr
    skipped = [line for line in done.stderr.splitlines() if "'gone'" in line]
    assert len(skipped) == 1 and "cannot be reached" in skipped[0] and "the run goes on" in skipped[0]


def test_an_input_variable_is_asked_at_the_terminal_and_its_server_skipped_headless(ws, me):
    write(ws / ".vscode" / "mcp.json", {
        "inputs": [{"id": "python", "type": "promptString", "description": "Which Python"}],
        "servers": {"code": {"type": "stdio", "command": "${input:python}", "args": SERVER[1:]}}})
    script = [calls(tool_call("mcp__code__echo", text="typed")), "Done."]
    done, results = run(ws, me[1], script, "--yes", tty=f"y\n{sys.executable}\n")  # trust it, then the input
    assert done.returncode == 0, done.stderr
    assert "[mcp] code needs ${input:python} (Which Python): " in done.screen
    assert results == ["echo: typed"]
    # no terminal: the server is skipped with a line, and the run goes on
    done, results = run(ws, me[1], ["Done."], "--trust")
    assert done.returncode == 0, done.stderr
    assert "[mcp] code: skipped: it needs ${input:python}, which is asked for at a terminal" in done.stderr


def test_claude_json_and_codex_config_toml_are_the_users_own(ws, me, monkeypatch):
    home, env = me
    entry = {"command": SERVER[0], "args": SERVER[1:]}
    write(home / ".claude.json", {"numStartups": 3, "mcpServers": {"cuser": entry},
                                  "projects": {os.path.realpath(ws): {"mcpServers": {"clocal": entry}},
                                               str(home / "elsewhere"): {"mcpServers": {"nope": entry}}}})
    write(home / ".codex" / "config.toml", f"""# Codex's own settings
model = "o4-mini"

[mcp_servers.cx]
command = {json.dumps(SERVER[0])}
args = [{json.dumps(SERVER[1])}]  # the server
env = {{ "MODE" = "codex" }}

[mcp_servers.off]
command = "x"
enabled = false
""")
    script = [calls(*(tool_call(f"mcp__{name}__echo", text=name) for name in ("cuser", "clocal", "cx"))), "Done."]
    done, results = run(ws, env, script, "--yes")  # no terminal, no --trust: the user's own need no question
    assert done.returncode == 0, done.stderr
    assert results == ["echo: cuser", "echo: clocal", "echo: cx"]
    assert "mcp__nope" not in json.dumps(done.stderr) and "Trust" not in done.stdout
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from tinyharness.mcp.scopes import server_configs
    found = {name: (config, source) for name, config, source, _ in server_configs(str(ws))}
    assert set(found) == {"cuser", "clocal", "cx", "off"}
    assert found["cuser"][0]["cwd"] == found["clocal"][0]["cwd"] == str(home)  # never the workspace
    assert found["cx"][0]["cwd"] == str(home / ".codex") and found["cx"][0]["env"] == {"MODE": "codex"}
    assert found["off"][0]["disabled"] is True


def test_mcp_list_names_every_file_it_looked_at(ws, me):
    home, env = me

    def mcp_list():
        done = subprocess.run([sys.executable, "-m", "tinyharness", "mcp", "list"], cwd=ws, capture_output=True,
                              text=True, env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()
    lines = mcp_list()
    for path in (home / "config" / "tinyharness" / "mcp.json", home / ".claude.json", home / ".codex" / "config.toml",
                 ws / ".mcp.json", ws / ".vscode" / "mcp.json", ws / ".tinyharness" / "mcp.json"):
        assert any(line.startswith(f"  {path} (") and line.endswith(": not there") for line in lines), lines
    assert lines[-1] == "No MCP servers are configured in any of them, nor with --mcp."
    write(home / ".claude.json", {"mcpServers": {"mine": {"command": "/nonexistent/mine", "disabled": True}}})
    lines = mcp_list()
    assert f"  {home / '.claude.json'} (Claude Code's user scope): read" in lines
    assert lines[lines.index("mine  [stdio] /nonexistent/mine") + 1] == \
        f"  trusted: your own file {home / '.claude.json'}"


SAMPLE = """# a comment
model = "gpt-5"   # trailing
[mcp_servers.docs]
command = "npx"
args = ["-y", "mcp-server", 'C:\\\\literal', "a # not a comment"]
env = { "API_KEY" = "v", OTHER = 'w' }
enabled = false
tool_timeout_sec = 30.5
[mcp_servers."quoted.name".env]
X = "1"
"""


def test_the_toml_subset_for_python_3_10_reads_what_tomllib_reads():
    tomllib = pytest.importorskip("tomllib")
    from tinyharness.tomlread import subset
    assert subset(SAMPLE) == tomllib.loads(SAMPLE)
    with pytest.raises(ValueError, match="line 2"):
        subset('[a]\nx = """multi\nline"""\n')
