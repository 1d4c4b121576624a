"""`.git` and `.tinyharness`: what runs later, outside the sandbox, is put back after each command.

The problem: Landlock grants and never carves, so `.git` cannot be made read-only inside a writable
workspace, and git runs programs named in it (core.fsmonitor, hooks, filters) at the user's next
`git`, outside any sandbox. The mechanism: the harness snapshots, before the command, everything git
reads to run code - `config`, `config.worktree`, `commondir`, `gitdir`, `info/attributes`, every
`hooks/` folder, at any depth (submodules in `.git/modules/*`, linked worktrees in
`.git/worktrees/*`), every symbolic link in `.git`, and `.git`'s own identity (its inode) - and
afterwards puts it back: `.git` moved (`mv .git .git-real` plus a `gitdir:` file) is found by its
inode and moved back, a `.git` file or link appearing where there was none is removed, a changed
file is restored, a new hook removed (a new `*.sample` file, which git never runs, may stay), a
config kept only when every key it gained is harmless (`user.name`, `remote.origin.url`...: a key
that runs a program, like `core.fsmonitor` or `core.hooksPath`, is never on that list). A folder the
command made unreadable (`chmod 111 .git/hooks`) is given back to its owner before the check and its
mode restored after. If the check or the restore fails (no file descriptors left, a full disk),
RestoreFailed stops the run with exit status 1 and the console says what to check: the model is
never told "all is well". The file tools refuse any path through a `.git` or `.tinyharness`
component, at any depth (protected_path), also when a link inside the workspace (`g -> .git`) leads
there.

What it cannot do: objects, refs and logs are not watched (they run nothing); a `.git` made by the
command in a sub-folder is not watched (run git there only if you made it); a hook planted and
triggered within one command (`... > .git/hooks/pre-commit && git commit`) runs before it is undone,
but inside the sandbox; what is undone is what would run later, outside it. Hooks a repository keeps
in the workspace (`core.hooksPath = .husky`) and files another tool runs later (a Makefile) are the
command's to change.
"""
import hashlib
import os
import shutil
import stat
import time
from pathlib import Path

# the file tools write nothing through these names, at any depth
PROTECTED_TOPS = (".git", ".tinyharness")
# Inside .git, what makes git run a program: its config (core.fsmonitor, core.hooksPath, includes,
# filters, aliases), the per-worktree config, the hooks, the links that make git read config and
# hooks from another folder (commondir, gitdir), info/attributes (which names a filter or diff
# driver). All of these, at any depth: submodules live in .git/modules/*/ and linked worktrees in
# .git/worktrees/*/, each a git folder of its own. What ordinary git work changes and git never runs
# is not watched: objects, refs, logs.
GIT_WATCHED = {"config", "config.worktree", "commondir", "gitdir", "hooks", "attributes"}
GIT_SKIPPED = {"objects", "refs", "logs", "lfs", "rr-cache"}
# not paths: the .git folder's inode, and every folder's mode
GIT_IDENTITY, MODES = ":git-identity", ":modes"
# git config keys a command may add: none of them runs a program (core.fsmonitor, core.hooksPath,
# core.sshCommand, core.worktree, *.textconv, filter.*, alias.*, include.* ... are not here, so
# adding one is undone)
HARMLESS_CONFIG = {"core.repositoryformatversion", "core.filemode", "core.bare",
                   "core.logallrefupdates",
                   "core.ignorecase", "core.precomposeunicode", "core.symlinks", "user.name",
                   "user.email",
                   "init.defaultbranch", "branch.*.remote", "branch.*.merge", "remote.*.url",
                   "remote.*.fetch"}


# path -> (stamp_of its lstat, sha256, bytes or None): what a settled watched file held when read
KNOWN: dict[str, tuple] = {}
KNOWN_BYTES = 1 << 20  # a file's bytes kept beside its digest; a bigger one is read again
SETTLED_NS = 2_000_000_000  # a file changed this recently when read is read again next time


class RestoreFailed(BaseException):
    """The harness could not check or put back the protected paths after a command. Not an
    Exception: no tool-level `except Exception` may turn it into a result the model reads; the run
    stops (exit 1) and the message tells the user what may be left."""


def protected_path(path):
    """The protected name a workspace-relative path goes through, or None: what the file tools
    refuse. Any component counts, not only the first (`sub/.git/hooks/x`, `.git/modules/a/hooks/x`),
    and a path that IS `.git` (a file `gitdir: elsewhere` makes git read another folder's
    config)."""
    for part in Path(path).parts:
        if part.lower() in PROTECTED_TOPS:  # .GIT is .git on a case-insensitive file system
            return part
    return None


def snapshot(workspace, contents=None, fix=False):
    """{relative path: ("file", sha256, mode) | ("link", target) | ("dir",)} for .tinyharness and
    what git reads to run code under .git, plus the .git folder's identity and every folder's mode.
    `contents`, when given, receives each file's bytes (the state to put back: the user's own
    files). `fix`: first give back to the owner any folder or file the command made unreadable
    (`chmod 111 .git/hooks` would hide a planted hook from the check, not from git). After the
    command only digests are taken, in chunks: a 1 GiB file planted there costs time, not the
    harness's memory."""
    seen: dict = {}  # key -> its state, MODES -> modes
    modes: dict[str, int] = {}
    tiny = Path(workspace, ".tinyharness")
    seen[".tinyharness"] = state_of(tiny, ".tinyharness", contents, fix)
    if seen[".tinyharness"] == ("dir",):
        walk(tiny, ".tinyharness", seen, modes, contents, fix, everything=True)
    git = Path(workspace, ".git")
    seen[".git"] = state_of(git, ".git", contents, fix)
    if seen[".git"] == ("dir",):
        info = os.lstat(git)
        seen[GIT_IDENTITY] = (info.st_dev, info.st_ino)
        walk(git, ".git", seen, modes, contents, fix, everything=False)
    seen[MODES] = modes
    return {k: v for k, v in seen.items() if v is not None}


def walk(folder, key, seen, modes, contents, fix, everything):
    """Record the watched entries under `folder` (all of them when `everything`: .tinyharness, a
    hooks folder). A folder that cannot be listed even after `fix` cannot be checked:
    RestoreFailed."""
    info = os.lstat(folder)
    if fix and info.st_mode & 0o700 != 0o700:
        give_back(folder, 0o700)
        info = os.lstat(folder)
    modes[key] = stat.S_IMODE(info.st_mode)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise RestoreFailed(f"could not list {key}: {e.strerror}") from None
    for entry in entries:
        child = f"{key}/{entry.name}"
        # a link anywhere in .git may lead git's reads elsewhere: always watched
        if entry.is_symlink():
            seen[child] = ("link", os.readlink(entry.path))
        elif entry.is_dir(follow_symlinks=False):
            if not everything and entry.name in GIT_SKIPPED:
                continue
            inner = everything or entry.name == "hooks"
            if inner:
                seen[child] = ("dir",)
            walk(Path(entry.path), child, seen, modes, contents, fix, inner)
        elif everything or entry.name in GIT_WATCHED:
            seen[child] = state_of(Path(entry.path), child, contents, fix)


def give_back(path, bits):
    """chmod u+bits when the command took them away (the harness owns what its commands made)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISLNK(info.st_mode) and info.st_mode & bits != bits:
            os.chmod(path, stat.S_IMODE(info.st_mode) | bits)
    except OSError:
        pass  # what still cannot be read is reported by the reader


def state_of(path, key, contents=None, fix=False):
    """("link", target) | ("file", sha256, mode) | ("dir",) | ("other",) | None, from one lstat:
    this runs twice per command on every watched entry, so it is the sandbox's per-command cost
    (benchmarks.sandbox)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        return ("dir",)
    if not stat.S_ISREG(info.st_mode):
        return ("other",)  # a FIFO or socket planted there: a change
    if fix and info.st_mode & 0o400 != 0o400:
        give_back(path, 0o400)
        info = os.lstat(path)
    return ("file", known_digest(path, key, contents, info), info.st_mode)


def stamp_of(info):
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode


def known_digest(path, key, contents, info):
    """digest_of, or what the file held when it was last read, if its inode, size, times and mode
    are the same and it had been left alone for a while then (KNOWN): most watched files
    (hooks/*.sample, config) never change, and reading them twice a command was most of the
    snapshot's time. A write moves ctime, which no command can set back; one within the clock's tick
    of the read could keep it, so a file changed less than SETTLED_NS before it was read is read
    again (git's rule for "racily clean" files)."""
    known = KNOWN.get(str(path))
    if known and known[0] == stamp_of(info) and (contents is None or known[2] is not None):
        if contents is not None:
            contents[key] = known[2]
        return known[1]
    box = contents if contents is not None or info.st_size > KNOWN_BYTES else {}
    read_at = time.time_ns()
    digest = digest_of(path, key, box)
    if info.st_ctime_ns < read_at - SETTLED_NS and info.st_mtime_ns < read_at - SETTLED_NS:
        if len(KNOWN) > 10_000:
            KNOWN.clear()
        kept = box.get(key) if info.st_size <= KNOWN_BYTES else None
        KNOWN[str(path)] = (stamp_of(info), digest, kept)
    return digest


def digest_of(path, key, contents):
    """The file's sha256, read in chunks without following a link or blocking on a FIFO swapped in
    since the lstat (a parallel command may still be running); `contents` receives its bytes when
    given."""
    digest, chunks = hashlib.sha256(), []
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
            if contents is not None:
                chunks.append(chunk)
    if contents is not None:
        contents[key] = b"".join(chunks)
    return digest.hexdigest()


def config_keys(data):
    """{section.key: value} of a git config file, enough to tell harmless keys from the rest."""
    keys: dict[str, list[str]] = {}
    section = ""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head = line[1:line.find("]")] if "]" in line else line[1:]
            name, _, sub = head.partition(" ")
            section = name.lower() + (".*" if sub.strip() else "")
            continue
        key, _, value = line.partition("=")
        keys.setdefault(f"{section}.{key.strip().lower()}", []).append(value.strip())
    return keys


def config_is_harmless(before, after):
    old = config_keys(before or b"")
    return all(k in HARMLESS_CONFIG or old.get(k) == v for k, v in config_keys(after).items())


def harmless_new_hook(key, old, new):
    """git init makes .git, and .git/hooks full of *.sample files; git never runs those. (What it
    puts in .git is judged like everything else in there: a config with only harmless keys
    stays.)"""
    if key == ".git" and old is None and new == ("dir",):
        return True
    if old is not None or new is None or not key.startswith(".git/"):
        return False
    parts = key.split("/")
    in_hooks = "hooks" in parts[1:-1]
    return ((parts[-1] == "hooks" and new == ("dir",))
            or (in_hooks and key.endswith(".sample") and new[0] == "file"))


def restore(workspace, before, contents):
    """Undo every change under the protected paths (`before` and `contents` from snapshot); return
    what was undone, one line each. First .git itself: the folder it was (moved back if the command
    moved it, whatever was put in its place removed), or no .git if there was none. The harness runs
    with all the user's rights here, so it never works through a link the command may have planted:
    a path with a symbolic link on its way is left alone (the link itself is a change, and is
    undone). Raises RestoreFailed when it cannot check or put back (the caller stops the run)."""
    try:
        before, undone = put_git_back(workspace, before)
        after = snapshot(workspace, fix=True)
        # most commands: every digest, link, mode and .git's identity as they were
        if not undone and after == before:
            return undone
        for key in sorted(set(before) | set(after), key=len, reverse=True):  # the deepest first
            old, new = before.get(key), after.get(key)
            if key.startswith(":") or old == new or harmless_new_hook(key, old, new) or \
                    harmless_config(workspace, key, old, new, contents):
                continue
            if no_link_on_the_way(workspace, key):
                remove(Path(workspace, key))
            how = 'created' if old is None else 'deleted' if new is None else 'changed'
            undone.append(f"{key} ({how})")
        for key in sorted(before, key=len):  # the shallowest first: folders before what they hold
            path = Path(workspace, key)
            if (not key.startswith(":") and before[key] != state_of(path, key)
                and no_link_on_the_way(workspace, key)):
                put_back(path, before[key], contents.get(key))
        # chmod 111 undone
        for key, mode in sorted(before.get(MODES, {}).items(), key=lambda kv: -len(kv[0])):
            path = Path(workspace, key)
            if no_link_on_the_way(workspace, key) and path.is_dir() and not path.is_symlink() and \
                    stat.S_IMODE(path.lstat().st_mode) != mode:
                os.chmod(path, mode)
        return undone
    except OSError as e:
        raise RestoreFailed(f"{e.strerror or e}"
                            + (f": {e.filename}" if e.filename else "")) from None


def put_git_back(workspace, before):
    """(the snapshot to compare with, what was undone) after making .git the folder it was. The
    command may have moved it (`mv .git .git-real`) and put a `gitdir: .git-real` file or another
    folder in its place: the original is found by its inode, anywhere in the workspace, and moved
    back."""
    identity = before.get(GIT_IDENTITY)
    git = Path(workspace, ".git")
    if identity is None or is_folder(git, identity):
        return before, []
    original = find_folder(workspace, identity)
    if original is None:
        # deleted, and a new repository made: judged as new
        if git.is_dir() and not git.is_symlink():
            return ({k: v for k, v in before.items() if k != ".git" and not k.startswith(".git/")},
                    [".git (deleted and made again: the new one is checked as new)"])
        if os.path.lexists(git):
            remove(git)
        return ({k: v for k, v in before.items() if k != ".git" and not k.startswith(".git/")},
                [(".git (deleted by the command; only its settings and hooks are watched, so it "
                  "cannot be put back)")])
    if os.path.lexists(git):
        remove(git)
    os.rename(original, git)
    return (before, [(f".git (moved to {Path(original).relative_to(workspace).as_posix()}; moved "
                      "back)")])


def is_folder(path, identity):
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) == identity


def find_folder(workspace, identity, budget=200_000):
    """The folder with this (device, inode) under the workspace, or None (looked for in `budget`
    entries)."""
    for top, dirs, _ in os.walk(workspace):
        for name in dirs:
            budget -= 1
            path = os.path.join(top, name)
            if is_folder(path, identity):
                return path
        if budget < 0:
            break
    return None


def harmless_config(workspace, key, old, new, contents):
    """A git config that only gained harmless keys (git init, git config user.name) stays."""
    if not key.startswith(".git/") or Path(key).name != "config" or not new or new[0] != "file" or \
            (old and old[0] != "file"):
        return False
    path = Path(workspace, key)
    if path.stat().st_size > 1 << 20 or not no_link_on_the_way(workspace, key):
        return False
    return config_is_harmless(contents.get(key) if old else None, path.read_bytes())


def no_link_on_the_way(workspace, key):
    """True when every folder between the workspace and `key` is a real folder, not a symbolic
    link."""
    path = Path(workspace)
    for part in Path(key).parts[:-1]:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            # missing: put_back will make real folders
            return not path.exists() and not path.is_symlink()
    return True


def remove(path):
    if path.is_symlink() or not path.is_dir():
        if os.path.lexists(path):
            path.unlink()
    else:
        shutil.rmtree(path)


def put_back(path, state, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    if state[0] == "dir":
        if path.is_symlink() or path.exists() and not path.is_dir():
            remove(path)
        path.mkdir(exist_ok=True)
    elif state[0] == "link":
        remove(path)
        path.symlink_to(state[1])
    elif state[0] == "file":
        remove(path)
        path.write_bytes(data)
        os.chmod(path, state[2] & 0o7777)
