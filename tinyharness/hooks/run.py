"""Running one command hook: in the sandbox unless its entry says `"sandbox": false`, in a process
group of its own, bounded by its timeout.

The problem. A hook is the user's policy, but what it runs is often the model's work: a
`post_tool_use` hook that runs `python -m unittest` imports the test file the model just wrote, and
a `ruff check .` reads a `pyproject.toml` the model may have changed. Run with the user's rights,
that test file may delete a folder outside the workspace, read `~/.ssh` or send it anywhere.
Trusting the hooks file does not make the workspace's files trustworthy.

The mechanism. A hook runs as a model's `shell` command does (sandbox/__init__.py): the workspace
writable, a private TMPDIR, the system readable, no network, no home folder, nothing left running
afterwards, the protected paths (`.git`, `.tinyharness`) put back. Only its environment differs: the
allowlist plus `CLAUDE_PROJECT_DIR`; and it may read and run the programs on the user's PATH that
live in the home folder (`tool_folders`: each PATH folder there - `~/.local/bin`, `~/.cargo/bin`, a
version manager's `bin` - the folder each of its programs really lives in when it is a link or names
its interpreter, each such `bin` folder's `lib`, `lib64`, `libexec` and a virtualenv's `pyvenv.cfg`,
`~/.rustup` for `~/.cargo/bin`), read-only, never the home folder itself nor a private place
(private_places.py: `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.claude/.credentials.json`...), so a
formatter hook finds its formatter as it would in the user's shell. A hook from the user's own file
(`~/.claude/settings.json`, the harness's own hooks.json) never starts in the workspace: confined,
it starts in that file's folder's `hooks/` (where such scripts live, and the only part of the home
folder it may read), else in the home folder (empty in there); unconfined, in the file's folder.
With `--sandbox off` hooks run unconfined, as the commands do. A hook whose entry says `"sandbox":
false` runs with all the user's rights; the trust question names it, and before each of its starts
the workspace files its command names are compared with what the user trusted (trust.py,
`cannot_start`): one the model changed since is asked about again, or, with no terminal, the hook is
not started and the call is refused.

Nothing of a hook outlives the harness, even killed with SIGKILL (no handler runs): confined, the
process that enters its namespaces dies with the thread that started it, and takes the namespace
with it; unconfined, a process stays between the harness and the hook's group and kills the group
when the harness is gone (sandbox/rules.py, `die_with` and `stay_between`). The thread that starts a
hook waits for it, so a thread's end never kills a hook early.

What it cannot do. Confined, a hook that needs the network (a webhook, a notifier), a variable
outside the allowlist, or your home folder beyond its PATH tools (a script elsewhere in it, a tool's
cache or settings, a tool that finds its files through a variable) fails, and a failing hook blocks:
give that one `"sandbox": false`, knowing what it runs. What a confined hook writes under `.git` or
`.tinyharness` is put back, as a command's is. Unconfined, a hook runs whatever the workspace holds
that it imports or reads. Where the sandbox cannot run (no Landlock), a confined hook refuses, as
`shell` does.
"""
import os
import subprocess
import threading

from ..filedoor import read_bytes
from ..private_places import private
from ..sandbox.handle import unconfined
from .decide import Verdict

# bytes of a hook's stdout/stderr read into memory; the rest is read and dropped
MAX_CAPTURE = 1 << 20
PROGRAMS = 2000  # entries of one PATH folder looked at for where its programs really live
BESIDE_BIN = ("lib", "lib64", "libexec", "pyvenv.cfg")  # what an install prefix's programs read


CONFINED = ("in the sandbox that confines the model's shell commands: they may write only in this "
            "workspace, open no network connection and read nothing of your home folder but the "
            "programs on your PATH")


def confinement_note(hooks, sandbox_on=True):
    """What the trust question says of a file's hooks ({event: [Hook]}): which of them run
    unconfined."""
    every = [hook for entries in hooks.values() for hook in entries]
    loose = list(dict.fromkeys(hook.command for hook in every if not (hook.sandbox and sandbox_on)))
    if not loose:
        return (f"These commands run {CONFINED} (\"sandbox\": false in a hook's entry runs it "
                "unconfined).")
    why = '"sandbox": false' if sandbox_on else "--sandbox off"
    others = f" The others run {CONFINED}." if len(loose) < len(every) else ""
    return (f"These run UNCONFINED ({why}): {', '.join(f'`{c}`' for c in loose)} - outside the "
            "sandbox, with all your rights (your files, your keys, the network); they can run "
            "code the model wrote in this workspace (a hook that runs the tests imports its test "
            f"files).{others} Trust this file only if you would run these commands yourself, in "
            "this folder, after the model has worked in it.")


def tool_folders(environ=None, home=None):
    """The paths a confined hook may read and run besides the commands' own: the user's PATH tools
    that live in the home folder and what they need (the module's docstring), no private place."""
    environ = os.environ if environ is None else environ
    home = os.path.realpath(home or os.path.expanduser("~"))
    found = []
    for entry in environ.get("PATH", "").split(os.pathsep):
        folder = os.path.realpath(entry) if os.path.isabs(entry) else ""
        if not in_home(folder, home):
            continue
        found += beside(folder)
        for program in programs(folder):
            found += [path for where in (os.path.realpath(program), interpreter(program))
                      if in_home(where, home) for path in beside(os.path.dirname(where))]
        if folder == os.path.join(home, ".cargo", "bin"):  # rustup's proxies read its toolchains
            found.append(environ.get("RUSTUP_HOME") or os.path.join(home, ".rustup"))
    return [path for path in dict.fromkeys(found)
            if os.path.exists(path) and in_home(path, home) and not private(path, home)]


def in_home(path, home):
    """Inside the home folder, not the home folder itself."""
    return bool(path) and path.startswith(home.rstrip(os.sep) + os.sep)


def beside(folder):
    """The folder, and for a `bin` folder what its install prefix's programs read beside it."""
    parent = os.path.dirname(folder)
    extra = [os.path.join(parent, name) for name in BESIDE_BIN]
    return [folder, *(extra if os.path.basename(folder) == "bin" else [])]


def programs(folder):
    try:
        with os.scandir(folder) as entries:
            return [entry.path for _, entry in zip(range(PROGRAMS), entries)]
    except OSError:
        return []


def interpreter(program):
    """The absolute interpreter a script's `#!` line names (a pipx or venv tool's Python), or
    ''."""
    real = os.path.realpath(program)
    try:  # through the door: a FIFO named like a program never hangs the harness
        first = read_bytes(os.path.basename(real), 256, os.path.dirname(real))[0].split(b"\n")[0]
    except (OSError, ValueError):
        return ""
    if not first.startswith(b"#!"):
        return ""
    words = first[2:].split()
    return os.path.realpath(os.fsdecode(words[0])) if words and words[0].startswith(b"/") else ""


class Capture(threading.Thread):
    """Read a pipe to its end on a thread of its own; keep the first MAX_CAPTURE bytes."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe, self.chunks, self.size = pipe, [], 0
        self.start()

    def run(self):
        try:
            while chunk := self.pipe.read1(65536):
                if self.size < MAX_CAPTURE:
                    self.chunks.append(chunk[:MAX_CAPTURE - self.size])
                self.size += len(chunk)
        except (OSError, ValueError):
            pass

    def text(self):
        return b"".join(self.chunks)


def cannot_start(hook, sandbox):
    """A blocking Verdict when the hook must not start, else None: its sandbox cannot run here, or,
    unconfined, a file its command names is not what the user trusted (trust.Trusted.may_start:
    the model may have rewritten its script)."""
    command = hook.command
    if sandbox is not None and (problem := sandbox.problem()):
        return Verdict(False, f"the hook `{command}` runs in the sandbox, which cannot run here, "
                              f"so the call is refused ({problem}) Or give that hook "
                              "\"sandbox\": false.", hook=command)
    if sandbox is None and hook.trusted is not None and \
            (changed := hook.trusted.may_start([command], f"the unconfined hook `{command}`")):
        return Verdict(False, f"{changed}, so the call is refused", hook=command)
    return None


def run_command(command, stdin, cwd, env, timeout, sandbox=None, workspace=None, report=None):
    """(exit code, or None when it timed out; stdout bytes; stderr bytes). The command leads a
    process group; whatever is left of the group when it ends (a background child holding its
    output) is killed with it, so nobody waits for the child's end of the pipe. `sandbox` (an
    enabled sandbox.Sandbox): confined as a shell command in `workspace` is, `env` then only adds to
    its allowlist; else unconfined (sandbox/handle.py). `report` gets what the sandbox did
    afterwards (a protected path put back)."""
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    finish = None
    if sandbox is not None and sandbox.enabled:
        process, finish = (sandbox.start(workspace, command, timeout, cwd=cwd, env_extra=env,
                                         **pipes))
    else:
        process = unconfined(command, cwd, env, **pipes)
    out, err = Capture(process.stdout), Capture(process.stderr)
    threading.Thread(target=feed, args=(process.stdin, stdin), daemon=True).start()
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    except BaseException:  # Ctrl-C: nothing of the hook outlives the call
        process.kill()
        if finish:
            finish(True)
        process.wait()
        raise
    process.kill()
    notes = finish(code is None) if finish else []
    process.wait()
    for reader in (out, err):
        reader.join(2)  # a child that left the group (setsid) may hold the pipe: take what came
    for note in notes:
        if report:
            report(f"[hook] `{command}`: {note}")
    return code, out.text(), err.text()


def feed(pipe, data):
    try:
        pipe.write(data)
        pipe.close()
    except OSError:  # the hook did not read its input: allowed
        pass
