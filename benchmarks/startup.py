"""Start-up time: `tinyharness --help` beside bare Python, side by side.

    python -m benchmarks.startup [--runs 15]

A command people type, and scripts call in loops, should answer at once. The target is within 2.5x
of `python3 -c pass` (the interpreter starting and stopping, the floor no Python program goes
under): `tinyharness --help` imports only argparse and the console module; each command imports the
model client, the loop and the sandbox when it runs. Each figure is the median of --runs starts, in
fresh processes, alternating the two so that a busy moment of the machine falls on both.
"""
import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"python3 -c pass": [sys.executable, "-c", "pass"],
            "tinyharness --help": [sys.executable, "-m", "tinyharness", "--help"],
            "tinyharness --version": [sys.executable, "-m", "tinyharness", "--version"]}


def seconds(command):
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def figures(runs=15):
    """{name: median seconds} over RUNS alternating starts of each command."""
    times = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            times[name].append(seconds(command))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="starts of each command (default %(default)s)")
    args = parser.parse_args(argv)
    found = figures(args.runs)
    floor = found["python3 -c pass"]
    print(f"{'command':<24}{'median':>10}{'vs bare Python':>16}")
    for name, value in found.items():
        print(f"{name:<24}{value * 1000:>8.1f} ms{value / floor:>15.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
