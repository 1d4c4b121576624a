"""What the two fuzzers share: running a command line's `main(argv)` in this process, with its own
stdout, stderr and stdin, its own working folder and a time limit, and telling a crash or a hang
from a run that kept to the contract.

benchmarks/fuzz.py (a model's replies) and benchmarks/fuzz_surfaces.py (every other input) both
import it; neither imports the other's internals, so the benchmarks' imports go one way.
"""
import contextlib
import io
import os
import signal
import sys
import time
import traceback

CONTRACT_EXITS = {0, 1, 2, 3}


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so no `except Exception` in the harness swallows it."""


@contextlib.contextmanager
def swapped_io(workspace, stdin=""):
    """The run's own stdout, stderr, stdin (empty by default: a question gets EOF) and working folder."""
    saved = sys.stdout, sys.stderr, sys.stdin, os.getcwd()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO(stdin)
    os.chdir(workspace)
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved[:3]
        os.chdir(saved[3])


@contextlib.contextmanager
def time_limit(seconds):
    """Raise Hang after `seconds`; put back whatever alarm was set before (pytest's per-test limit)."""
    def give_up(signum, frame):
        raise Hang()
    handler = signal.signal(signal.SIGALRM, give_up)
    started = time.monotonic()
    previous, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler)
        if previous:
            signal.setitimer(signal.ITIMER_REAL, max(0.01, previous - (time.monotonic() - started)))


def run_main(main, argv, workspace, limit, stdin=""):
    """(outcome, exit code, stdout bytes, stderr bytes) of main(argv) run here; outcome is "ok",
    "crash" (an exit code outside the contract, or an exception that escaped: its traceback is
    written to stderr) or "hang" (still running after `limit` seconds)."""
    outcome, code = "ok", None
    with swapped_io(workspace, stdin) as (out, err):
        try:
            with time_limit(limit):
                code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Hang:
            outcome = "hang"
        except BaseException:                    # what would have been a traceback on the terminal
            outcome = "crash"
            err.write(traceback.format_exc())
        out.flush()
        err.flush()
        stdout, stderr = out.buffer.getvalue(), err.buffer.getvalue()
    if outcome == "ok" and code not in CONTRACT_EXITS:
        outcome = "crash"
    return outcome, code, stdout, stderr
