"""The permission prompt as people answer it: at the terminal, in the words they type.

The problem. `Allow shell({...})? [y/N]` is answered by a person, who types `yes` as often as `y`.
A prompt that reads its answer from standard input takes whatever is piped there for an answer:
`cat log | tinyharness run "explain this"` ran a shell command because the log's first line was
`y`. People coming from Claude Code expect a third answer, "always", so that the twentieth
`npm test` is not asked about again. And a question that shows a 6,800-character write as escaped
JSON is a page nobody reads; what the user needs is what changes in the file.

The mechanism. `ask` opens the terminal (/dev/tty; the console on Windows) for each question,
writes the question there and reads one line from it. `y`/`yes` approves and `n`/`no` denies, in
any case, spaces around ignored; Enter alone is the default, no; `a`/`always` approves and allows
the rule the question offers from now on (always.py: it is saved in the workspace's
.claude/settings.local.json, and one line says so). Anything else asks again, at most TRIES times,
then denies. No terminal (a CI job, a detached process) or the end of input (Ctrl-D) is a no, and
`on_eof` counts it. Standard input is never read here, so nothing piped can answer. When standard
output is not the terminal (a file, a pipe, --json's stderr), the question and the answer are
written there too, so the record shows what was asked and how it was answered. `for_call` builds a
call's question (a `Question`: the text, and the rule "always" would allow): a write shows its size
and a short diff against the file there now, or the first lines of a new file; other calls show
their arguments as the [tool] line does.

What it cannot do. It cannot tell who sits at the terminal: a program that drives a pseudo-terminal
answers as a person would. The diff is cut at PREVIEW_LINES lines of LINE_CHARS characters: the
whole content is the file after the write, not the question. The terminal echoes what is typed as
it likes (a terminal with echo turned off shows no answer).
"""
import difflib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from . import always, filedoor
from .console import printable

TERMINALS = {"nt": ("CONIN$", "CONOUT$")}  # elsewhere: /dev/tty for both
TRIES = 3                                 # unclear answers before the question is a no
YES, NO, ALWAYS = ("y", "yes"), ("n", "no", ""), ("a", "always")
PREVIEW_LINES, LINE_CHARS = 12, 160       # of a write's diff or new file shown in the question
READ_CAP = 1024 * 1024                    # bytes of the current file the diff is made from
DIFF_LINES = 20_000                       # lines of both sides past which no diff is made


@dataclass(frozen=True)
class Offer:
    """What an "always" answer allows: the rule, the workspace whose settings keep it, and the
    run's rules it joins (permissions.Rules, or None)."""
    rule: str
    workspace: str
    rules: Any = None


class Question(str):
    """A question's text, with the Offer an "always" answer takes up (None: only yes or no). A
    str, so every approver that takes a question still takes it."""
    offer: Offer | None = None

    def __new__(cls, text, offer=None):
        question = super().__new__(cls, text)
        question.offer = offer
        return question


def for_call(name, arguments, workspace, rules=None):
    """The question for one call that needs approval: what it does, then `Allow ...? [y/N] `, with
    `/a` and the rule it would allow when "always" can cover it."""
    rule = always.rule_for(name, arguments, workspace)
    offer = Offer(rule, workspace, rules) if rule else None
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)  # as the [tool] line shows it
    before = ""
    if name == "write_file" and isinstance(arguments.get("content"), str):
        before, shown = write_preview(arguments["path"], arguments["content"], workspace)
    if offer:
        before += (f"  (a = always: allow {rule} from now on, saved in "
                   f"{always.LOCAL_SETTINGS})\n")
    return Question(f"{before}Allow {name}({shown})? [y/N{'/a' if offer else ''}] ", offer)


def write_preview(path, content, workspace):
    """(lines saying what the write changes, the path as the question shows it: escaped as in JSON,
    so that a name with a line break cannot draw lines of its own)."""
    label = json.dumps(path, ensure_ascii=False)[1:-1]
    try:
        data, size = filedoor.read_bytes(path, READ_CAP, workspace)
        old = data.decode("utf-8", errors="replace")
    except FileNotFoundError:
        old, size = None, "a new file"
    except OSError as e:  # a FIFO, a link leading out: the write will say so too
        old, size = None, f"the file there now is not read ({e})"
    lines = content.splitlines()
    new = f"{len(content):,} characters in {len(lines):,} line{'s' * (len(lines) != 1)}"
    if old == content:
        return f"write_file {label}: {new}, the same as the file has now\n", label
    if old is None or len(lines) + old.count("\n") > DIFF_LINES:  # difflib is slow on huge files
        head = f"write_file {label}: {size}, {new}" if old is None else \
            f"write_file {label}: {new}, replacing {size:,} bytes (too long to compare here)"
        return head + shown_lines([f"+{line}" for line in lines]), label
    diff = list(difflib.unified_diff(old.splitlines(), lines, label, label, lineterm="", n=1))
    added = sum(1 for d in diff[2:] if d.startswith("+"))
    removed = sum(1 for d in diff[2:] if d.startswith("-"))
    cut = " (its first 1 MiB compared)" if size > READ_CAP else ""
    return (f"write_file {label}: {new}, replacing {size:,} bytes{cut}: +{added} -{removed} lines"
            + shown_lines(diff)), label


def shown_lines(lines):
    """The first PREVIEW_LINES lines, each cut at LINE_CHARS, and what was left out."""
    shown = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " [...]"
             for line in lines[:PREVIEW_LINES]]
    more = len(lines) - PREVIEW_LINES
    return "".join(f"\n  {line}" for line in shown) + (f"\n  [{more:,} more lines]" if more > 0
                                                       else "") + "\n"


def ask(question, on_eof=None):
    """Put the question to the person at the terminal; True for yes (or always). No terminal, or
    the end of its input, is a no, and calls `on_eof`."""
    question = question if isinstance(question, Question) else Question(str(question))
    text = printable(question)
    sys.stdout.flush()  # what the run printed comes before the question
    ends = open_terminal()
    if ends is None:
        print(text + "(no terminal to answer at: denied)", flush=True)
        word = None
    else:
        try:
            word = answered(ends, text, question.offer)
        finally:
            for fd in set(ends):
                os.close(fd)
    if word is None and on_eof:
        on_eof()
    return word in ("yes", "always")


def answered(ends, text, offer):
    """The answer read at the terminal ('yes', 'no', 'always', or None at the end of input), and
    recorded; an "always" allowed and saved, said on both."""
    word, typed = converse(ends, text, offer)
    said = always.allow(offer.rule, offer.workspace, offer.rules) if word == "always" else ""
    if said:
        write(ends[1], printable(said) + "\n")
    record(text, typed if word else "(end of input: denied)", said)
    return word


def converse(ends, text, offer):
    """('yes' | 'no' | 'always' | None at end of input, the line typed), asking again at an
    answer that is none of them."""
    prompt, line = text, ""
    for attempt in range(TRIES):
        write(ends[1], prompt)
        line = read_line(ends[0])
        if line is None:  # after an unclear answer somebody was there: that is their no
            return ("no", "") if attempt else (None, "")
        word = line.strip().lower()
        if word in YES or word in NO or (offer and word in ALWAYS):
            return ("yes" if word in YES else "no" if word in NO else "always"), line.strip()
        prompt = (f"{printable(line.strip())[:40]!r} is not an answer: type y (yes) or n (no)"
                  f"{' or a (always)' if offer else ''}, then Enter: ")
    write(ends[1], "No clear answer: denied.\n")
    return "no", line.strip()


def open_terminal():
    """(descriptor to read, descriptor to write) of the terminal, or None when there is none."""
    reader, writer = TERMINALS.get(os.name, ("/dev/tty", "/dev/tty"))
    flags = getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        if reader == writer:
            fd = os.open(reader, os.O_RDWR | flags)
            return fd, fd
        read_fd = os.open(reader, os.O_RDONLY | flags)
    except OSError:  # ENXIO: no controlling terminal; ENOENT: no such device
        return None
    try:
        return read_fd, os.open(writer, os.O_WRONLY | flags)
    except OSError:
        os.close(read_fd)
        return None


def has_terminal():
    """Whether a question could be put to anybody (a run without one warns at its start)."""
    ends = open_terminal()
    for fd in set(ends or ()):
        os.close(fd)
    return ends is not None


def read_line(fd):
    """One line typed at the terminal (without its newline), or None at the end of input."""
    data = b""
    while not data.endswith(b"\n") and len(data) < 4096:
        piece = os.read(fd, 4096)
        if not piece:
            return None if not data else data.decode("utf-8", errors="replace")
        data += piece
    return data.decode("utf-8", errors="replace").rstrip("\r\n")


def write(fd, text):
    data = text.encode("utf-8", errors="replace")
    while data:
        data = data[os.write(fd, data):]


def record(question, answer, said=""):
    """The question and its answer on standard output too, when that is not the terminal (a file,
    a pipe): the record of the run shows what was asked and what was answered."""
    if sys.stdout.isatty():
        return
    print(question + printable(answer) + (f"\n{printable(said)}" if said else ""), flush=True)
