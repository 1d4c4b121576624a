"""Running programs and watching folders, for the eval: armour. Read it after eval.py and common.py.

The problem: the eval runs code nobody has read - the harness driving a real model, the model's
scripts, our hidden tests against the model's functions. Any of them can hang, start children that
outlive it and hold its pipes open, print bytes that are not UTF-8, or change files outside the
workspace it was given.

The mechanism: every program runs in its own process group with a timeout, and on a timeout (or
Ctrl+C) the whole group is killed, not only the direct child (`run_process`); output is decoded
with replacement marks, never a crash. A check that runs code runs it in a fresh copy of the
workspace (`run_python_in_copy`), so the eval's own files never appear in the model's. The folder
outside the workspace is recorded before the run and compared after it, files by content hash and
links by target (`snapshot`, `differences`).

What it cannot do: a grandchild that leaves the process group (setsid) survives the kill, and a
snapshot sees what changed on disk, not what was read or sent over the network.
"""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path


def run_process(command, cwd, timeout, env=None):
    """Run a command; return (exit code, or None when it timed out, stdout, stderr) as text.

    The command gets its own process group, and on a timeout the whole group is killed: killing only
    the direct child would leave whatever it started running (and holding our pipes open).
    """
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=os.name == "posix")
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, decode(out), decode(err)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        # a grandchild escaped the group and holds the pipes
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return None, decode(out), decode(err)
    # Ctrl+C: its own session means it did not get the signal
    except BaseException:
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


def run_python_in_copy(workspace, scratch, args, extra_files, timeout):
    """`python ARGS` in a fresh copy of the workspace under `scratch` (plus extra_files: name ->
    text); (exit code or None on timeout, stdout and stderr together)."""
    scratch.mkdir(parents=True, exist_ok=True)
    copy = scratch / f"copy{len(list(scratch.iterdir()))}"
    shutil.copytree(workspace, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in (extra_files or {}).items():
        (copy / name).write_bytes(text.encode("utf-8"))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
    env.pop("PYTHONPATH", None)                 # the model's code sees its own folder, not our repo
    code, out, err = run_process([sys.executable, *args], copy, timeout, env)
    return code, out + err


def snapshot(folder):
    """Everything under a folder, as {relative path: what it is}: file contents by hash, links by
    target. Two snapshots differ exactly when something was added, removed or changed."""
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
    return ("; ".join(f"{label} {', '.join(paths[:3])}"
                      + (" ..." if len(paths) > 3 else "") for label, paths in parts))
