"""Bounded reads: read_file never takes a whole huge file into the harness, the session or the context.

A 128 MiB file once took the harness to 1.7 GiB and the session file to 768 MiB; a 1 GiB sparse file to
7.2 GiB and MemoryError. read_file now reads at most 256 KiB (the first and the last half, the size
said), never a FIFO or a device, and the session stores the result as the model was sent it.
"""
import json
import os
import time

from tests.ladder import run_stage, tool_results
from tinyharness import tools
from tinyharness.testing import ScriptedServer


def test_a_huge_sparse_file_is_read_head_and_tail_with_its_size(tmp_path):
    with open(tmp_path / "huge.bin", "wb") as f:
        f.write("é-start\n".encode() * 10)
        f.truncate(1 << 30)  # 1 GiB, no disk used
        f.seek((1 << 30) - 6)
        f.write(b"-end\xc3\xa9")
    text = tools.read_file(str(tmp_path), "huge.bin")
    assert text.startswith("[read_file: huge.bin is 1,073,741,824 bytes") and text.endswith("-endé"), text[:300]
    assert len(text) < 300_000 and "é-start" in text and "\ufffd" not in text


def test_a_file_just_under_the_cap_is_whole_and_one_over_is_cut(tmp_path):
    (tmp_path / "under.txt").write_bytes(b"a" * tools.READ_CAP)
    (tmp_path / "over.txt").write_bytes(b"b" * (tools.READ_CAP + 1))
    assert tools.read_file(str(tmp_path), "under.txt") == "a" * tools.READ_CAP
    over = tools.read_file(str(tmp_path), "over.txt")
    assert over.startswith("[read_file: over.txt is 262,145 bytes") and "1 bytes in the middle not read" in over


def test_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    started = time.monotonic()
    result = tools.run_tool(str(tmp_path), "read_file", {"path": "pipe"})
    assert result.startswith("ERROR") and "not a regular file" in result and time.monotonic() - started < 5


def test_the_session_stores_what_the_model_was_sent(tmp_path):
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    with open(ws / "big.log", "wb") as f:
        f.truncate(128 << 20)  # 128 MiB of zero bytes
    calls = [{"name": "read_file", "arguments": {"path": "big.log"}, "id": "r"},
             {"name": "shell", "arguments": {"command": "head -c 3000000 /dev/zero | tr '\\\\0' x"}, "id": "s"}]
    with ScriptedServer(script=[{"tool_calls": calls}, "done"]) as server:
        result = run_stage("tinyharness", ws, "--yes", "--base-url", server.base_url, "task",
                           env={"XDG_DATA_HOME": str(data), "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    sent = tool_results(server.requests[-1])
    assert sent["r"].startswith("[read_file: big.log is 134,217,728 bytes") and len(sent["r"]) < 10_000, sent["r"][:200]
    sessions = list(data.rglob("*.jsonl"))
    assert len(sessions) == 1 and sessions[0].stat().st_size < 100_000
    events = [json.loads(line) for line in sessions[0].read_text().splitlines()]
    stored = {e["message"]["tool_call_id"]: e["message"]["content"] for e in events if e.get("type") == "tool"}
    assert stored == sent
