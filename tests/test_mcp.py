"""MCP tool slots against a real child process speaking newline-delimited JSON-RPC (tests/mcp_server.py)."""
import json
import os
import sys
import time

import pytest

from tests.ladder import ROOT
from tests.mcp_server import PNG
from tinyharness import mcp
from tinyharness.mcp import client as mcp_client
from tinyharness.mcp import config as mcp_config

SERVER = [sys.executable, str(ROOT / "tests" / "mcp_server.py")]


@pytest.fixture(autouse=True)
def own_data_home(tmp_path, monkeypatch):
    """The servers' logs go beside the sessions: this test's folder, never the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def start(*flags, read_only=("echo",), name="t"):
    reports = []
    slots = mcp.Slots.start({name: {"command": SERVER + list(flags), "read_only": read_only}}, report=reports.append)
    return slots, reports


@pytest.fixture
def slots():
    slots, reports = start()
    yield slots
    slots.close()


def test_handshake_and_every_page_of_tools(slots):
    names = {s["function"]["name"] for s in slots.schemas()}
    assert {"mcp__t__echo", "mcp__t__add", "mcp__t__fail", "mcp__t__tool_4"} <= names  # tool_4 is on page 3
    assert len(names) == 17
    assert slots.servers["t"].version == mcp_client.PROTOCOL_VERSION


def test_a_call_returns_its_text_and_is_error_is_an_error_the_model_reads(slots):
    assert slots.call("mcp__t__echo", {"text": "hi"}) == "echo: hi"
    assert slots.call("mcp__t__add", {"a": 2, "b": 3}) == "5"
    assert slots.call("mcp__t__fail", {}) == "ERROR: the tool reported an error: the record is locked"
    assert "needs the arguments a, b" in slots.call("mcp__t__add", {})
    assert "has no tool 'nope'" in slots.call("mcp__t__nope", {})


def test_a_picture_reaches_the_model_as_a_picture_and_a_broken_one_is_noted(slots):
    images = []
    assert slots.call("mcp__t__image", {}, images=images) == (
        "a picture follows\n[image picture 1: image/png, 73 bytes; it is attached after this turn's tool results]")
    [(name, part)] = images
    assert name == "image picture 1" and part["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert slots.call("mcp__t__junk_image", {}, images=images) == (
        "[a picture was left out: it is not a PNG, JPEG or WebP image in base64]")
    assert len(images) == 1


def test_read_only_comes_from_the_config(slots):
    assert slots.read_only("mcp__t__echo") and not slots.read_only("mcp__t__add")


def test_list_changed_re_lists(slots):
    assert "mcp__t__new_tool" not in {s["function"]["name"] for s in slots.schemas()}
    assert slots.call("mcp__t__grow", {}) == "grown"
    deadline = time.monotonic() + 5
    while not slots.servers["t"].list_changed.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "mcp__t__new_tool" in {s["function"]["name"] for s in slots.schemas()}


def test_a_slow_call_times_out_and_the_server_stays_usable(slots):
    result = slots.call("mcp__t__slow", {"seconds": 1}, timeout=0.3)  # outlives the limit; closing waits out the rest
    assert result.startswith("ERROR:") and "did not answer tools/call within 0.3 s" in result
    assert slots.call("mcp__t__echo", {"text": "still here"}) == "echo: still here"


def test_a_crash_mid_run_is_reported_once_and_its_tools_withdrawn():
    slots, reports = start()
    try:
        result = slots.call("mcp__t__crash", {})
        assert result.startswith("ERROR:") and "gone" in result
        assert slots.schemas() == []
        assert "not available" in slots.call("mcp__t__echo", {"text": "x"})
        assert sum("withdrawn" in r for r in reports) == 1
    finally:
        slots.close()


def test_junk_on_stdout_is_skipped():
    slots, _ = start("--junk")
    try:
        assert slots.call("mcp__t__echo", {"text": "through the noise"}) == "echo: through the noise"
    finally:
        slots.close()


def test_an_unsupported_version_names_both_and_the_run_goes_on():
    slots, reports = start("--version", "1999-01-01")
    try:
        assert slots.schemas() == []
        assert "'1999-01-01'" in reports[0] and mcp_client.PROTOCOL_VERSION in reports[0]
    finally:
        slots.close()


def test_a_server_that_fails_to_start_is_reported():
    slots, reports = start("--crash-at-start")
    assert slots.schemas() == [] and "Its tools are not offered" in reports[0]
    reports = []
    slots = mcp.Slots.start({"x": {"command": ["/nonexistent/server"]}}, report=reports.append)
    assert slots.schemas() == [] and "cannot start MCP server 'x'" in reports[0]


def test_close_ends_the_child(slots):
    process = slots.servers["t"].process
    slots.close()
    assert process.poll() is not None


@pytest.mark.parametrize("text, expected", [
    ("notes=python3 server.py --root 'my notes'", ("notes", ["python3", "server.py", "--root", "my notes"])),
])
def test_the_flag_is_split_as_a_shell_would(text, expected):
    name, config = mcp_config.parse_flag(text)
    assert (name, config["command"]) == expected


@pytest.mark.parametrize("text", ["noequals", "=cmd", "a__b=cmd", "x='unclosed"])
def test_bad_flags_are_refused(text):
    with pytest.raises(ValueError):
        mcp_config.parse_flag(text)


def test_config_file_is_read_and_checked(tmp_path):
    good = tmp_path / "mcp.json"
    good.write_text('{"servers": {"n": {"command": ["a", "b"], "read_only": true}}}')
    assert mcp_config.load_config(good) == {"n": {"type": "stdio", "command": ["a", "b"], "env": {}, "read_only": True,
                                           "disabled": False, "timeout": 60.0}}
    bad = tmp_path / "bad.json"
    bad.write_text('{"servers": {"n": {"command": 5}}}')
    with pytest.raises(ValueError, match="needs \"command\""):
        mcp_config.load_config(bad)


# --- the shapes other tools write ---------------------------------------------------------------------

def test_the_shapes_of_claude_cursor_and_vs_code(tmp_path, monkeypatch):
    monkeypatch.setenv("NOTES_KEY", "k-123")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({
        "mcpServers": {"claude": {"command": "npx", "args": ["-y", "pkg", "${NOTES_KEY}"], "env": {"K": "${NOTES_KEY}"}}},
        "servers": {"vscode": {"type": "stdio", "command": "python3", "args": ["s.py", "${env:NOTES_KEY}"]},
                    "hosted": {"type": "http", "url": "https://example.com/mcp",
                               "headers": {"Authorization": "Bearer ${NOTES_KEY}"}, "timeout": 5},
                    "urlonly": {"url": "http://127.0.0.1:9/mcp"},
                    "off": {"command": "x", "disabled": True},
                    "split": {"command": "python3 server.py --root '${UNSET_VAR:-my notes}'"}}}))
    configs = mcp_config.load_config(path)
    assert configs["claude"]["command"] == ["npx", "-y", "pkg", "k-123"] and configs["claude"]["env"] == {"K": "k-123"}
    assert configs["vscode"]["command"] == ["python3", "s.py", "k-123"]
    assert (configs["hosted"]["type"], configs["hosted"]["headers"], configs["hosted"]["timeout"]) == \
           ("http", {"Authorization": "Bearer k-123"}, 5.0)
    assert configs["urlonly"]["type"] == "http" and configs["off"]["disabled"] is True
    assert configs["split"]["command"] == ["python3", "server.py", "--root", "my notes"]


@pytest.mark.parametrize("servers, problem", [
    ({"n": {"command": "python3", "env": {"PORT": 8080}}}, "\"env\" must map names to strings ('PORT' is 8080)"),
    ({"a__b": {"command": "x"}}, "must be letters, digits, '-' or single '_'"),
    ({"": {"command": "x"}}, "must be letters"),
    ({"n": {"command": "x", "args": "--flag"}}, "\"args\" must be a list of strings"),
    ({"n": {"command": "x", "args": ["${SURELY_UNSET_VAR}"]}}, "${SURELY_UNSET_VAR} is used but the variable is not set"),
    ({"n": {"type": "sse"}}, "\"type\": \"sse\" needs \"url\""),
    ({"n": {"type": "http"}}, "needs \"url\""),
    ({"n": {"type": "http", "url": "file:///etc/passwd"}}, "needs \"url\""),
    ({"n": {"type": "http", "url": "http://x", "headers": {"A": 1}}}, "\"headers\" must map"),
    ({"n": {"type": "http", "url": "http://x", "headers": {"A": "b\r\nEvil: 1"}}}, "line break"),
    ({"n": {"command": "x", "disabled": "yes"}}, "\"disabled\" must be true or false"),
    ({"n": {"command": "x", "timeout": -1}}, "\"timeout\" must be a number"),
    ({"n": {"command": "x", "read_only": "all"}}, "\"read_only\" must be true or a list"),
    ({"n": ["x"]}, "must be an object"),
])
def test_every_malformed_field_is_a_sentence(tmp_path, servers, problem):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": servers}))
    with pytest.raises(ValueError) as raised:
        mcp_config.load_config(path)
    assert problem in str(raised.value) and str(path) in str(raised.value)


def test_a_vs_code_mcp_json_with_args_works_through_run(workspace, tmp_path):
    from tests.ladder import FINAL, calls, run_stage, tool_call, tool_results
    from tinyharness.testing import ScriptedServer
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "mcp.json").write_text(json.dumps({"inputs": [], "servers": {
        "notes": {"type": "stdio", "command": sys.executable, "args": [str(ROOT / "tests" / "mcp_server.py")]},
        "gone": {"type": "stdio", "command": "/nonexistent/server", "disabled": True}}}))
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    with ScriptedServer(script=[calls(tool_call("mcp__notes__echo", text="from vs code")), "Done."]) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "--yes", "go", tty="y\n", env=env)  # y: trust it
    assert result.returncode == 0, result.stderr
    assert list(tool_results(server.requests[1]).values()) == ["echo: from vs code"]
    assert "[mcp] notes: 17 tool(s), protocol 2025-11-25" in result.stderr and "gone" not in result.stderr


def test_a_malformed_config_stops_the_run_with_exit_2_and_a_sentence(workspace, tmp_path):
    from tests.ladder import FINAL, run_stage
    from tinyharness.testing import ScriptedServer
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "mcp.json").write_text('{"mcpServers": {"n": {"command": "x", "env": {"A": 1}}}}')
    with ScriptedServer(script=["Done."]) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "go", tty="y\n",
                           env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert result.returncode == 2 and server.requests == []
    assert "\"env\" must map names to strings" in result.stderr and "Traceback" not in result.stderr


# --- a server is untrusted input ---------------------------------------------------------------------

def test_endless_paging_stops_and_the_run_goes_on():
    slots, reports = start("--endless-cursor")
    try:
        assert any(f"after {mcp_client.MAX_PAGES} pages" in r for r in reports)
        assert "mcp__t__echo" in {s["function"]["name"] for s in slots.schemas()}
    finally:
        slots.close()


def test_hostile_names_schemas_ids_and_content_never_crash():
    slots, reports = start("--hostile")
    try:
        names = {s["function"]["name"] for s in slots.schemas()}
        assert all(mcp.MODEL_NAME.fullmatch(n) for n in names)
        assert {"mcp__t__two_words", "mcp__t__two_words_2", "mcp__t__esc__2Jname"} <= names
        assert "mcp__t__" + "x" * (64 - len("mcp__t__")) in names
        assert not any("required_five" in n or "schema_list" in n for n in names)
        text = "\n".join(reports)
        assert "'required_five' has \"required\" that is not a list" in text
        assert "without a string \"name\"" in text and "'' has a name no model server accepts" in text
        # replies preceded by one whose id is a list: the reader lives on
        assert slots.call("mcp__t__echo", {"text": "still"}) == "echo: still"
        assert slots.call("mcp__t__two_words_2", {}).startswith("ERROR: MCP server 't' answered tools/call with an "
                                                               "error: unknown tool two words")  # its own name
        assert slots.call("mcp__t__bad_content", {}) == ('ERROR: the tool reported an error: the server\'s reply to '
                                                         'tools/call has a "content" that is not a list, so the '
                                                         "tool's result cannot be read")
    finally:
        slots.close()


def test_a_call_is_bounded_by_the_runs_time_left_and_close_ends_the_servers_children():
    slots, _ = start()
    try:
        server = slots.servers["t"]
        result = slots.call("mcp__t__fork", {}, time_left=0.2)
        assert f"did not answer tools/call within {mcp.MIN_CALL_TIME:g} s" in result
        child = next(int(line.split()[1]) for line in server.log_path.read_text().splitlines()
                     if line.startswith("forked "))
    finally:
        slots.close()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_log_is_private_capped_and_beside_the_sessions(tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_client, "MAX_LOG_BYTES", 300)   # Log reads it there
    slots, _ = start()
    try:
        for i in range(20):
            slots.call("mcp__t__echo", {"text": str(i)})  # the server logs each request on stderr
        path = slots.servers["t"].log_path
    finally:
        slots.close()
    assert path.parent == tmp_path / "data" / "tinyharness" / "mcp-logs"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.stat().st_size < 300 + 100 and path.read_text().endswith("the rest is dropped\n")


def test_a_servers_last_stderr_lines_reach_the_log_before_it_closes(monkeypatch):
    """The copy of stderr runs on its own thread; on a loaded machine it may lag behind the call.
    Closing the server must let it finish (the group is dead, the pipe ends) before the log closes,
    or the server's last lines - often why it failed - are lost. The lag is made here on purpose."""
    drain = mcp_client.Log.drain

    def lagging(log, pipe):
        time.sleep(0.5)  # the thread is late, as under load
        drain(log, pipe)
    monkeypatch.setattr(mcp_client.Log, "drain", lagging)
    slots, _ = start()
    try:
        slots.call("mcp__t__echo", {"text": "x"})  # the server logs each request on stderr
        path = slots.servers["t"].log_path
    finally:
        slots.close()
    assert "got tools/call" in path.read_text()


def test_a_per_server_timeout_from_the_config():
    slots = mcp.Slots.start({"t": {"command": SERVER, "timeout": 0.3}}, report=lambda t: None)
    try:
        assert "did not answer tools/call within 0.3 s" in slots.call("mcp__t__slow", {"seconds": 1})
    finally:
        slots.close()


def test_progress_is_shown_on_stderr():
    slots, reports = start()
    try:
        assert slots.call("mcp__t__progress", {}) == "progressed"
        assert any(r.startswith("[mcp] t: progress in progress (") and "step" in r for r in reports)
    finally:
        slots.close()


def test_ctrl_c_in_chat_stops_the_turns_commands_never_a_server(tmp_path):
    # In a process of its own: a command the shell tool's sandbox started and Ctrl-C interrupted is
    # reaped and counted by that sandbox (tools.stop_commands); the server, and a child nobody's tool
    # started, run on.
    import subprocess
    program = f"""
import subprocess, sys
from tinyharness import mcp, tools
from tinyharness.sandbox import Sandbox
slots = mcp.Slots.start({{"t": {{"command": {SERVER!r}}}}}, report=lambda t: None)
box = Sandbox(enabled=False)
command, finish = box.start({str(tmp_path)!r}, "sleep 300", 60, stdout=subprocess.DEVNULL)
bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
command.interrupt()
print(tools.stop_commands(box), command.pid, bystander.poll(), flush=True)
print(slots.call("mcp__t__echo", {{"text": "alive"}}), flush=True)
bystander.kill()
slots.close()
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr
    (killed, pid, bystander), answer = done.stdout.splitlines()[0].split(), done.stdout.splitlines()[1]
    assert killed == "1" and not alive(int(pid)) and bystander == "None"  # the command's group alone
    assert answer == "echo: alive"


def test_mcp_list_shows_servers_tools_and_trust(workspace, tmp_path):
    import subprocess
    data, config = tmp_path / "data", tmp_path / "config"
    (config / "tinyharness").mkdir(parents=True)
    (config / "tinyharness" / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"mine": {"command": SERVER[0], "args": SERVER[1:], "read_only": ["echo"]}}}))
    (workspace / ".tinyharness").mkdir()
    (workspace / ".tinyharness" / "mcp.json").write_text(json.dumps(
        {"servers": {"theirs": {"command": "/nonexistent/never-started"}, "off": {"command": "x", "disabled": True}}}))
    env = {"XDG_DATA_HOME": str(data), "XDG_CONFIG_HOME": str(config)}
    result = mcp_list(workspace, env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Looked at:" and f"  {config / 'tinyharness' / 'mcp.json'} (your own): read" in lines
    mine = lines.index(f"mine  [stdio] {' '.join(SERVER)}")
    assert lines[mine:mine + 3] == [f"mine  [stdio] {' '.join(SERVER)}",
                         f"  trusted: your own file {config / 'tinyharness' / 'mcp.json'}",
                         "  protocol 2025-11-25, 17 tool(s), 60 s a call"]
    assert any(line.split()[:3] == ["mcp__mine__echo", "read-only,", "runs"] for line in lines)
    assert any(line.split()[:3] == ["mcp__mine__add", "asks", "permission"] for line in lines)
    untrusted = lines.index("theirs  [stdio] /nonexistent/never-started")
    assert lines[untrusted + 1].startswith("  NOT trusted yet:") and "never started" in lines[untrusted + 1]
    assert "  disabled in its config: not started" in lines
    # trusted, the workspace's server is started; this one cannot start: exit 1 and why
    subprocess.run([sys.executable, "-c", "import sys; from tinyharness import trust; trust.remember(sys.argv[1])",
                    str(workspace / ".tinyharness" / "mcp.json")], env={**os.environ, **env}, check=True, cwd=ROOT)
    result = mcp_list(workspace, env)
    assert result.returncode == 1
    assert "  failed: cannot start MCP server 'theirs' (/nonexistent/never-started): " in result.stdout


def mcp_list(workspace, env):
    import subprocess
    return subprocess.run([sys.executable, "-m", "tinyharness", "mcp", "list"], cwd=workspace, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_picture_from_a_tool_reaches_the_model_after_the_turns_results(workspace, tmp_path):
    from tests.ladder import FINAL, calls, run_stage, tool_call, tool_results
    from tinyharness.testing import ScriptedServer
    script = [calls(tool_call("mcp__t__image"), tool_call("mcp__t__echo", text="x")), "A red square."]
    with ScriptedServer(script=script) as server:
        result = run_stage(FINAL, workspace, "--base-url", server.base_url, "--mcp", f"t={' '.join(SERVER)}",
                           "--yes", "what is it?", env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    sent = server.requests[1]["messages"]
    assert list(tool_results(server.requests[1]).values())[1] == "echo: x"
    follow_up = sent[-1]
    assert follow_up["role"] == "user" and sent[-2]["role"] == "tool"  # after the last result, never between
    urls = [p["image_url"]["url"] for p in follow_up["content"] if p.get("type") == "image_url"]
    assert urls == ["data:image/png;base64," + PNG]
