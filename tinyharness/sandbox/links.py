"""Hard links out of the workspace: what the sandbox cannot cover, named once.

The problem. Landlock judges a file by the names the kernel walks to it, so a file of the workspace
that is a hard link to a file outside it is, to the kernel, a workspace file: a command may write
it, and the file outside changes too. The sandbox cannot tell the two names apart; it can say so.

The mechanism. `hard_link_note` walks the workspace for regular files with more links than names
found inside it, and words one line. A walk costs a stat a file (about 120 ms for 30,000 files), so
it is made once, lazily, just before the run's first sandboxed command (`Sandbox.before_first`,
set by flags.py): never on the way to the first request, and not at all in a run that runs no
command (the file tools write through no link: filedoor.py). Files under `.git/objects` are left
out: a `git clone` from a local path hard-links them (`pack/*`, read-only, and `info/*`) to the
source repository's, and git never writes one of them in place (an object is never changed, an
info file is replaced by a rename).

What it cannot do. The walk stops after WALK_LIMIT entries, so a file past them is not named; nor
is a link made after the walk, nor a file under `.git/objects` that a command writes into on purpose
(git itself does not).
"""
import os
import stat

WALK_LIMIT = 20_000
GIT_OBJECTS = f"{os.sep}.git{os.sep}objects{os.sep}"


def git_object(folder):
    """A file of a repository's object store: git writes a new object, never an old one, and
    replaces its info files by renaming; nothing writes through one in the course of work (named,
    a local clone's would be noise at every run)."""
    return GIT_OBJECTS in folder + os.sep


def linked_outside(workspace, limit=WALK_LIMIT):
    """(how many, one of them) of the workspace's regular files that are hard links with a name
    outside it (more links than names found inside): the kernel sees the workspace's name, so a
    command may change the file for the other name too. The walk stops after `limit` entries (a huge
    tree is not scanned)."""
    names: dict[tuple, list] = {}  # (device, inode) -> [names inside, links, a path]
    seen = 0
    for folder, subfolders, files in os.walk(workspace):
        for name in files:
            seen += 1
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1 and not git_object(folder):
                key = (info.st_dev, info.st_ino)
                names[key] = [names.get(key, [0])[0] + 1, info.st_nlink, os.path.join(folder, name)]
        if seen > limit:
            break
    outside = [path for count, links, path in names.values() if links > count]
    return len(outside), (os.path.relpath(outside[0], workspace) if outside else None)


def hard_link_note(workspace):
    """The line said once, before the first command, when the workspace holds hard links to files
    outside it; or None."""
    count, example = linked_outside(workspace)
    if not count:
        return None
    more = f" and {count - 1} more file{'s' * (count > 2)}" if count > 1 else ""
    linked = "are hard links to files" if more else "is a hard link to a file"
    return (f"[sandbox] not covered: {example}{more} in the workspace {linked} outside it: a "
            "command that writes into one changes the file outside too (the kernel sees the "
            "workspace's name); copy it to break the link")
