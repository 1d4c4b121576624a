"""The sandbox: what m3's regex cannot stop, the kernel does.

m3 taught, honestly, that a command policy is text matching. `x=rm; $x -rf "$D"`, `find "$D"
-delete`, a script written and then run, `git -c core.fsmonitor=...`, a hard link,
`/proc/self/root/...`: the words never hold `rm -rf`, so no regex sees them. What every one of them
has to do in the end is ask the kernel: open this file for writing, unlink that one, connect a
socket, send a signal. The sandbox makes the kernel say no, at the moment of the system call,
whatever the spelling.

A confined process confines everything it will start: after `fork` and before `exec /bin/sh`, a
child confines itself for good. With namespaces, the first `shell` command of a run makes such a
process that stays, the run's spawner, and every command is started by it (sandbox/spawner.py);
without, or beside another command, each command's own child confines itself. This module is the
front that composes the layers, one module each:

| module | the layer | what it stops |
|---|---|---|
| sandbox/rules.py | what the child applies: no new privileges, limits | setuid gains, a 1 GiB file,
a fork bomb |
| sandbox/landlock.py | Landlock | writes outside the workspace, reads of your files, TCP, signals
out |
| sandbox/seccomp.py | seccomp | UDP, raw and netlink sockets, io_uring, setuid bits, renice of
others, keyrings |
| sandbox/namespaces.py | namespaces, where they work | sockets in /tmp, /run and home; other
processes; SysV IPC |
| sandbox/env.py | an allowlist environment | secrets in variables, the SSH agent, tmux, D-Bus |
| sandbox/reaping.py | no process left behind | what a command leaves running |
| sandbox/spawner.py | the run's sandbox, made once | the cost: a copy of the harness per command |
| sandbox/handle.py | one handle per command, and what Ctrl-C stopped | a caller that must know
the mechanism, or the sandbox's registries |
| sandbox/git.py | `.git` and `.tinyharness` put back | a git hook or setting that runs later,
unconfined |
| sandbox/beneath.py | the file tools' opens | `..`, links and `/proc/self/root` out of the
workspace |

(sandbox/syscalls.py makes the system calls Python has no function for.) Each module's docstring
says what its layer cannot do.

Around the layers, this module keeps the start folder safe (`workspace_problem`: no workspace that
holds the home folder or the harness, or lies inside a folder other programs read as settings or run
from), removes each command's private TMPDIR whatever modes it left, and names, before the first
command, a hard link to a file outside (sandbox/links.py). The harness's own files go through
filedoor.py.

The model only reads text, and `Permission denied` alone sends a small model looking for another
way (sudo, another path): when a command's output shows a refusal, the result ends with one
`[sandbox]` line saying what the sandbox allows and that the task should say what it needs.

**Fail closed.** On a kernel without Landlock, or with an ABI older than 6 (kernel 6.12; scoping,
the newest Landlock right it relies on), or on an architecture the seccomp filter does not know,
`shell` refuses to run anything and says why; `tinyharness run --sandbox off` runs commands
unconfined, with a warning on every run.

**What it still cannot see.** Anything inside the workspace is fair game: a command can delete or
rewrite every file there (use git), including hooks a repository keeps there (`core.hooksPath =
.husky`) and files another tool runs later (a Makefile). Reads of the system are allowed, so a
command sees which programs are installed and the world-readable parts of `/etc`; running as root,
root-owned files there are readable too. `/tmp` itself is closed (empty, with namespaces): a program
that ignores `TMPDIR` fails there. The commands of one run share the spawner's namespaces one after
another: a file one leaves beside its TMPDIR (`$TMPDIR/..`) is there for the next, though nothing it
started is. `AF_UNIX` sockets stay open, and Landlock (up to ABI 7) does not check connecting to a
socket file: with namespaces only those outside `/tmp`, `/run` and the home folder are left to
reach; without them every one the user may use (an SSH agent's, tmux's, `/var/run/docker.sock`). The
user's MCP servers, the command hooks marked `"sandbox": false` (the others run in here:
hooks/run.py), and the harness itself (its `view_image` URLs, its model server, its own files:
filedoor.py), run unconfined; what the user runs in the workspace afterwards (`make`, `npm install`,
`pytest`) runs what the model wrote, and a hard link there writes through. Memory is not capped, CPU
only per process by the CPU-seconds limit, and the disk can still fill with many 1 GiB files; as
root, the task limit is not enforced. What the command prints, and what the model reads in the
workspace, may still carry a prompt injection: the kernel stops what a command does, not what the
model believes. And it is Linux only. (The README's sandbox table names, for each rule, the test
that attacks it, and lists what a user can do about each of these.)

**Check it yourself** (the sandbox is on by default):
    tinyharness run --yes "run: x=rm; \\$x -rf ~/some-folder"
        -> nothing to delete: home is empty in there
    tinyharness run --yes "run: python3 -c 'import socket; socket.socket(2, 2)'"
        -> PermissionError
or without a model (Landlock and seccomp, no namespaces): `python -m tinyharness.sandbox --exec
WORKSPACE -- sh -c 'touch ~/x'`.
"""
import functools
import os
import platform
import subprocess
import sys
import tempfile
import threading
import weakref

from . import clone as sandbox_clone
from .env import clean_environment
from .git import RestoreFailed, restore, snapshot
from .handle import Command, Stopped
from .landlock import MIN_ABI, landlock_abi
from .namespaces import NAMESPACES, Isolation, namespaces_work
from .reaping import LIVE, LOCK, become_subreaper, child_lister, end_everything
from .rules import FILE_BYTES, NEW_TASKS, Rules, read_paths, stay_between, tasks_now
from .seccomp import syscall_filter
from .settings_folders import holds, read_or_run_from, settings_targets, xdg
from .spawner import Spawner, Spawners

# commands; then the ruleset is built afresh (each command's TMPDIR adds one rule)
REBUILD_AFTER = 256
SPAWNER_SECONDS = 24 * 3600  # the spawner's own CPU limit: each command sets its own


def unavailable_reason(abi=None, machine=None):
    """Why this machine cannot run the sandbox, in one paragraph, or None when it can."""
    abi = landlock_abi() if abi is None else abi
    machine = platform.machine() if machine is None else machine
    if sys.platform != "linux":
        missing = f"it needs Linux, and this is {sys.platform}"
    elif abi == 0:
        missing = (f"this kernel ({platform.release()}) has no Landlock, or it is switched off "
                   "(Landlock came in Linux 5.13; check that `lsm=` on the kernel command line "
                   "includes landlock)")
    elif abi < MIN_ABI:
        missing = (f"this kernel ({platform.release()}) has Landlock ABI {abi}, and the sandbox "
                   f"needs ABI {MIN_ABI} (Linux 6.12) to keep signals inside the sandbox; ABI 4 "
                   "(6.7) is needed to cut TCP")
    elif syscall_filter(machine) is None:
        missing = f"its seccomp filter knows x86_64 and aarch64, not {machine}"
    else:
        return None
    return (f"the shell is sandboxed and the sandbox cannot run here: {missing}. Nothing ran. To "
            "run commands without a sandbox (the command regex is then all that stands between "
            "the model and your files), start tinyharness again with --sandbox off, and read "
            "every command before you approve it.")


class Sandbox:
    """How `shell` runs commands: `Sandbox()` confines them, `Sandbox(enabled=False)` does not.
    `extra_read`: more paths the commands may read (--sandbox-read); `file_bytes`: the largest
    file."""

    def __init__(self, enabled=True, extra_read=(), file_bytes=FILE_BYTES, extra_env=(),
                 isolate=None):
        self.enabled, self.extra_read, self.file_bytes = enabled, list(extra_read), file_bytes
        self.extra_env = list(extra_env)  # --sandbox-env: more variable names passed on
        self.deny_read = []  # files bound empty for commands: a Read deny rule's (permissions.py)
        self._abi, self._isolate = None, isolate  # isolate: None = namespaces where they work
        # workspace -> [Rules built once a run, commands started]
        self._built: dict = {}
        self._lock, self._spawners = LOCK, Spawners()
        self.before_first = None  # f(workspace), once, before the first command (links.py)
        self._stopped = Stopped()  # the commands Ctrl-C killed, until stop_all reaps them
        weakref.finalize(self, close_all, self._built, self._spawners)

    @property
    def isolated(self):
        """Whether commands get namespaces: a private /tmp, /run and home, and a PID namespace."""
        if self._isolate is None:
            self._isolate = namespaces_work()
        return self._isolate

    @property
    def abi(self):
        if self._abi is None:
            self._abi = landlock_abi()
        return self._abi

    def problem(self):
        """Why commands cannot run sandboxed here (one paragraph), or None."""
        return unavailable_reason(self.abi) if self.enabled else None

    def rules(self, workspace, tmpdir, timeout):
        read = [workspace, *read_paths(self.extra_read)]
        isolation = (Isolation(tmpdir, [workspace, *read], os.path.expanduser("~"), self.deny_read)
                     if self.isolated else None)
        # RLIMIT_NPROC counts the user's tasks in the command's user namespace when it has one: then
        # 256 is the command's own bound; without one, every task of the user counts (see tasks_now)
        return Rules(self.abi, [workspace, tmpdir], read, cpu_seconds=max(1, int(timeout) + 1),
                     max_processes=NEW_TASKS if isolation else tasks_now() + NEW_TASKS,
                     file_bytes=self.file_bytes, isolation=isolation)

    def rules_for(self, workspace, tmpdir, timeout, cwd):
        """The rules of one command, from those built once a run (the read list, /etc entry by
        entry, the namespaces' mounts, the seccomp program, the Landlock ruleset): its TMPDIR added,
        its limits set. Called under the lock, which is held until the child is forked: a ruleset is
        closed (rebuilt after REBUILD_AFTER commands, so the rules of gone TMPDIRs do not pile up)
        only when no child is being made."""
        built = self._built.get(workspace)
        if built is None or built[1] >= REBUILD_AFTER:
            if built:
                built[0].close()
            base = self.rules(workspace, None, timeout)
            base.grants = [(path, rights) for path, rights in base.grants if path is not None]
            built = self._built[workspace] = [base.build(), 0]
        built[1] += 1
        return built[0].for_command(tmpdir, max(1, int(timeout) + 1),
                                    NEW_TASKS if self.isolated else tasks_now() + NEW_TASKS, cwd)

    def env(self, tmpdir, workspace):
        return clean_environment(os.environ, tmpdir, workspace, self.extra_env)

    def with_read(self, paths):
        """The same sandbox, with more paths the commands may read (a user hook's own scripts
        folder)."""
        more = (Sandbox(self.enabled, [*self.extra_read, *paths], self.file_bytes, self.extra_env,
                        self._isolate))
        more._abi, more.deny_read, more._stopped = self._abi, self.deny_read, self._stopped
        return more

    def stop_all(self):
        """Ctrl-C: reap what the interruption killed of the commands this sandbox started (and
        the copies with_read made); how many they were. Nothing else is touched: not a server,
        not a process of the user's."""
        return self._stopped.reap_all()

    def start(self, workspace, command, timeout, cwd=None, env_extra=None, reuse=False, **popen):
        """Start the command (confined when enabled); return (process, finish): one handle
        whatever started it (sandbox/handle.py: wait, poll, kill, interrupt, and the pipes), and
        finish(), which ends what it left behind, removes its TMPDIR, undoes changes to protected
        paths and returns notes. `cwd`: where it starts when not the workspace (a user's own
        hook); `env_extra`: variables set beside the allowlist (CLAUDE_PROJECT_DIR for a hook);
        `reuse`: the shell tool's call (stdin from /dev/null, stdout and stderr one pipe), which
        the run's spawner may take (sandbox/spawner.py)."""
        if not self.enabled:
            return self.start_unconfined(workspace, command, cwd, env_extra, popen)
        say, self.before_first = self.before_first, None  # once: not on the way to the request
        if say:
            say(workspace)
        become_subreaper()
        adopted_before = child_lister()(os.getpid())
        contents: dict = {}
        before = snapshot(workspace, contents)
        workspace = os.path.realpath(workspace)
        with self._lock:
            spawner = (self._spawners.for_command(workspace, self.start_spawner)
                       if reuse and self.isolated and not (cwd or env_extra) else None)
            tmpdir = (spawner.new_tmpdir() if spawner
                      else tempfile.mkdtemp(prefix="tinyharness-tmp-"))
            try:
                env = {**self.env(tmpdir, workspace), **(env_extra or {})}
                process = (spawner.run(command, env, workspace, int(timeout) + 1, self._stopped)
                           if spawner else None)
                if process is None:
                    process = self.clone_or_fork(workspace, command, timeout, cwd, env, tmpdir,
                                                 popen)
            except BaseException:
                remove_tmpdir(tmpdir)
                raise
        return (process, functools.partial(finish, process, adopted_before, tmpdir, workspace,
                                           before, contents))

    def start_unconfined(self, workspace, command, cwd, env_extra, popen):
        """--sandbox off: the command as it is, with a process between it and the harness so that
        its group dies with a killed harness; nothing to finish."""
        env = {**os.environ, **env_extra} if env_extra else None
        harness = os.getpid()
        plain = subprocess.Popen(command, shell=True, cwd=cwd or workspace, start_new_session=True,
                                 env=env, preexec_fn=lambda: stay_between(harness),  # noqa: PLW1509
                                 **popen)
        return Command(plain, self._stopped), lambda timed_out=False, reap=True: []

    def clone_or_fork(self, workspace, command, timeout, cwd, env, tmpdir, popen):
        """The command started on its own (sandbox/clone.py, or the two-fork way). Under the
        lock: no other command's clean-up takes it for a leftover before it is in LIVE."""
        # the child has its own copy of the ruleset's descriptor, and closes it at exec
        rules = self.rules_for(workspace, tmpdir, timeout,
                               os.path.realpath(cwd) if cwd else workspace)
        process = launch(["/bin/sh", "-c", command], rules, cwd=rules.cwd, start_new_session=True,
                         env=env, **popen)
        LIVE.add(process.pid)
        return Command(process, self._stopped)

    def start_spawner(self, workspace, root):
        """The run's spawner for this workspace, started as a sandboxed command whose TMPDIR is
        `root` (it holds each command's)."""
        rules = self.rules_for(workspace, root, SPAWNER_SECONDS, workspace)
        env = self.env(root, workspace)
        spawner = Spawner.start(lambda argv, **popen: launch(argv, rules, cwd=rules.cwd,
                                                               start_new_session=True, env=env,
                                                               **popen), root)
        LIVE.add(spawner.process.pid)
        return spawner


def finish(process, adopted_before, tmpdir, workspace, before, contents, timed_out=False,
           reap=True):
    """After a confined command (its handle): end what it left, remove its TMPDIR, put the protected
    paths back; the notes. `reap`: wait for the command (killed by now) here; False leaves it to its
    interruption (Sandbox.stop_all reaps and counts it), and then it stays in LIVE, a child of
    ours."""
    with LOCK:  # no child is between its start and its registration in LIVE
        left = 0 if nothing_to_look_for(process) else end_everything(process.pid, adopted_before)
    if reap:
        process.wait()
        LIVE.discard(process.pid)
    remove_tmpdir(tmpdir)
    ended = (f"[sandbox] ended {left} process{'es' * (left != 1)} the command left running "
             "outside its process group")
    notes = [ended] if left and not timed_out else []  # a timeout's message says so already
    try:
        undone = restore(workspace, before, contents)
    except RestoreFailed as e:  # never a note for the model: the user must know, and the run stops
        raise RestoreFailed(what_is_left(workspace, e)) from None
    if undone:
        notes.append("[sandbox] protected paths were changed and have been put back: "
                     + ", ".join(undone)
                     + ". .git (its hooks, config and links) and the harness's own settings are "
                     "for the user to change.")
    if hasattr(process, "release"):
        process.release()
    return notes


def nothing_to_look_for(process):
    """Whether what the command left was ended with it, so that no walk of /proc looks for it: a
    command cloned as PID 1 of its PID namespace (killed now, if it was not), or one the spawner
    started (it killed the rest)."""
    if not hasattr(process, "end_namespace"):
        return False
    process.end_namespace()
    return True


def launch(argv, rules, **popen):
    """Popen of the confined command: cloned straight into its namespaces (one copy of the harness,
    sandbox/clone.py) where that works, else forked with the rules applied in preexec_fn."""
    # A raw clone3 takes none of the C library's fork-time locks (its allocator's, the loader's):
    # with other threads running, the child could wait on one held at that instant. Only a harness
    # with one thread clones; one with more (parallel calls, hooks run together) forks.
    if rules.isolation is not None and sandbox_clone.works() is not False and \
            threading.active_count() == 1:
        try:
            return sandbox_clone.CloneStart(argv, rules, NAMESPACES, **popen)
        except OSError as e:
            # not the clone refused: the command could not start
            if sandbox_clone.works() is not False:
                raise
            del e
    # preexec_fn: the confinement must be set between fork and exec, in the child alone; the
    # harness's other threads take no lock the child needs (it only makes system calls)
    return subprocess.Popen(argv, preexec_fn=rules.apply_in_child, **popen)  # noqa: PLW1509


def close_all(built, spawners):
    """Close the rulesets a Sandbox built and end its spawners (when it is gone, or at exit)."""
    spawners.close(remove_tmpdir)
    for rules, _ in built.values():
        rules.close()
    built.clear()


def what_is_left(workspace, error):
    return (f"the sandbox could not check or put back the protected paths of {workspace} after a "
            f"shell command ({error}), so the run was stopped. They may still hold what the "
            "command left there: a git hook or setting that runs a program at your next git "
            "command. Before you run git in that folder, check .git (is it a folder?), "
            ".git/hooks, .git/config, .git/config.worktree, .git/commondir, .git/info/attributes, "
            ".git/modules/*/hooks and .git/modules/*/config, and .tinyharness/.")


def workspace_problem(workspace, home=None, environ=None):
    """Why the harness must not run with this folder as its workspace, in one sentence, or None. The
    commands may write anything in the workspace, so it must not hold what runs or configures things
    outside the sandbox later: the home folder (dotfiles, ~/.ssh, the harness's trust store), the
    XDG config and data folders, or the harness's own code and the Python it runs on (a planted
    `tinyharness/__init__.py` or a `.pth` file would run at the next launch, unconfined); nor be
    inside a folder other programs read or run from (read_or_run_from). --workspace-anyway skips
    this check."""
    environ = os.environ if environ is None else environ
    home = os.path.realpath(home or os.path.expanduser("~"))
    workspace = os.path.realpath(workspace)
    guarded = [("your home folder", home),
               ("your config folder (XDG_CONFIG_HOME)",
                xdg(environ, "XDG_CONFIG_HOME", home, ".config")),
               ("your data folder (XDG_DATA_HOME)",
                xdg(environ, "XDG_DATA_HOME", home, ".local/share")),
               *settings_targets(environ, home),
               ("tinyharness's own code", os.path.dirname(os.path.realpath(__file__))),
               ("the Python environment tinyharness runs from", os.path.realpath(sys.prefix))]
    for what, path in guarded:
        if path == workspace or path.startswith(workspace.rstrip(os.sep) + os.sep):
            return (f"the workspace {workspace} contains {what} ({path}), and shell commands may "
                    "change anything in the workspace, including what runs outside the sandbox "
                    "later; start tinyharness in a project folder that holds neither"
                    + (" (install tinyharness outside it: pipx, or a virtualenv elsewhere)"
                                                   if "own code" in what or "Python" in what
                                 else ""))
    for what, path in read_or_run_from(environ, home):
        if (workspace == path or workspace.startswith(path.rstrip(os.sep) + os.sep)
            and not holds(path, home)):
            return (f"the workspace {workspace} is {'inside ' * (workspace != path)}{what} "
                    f"({path}), whose files other programs read as their settings or run, outside "
                    "the sandbox; shell commands may change anything in the workspace; start "
                    "tinyharness in a project folder")
    return None


REFUSALS = ("Permission denied", "Operation not permitted", "Errno 13", "Errno 1]")
HINT = ("[sandbox] this command ran in the sandbox: it may write only in the workspace and "
        "$TMPDIR, read only the system and the workspace (the home folder, /tmp and /run may look "
        "empty), open no network connection and signal no process outside, so a refusal above may "
        "be the sandbox's. Do not look for a way around it; if the task needs more, say so in your "
        "answer.")


def hint_for(output):
    """The sandbox's one-line explanation, for an output that shows a refusal; None otherwise. A
    small model that reads only 'Permission denied' tries sudo, or another path; this tells it
    why."""
    return HINT if any(word in output for word in REFUSALS) else None


def remove_tmpdir(tmpdir):
    """The command's private TMPDIR, removed whatever modes the command left in it: a folder made
    unreadable or unwritable (chmod 000) gets its owner's rights back as the walk reaches it. Every
    process of the command is gone by now, and the walk follows no link."""
    try:
        os.rmdir(tmpdir)  # most commands leave it empty: 2 ms cheaper than a walk
        return
    except OSError:
        pass
    # In the spawner's folder a command may swap its TMPDIR for a link, or a FIFO (whose open
    # would wait forever): anything but a folder is removed as itself.
    if not os.path.isdir(tmpdir) or os.path.islink(tmpdir):
        try_to(os.unlink, tmpdir)
        return
    remove_tree(tmpdir)


def remove_tree(top, longest=2048):
    """Remove the folder `top` and all in it, following no link, however deep a command made it:
    a walk with a list, not recursion (shutil.rmtree raises RecursionError at about 1,000 levels),
    and a folder whose path grows longer than `longest` is first moved up into `top` (a path longer
    than PATH_MAX cannot be named at all). Each folder gets its owner's rights back as it is
    reached; what still cannot be removed is left."""
    todo, seen, moved = [top], set(), 0
    while todo:
        folder = todo.pop()
        if folder in seen:  # its content is handled: now it is empty, or stays
            try_to(os.rmdir, folder)
            continue
        seen.add(folder)
        todo.append(folder)
        try_to(os.chmod, folder, 0o700)
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                try_to(os.unlink, entry.path)
            elif len(entry.path) > longest:
                moved += 1
                up = os.path.join(top, f".deep-{moved}-{os.getpid()}")
                todo.append(up if try_to(os.rename, entry.path, up) else entry.path)
            else:
                todo.append(entry.path)


def try_to(action, *args):
    """action(*args); False when the system said no."""
    try:
        action(*args)
        return True
    except OSError:
        return False
