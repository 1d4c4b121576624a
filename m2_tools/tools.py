"""The model's hands, and what they report back.

A tool result is all the model knows about what happened, so every result is written for a colleague
who cannot see your screen: a failure says what went wrong, with the operating system's own words; a
success gives evidence (how many characters, how many entries).
"""
import os
import signal
import subprocess
import threading
from pathlib import Path

from .safeio import Output, check_arguments, decode, parse_arguments, usage
SHELL_TIMEOUT = 60  # seconds; --shell-timeout changes it
KEEP_CHARS = 2900  # shown from each end of long output: about 6000 characters in all, for a small window


def list_dir(workspace, path="."):
    folder = Path(workspace) / path
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    if not names:
        return f"OK: {path} is an empty folder"
    return f"OK: {path} has {len(names)} entr{'y' if len(names) == 1 else 'ies'}:\n" + "\n".join(names)


def read_file(workspace, path):
    text = decode((Path(workspace) / path).read_bytes())
    return text or f"OK: {path} is empty (0 characters)"


def write_file(workspace, path, content):
    data = content.encode("utf-8")  # encode first: a failure must not leave an emptied file behind
    (Path(workspace) / path).write_bytes(data)
    return f"OK: wrote {len(content)} characters to {path}"


def shell(workspace, command, timeout=SHELL_TIMEOUT):
    """Run one command in a new shell. The command gets its own process group (a new session), so the
    timeout can kill everything it started, not just /bin/sh."""
    process = subprocess.Popen(command, shell=True, cwd=workspace, start_new_session=True,
                               stdin=subprocess.DEVNULL,  # a command that waits for input gets end-of-file
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = Output()
    reader = threading.Thread(target=output.collect, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        process.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    kill_group(process.pid)  # also what the command left running in the background: it would hold the pipe open
    status = process.wait()
    reader.join(timeout=1)  # a child that left the group (setsid) can keep the pipe open forever: stop reading
    text = cut(decode(output.head + output.tail), output.dropped)
    if timed_out:
        return (f"ERROR: timed out after {timeout:g} s; the command and everything it started were killed "
                f"(exit status {status}). Output until then:\n{text}")
    return f"exit status {status}" + (f"\n{text}" if text else " (no output)")

# exercise(m2): Write kill_group: kill the command's whole process group (not only /bin/sh), and treat a group that has already ended as done.
def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group had already ended


def cut(text, dropped=0, keep=KEEP_CHARS):
    """Keep the head and the tail of long output (errors and summaries come last) and say what is missing.
    `dropped` counts bytes never held in memory; they are counted as characters."""
    if len(text) <= 2 * keep:
        return text
    omitted = len(text) - 2 * keep + dropped
    return (f"{text[:keep]}\n[... {omitted} characters omitted. To see them, run the command again with "
            f"| head, | tail or | grep to pick the part you need ...]\n{text[-keep:]}")


TOOLS = {"list_dir": list_dir, "read_file": read_file, "write_file": write_file, "shell": shell}
VERBS = {"list_dir": "list", "read_file": "read", "write_file": "write"}


def schema(name, description, **params):
    """The JSON schema the model sees: every parameter is a required string."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(params),
                       "properties": {k: {"type": "string", "description": v} for k, v in params.items()}}}}


SCHEMAS = [
    schema("list_dir", "List the files and folders in a folder of the workspace.",
           path="folder path relative to the workspace, '.' for the top"),
    schema("read_file", "Read a text file of the workspace.", path="file path relative to the workspace"),
    schema("write_file", "Create or overwrite a text file in the workspace.",
           path="file path relative to the workspace", content="the full text to write"),
    schema("shell", "Run a command with /bin/sh in the workspace; returns its exit status and output "
                    "(stdout and stderr together, long output cut in the middle). Each call starts a new "
                    "shell: cd and variables do not persist between calls, and anything left running in the "
                    "background is stopped when the command ends. Slow commands are killed by a timeout.",
           command="the command line to run"),
]
PARAMETERS = {s["function"]["name"]: s["function"]["parameters"]["required"] for s in SCHEMAS}


def run_tool(workspace, name, arguments, shell_timeout=SHELL_TIMEOUT):
    """Run one call. Whatever goes wrong comes back as text that says what was wrong and what is valid;
    the loop never crashes here."""
    if name not in TOOLS:
        return f"ERROR: there is no tool named {name!r}. The tools are: {', '.join(TOOLS)}."
    arguments, problem = parse_arguments(arguments)
    problem = problem or check_arguments(name, arguments, PARAMETERS[name])
    if problem:
        return f"ERROR: {problem}. {name} takes {usage(PARAMETERS[name])}."
    try:
        if name == "shell":
            return shell(workspace, arguments["command"], timeout=shell_timeout)
        return TOOLS[name](workspace, **arguments)
    except OSError as e:
        if name not in VERBS:
            return f"ERROR: cannot run the command: {e}"
        return f"ERROR: cannot {VERBS[name]} {arguments['path']}: {explain(e, workspace, arguments['path'])}"
    except Exception as e:  # e.g. a NUL byte in a path: still words for the model, never a crash
        return f"ERROR: {name} failed: {type(e).__name__}: {e}"


# exercise(m2): Write explain: turn an OSError into words about this path (which folder is missing, which step is a file), followed by the system's own [Errno N] words.
def explain(error, workspace, path):
    """The OS error in words about this path, then the system's own words ([Errno 2] No such file...)."""
    words = f"[Errno {error.errno}] {error.strerror}" if error.errno else str(error)
    if isinstance(error, FileNotFoundError):
        missing = first_step(workspace, path, lambda p: not p.exists())
        whole = missing == Path(path).as_posix()
        return f"{path if whole else 'the folder ' + missing} does not exist {words}"
    if isinstance(error, NotADirectoryError):
        return f"{first_step(workspace, path, Path.is_file)} is a file, not a folder {words}"
    if isinstance(error, IsADirectoryError):
        return f"{path} is a folder, not a file {words}"
    return words


def first_step(workspace, path, test):
    """The first step from the workspace towards `path` that passes `test`: 'scratch' for 'scratch/a.txt'."""
    parts = Path(path).parts
    for i in range(1, len(parts) + 1):
        if test(Path(workspace, *parts[:i])):
            return Path(*parts[:i]).as_posix()
    return path
