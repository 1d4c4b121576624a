"""Piped input is context: `cat build.log | tinyharness run "explain this"` sends the log along.

The problem. People pipe what they want explained into the command, as `claude -p` and most Unix
tools taught them. A harness that ignores standard input sends the task alone (the model then asks
for a log it cannot see), and one that reads its permission answers from standard input takes the
log's lines for answers (asking.py reads the terminal instead).

The mechanism. `with_task` runs when the task is given on the command line (`run -` takes the task
itself from standard input, as before) and standard input is not a terminal. It waits up to
WAIT_SECONDS for the first byte (a pipe from a program that is still starting, a file, /dev/null
at once), then reads to the end, at most CAP bytes. What came is added below the task, marked as
standard input; a cut is said there, for the model, and on stderr, for the user; without a cut,
a line on stderr says how much went with the task.

What it cannot do. A producer that sends nothing for WAIT_SECONDS (a slow build, an inherited
pipe nobody writes, `ssh host tinyharness run ...` with the local terminal behind it) is not waited
for: the run goes on without it and says so (redirect `</dev/null` to skip the wait). Bytes that are
not UTF-8 arrive as U+FFFD. It reads what arrived before the run starts; a stream that goes on
(`tail -f log | ...`, a trickle that never falls silent) is read until the cap or READ_SECONDS,
said on stderr; the rest never reaches the model.
"""
import os
import select
import sys
import time

from .console import warn

CAP = 64 * 1024     # bytes of piped input that go to the model, as INSTRUCTIONS.md's cap
WAIT_SECONDS = 3.0  # for the first byte, as Claude Code waits
READ_SECONDS = 10.0  # for the rest: a stream that never ends (a trickle, `tail -f`) is cut there


def with_task(task, stdin=None):
    """The task, with what was piped to standard input below it (capped, the cut said); the task
    alone when standard input is a terminal, closed, empty, or silent for WAIT_SECONDS."""
    stdin = sys.stdin if stdin is None else stdin
    if stdin is None or stdin.closed or stdin.isatty():
        return task
    if not arrives(stdin):
        warn(f"[input] standard input is not a terminal, but nothing came on it in "
             f"{WAIT_SECONDS:g} s: the run goes on without it (redirect </dev/null to skip the "
             "wait; `tinyharness run -` reads the task itself from it)")
        return task
    try:
        data, size, still_open = read_capped(stdin)
    except (OSError, ValueError):  # a stream that cannot be read (closed under us, a stand-in)
        return task
    if still_open and size <= CAP:
        warn(f"[input] standard input was still open after {READ_SECONDS:g} s: what came by then "
             f"({size:,} bytes) goes to the model with the task, the rest never does")
    if not data.strip():
        return task
    text = data.decode("utf-8", errors="replace")
    if size > CAP:
        text += (f"\n[standard input held more than {CAP // 1024} KiB; only its first "
                 f"{CAP // 1024} KiB are here]")
        warn(f"[input] more than {CAP // 1024} KiB came on standard input: only its first "
             f"{CAP // 1024} KiB go to the model with the task")
    else:
        warn(f"[input] the {size:,} bytes piped to standard input go to the model with the task")
    return f"{task}\n\nPiped to standard input ({min(size, CAP):,} bytes):\n{text}"


def arrives(stdin):
    """Whether something (data or the end) comes on standard input within WAIT_SECONDS."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # a StringIO: what it holds is there already
        return True
    if os.name == "nt":
        return True  # select() takes only sockets there: read, as a pipe would be read
    try:
        return bool(select.select([fd], [], [], WAIT_SECONDS)[0])
    except (OSError, ValueError):
        return True


def read_capped(stdin):
    """(at most CAP bytes, how many bytes came: CAP + 1 means more than CAP, whether the stream
    was still open at READ_SECONDS)."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # a test's StringIO: what it holds is there
        return read_whole(stdin)
    data, deadline = b"", time.monotonic() + READ_SECONDS
    while len(data) <= CAP:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data[:CAP], len(data), True
        chunk = os.read(fd, CAP + 1 - len(data))
        if not chunk:
            break
        data += chunk
    return data[:CAP], len(data), False


def read_whole(stdin):
    source = getattr(stdin, "buffer", None)
    data = (source.read(CAP + 1) if source is not None
            else stdin.read(CAP + 1).encode("utf-8", errors="replace"))
    return data[:CAP], len(data), False
