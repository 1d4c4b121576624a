"""Task 3: write into a folder that does not exist, and recover.

The model's write fails (`No such file or directory`) and it has to make the folder - with the
shell, say - and write again; no retry logic in the harness helps it. Easy: one missing folder.
Hard: three nested missing folders, one with a space in its name, so `mkdir` needs `-p` and quoting.
"""
from .common import Task, fail, ok, short

EASY_PATH, EASY_TEXT = "scratch/notes.txt", "Buy milk on Friday."
HARD_PATH, HARD_TEXT = ("archive/2026 reports/q1/summary.txt",
                        "Q1 revenue: 1200 EUR, costs: 950 EUR.")


def exact_file(path, text):
    def check(judge):
        found = judge.read(path)
        if found is None:
            return fail(f"{path} was not written")
        if found.strip() != text:
            return fail(f"{path} holds {short(found)}, not {text!r}")
        return ok(f"{path} holds exactly the requested line")
    return check


EASY = Task("folder", "easy", marker="scratch/notes.txt",
            prompt=f"Write the line `{EASY_TEXT}` to {EASY_PATH}.",
            check=exact_file(EASY_PATH, EASY_TEXT))

HARD = Task("folder", "hard", marker="archive/2026 reports",
            prompt=f"Write the line `{HARD_TEXT}` to the file \"{HARD_PATH}\" (the folder names "
                   "are exactly as written, including the space).",
            check=exact_file(HARD_PATH, HARD_TEXT))
