"""What a checkpoint adds to a shell command, by workspace size and by what the command changed.

    python -m benchmarks.checkpoints [--runs 15] [--big] [--sandbox on|off]

For workspaces of 100 and 10,000 files (and 100,000 with `--big`: slow to build), ten to a folder
and a hundred folders to a folder above, in a fresh git repository (packed), it times one whole `tools.shell` call alone (the command, with
the sandbox as a run uses it) and the same call wrapped in a run's checkpoint
(`Recorder.around`, as loop.py wraps it): the checkpoint before, the look at what changed after. The
two take turns, so a slow spell of a shared machine falls on both. Three commands:

- unchanged:   `true`;
- one file:    `echo x >> aA/dD/fF.txt`, a different file each time (a change rewrites the trees
               of the folders on its way up: its cost grows with their size, not the workspace's);
- 50 MiB:      a 50 MiB file rewritten (`head -c ... /dev/urandom > big.bin`): its bytes are read
               and kept.

It also prints the run's first checkpoint (the whole workspace scanned; the first time ever, every
file is read and kept; a later run reads only what changed since), the same unchanged checkpoint when
the kernel's watch is not used (every file looked at: the fallback), and the store's size after a
50-command run that changes one small file per command, beside the workspace's. Timings vary with
the machine and its load: printed, never asserted. The target: on an unchanged 10,000-file workspace
a few milliseconds (what the sandbox itself adds), growing with what changed, not with the workspace.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from tinyharness.checkpoints.recorder import Recorder
from tinyharness.sandbox import Sandbox, unavailable_reason
from tinyharness.tools import shell

BIG = 50 << 20


def build(root, files):
    """A git repository of `files` small files, ten to a folder, a hundred folders to a folder
    above (`aA/dD/fF.txt`, as a source tree nests), committed; returns its path."""
    ws = os.path.join(root, f"ws{files}")
    os.mkdir(ws)
    for i in range(files):
        folder = os.path.join(ws, f"a{i // 1000}", f"d{i // 10 % 100}")
        if i % 10 == 0:
            os.makedirs(folder)
        with open(os.path.join(folder, f"f{i % 10}.txt"), "w") as file:
            file.write(f"line {i}\n" * 8)
    if shutil.which("git"):
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@b"}
        # packed, as a repository that has lived a while (and no gc --auto in the background)
        for args in (["init", "-q"], ["add", "-A"], ["-c", "gc.auto=0", "commit", "-qm", "files"], ["gc", "-q"]):
            subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)
    return ws


def timed_pair(alone, wrapped, runs):
    """(median ms alone, median ms wrapped), the two taking turns."""
    times = {"alone": [], "wrapped": []}
    for round_ in range(runs):
        pair = [("alone", alone), ("wrapped", wrapped)]
        for name, function in (pair if round_ % 2 == 0 else pair[::-1]):
            started = time.perf_counter()
            function()
            times[name].append((time.perf_counter() - started) * 1000)
    return statistics.median(times["alone"]), statistics.median(times["wrapped"])


def commands(files):
    """name -> a function giving the next command line."""
    counter = iter(range(10 ** 9))
    return {"unchanged": lambda: "true",
            "one file": lambda: (lambda i: f"echo x >> a{i // 1000}/d{i // 10 % 100}/f{i % 10}.txt")(
                next(counter) * 7 % files),
            "50 MiB": lambda: f"head -c {BIG} /dev/urandom > big.bin"}


def measure(ws, data, runs, sandbox, out):
    """One workspace: the first checkpoints, then each command alone (on a copy of the workspace, so
    that its changes are no work for the recorder) and with its checkpoint."""
    alone_ws = ws + "-alone"
    shutil.copytree(ws, alone_ws, symlinks=True)
    recorder = Recorder(ws, out, root=data)
    first = timed_once(lambda: recorder.around("first"))
    again = Recorder(ws, out, root=data)
    later = timed_once(lambda: again.around("a later run's first"))
    again.close()
    fallback = Recorder(ws, out, root=data, watch=False)
    timed_once(lambda: fallback.around("first"))
    no_watch = timed_pair(lambda: shell(alone_ws, "true", sandbox=sandbox),
                          lambda: checked(fallback, ws, "true", sandbox), max(3, runs // 3))
    rows = []
    for name, next_command in commands(count_files(ws)).items():
        n = max(3, runs // 3) if name == "50 MiB" else runs
        alone, wrapped = timed_pair(lambda: shell(alone_ws, next_command(), sandbox=sandbox),
                                    lambda: checked(recorder, ws, next_command(), sandbox), n)
        rows.append((name, alone, wrapped))
    recorder.close()
    shutil.rmtree(alone_ws)
    return first, later, rows, no_watch


def timed_once(context):
    started = time.perf_counter()
    with context():
        pass
    return (time.perf_counter() - started) * 1000


def count_files(ws):
    """The workspace's files, its .git aside."""
    return sum(len(files) for folder, _, files in os.walk(ws)
               if ".git" not in os.path.relpath(folder, ws).split(os.sep))


def checked(recorder, ws, command, sandbox):
    with recorder.around(f"shell: {command}"):
        return shell(ws, command, sandbox=sandbox)


def store_after_fifty(root, sandbox, out):
    """(workspace bytes, store bytes) after 50 commands on a 1,000-file workspace, one file each."""
    ws, data = build(root, 1000), os.path.join(root, "data-fifty")
    recorder = Recorder(ws, out, root=data)
    for i in range(50):
        checked(recorder, ws, f"echo change {i} >> a0/d{i}/f0.txt", sandbox)
    recorder.close()
    return size_of(ws), size_of(data)


def size_of(folder):
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(folder) for f in fs)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoints", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds per command (the 50 MiB one: a third)")
    parser.add_argument("--big", action="store_true", help="also 100,000 files (slow to build)")
    parser.add_argument("--sandbox", choices=["on", "off"], default="on" if not unavailable_reason() else "off")
    args = parser.parse_args(argv)
    sandbox = Sandbox(enabled=args.sandbox == "on")
    quiet = lambda line: None  # noqa: E731 - what a checkpoint says is not timed
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, sandbox {args.sandbox}, "
          f"medians of {args.runs} rounds (ms)")
    print("| files | first checkpoint (first run / a later run) | command | alone | with checkpoint | added |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="checkpoints-bench-") as root:
        for files in (100, 10_000) + ((100_000,) if args.big else ()):
            ws = build(root, files)
            first, later, rows, (alone, scanned) = measure(ws, os.path.join(root, f"data{files}"),
                                                           args.runs, sandbox, quiet)
            for i, (name, a, w) in enumerate(rows):
                head = f"{files:,} | {first:.0f} / {later:.0f}" if i == 0 else " | "
                print(f"| {head} | {name} | {a:.1f} | {w:.1f} | +{w - a:.1f} |")
            print(f"|  |  | unchanged, no watch (every file looked at) | {alone:.1f} | {scanned:.1f} | "
                  f"+{scanned - alone:.1f} |")
            shutil.rmtree(ws)
        workspace, store = store_after_fifty(root, sandbox, quiet)
    print(f"\nstore after a 50-command run (1,000 files, one changed per command): {store / 1024:.0f} KiB, "
          f"beside a workspace of {workspace / 1024:.0f} KiB (its .git included)")


if __name__ == "__main__":
    main()
