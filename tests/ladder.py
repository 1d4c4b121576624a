"""Helpers for the ladder tests: which stages exist, and how to run a stage's CLI for real.

A behaviour introduced at stage K is tested on K, on every later stage and on `tinyharness run`:
parametrise a test with `stages_from("m2")` and it grows as stages are added.

`run_stage` calls the stage's own `main(argv)` in this process, with the workspace as the current
folder, its own environment, stdin and captured stdout/stderr: the same code path as `python -m
stage`, without starting a Python (and importing requests) for each of a thousand runs. A test
where the process itself matters (signals, a crash, the interpreter's exit) passes in_process=False;
LADDER_SUBPROCESS=1 runs every test that way, to check that nothing depends on the shortcut.
"""
import atexit
import contextlib
import hashlib
import importlib
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = sorted(p.name for p in ROOT.glob("m[0-9]_*") if (p / "__main__.py").is_file())
FINAL = "tinyharness"
FINAL_LEVEL = 8  # the highest stage whose lesson tinyharness/ has merged; raise it with each merge
STAGE_DIR_ENV = "TINYHARNESS_STAGE_DIR"  # a learner's copy of one stage (`tinyharness course check --mine`)


def level(stage):
    """The stage number (m3_hooks -> 3); the final package counts as the highest stage it merged."""
    return FINAL_LEVEL if stage == FINAL else int(stage[1:].split("_")[0])


def stages_from(first, final=True):
    """Stage folder names from `first` (e.g. "m1") on, plus the final package."""
    chosen = [s for s in STAGES if level(s) >= int(first[1:].split("_")[0])]
    return chosen + ([FINAL] if final else [])


# (first stage, files, the stages chosen): every call of copies() in this run, checked by tests/test_structure.py
TESTED_COPIES = []


def copy_digest(folder, files):
    """One hash of a stage folder's copies of `files` (a file the stage lacks counts as empty)."""
    digest = hashlib.sha256()
    for name in files:
        path = Path(folder) / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"") + b"\0")
    return digest.hexdigest()


def copies(first, *files, final=True, root=ROOT):
    """Stages from `first` on, one for each distinct copy of `files`: a test of code that later stages
    carry byte-identical (the armour's wire.py, fences.py, ...) runs once per copy, not once per stage.
    A stage whose copy differs from every earlier one is chosen itself, so nothing that differs goes
    untested; the package (its own files, by other names) is added when `final`."""
    chosen, seen = [], set()
    for stage in stages_from(first, final=False):
        digest = copy_digest(stage_folder(stage, root), files)
        if digest not in seen:
            seen.add(digest)
            chosen.append(stage)
    TESTED_COPIES.append((first, files, tuple(chosen)))
    return chosen + ([FINAL] if final else [])


def untested_copies(first, files, tested, root=ROOT):
    """Stages from `first` whose copy of `files` is identical to no tested stage's copy."""
    digests = {copy_digest(stage_folder(stage, root), files) for stage in tested}
    return [stage for stage in stages_from(first, final=False)
            if copy_digest(stage_folder(stage, root), files) not in digests]


def stage_folder(stage, root=ROOT):
    """Where the stage's files are: a learner's copy under `course check --mine` (it differs from the
    repository's, so copies() chooses it), else the repository's folder."""
    mine = os.environ.get(STAGE_DIR_ENV)
    return Path(mine) if mine and Path(mine).name == stage else Path(root) / stage


def command(stage, *args):
    """The argv that runs one stage (or `tinyharness run`) with the contract's flags."""
    if stage == FINAL:
        return [sys.executable, "-m", "tinyharness", "run", *args]
    return [sys.executable, "-m", stage, *args]


def import_roots(stage):
    """The folders a stage's subprocess imports from: the repository, after a learner's copy of this
    stage when TINYHARNESS_STAGE_DIR names one (a folder called like the stage)."""
    mine = os.environ.get(STAGE_DIR_ENV)
    if mine and Path(mine).name == stage:
        return [str(Path(mine).resolve().parent), str(ROOT)]
    return [str(ROOT)]


_SESSIONS_HOME = []


def sessions_home():
    """One temporary data folder for the whole test run (removed at exit). Next to the workspace it
    would look like something an attack created outside it (tests/test_m3_attacks.py)."""
    if not _SESSIONS_HOME:
        _SESSIONS_HOME.append(tempfile.mkdtemp(prefix="tinyharness-test-data-"))
        atexit.register(shutil.rmtree, _SESSIONS_HOME[0], True)
    return _SESSIONS_HOME[0]


def run_stage(stage, workspace, *args, stdin="", timeout=60, env=None, approve=False, in_process=True, tty=None):
    """Run a stage's CLI in `workspace` (its cwd); return a CompletedProcess (text mode).

    approve=True adds --yes on stages that ask permission (m3 on), so a test of an earlier
    lesson can run unchanged on the later stages. `tty`: what the user types at the terminal, the
    answers to the permission prompts. The stages read those from standard input; `tinyharness run`
    only from its terminal, so it runs on a pty of its own (what the terminal showed in `.screen`),
    standard input still `stdin`. Without `tty` the package has no terminal (conftest.py).
    """
    if approve and level(stage) >= 3:
        args = ("--yes", *args)
    if tty is not None and stage != FINAL:
        stdin = stdin + tty
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    full_env["PYTHONPATH"] = os.pathsep.join(import_roots(stage)) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env["PYTHONIOENCODING"] = "utf-8"
    full_env["XDG_DATA_HOME"] = sessions_home()  # sessions go to a folder of the test run: not home, not beside the workspace
    full_env.update(env or {})
    if tty is not None and stage == FINAL:
        return run_on_terminal(command(stage, *args), workspace, stdin, tty, timeout, full_env)
    if not (in_process and can_run_in_process(stage)):
        return subprocess.run(command(stage, *args), cwd=workspace, input=stdin, capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=timeout, env=full_env)
    return run_in_process(stage, workspace, list(args), stdin, timeout, full_env)


# after setsid (start_new_session), opening a terminal makes it the session's controlling terminal
TAKE_TERMINAL = ("import os, sys; os.close(os.open(sys.argv[1], os.O_RDWR)); "
                 "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")


def on_terminal(argv, terminal):
    """ARGV (a Python command line) with TERMINAL (a pty's path) as its controlling terminal: /dev/tty
    opens it. Start it with start_new_session=True."""
    return [argv[0], "-c", TAKE_TERMINAL, terminal, *argv[1:]]


def run_on_terminal(argv, cwd, stdin, typed, timeout, env, preexec_fn=None):
    """ARGV run with a pty as its terminal, TYPED written to it before it starts (each answer a line;
    end of input after them), standard input `stdin` and standard output and error captured as usual.
    A CompletedProcess whose `.screen` is the text the terminal was sent."""
    with Terminal(typed) as terminal:
        done = subprocess.run(on_terminal(argv, terminal.path), cwd=cwd, input=stdin, capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=timeout, env=env,
                              start_new_session=True, preexec_fn=preexec_fn)
    done.screen = terminal.screen
    return done


class Terminal:
    """A pty for one run: `path` to open as the controlling terminal (on_terminal, or open it after setsid),
    TYPED already written to it (then Ctrl-D a few times: the end of input), and what it was sent kept in
    `screen` (read all along: a terminal nobody reads fills up, and the writer blocks)."""

    def __init__(self, typed):
        self.typed, self.screen = typed, ""

    def __enter__(self):
        self.master, self.slave = os.openpty()
        self.path = os.ttyname(self.slave)
        os.write(self.master, self.typed.encode() + b"\x04" * 8)  # Ctrl-D at a line's start: end of input
        self.received, self.stop = bytearray(), threading.Event()
        self.reader = threading.Thread(target=self.drain, daemon=True)
        self.reader.start()
        return self

    def drain(self):
        while not self.stop.is_set():
            if select.select([self.master], [], [], 0.05)[0]:
                try:
                    self.received.extend(os.read(self.master, 65536))
                except OSError:
                    return

    def __exit__(self, *exc):
        self.stop.set()
        self.reader.join(timeout=10)
        while select.select([self.master], [], [], 0)[0]:  # what came after the reader's last look
            self.received.extend(os.read(self.master, 65536))
        os.close(self.slave)
        os.close(self.master)
        self.screen = bytes(self.received).decode("utf-8", errors="replace")


def can_run_in_process(stage):
    """Whether a run of the stage in this process stands for its process: not under LADDER_SUBPROCESS=1,
    with the stage imported from where the process would import it, on the thread that owns signals."""
    return (not os.environ.get("LADDER_SUBPROCESS") and imported_as_a_process_would(stage)
            and threading.current_thread() is threading.main_thread())


def imported_as_a_process_would(stage):
    """True when this process has the stage from where its own process would import it: the repository,
    or the learner's copy that `course check --mine` loaded (tests/exercise_check.py)."""
    if stage == FINAL:
        return True
    here = Path(importlib.import_module(stage).__file__).resolve().parent.parent
    return here == Path(import_roots(stage)[0]).resolve()


class _TimedOut(BaseException):
    """Raised into the run by the alarm; a BaseException, so no `except Exception` in the harness eats it."""


def run_in_process(stage, workspace, argv, stdin, timeout, env, main=None, shown_as=None):
    """`python -m stage ARGV`, in this process: same main(), same streams, exit code as the process's.
    Another command line of the stage (its eval) passes its own `main` and the argv it stands for."""
    if main is None and stage == FINAL:
        main = lambda argv: importlib.import_module("tinyharness.cli").main(["run", *argv])
    elif main is None:
        main = importlib.import_module(f"{stage}.__main__").main
    shown_as = shown_as or command(stage, *argv)
    out, err = io.BytesIO(), io.BytesIO()
    with _process_state(workspace, env, stdin, out, err), _alarm(timeout, shown_as):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's usage errors, sys.exit(): what the process would exit with
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else (print(e.code, file=sys.stderr) or 1))
        except Exception:  # what the interpreter does with an uncaught exception: a traceback, exit 1
            traceback.print_exc()
            code = 1
    text = lambda buffer: buffer.getvalue().decode("utf-8", errors="replace")
    return subprocess.CompletedProcess(shown_as, code, text(out), text(err))


@contextlib.contextmanager
def _process_state(workspace, env, stdin, out, err):
    """What a new process would have: its cwd, its environment, its three streams, and Ctrl-C raising
    KeyboardInterrupt as from a terminal (a worker of a parallel run, or a suite started in the
    background, has SIGINT ignored); all put back after."""
    saved = sys.stdin, sys.stdout, sys.stderr, os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    streams = [io.TextIOWrapper(buffer, encoding="utf-8", write_through=True) for buffer in (out, err)]
    sys.stdin, (sys.stdout, sys.stderr) = io.StringIO(stdin), streams
    os.environ.clear()
    os.environ.update(env)
    os.chdir(workspace)
    try:
        yield
    finally:
        for stream in streams:
            stream.flush()
            stream.detach()  # so that dropping the wrapper does not close the buffer we read
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        os.chdir(saved[3])
        os.environ.clear()
        os.environ.update(saved[4])
        signal.signal(signal.SIGINT, saved[5])


@contextlib.contextmanager
def _alarm(timeout, argv):
    """subprocess.run's timeout, for a run in this process (SIGALRM; the suite's own limit is put back)."""
    def expire(signum, frame):
        raise _TimedOut()
    started, outer = time.monotonic(), signal.alarm(0)  # the per-test limit from conftest.py, if set
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(timeout + 0.999)))
    try:
        yield
    except _TimedOut:
        raise subprocess.TimeoutExpired(argv, timeout) from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.alarm(max(1, outer - int(time.monotonic() - started)))


def wait_for_the_first_request(server, proc, seconds=300):
    """Wait until the child `proc` has sent `server` its first request (a loaded machine can take minutes
    to start Python), so that a Ctrl-C test interrupts a wait for the model and not the start-up."""
    deadline = time.monotonic() + seconds
    while not server.requests and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.requests, f"the child never reached the model (exit code {proc.poll()})"


def ctrl_c_as_on_a_terminal():
    """preexec_fn for a child that a test sends SIGINT. A suite started in the background (`cmd &` in a
    script, some CI runners) hands its children SIGINT ignored, and Python then never raises
    KeyboardInterrupt: the child must start with the default, as from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def tool_call(name, **arguments):
    """One scripted tool call, in the scripted server's reply format."""
    return {"name": name, "arguments": arguments}


def calls(*tool_calls):
    """A scripted reply that asks for these tool calls."""
    return {"tool_calls": list(tool_calls)}


def tool_results(request):
    """The tool messages of a recorded request, as {tool_call_id: content}."""
    return {m.get("tool_call_id"): m.get("content") for m in request["messages"] if m.get("role") == "tool"}


def stats_line(stderr):
    """Parse the `[stats] key=value ...` line into a dict of strings."""
    for line in stderr.splitlines():
        if line.startswith("[stats] "):
            return dict(pair.split("=", 1) for pair in line[len("[stats] "):].split())
    raise AssertionError(f"no [stats] line in stderr:\n{stderr}")


def load_json(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))
