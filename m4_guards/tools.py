"""The model's hands, and what they report back.

A tool result is all the model knows about what happened, so every result is written for a colleague
who cannot see your screen: a failure says what went wrong, with the operating system's own words; a
success gives evidence (how many characters, how many entries).
"""
import errno
import json
import locale
import os
import secrets
import signal
import stat
import subprocess
import threading
from pathlib import Path

SHELL_TIMEOUT = 60  # seconds; --shell-timeout changes it
KEEP_CHARS = 2900  # shown from each end of long output: about 6000 characters in all, for a small window
KEEP_BYTES = 100_000  # held from each end while a command runs, so one that prints forever cannot fill memory


def list_dir(workspace, path="."):
    folder = Path(workspace) / path
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    if not names:
        return f"OK: {path} is an empty folder"
    return f"OK: {path} has {len(names)} entr{'y' if len(names) == 1 else 'ies'}:\n" + "\n".join(names)


def read_file(workspace, path):
    # O_NONBLOCK: opening a FIFO that nobody writes to would otherwise wait forever
    with open(os.open(Path(workspace) / path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
        kind = os.fstat(file.fileno()).st_mode
        if stat.S_ISDIR(kind):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(kind):
            return f"ERROR: cannot read {path}: it is not a regular file (a named pipe, socket or device could wait forever)"
        text = decode(file.read())
    return text or f"OK: {path} is empty (0 characters)"


def write_file(workspace, path, content):
    """Write a new file beside the target, then rename it over the target. A rename replaces what was
    there - a hard link to another file, a FIFO, a symlink - instead of writing through it, and a harness
    that dies halfway leaves the old file or the new one, never half of one."""
    target = Path(workspace) / path
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    temp = target.parent / f".write-{secrets.token_hex(4)}.tmp"
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to any new file
    try:
        with open(descriptor, "w", encoding="utf-8") as file:
            file.write(content)
        if target.is_file():
            os.chmod(temp, stat.S_IMODE(target.stat().st_mode))  # a script stays executable
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
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


class Output:
    """A command's output as it arrives, keeping only its first and last KEEP_BYTES."""

    def __init__(self):
        self.head, self.tail, self.dropped = b"", b"", 0

    def collect(self, pipe):
        for chunk in iter(lambda: pipe.read1(65536), b""):
            room = max(0, KEEP_BYTES - len(self.head))
            self.head, self.tail = self.head + chunk[:room], self.tail + chunk[room:]
            if len(self.tail) > KEEP_BYTES:
                self.dropped += len(self.tail) - KEEP_BYTES
                self.tail = self.tail[-KEEP_BYTES:]
        pipe.close()


# exercise(m2): Write kill_group: kill the command's whole process group (not only /bin/sh), and treat a group that has already ended as done.
def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group had already ended


def decode(data):
    """Bytes to text the model can read: UTF-8, else the locale's encoding (Big5 under a zh_TW.Big5
    locale), else UTF-8 with a replacement mark for each byte that fits neither. Never a crash. Nothing is
    guessed: on a UTF-8 system, output in a legacy encoding such as cp950 arrives as replacement marks
    and stray characters, which at least tell the model that the output was not UTF-8."""
    for encoding in ("utf-8", locale.getpreferredencoding(False)):
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            pass
    return data.decode("utf-8", errors="replace")


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
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
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


def check_call(name, arguments):
    """(the arguments as a dict, None) for a call that can run, or (None, an ERROR result saying what is
    wrong and what is valid). The hooks in loop.py only ever see calls that passed here."""
    if name not in TOOLS:
        return None, f"ERROR: there is no tool named {name!r}. The tools are: {', '.join(TOOLS)}."
    arguments, problem = parse_arguments(arguments)
    problem = problem or check_arguments(name, arguments)
    if problem:
        return None, f"ERROR: {problem}. {name} takes {usage(name)}."
    return arguments, None


def parse_arguments(arguments):
    """(the arguments as a dict, what was wrong with them or None). Servers in the OpenAI style send a
    JSON string; some send an object, which is just as good."""
    if isinstance(arguments, dict):
        return arguments, None
    if arguments in (None, ""):
        return {}, None
    try:
        value = json.loads(arguments)
    except (ValueError, TypeError) as e:
        return {}, f"the arguments are not valid JSON ({e}): {str(arguments)[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {str(arguments)[:200]!r}"
    return value, None


def canonical(arguments):
    """One spelling for the same arguments: what the [tool] line shows and what the history keeps."""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def check_arguments(name, arguments):
    """What is wrong with the arguments of a known tool, in words, or None."""
    expected = PARAMETERS[name]
    problems = {"missing": [p for p in expected if p not in arguments],
                "not expected": [p for p in arguments if p not in expected],
                "not a string": [p for p in expected if p in arguments and not isinstance(arguments[p], str)]}
    found = [f"{what}: {', '.join(names)}" for what, names in problems.items() if names]
    return f"wrong arguments for {name} ({'; '.join(found)})" if found else None


def usage(name):
    """How to call a tool, as JSON: {"path": "<string>", "content": "<string>"}."""
    return json.dumps({p: "<string>" for p in PARAMETERS[name]})


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
