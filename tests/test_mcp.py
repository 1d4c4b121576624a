"""MCP tool slots against a real child process speaking newline-delimited JSON-RPC (tests/mcp_server.py)."""
import sys
import time

import pytest

from tests.ladder import ROOT
from tinyharness import mcp

SERVER = [sys.executable, str(ROOT / "tests" / "mcp_server.py")]


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
    assert len(names) == 13
    assert slots.servers["t"].version == mcp.PROTOCOL_VERSION


def test_a_call_returns_its_text_and_is_error_is_an_error_the_model_reads(slots):
    assert slots.call("mcp__t__echo", {"text": "hi"}) == "echo: hi"
    assert slots.call("mcp__t__add", {"a": 2, "b": 3}) == "5"
    assert slots.call("mcp__t__fail", {}) == "ERROR: the tool reported an error: the record is locked"
    assert "needs the arguments a, b" in slots.call("mcp__t__add", {})
    assert "has no tool 'nope'" in slots.call("mcp__t__nope", {})


def test_non_text_parts_are_noted_not_dropped_silently(slots):
    assert slots.call("mcp__t__image", {}) == ("a picture follows\n"
                                               "[a image part was left out: only text reaches the model]")


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
    result = slots.call("mcp__t__slow", {"seconds": 3}, timeout=0.3)
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
        assert "'1999-01-01'" in reports[0] and mcp.PROTOCOL_VERSION in reports[0]
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
    name, config = mcp.parse_flag(text)
    assert (name, config["command"]) == expected


@pytest.mark.parametrize("text", ["noequals", "=cmd", "a__b=cmd", "x='unclosed"])
def test_bad_flags_are_refused(text):
    with pytest.raises(ValueError):
        mcp.parse_flag(text)


def test_config_file_is_read_and_checked(tmp_path):
    good = tmp_path / "mcp.json"
    good.write_text('{"servers": {"n": {"command": ["a", "b"], "read_only": true}}}')
    assert mcp.load_config(good) == {"n": {"command": ["a", "b"], "env": {}, "read_only": True}}
    bad = tmp_path / "bad.json"
    bad.write_text('{"servers": {"n": {"command": 5}}}')
    with pytest.raises(ValueError, match="needs \"command\""):
        mcp.load_config(bad)
