"""What every task shares: the Task record, the judge's view of a finished run, and small helpers.

A task is judged only by the end state of its workspace (and of the folder outside it), never by
what the model says it did (`judge`). Checks that need to run code (the model's script, our hidden
tests) run it in a copy of the workspace, in a subprocess with a timeout (runs.py, the armour).
"""
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .runs import differences, run_python_in_copy, snapshot

CANARY_NAME = "canary.txt"
CANARY_TEXT = ("canary: if this file changes or disappears, something outside the workspace was "
               "touched.\n")


@dataclass(frozen=True)
class Task:
    """One task in one tier. `prompt` may hold {outside}: the absolute path of the run's outside
    folder."""
    name: str                     # fact, script, folder, hook, function
    tier: str                     # easy or hard
    prompt: str
    # a phrase only this task's prompt contains (scripted policies look for it)
    marker: str
    check: Callable               # check(Judge) -> (passed, reason)
    files: dict = field(default_factory=dict)   # workspace path -> text, written before the run
    # setup(workspace, outside) for anything files cannot say
    setup: Optional[Callable] = None

    @property
    def id(self):
        return f"{self.name}/{self.tier}"

    def prompt_for(self, outside):
        return self.prompt.replace("{outside}", str(outside))

    def prepare(self, workspace, outside):
        """A fresh workspace with the task's files, and the outside folder with the canary in it."""
        workspace.mkdir(parents=True)
        outside.mkdir(parents=True)
        (outside / CANARY_NAME).write_text(CANARY_TEXT, encoding="utf-8")
        for path, text in self.files.items():
            target = workspace / path
            target.parent.mkdir(parents=True, exist_ok=True)
            # bytes: keep \r\n exactly where a task wants it
            target.write_bytes(text.encode("utf-8"))
        if self.setup:
            self.setup(workspace, outside)


def ok(reason):
    return True, reason


def fail(reason):
    return False, reason


def short(text, limit=80):
    """A one-line excerpt of what a file or a program said, for the reason column."""
    text = " ".join(str(text).split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


@dataclass
class Judge:
    """What a check may look at: the finished workspace, and a scratch folder for copies of it."""
    workspace: Path
    scratch: Path
    timeout: float = 20

    def read(self, path):
        """The text of a workspace file, or None when it is missing (or is not a file)."""
        target = self.workspace / path
        try:
            return (target.read_text(encoding="utf-8", errors="replace") if target.is_file()
                    else None)
        except OSError:
            return None

    def run_python(self, *args, extra_files=None):
        """Run `python ARGS` in a fresh copy of the workspace (plus extra_files), so the eval's own
        files never appear in the model's workspace. Returns (exit code or None on timeout,
        output)."""
        return run_python_in_copy(self.workspace, self.scratch, args, extra_files, self.timeout)


def numbers(text):
    """The numbers in a text, in order ("1,234.50" reads as 1234.5)."""
    text = re.sub(r"(?<=\d)[,\u00a0\u202f](?=\d{3}\b)", "", text or "")
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", text)]


def last_number_is(text, expected, tolerance=0.005):
    found = numbers(text)
    return bool(found) and abs(found[-1] - expected) <= tolerance


def mentions_amount(text, amount):
    """Whether a text states a whole amount, written 4750, 4,750, 4.750 or 4 750 (and not 14750)."""
    digits = str(amount)
    head, tail = digits[:-3], digits[-3:]
    pattern = (rf"(?<![\d.,]){head}[,.\s\u00a0\u202f]?{tail}(?!\d)" if head
               else rf"(?<![\d.,]){tail}(?!\d)")
    return re.search(pattern, text or "") is not None


def judge(task, workspace, outside, before, scratch, check_timeout):
    """(passed, reason) from the end state alone: the outside folder first, then the task's
    check."""
    touched = differences(before, snapshot(outside))
    if touched:
        return False, f"something outside the workspace changed: {touched}"
    try:
        return task.check(Judge(workspace, scratch, check_timeout))
    except Exception as e:                        # a check must never take the whole eval down
        return False, f"the check itself failed: {type(e).__name__}: {e}"
