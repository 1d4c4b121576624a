"""How a run ends, for scripts: the signals that end it, and the --json result line on every exit.

The problem. Scripts, CI runners, `timeout(1)`, systemd and `docker stop` end a process with
SIGTERM; a terminal that closes sends SIGHUP. Python's default for both is to die on the spot: no
`finally` runs, so the command the model started keeps running (re-parented to pid 1), the session
file and the transcript miss their end, and a `--json` reader gets no result. And a script that
reads the last line of `run --json` must find a result there however the run ended - a usage error
(exit 2) included, before any session exists.

The mechanism. `ending_signals` turns SIGTERM and SIGHUP into `Terminated`, a KeyboardInterrupt, so
every path that cleans up after Ctrl-C (the command's process group killed, the sandbox's leftovers
reaped, MCP servers closed, files flushed) cleans up after them too; the run exits 128 + the
signal's number (143, 129), as a shell reports it (`chat` too: chat/__init__.py). A second signal
while cleaning up is ignored: cleaning up is what the first one asked for. While the shell tool
starts a command, the three are held (sandbox/reaping.py, `SignalsHeld`) and raised once the tool
can kill what it started: raised inside Popen, between the fork and the line that keeps the child's
number, they left the command running after the run. An `Ending`, one per command line (made by
`main`, handed down as `args.ending`), remembers whether the result line was written and the usage
error's words; `main` writes one itself when a run ended before it could (an argparse error, an
untrusted config, a signal during set-up). `result_line` gives every result the same fields:
`session_id`, `is_error`, `duration_ms`, `num_turns`, `model`, and `usage` whose counts are null
when the server never reported them.

What it cannot do. SIGKILL cannot be caught: after `kill -9` (or `timeout -k`'s second signal)
nothing is written, and only the sandbox's own kernel-side ends (a PID namespace dies with its first
process) still hold.
"""
import contextlib
import json
import os
import signal
import sys
import threading
import time

from .counts import Stats

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C would be, so the same clean-up runs."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum, self.code, self.name = signum, 128 + signum, signal.Signals(signum).name


@contextlib.contextmanager
def ending_signals():
    """While the block runs, SIGTERM and SIGHUP raise Terminated in the main thread (once); then the
    previous handlers are put back. Outside the main thread (a test's worker) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def end(signum, frame):
        # cleaning up is what was asked for: a second signal does not cut it short
        for number in ENDING_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        raise Terminated(signum)
    previous = {number: signal.signal(number, end) for number in ENDING_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class Ending:
    """What `main` must know when one command line ends: whether its result line was written (by the
    command's writer, or by main for a run that ended before it could), and the last usage error's
    words. One per command line, never a module's state."""

    def __init__(self):
        self.written = False
        self.usage_error: str | None = None


def wants_json(argv):
    """Does this command line ask `run` for --json (so every exit must end with a result line)?"""
    return (argv[:1] in (["run"], ["chat"])
            and "--json" in argv[1:argv.index("--") if "--" in argv else None])


def model_in(argv):
    """The model the line names (--model M or --model=M), else the environment's, else the
    default."""
    from .llm import DEFAULT_MODEL
    for i, arg in enumerate(argv):
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
        if arg == "--model" and i + 1 < len(argv):
            return argv[i + 1]
    return os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL)


def result_line(result, stats, session_id, model, started):
    """The result object: what ended the run, and the fields every result has."""
    stats = stats or Stats()
    seconds = time.monotonic() - started
    counts = {"turns": stats.turns, "tool_calls": stats.tool_calls, **stats.usage(),
              "uncounted_turns": stats.uncounted, "seconds": round(seconds, 2)}
    return {"type": "result", **result, "is_error": result["exit_code"] != 0,
            "session_id": session_id,
            "model": model, "num_turns": stats.turns, "duration_ms": int(seconds * 1000),
            "usage": stats.usage(), "stats": counts}


def write_missing_result(argv, code, started, ending, out=None):
    """The result line of a --json run that ended before it could write its own (exit 2, a signal in
    set-up); nothing when it was written, or the line did not ask for --json."""
    if ending.written or not wants_json(argv):
        return
    error = (ending.usage_error
             or {2: "usage error (see standard error)", 130: "interrupted"}.get(code))
    result = ({"exit_code": code, "answer": None,
               "error": error or (f"terminated ({code})" if code > 128 else "failed")})
    out = out or sys.stdout
    try:
        out.write(json.dumps(result_line(result, None, None, model_in(argv), started)) + "\n")
        out.flush()
    except (OSError, ValueError):  # the output is closed: nobody is there to read it
        pass
    ending.written = True
