"""Signs of life: a one-line spinner on the terminal while the model has not said its first word.

The problem. A local model can take seconds to its first token, and a cold Ollama load tens of
seconds; a terminal that stays blank all that time reads as a hang, and people press Ctrl-C on a run
that was about to answer.

The mechanism. `waiting_for(client, out)` wraps the model client when `out` is a terminal that wants
it (not a pipe, not TERM=dumb; --json runs never ask). Each chat() starts a thread that rewrites one
line, `- waiting for MODEL ... 3 s`, ten times a second; the first streamed piece (answer or
reasoning), or the call's end, error or Ctrl-C, stops it and blanks the line before anything else is
written. It writes only `\r`, spaces and plain characters: no escape sequence, so NO_COLOR has
nothing to turn off. Every other attribute is the client's own (reads and writes go through).

What it cannot do. It says that the harness is waiting, not why (a model loading, a long prompt
being read, a server stuck): the seconds and `tinyharness doctor` tell those apart. Text the harness
itself prints from another thread while the spinner runs (none does today) would share its line.
"""
import os
import threading
import time

FRAMES = "-\\|/"
TICK = 0.1   # seconds between two frames


class Spinner:
    """One call's spinner: start() when the request goes out, stop() at the first piece or at
    the end."""

    def __init__(self, out, label):
        self.out, self.label = out, label
        self.done, self.lock, self.width = threading.Event(), threading.Lock(), 0
        self.thread = threading.Thread(target=self.spin, name="waiting", daemon=True)

    def start(self):
        self.started = time.monotonic()
        self.thread.start()
        return self

    def spin(self):
        frame = 0
        while not self.done.wait(0 if frame == 0 else TICK):
            seconds = int(time.monotonic() - self.started)
            self.draw(f"{FRAMES[frame % len(FRAMES)]} waiting for {self.label} ... {seconds} s")
            frame += 1

    def draw(self, line):
        with self.lock:
            if self.done.is_set():
                return
            self.out.write("\r" + line.ljust(self.width))
            self.out.flush()
            self.width = max(self.width, len(line))

    def stop(self):
        """Blank the line and leave the cursor at its start; harmless when called again."""
        with self.lock:
            if self.done.is_set():
                return
            self.done.set()
            if self.width:
                self.out.write("\r" + " " * self.width + "\r")
                self.out.flush()


class Waiting:
    """A model client that shows a Spinner during each chat() until the first streamed piece."""

    def __init__(self, client, out):
        object.__setattr__(self, "client", client)
        object.__setattr__(self, "out", out)

    def chat(self, messages, tools=None, on_text=None, on_reasoning=None, timeout=None):
        client = self.client
        spinner = Spinner(self.out, getattr(client, "model", "the model")).start()
        text, reasoning = on_text or client.on_text, on_reasoning or client.on_reasoning
        try:
            return client.chat(messages, tools, on_text=first_stops(spinner, text),
                               on_reasoning=first_stops(spinner, reasoning), timeout=timeout)
        finally:
            spinner.stop()

    def __getattr__(self, name):
        return getattr(self.client, name)

    def __setattr__(self, name, value):
        setattr(self.client, name, value)


def first_stops(spinner, callback):
    """The callback, after the spinner is stopped (a no-op stop after the first piece)."""
    if callback is None:
        return None

    def piece(text):
        spinner.stop()
        callback(text)
    return piece


def waiting_for(client, out):
    """The client wrapped with a spinner on `out` when it is a terminal that wants one, else as
    it is."""
    if not getattr(out, "isatty", lambda: False)() or os.environ.get("TERM") == "dumb":
        return client
    return Waiting(client, out)
