"""`python -m tinyharness.sandbox --exec ...`: the helper that applies the sandbox to itself and
execs (the other way to get the rules into a child; see sandbox/__init__.py)."""
import os
import sys

from . import unavailable_reason
from .env import clean_environment
from .landlock import landlock_abi
from .rules import NEW_TASKS, Rules, read_paths, tasks_now

HELPER_USAGE = ("usage: python -m tinyharness.sandbox --exec WORKSPACE [--read PATH]... [--tmp "
                "DIR] -- PROGRAM [ARGS...]")


def helper_main(argv):
    """`python -m tinyharness.sandbox --exec WORKSPACE [--read PATH]... [--tmp DIR] -- PROGRAM
    ARGS...`: apply the rules to this process, then exec PROGRAM in WORKSPACE (the other way to get
    the rules into a child). --tmp: a private folder made by the caller, who removes it; without it,
    TMPDIR is the workspace (never the shared /tmp: that would open every other user's and program's
    files there)."""
    if len(argv) < 4 or argv[0] != "--exec" or "--" not in argv:
        print(HELPER_USAGE, file=sys.stderr)
        return 2
    split = argv.index("--")
    options, program = argv[1:split], argv[split + 1:]
    workspace = os.path.realpath(options[0])
    value = lambda name: [options[i + 1] for i, o in enumerate(options[:-1]) if o == name]
    tmpdir = os.path.realpath((value("--tmp") or [workspace])[-1])
    problem = unavailable_reason()
    if problem or not program:
        print(f"error: {problem or 'no program to run'}", file=sys.stderr)
        return 1
    Rules(landlock_abi(), [workspace, tmpdir], [workspace, *read_paths(value("--read"))],
          cpu_seconds=600, max_processes=tasks_now() + NEW_TASKS).build().apply()
    os.chdir(workspace)
    os.execvpe(program[0], program, clean_environment(os.environ, tmpdir, workspace))


if __name__ == "__main__":
    sys.exit(helper_main(sys.argv[1:]))
