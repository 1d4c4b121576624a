"""Parallel reads, measured: one reply asks for N slow read-only calls; the same run with and without
--no-parallel, side by side, through the real `tinyharness run` and a real MCP server process.

    python -m benchmarks.parallel [--calls 4] [--seconds 0.5]

The slow tool is tests/mcp_server.py's `slow` (it sleeps, like a tool waiting on a disk or a network),
marked read-only in the workspace's MCP config. Each run also checks that every result is paired with
its call's id in the order of the calls. `figures()` returns the numbers for NOTES.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tinyharness.testing import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]


def one_run(workspace, data, calls, seconds, parallel):
    # Slightly different durations: identical calls in a row would (rightly) wake the repeat guard.
    reply = {"tool_calls": [{"name": "mcp__t__slow", "arguments": {"seconds": seconds + i / 1000}}
                            for i in range(calls)]}
    with ScriptedServer(script=[reply, "Done."]) as server:
        # --trust: the workspace's mcp.json, as it is now (piped input never answers the question)
        command = [sys.executable, "-m", "tinyharness", "run", "--trust", "--base-url", server.base_url, "--no-session",
                   *([] if parallel else ["--no-parallel"]), "read them"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(data)}
        started = time.monotonic()
        done = subprocess.run(command, cwd=workspace, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                              timeout=300)
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"the run failed (exit {done.returncode}):\n{done.stderr}")
        sent = server.requests[1]["messages"]
    asked = next(m for m in sent if m.get("tool_calls"))
    results = [m for m in sent if m["role"] == "tool"]
    paired = ([m["tool_call_id"] for m in results] == [c["id"] for c in asked["tool_calls"]]
              and all(m["content"] == "slept" for m in results))
    return wall, paired


def figures(calls=4, seconds=0.5):
    with tempfile.TemporaryDirectory() as folder:
        workspace, data = Path(folder, "ws"), Path(folder, "data")
        (workspace / ".tinyharness").mkdir(parents=True)
        server = [sys.executable, str(ROOT / "tests" / "mcp_server.py")]
        (workspace / ".tinyharness" / "mcp.json").write_text(
            json.dumps({"servers": {"t": {"command": server, "read_only": ["slow"]}}}))
        serial, serial_paired = one_run(workspace, data, calls, seconds, parallel=False)
        together, together_paired = one_run(workspace, data, calls, seconds, parallel=True)
    return {"calls": calls, "seconds_each": seconds, "serial_s": serial, "parallel_s": together,
            "speedup": serial / together, "paired": serial_paired and together_paired}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.parallel", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.5)
    args = parser.parse_args(argv)
    f = figures(args.calls, args.seconds)
    print(f"{f['calls']} read-only calls of {f['seconds_each']:g} s each in one reply, whole `tinyharness run`:")
    print(f"  one after the other (--no-parallel)  {f['serial_s']:.2f} s")
    print(f"  together (default)                   {f['parallel_s']:.2f} s   ({f['speedup']:.1f}x faster)")
    print(f"  every result paired with its call, in the calls' order: {'yes' if f['paired'] else 'NO'}")
    return 0 if f["paired"] else 1


if __name__ == "__main__":
    sys.exit(main())
