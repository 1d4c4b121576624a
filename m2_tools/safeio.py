"""Armour for the tools: input and output that survive an endless command and a hostile workspace.
Read it after the lesson (tools.py), when a real command or workspace surprises you.

- A command that prints forever (`yes`, a runaway loop): only the first and last KEEP_BYTES of its output
  are held while it runs (`Output`), so memory stays bounded and the head and tail still reach the model.
- Arguments as servers send them (`parse_arguments`): a JSON string, an object, or nothing at all.
"""
import json


KEEP_BYTES = 100_000  # held from each end while a command runs, so one that prints forever cannot fill memory


class Output:
    """A command's output as it arrives, keeping only its first and last KEEP_BYTES."""

    def __init__(self):
        self.head, self.tail, self.dropped = b"", b"", 0

    def collect(self, pipe):
        for chunk in iter(lambda: pipe.read1(65536), b""):
            room = max(0, KEEP_BYTES - len(self.head))
            self.head, self.tail = self.head + chunk[:room], self.tail + chunk[room:]
            if len(self.tail) > KEEP_BYTES:
                self.dropped += len(self.tail) - KEEP_BYTES
                self.tail = self.tail[-KEEP_BYTES:]
        pipe.close()


def parse_arguments(arguments):
    """(the arguments as a dict, what was wrong with them or None). Servers in the OpenAI style send a
    JSON string; some send an object, which is just as good."""
    if isinstance(arguments, dict):
        return arguments, None
    if arguments in (None, ""):
        return {}, None
    try:
        value = json.loads(arguments)
    except (ValueError, TypeError) as e:
        return {}, f"the arguments are not valid JSON ({e}): {str(arguments)[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {str(arguments)[:200]!r}"
    return value, None
