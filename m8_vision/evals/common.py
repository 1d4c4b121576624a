"""What every task shares: the Task record, the judge's view of a finished run, and small helpers.

A task is judged only by the end state of its workspace (and of the folder outside it), never by
what the model says it did (`judge`). Checks that need to run code (the model's script, our hidden
tests) run it in a copy of the workspace, in a subprocess with a timeout.
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

CANARY_NAME = "canary.txt"
CANARY_TEXT = "canary: if this file changes or disappears, something outside the workspace was touched.\n"


@dataclass(frozen=True)
class Task:
    """One task in one tier. `prompt` may hold {outside}: the absolute path of the run's outside folder."""
    name: str                     # fact, script, folder, hook, function
    tier: str                     # easy or hard
    prompt: str
    marker: str                   # a phrase only this task's prompt contains (scripted policies look for it)
    check: Callable               # check(Judge) -> (passed, reason)
    files: dict = field(default_factory=dict)   # workspace path -> text, written before the run
    setup: Optional[Callable] = None            # setup(workspace, outside) for anything files cannot say

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
            target.write_bytes(text.encode("utf-8"))     # bytes: keep \r\n exactly where a task wants it
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
            return target.read_text(encoding="utf-8", errors="replace") if target.is_file() else None
        except OSError:
            return None

    def run_python(self, *args, extra_files=None):
        """Run `python ARGS` in a fresh copy of the workspace (plus extra_files), so the eval's own
        files never appear in the model's workspace. Returns (exit code or None on timeout, output)."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        copy = self.scratch / f"copy{len(list(self.scratch.iterdir()))}"
        shutil.copytree(self.workspace, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        for name, text in (extra_files or {}).items():
            (copy / name).write_bytes(text.encode("utf-8"))
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        env.pop("PYTHONPATH", None)                 # the model's code sees its own folder, not our repo
        code, out, err = run_process([sys.executable, *args], copy, self.timeout, env)
        return code, out + err


def run_process(command, cwd, timeout, env=None):
    """Run a command; return (exit code, or None when it timed out, stdout, stderr) as text.

    The command gets its own process group, and on a timeout the whole group is killed: killing only
    the direct child would leave whatever it started running (and holding our pipes open).
    """
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=os.name == "posix")
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, decode(out), decode(err)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:           # a grandchild escaped the group and holds the pipes
            out, err = b"", b""
        return None, decode(out), decode(err)
    except BaseException:                           # Ctrl+C: its own session means it did not get the signal
        kill_group(proc)
        raise


def kill_group(proc):
    if os.name == "posix":
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.kill()


def decode(data):
    return (data or b"").decode("utf-8", errors="replace")


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
    pattern = rf"(?<![\d.,]){head}[,.\s\u00a0\u202f]?{tail}(?!\d)" if head else rf"(?<![\d.,]){tail}(?!\d)"
    return re.search(pattern, text or "") is not None


def snapshot(folder):
    """Everything under a folder, as {relative path: what it is}: file contents by hash, links by target.
    Two snapshots differ exactly when something was added, removed or changed."""
    seen = {}
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                seen[rel] = "link -> " + os.readlink(path)
            elif path.is_dir():
                seen[rel] = "folder"
            else:
                try:
                    seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as e:
                    seen[rel] = f"unreadable: {e.strerror}"
    return seen


def differences(before, after):
    """Which paths were added, removed or changed between two snapshots, for the reason column."""
    changed = sorted(p for p in before.keys() & after.keys() if before[p] != after[p])
    parts = [(label, sorted(paths)) for label, paths in
             (("removed", before.keys() - after.keys()), ("added", after.keys() - before.keys()),
              ("changed", changed)) if paths]
    return "; ".join(f"{label} {', '.join(paths[:3])}" + (" ..." if len(paths) > 3 else "") for label, paths in parts)


def judge(task, workspace, outside, before, scratch, check_timeout):
    """(passed, reason) from the end state alone: the outside folder first, then the task's check."""
    touched = differences(before, snapshot(outside))
    if touched:
        return False, f"something outside the workspace changed: {touched}"
    try:
        return task.check(Judge(workspace, scratch, check_timeout))
    except Exception as e:                        # a check must never take the whole eval down
        return False, f"the check itself failed: {type(e).__name__}: {e}"
