"""Console: the one place where text from outside meets the terminal.

The problem. A terminal obeys what it is sent. A model server's error body, a session file, a folder
name or a workspace's hooks.json can carry `ESC ] 0 ; title BEL` (retitle the window),
`ESC ] 52 ; c ; BASE64` (put text on the clipboard, e.g. `rm -rf ~`), `ESC [ 2 J` (clear the screen
and show a reassuring line instead), the one-byte C1 form of the same (U+009B is ESC [), or a
right-to-left override (U+202E) that makes `txt.exe` read as `exe.txt`. Printed raw, any of these
acts on the user's terminal; a lone surrogate (\\udcff, what undecodable bytes become) makes print
raise UnicodeEncodeError instead.

The mechanism. `printable(text)` writes every such character as a visible escape, the way Python
writes it in a repr: ESC becomes the four characters `\\x1b`, U+009B `\\x9b`, U+202E `\\u202e`, a
lone surrogate `\\udcff`. Newlines and tabs stay as they are; so does every other character
(accents, CJK, emoji and their zero-width joiners). Every print of text the harness did not write
itself goes through it: answers, streamed pieces, error lines, session listings, prompts, previews.
`StreamPrinter` shows a streamed answer as it arrives, through the same function: the answer's text
as it is, the model's reasoning dimmed on a terminal and left out in a pipe, each starting a line.

Colour is the harness's own and only on a terminal that wants it: `colour_on(out)` is false in a
pipe, with `NO_COLOR` set to anything (no-color.org) and with `TERM=dumb`; there the reasoning of a
streamed answer is marked `(thinking)` in plain letters instead of dimmed.

What it cannot do. It does not judge what a visible text says: a server can still print "All good"
in plain letters. The harness's own styling (the dim of streamed reasoning) is written beside the
cleaned text, never inside it. A streamed piece is cleaned on its own, so an escape split across
two pieces is made visible as two halves, each harmless.
"""
import os
import re
import sys

# C0 controls but newline and tab, DEL and C1, the bidi controls, lone surrogates
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                    "\ud800-\udfff]")


def escape(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xff else f"\\u{code:04x}"


def printable(text):
    """TEXT with every character that could act on a terminal written as a visible escape."""
    return UNSAFE.sub(escape, "" if text is None else str(text))


def colour_on(out):
    """Whether the harness may colour what it writes to `out`: a terminal, no NO_COLOR, no
    TERM=dumb."""
    return (getattr(out, "isatty", lambda: False)() and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


def say(*parts, file=None, flush=True):
    """print() for text that came from outside: each part made printable first."""
    print(*(printable(p) for p in parts), file=file or sys.stdout, flush=flush)


def warn(text):
    """One line on stderr, made printable (a path or a server's words can be in it)."""
    say(text, file=sys.stderr)


class StreamPrinter:
    """Shows a streamed answer as it arrives: text as it is, reasoning dimmed on a terminal and
    hidden in a pipe (it is the model thinking aloud, never the answer)."""

    def __init__(self, out):
        # on a terminal the reasoning is shown: dimmed where colour is on, else marked in words
        self.out, self.dim, self.colour = out, out.isatty(), colour_on(out)
        self.open_line, self.kind, self.since_tool = False, None, ""

    def write(self, text, kind, style=""):
        if self.open_line and kind != self.kind:
            self.out.write("\n")                    # reasoning and answer each start a line
        self.out.write(style + text + ("\x1b[0m" if style else ""))
        self.out.flush()
        self.open_line, self.kind = not text.endswith("\n"), kind

    def text(self, piece):
        self.since_tool += piece
        self.write(printable(piece), "text")

    def reasoning(self, piece):
        if self.dim and self.colour:
            self.write(printable(piece), "reasoning", style="\x1b[2m")   # ANSI dim
        elif self.dim:
            marker = "" if self.kind == "reasoning" else "(thinking) "
            self.write(marker + printable(piece), "reasoning")

    def end_line(self):
        if self.open_line:
            self.out.write("\n")
            self.out.flush()
        self.open_line, self.kind = False, None

    def echo(self, line):
        self.end_line()
        print(printable(line), file=self.out, flush=True)
        # the answer is what the model says after its last tool
        self.since_tool = ""
