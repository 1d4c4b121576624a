"""m3 with the hooks a first attempt writes: a substring blacklist and a path check on the text.

    python first_hooks.py [the options of python -m m3_hooks] "TASK"

The source article's first command rule looked for the words `remove-item -recurse` in the command;
the model wrote `Remove-Item -Path x -Force -Recurse`, the words were not next to each other, and the
command ran. Its first path check compared text, and `root/../evil.txt` starts with `root`. This file
runs `python -m m3_hooks` with the stage's hooks swapped for those two (the loop, the permission
prompt and the tools are the stage's own), so the same scripted model can be played against both.
"""
import os
import sys

from m3_hooks import __main__ as stage
from m3_hooks import hooks

BLACKLIST = ["rm -rf", "remove-item -recurse"]


def text_path_guard(workspace, name, args):
    """Inside if the joined text starts with the workspace's: '..' is never followed."""
    path = args.get("path")
    if isinstance(path, str) and not os.path.join(workspace, path).startswith(str(workspace)):
        return f"{path!r} is outside the workspace"
    return None


def substring_policy(workspace, name, args):
    """Blocked if the command contains a blacklisted string."""
    command = args.get("command") if name == "shell" else None
    for words in BLACKLIST if isinstance(command, str) else []:
        if words in command.lower():
            return f"the command contains {words!r}"
    return None


if __name__ == "__main__":
    hooks.PRE_TOOL_USE[:] = [text_path_guard, substring_policy]
    sys.exit(stage.main())
