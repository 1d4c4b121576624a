"""Start-up against the workspace's size: `tinyharness run` to its first request, in an empty folder and
in one of 30,000 files, side by side.

    python -m benchmarks.workspace_start [--runs 9] [--files 30000]

A run should not pay for the size of the folder it is started in before it asks the model anything.
Each figure is the time from starting the process to the scripted server receiving the first request
(the model's reply is immediate, and the run ends there), the median of --runs starts in fresh
processes, alternating the folders and the sandbox on and off so that a busy moment of the machine
falls on all of them. HOME and XDG_* point into a temporary folder; no session is kept. Timings vary
with the machine; they are printed, never asserted.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = 30_000


def make_tree(folder, files):
    """`files` small files, 100 a folder."""
    for i in range(files):
        sub = folder / f"d{i // 100}"
        if i % 100 == 0:
            sub.mkdir()
        (sub / f"f{i % 100}.txt").write_text("x\n")


def first_request(workspace, home, sandbox):
    """Seconds from the start of `tinyharness run` to its first request at the scripted server."""
    from tinyharness.testing import ScriptedServer
    arrived = threading.Event()
    times = {}

    def reply(body, index):
        times.setdefault("first", time.perf_counter())
        arrived.set()
        return {"content": "Done."}
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"), "PYTHONPATH": str(ROOT)}
    with ScriptedServer(policy=reply) as server:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tinyharness", "run", "--base-url", server.base_url, "--yes",
                               "--no-session", "--sandbox", sandbox, "Say done."], cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not arrived.is_set():
        raise SystemExit(f"the run in {workspace} failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return times["first"] - started


def figures(runs=9, files=FILES):
    """{(folder, sandbox): median seconds}."""
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        folders = {"empty folder": scratch / "empty", f"{files:,} files": scratch / "many"}
        for path in folders.values():
            path.mkdir()
        make_tree(folders[f"{files:,} files"], files)
        (scratch / "home").mkdir()
        times = {(name, sandbox): [] for name in folders for sandbox in ("on", "off")}
        for _ in range(runs):
            for (name, sandbox), found in times.items():
                found.append(first_request(folders[name], scratch / "home", sandbox))
    return {key: statistics.median(values) for key, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workspace_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="starts of each kind (default %(default)s)")
    parser.add_argument("--files", type=int, default=FILES, help="files in the large folder (default %(default)s)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.files < 1:
        parser.error("--runs and --files must be 1 or more")
    found = figures(args.runs, args.files)
    names = list(dict.fromkeys(name for name, _ in found))
    print(f"Start to first request, median of {args.runs} (load average {os.getloadavg()[0]:.2f}); not asserted.")
    print(f"| {'workspace':<14} | sandbox on | sandbox off |")
    print(f"|{'-' * 16}|-----------:|------------:|")
    for name in names:
        print(f"| {name:<14} | {found[name, 'on'] * 1000:7.0f} ms | {found[name, 'off'] * 1000:8.0f} ms |")
    for sandbox in ("on", "off"):
        print(f"sandbox {sandbox}: {names[1]} / {names[0]} = {found[names[1], sandbox] / found[names[0], sandbox]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
