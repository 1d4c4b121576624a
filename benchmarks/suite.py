"""Where the test suite's time goes: by file, by stage and by kind.

    python -m benchmarks.suite [PYTEST ARGS...]        # runs pytest with this plugin, then the tables
    python -m benchmarks.suite --report FILE.json      # the tables of an earlier run

The suite is a learner's checker and CI's whole proof, and both have a clock (COURSE.md: the README's
test command in at most 5 minutes on a quiet 2-core machine). Guessing where its time goes led two
rounds astray, so this measures it. Loaded as a pytest plugin (`-p benchmarks.suite`), it notes for
every test its call time (setup and teardown included) and what it did while it ran:

- nested pytest: it started a Python running pytest (the exercise sweeps grade a copy that way);
- subprocess: it started any other process (a stage's CLI, the console script, a shell command);
- sleep: it slept (time.sleep, in any thread) for 0.5 s or more in all;
- in-process: none of these - the stage's code ran in the test's own process.

A test counts under the first kind that applies. A parallel run (pytest-xdist) writes one part per
worker, joined into one report at the end; the seconds are then the tests' own, summed over workers. The figures are wall-clock seconds on whatever machine
runs it: print the load average beside them (this script does), and compare two runs only side by side.
"""
import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

KINDS = ("nested pytest", "subprocess", "sleep", "in-process")
REPORT_ENV = "TINYHARNESS_SUITE_REPORT"
STAGE_NAMES = ("m0_llm", "m1_loop", "m2_tools", "m3_hooks", "m4_guards", "m5_context", "m6_verify",
               "m7_eval", "m8_vision", "tinyharness")
SLEEP_THRESHOLD = 0.5


class Watch:
    """What the running test does: processes it starts and the time it sleeps (thread-safe counters)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.processes, self.nested, self.slept = 0, 0, 0.0

    def started(self, argv):
        words = [str(argv)] if isinstance(argv, (str, bytes)) else [str(word) for word in argv or ()]
        nested = any(a == "-m" and b == "pytest" for a, b in zip(words, words[1:])) or \
            any(Path(word).name in ("pytest", "py.test") for word in words[:1])
        with self.lock:
            self.processes += 1
            self.nested += nested

    def sleeping(self, seconds):
        with self.lock:
            self.slept += max(0.0, float(seconds or 0))

    def kind(self):
        if self.nested:
            return KINDS[0]
        if self.processes:
            return KINDS[1]
        return KINDS[2] if self.slept >= SLEEP_THRESHOLD else KINDS[3]


WATCH = Watch()
RESULTS = []


def pytest_configure(config):
    """Wrap Popen and sleep once for the whole run: every process and every sleep passes through them."""
    original_init, original_sleep = subprocess.Popen.__init__, time.sleep

    def watched_init(self, args, *rest, **kwargs):
        WATCH.started(args)
        original_init(self, args, *rest, **kwargs)

    def watched_sleep(seconds):
        WATCH.sleeping(seconds)
        original_sleep(seconds)

    subprocess.Popen.__init__ = watched_init
    time.sleep = watched_sleep


def pytest_runtest_protocol(item, nextitem):
    WATCH.reset()
    item._suite_started = time.perf_counter()


def pytest_runtest_makereport(item, call):
    if call.when == "teardown":
        RESULTS.append({"nodeid": item.nodeid, "seconds": time.perf_counter() - item._suite_started,
                        "kind": WATCH.kind(), "file": item.path.name, "stage": stage_of(item.nodeid)})


def pytest_unconfigure(config):
    """Each process writes its own part (a parallel run's workers and its controller); main() joins them."""
    path = os.environ.get(REPORT_ENV)
    if path and RESULTS:
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        Path(f"{path}.{worker}").write_text(json.dumps({"tests": RESULTS, "load": os.getloadavg()}), encoding="utf-8")


def joined(path):
    """The parts of one run as one report (and the parts removed)."""
    tests, load = [], ()
    for part in sorted(Path(path).parent.glob(Path(path).name + ".*")):
        data = json.loads(part.read_text(encoding="utf-8"))
        tests += data["tests"]
        load = data["load"]
        part.unlink()
    return {"tests": tests, "load": load}


def stage_of(nodeid):
    """The stage a case is parametrised with ("-" when none): the last stage name in its id."""
    params = nodeid.partition("[")[2]
    named = [name for name in STAGE_NAMES if name in params]
    return max(named, key=params.rfind) if named else "-"


def grouped(tests, key):
    """[(group, count, seconds)], the most expensive first."""
    sums = defaultdict(lambda: [0, 0.0])
    for test in tests:
        sums[test[key]][0] += 1
        sums[test[key]][1] += test["seconds"]
    return sorted(((name, n, s) for name, (n, s) in sums.items()), key=lambda row: -row[2])


def table(title, rows, limit=None):
    shown = rows[:limit] if limit else rows
    lines = [f"| {title} | tests | seconds |", "|---|---:|---:|"]
    lines += [f"| {name} | {count} | {seconds:.1f} |" for name, count, seconds in shown]
    if limit and len(rows) > limit:
        rest = rows[limit:]
        lines.append(f"| ({len(rest)} more) | {sum(r[1] for r in rest)} | {sum(r[2] for r in rest):.1f} |")
    return "\n".join(lines)


def report(data):
    tests = data["tests"]
    total = sum(t["seconds"] for t in tests)
    load = ", ".join(f"{x:.1f}" for x in data.get("load", ()))
    print(f"{len(tests)} tests, {total:.1f} s in the tests themselves (load average at the end: {load})\n")
    print(table("kind", grouped(tests, "kind")) + "\n")
    print(table("stage", grouped(tests, "stage")) + "\n")
    print(table("file", grouped(tests, "file"), limit=25) + "\n")
    slowest = sorted(tests, key=lambda t: -t["seconds"])[:15]
    print(table("slowest tests", [(t["nodeid"], 1, t["seconds"]) for t in slowest]))


def main(argv):
    if argv[:1] == ["--report"]:
        report(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
        return 0
    out = Path(os.environ.get(REPORT_ENV) or Path.cwd() / ".suite-report.json")
    env = {**os.environ, REPORT_ENV: str(out)}
    started, load = time.monotonic(), os.getloadavg()
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "benchmarks.suite", *argv], env=env)
    data = joined(out)
    out.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(f"\nwall {time.monotonic() - started:.0f} s; load average at the start: "
          f"{', '.join(f'{x:.1f}' for x in load)}; pytest exit {code}; the figures: {out}\n")
    report(data)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
