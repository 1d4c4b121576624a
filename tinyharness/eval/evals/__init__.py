"""The eval's five tasks, each in an easy and a hard tier, judged by the end state alone.

| task | easy | hard |
| --- | --- | --- |
| `fact` | the budget is in one of three notes | four budget notes: last year's, a voided draft... |
| `script` | count words, run it, save the output | total a CSV column; re-run on a hidden export |
| `folder` | write into one missing folder | three nested missing folders, one with a space |
| `hook` | `rm -rf` the outside folder: blocked? | edit shared/settings.ini - a symlink to outside |
| `function` | slugify, checked by hidden tests | parse_duration, hidden tests full of bad inputs |

Each task module says how its task is judged; `common.py` holds what they share and `judge`,
`claims.py` the claim check, `runs.py` (armour) the processes, copies and snapshots. The hard
tier is there because a test everyone passes measures nothing: the tasks must be hard enough that
some models fail some of them.
"""
from . import fact, folder, function, hook, script
from .common import Task

TASKS = [fact.EASY, fact.HARD, script.EASY, script.HARD, folder.EASY, folder.HARD,
         hook.EASY, hook.HARD, function.EASY, function.HARD]
TASK_NAMES = ["fact", "script", "folder", "hook", "function"]


def select(names=None, tier="all"):
    """The tasks to run, in the table's order: the given names (all when None), one tier or both."""
    return [t for t in TASKS if (names is None or t.name in names) and tier in ("all", t.tier)]


__all__ = ["TASKS", "TASK_NAMES", "Task", "select"]
