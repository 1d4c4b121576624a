"""The model's hands, and what they report back.

A tool result is all the model knows about what happened, so every result is written for a colleague
who cannot see your screen: a failure says what went wrong, with the operating system's own words; a
success gives evidence (how many characters, how many entries).

Each tool is its function and its record (toolrecord.Tool, in BUILT_IN at the bottom): what the
model is offered, whether it only reads, which arguments are paths, whether it asks, its Claude
names. Every other module asks `record(name)`; none keeps a list of tool names of its own.
"""
import errno
import json
import locale
import os
import secrets
import stat
import subprocess
import threading
from pathlib import Path

from .imageload import ImageError, load_image
from .sandbox import hint_for
from .sandbox.beneath import BENEATH, open_beneath
from .sandbox.git import protected_path
from .sandbox.reaping import SignalsHeld
from .toolrecord import TASK, Tool, parse_arguments, schema
from .vision import image_part, view_image_result

SHELL_TIMEOUT = 60  # seconds; --shell-timeout changes it
# shown from each end of long output: about 6000 characters in all, for a small window
KEEP_CHARS = 2900
# held from each end while a command runs, so one that prints forever cannot fill memory
KEEP_BYTES = 100_000


def list_dir(workspace, path="."):
    if not BENEATH:  # Windows: no folder descriptors, the path as the hooks checked it
        names = (sorted(p.name
                        + ("/" if p.is_dir() else "") for p in (Path(workspace) / path).iterdir()))
    else:
        folder = open_beneath(workspace, path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(folder) as entries:
                names = sorted(e.name + ("/" if e.is_dir() else "") for e in entries)
        finally:
            os.close(folder)
    if not names:
        return f"OK: {path} is an empty folder"
    return (f"OK: {path} has {len(names)} entr{'y' if len(names) == 1 else 'ies'}:\n"
            + "\n".join(names))


READ_CAP = 256 * 1024  # bytes read_file reads at most: the first and the last half of it


def read_file(workspace, path):
    """The file's text, or for a file over READ_CAP its first and last READ_CAP/2 bytes with the
    size said: never the whole of a 1 GiB file in the harness's memory, the session or the
    context."""
    # O_NONBLOCK: opening a FIFO that nobody writes to would otherwise wait forever
    with open(open_beneath(workspace, path,
                           os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
        info = os.fstat(file.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(info.st_mode):
            return (f"ERROR: cannot read {path}: it is not a regular file (a named pipe, socket or "
                    "device could wait forever)")
        head = file.read(READ_CAP + 1)  # one byte more: a file that grew since fstat is still cut
        if len(head) <= READ_CAP:
            text = decode(head)
            return text or f"OK: {path} is empty (0 characters)"
        size = max(info.st_size, os.fstat(file.fileno()).st_size)
        half = READ_CAP // 2
        tail = os.pread(file.fileno(), half, max(half, size - half))
    return (f"[read_file: {path} is {size:,} bytes, more than the {READ_CAP // 1024} KiB it reads: "
            f"here are its first and last {half // 1024} KiB. For the rest, use shell: grep -n "
            f"WORD {path}, sed -n '100,200p' {path}]\n" +
            decode(utf8_whole(head[:half], at_end=True)) +
            f"\n[... {size - 2 * half:,} bytes in the middle not read ...]\n"
            + decode(utf8_whole(tail, at_end=False)))


def utf8_whole(data, at_end):
    """Drop the bytes of a UTF-8 character cut in two at the end (or start) of a piece of a file."""
    if at_end:
        for back in range(1, min(4, len(data)) + 1):
            byte = data[-back]
            if byte < 0x80:
                return data
            if byte >= 0xC0:  # a lead byte: whole if the character fits in the bytes after it
                need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                return data if back >= need else data[:-back]
        return data
    skip = 0
    while skip < min(3, len(data)) and 0x80 <= data[skip] < 0xC0:
        skip += 1
    return data[skip:]


def write_file(workspace, path, content):
    """Write a new file beside the target, then rename it over the target. A rename replaces what
    was there - a hard link to another file, a FIFO, a symlink - instead of writing through it, and
    a harness that dies halfway leaves the old file or the new one, never half of one. The folder is
    opened once, beneath the workspace, and both steps happen in it: a link swapped in meanwhile
    changes nothing."""
    protected = protected_path(path)
    if protected:
        raise PermissionError(errno.EACCES, f"{protected} is protected: what is written there runs "
                                            "later (git hooks, git's config) or configures the "
                                            "harness; only the user changes it")
    target = Path(path)
    if target.name in ("", ".", ".."):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not BENEATH:  # Windows: the path as the hooks checked it, without folder descriptors
        replace_in(None, str(Path(workspace, target.parent)), target.name, content)
        return f"OK: wrote {len(content)} characters to {path}"
    folder = (open_beneath(workspace, str(target.parent),
                           getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY))
    try:
        # a link to .git inside
        protected = protected_path(Path(where(folder, workspace), target.name))
        if protected:
            raise PermissionError(errno.EACCES, f"{path} leads into {protected}, which is "
                                                "protected: what is written there runs later (git "
                                                "hooks, git's config) or configures the harness")
        replace_in(folder, None, target.name, content)
    finally:
        os.close(folder)
    return f"OK: wrote {len(content)} characters to {path}"


def where(folder, workspace):
    """The folder a descriptor is open on, relative to the workspace, as the kernel resolved it: a
    symbolic link inside the workspace (`g -> .git`) cannot hide where a write lands."""
    try:
        real = os.readlink(f"/proc/self/fd/{folder}")
    except OSError:
        return "."  # no /proc: the path as given was checked
    return os.path.relpath(real, os.path.realpath(workspace))


def replace_in(folder, folder_path, name, content):
    """The write itself, in a folder given as a descriptor (every name relative to it) or as a
    path."""
    at = (lambda n: n) if folder is not None else (lambda n: os.path.join(folder_path, n))
    try:
        old = os.stat(at(name), dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    temp = at(f".write-{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(temp, flags, 0o666, dir_fd=folder)  # the umask applies, as to any new file
    try:
        with open(descriptor, "w", encoding="utf-8") as file:
            file.write(content)
        if old and stat.S_ISREG(old.st_mode):
            os.chmod(temp, stat.S_IMODE(old.st_mode), dir_fd=folder)  # a script stays executable
        os.replace(temp, at(name), src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise


NOTES_FILE = "agent_notes.md"


def save_note(workspace, text):
    """Append a note to agent_notes.md at the top of the workspace: memory that the scissors never
    cut. One fixed name, append only: no path to guard and nothing to overwrite, so it needs no
    permission. What it must refuse is a link planted at that name, which would carry the note to a
    file elsewhere."""
    if not text.strip():
        return "ERROR: the note is empty; write the facts you will need later"
    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_NONBLOCK", 0))
    try:
        with open(open_beneath(workspace, NOTES_FILE, flags, 0o666), "a", encoding="utf-8") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                return (f"ERROR: cannot save the note: {NOTES_FILE} is not a plain file of its own "
                        "(a hard link or a special file), and notes are never written through "
                        "one. Tell the user about it.")
            file.write(text.strip() + "\n\n")
    except OSError as e:  # O_NOFOLLOW makes a symlink an error (ELOOP) instead of a way out
        link = (" (it is a symbolic link, and notes are never written through one)"
                if e.errno == errno.ELOOP else "")
        return f"ERROR: cannot save the note to {NOTES_FILE}{link}: [Errno {e.errno}] {e.strerror}"
    return f"OK: saved a note of {len(text.strip())} characters to {NOTES_FILE}"


def shell(workspace, command, timeout=SHELL_TIMEOUT, sandbox=None):
    """Run one command in a new shell, confined by the sandbox (sandbox/__init__.py) unless it is
    switched off. The command gets its own process group (a new session), and the sandbox finds what
    left the group, so the timeout can kill everything it started, not just /bin/sh. `sandbox`: the
    run's (flags.sandbox_from_args); none given, nothing runs."""
    problem = (sandbox.problem() if sandbox is not None  # never a default: the run's is handed over
               else "the shell tool was given no sandbox to run commands in, so nothing ran")
    if problem:
        return f"ERROR: {problem}"
    held, process, finish = start_held(sandbox, workspace, command, timeout)
    output = Output()
    reader = threading.Thread(target=output.collect, args=(process.stdout,), daemon=True)
    try:  # a Ctrl-C or SIGTERM from the command's start on ends it: held until here
        held.release()
        reader.start()
        process.wait(timeout)  # the handle's: the end seen at once (sandbox/handle.py)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:  # Ctrl-C: the command's own session missed the terminal's signal
        process.interrupt()  # killed, and what it started; returns once they have ended
        finish(True, reap=False)  # and what left the group, the private TMPDIR, the protected paths
        # the shell itself is left for its sandbox to reap and count (stop_commands)
        raise
    process.kill()  # its group: also what it left in the background, which would hold the pipe
    notes = finish(timed_out)  # sandboxed: every process it left, the protected paths put back
    status = process.wait()
    # unsandboxed, a child that left the group (setsid) can keep the pipe open: stop reading
    reader.join(timeout=1)
    text = cut(decode(output.head + output.tail), output.dropped)
    if sandbox.enabled and hint_for(text):
        notes.append(hint_for(text))
    if notes:  # what the sandbox did after the command: on lines of their own, after its output
        text = "\n".join(([text.rstrip("\n")] if text else []) + notes)
    if timed_out:
        # the run's time left: 3.98206 -> 4
        shown = f"{round(timeout, 1):g}" if timeout >= 0.1 else f"{timeout:.2g}"
        return (f"ERROR: timed out after {shown} s; the command and everything it started were "
                f"killed (exit status {status}). Output until then:\n{text}")
    return f"exit status {status}" + (f"\n{text}" if text else " (no output)")


def start_held(sandbox, workspace, command, timeout):
    """(held signals, process, finish): the command started with Ctrl-C, SIGTERM and SIGHUP held
    (sandbox/reaping.py): raised inside Popen, after the fork and before it keeps the child's
    number, one would lose the command, which would run on after the run."""
    held = SignalsHeld()
    try:
        return (held, *sandbox.start(workspace, command, timeout, reuse=True,
                                     stdin=subprocess.DEVNULL,  # waiting for input: end-of-file
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    except BaseException:
        held.release()
        raise


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


def stop_commands(sandbox):
    """Ctrl-C in a chat: the shell tool's commands the interruption killed, reaped by the sandbox
    that started them (Sandbox.stop_all); how many. Nothing else is touched: the MCP servers serve
    the whole chat, and a process of the user's was never ours."""
    return sandbox.stop_all() if sandbox is not None else 0


def decode(data):
    """Bytes to text the model can read: UTF-8, else the locale's encoding (Big5 under a zh_TW.Big5
    locale), else UTF-8 with a replacement mark for each byte that fits neither. Never a crash.
    Nothing is guessed: on a UTF-8 system, output in a legacy encoding such as cp950 arrives as
    replacement marks and stray characters, which at least tell the model that the output was not
    UTF-8."""
    for encoding in ("utf-8", locale.getpreferredencoding(False)):
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            pass
    return data.decode("utf-8", errors="replace")


def cut(text, dropped=0, keep=KEEP_CHARS):
    """Keep the head and the tail of long output (errors and summaries come last) and say what is
    missing. `dropped` counts bytes never held in memory; they are counted as characters."""
    if len(text) <= 2 * keep:
        return text
    omitted = len(text) - 2 * keep + dropped
    return (f"{text[:keep]}\n[... {omitted} characters omitted. To see them, run the command again "
            f"with | head, | tail or | grep to pick the part you need ...]\n{text[-keep:]}")


def view_image(workspace, path, images):
    """Load an image (a workspace path or an http(s) URL) for the model to see. A tool message can
    only hold text, so the picture goes into `images`; the loop sends it after all of this turn's
    results."""
    mime, data = load_image(path, workspace)
    images.append((path, image_part(mime, data)))
    return view_image_result(path, mime, data)


# --- The records: one per tool (toolrecord.py). A new tool is its function above and its record
# here; every table the harness keeps about tools is read from these.
BUILT_IN = (
    Tool("list_dir", list_dir, schema(
        "list_dir", "List the files and folders in a folder of the workspace.",
        path="folder path relative to the workspace, '.' for the top"),
        reads_only=True, paths=("path",), rereadable=True, claude=("LS", "Glob"),
        claude_rules=("Read", "LS", "Glob"), verb="list"),
    Tool("read_file", read_file, schema(
        "read_file", "Read a text file of the workspace.",
        path="file path relative to the workspace"),
        reads_only=True, paths=("path",), rereadable=True, claude=("Read",), verb="read"),
    Tool("write_file", write_file, schema(
        "write_file", "Create or overwrite a text file in the workspace.",
        path="file path relative to the workspace", content="the full text to write"),
        paths=("path",), asks=True, claude=("Write", "Edit", "MultiEdit"),
        claude_rules=("Edit", "Write", "MultiEdit", "NotebookEdit"), verb="write"),
    Tool("shell", shell, schema(
        "shell", "Run a command with /bin/sh in the workspace; returns its exit status and "
                 "output (stdout and stderr together, long output cut in the middle). Each call "
                 "starts a new shell: cd and variables do not persist between calls, and "
                 "anything left running in the background is stopped when the command ends. "
                 "Slow commands are killed by a timeout.",
        command="the command line to run"),
        asks=True, claude=("Bash",), extras=("timeout", "sandbox")),
    # no path to guard and nothing to overwrite (save_note): it asks nobody
    Tool("save_note", save_note, schema(
        "save_note", f"Append a note to {NOTES_FILE} in the workspace. Old tool results get cut "
                     "from the conversation to save room; notes survive. Write down what you "
                     "will need later, specifically: facts with their file names, numbers, "
                     "decisions.",
        text="the note: specific facts, with where they came from"),
        claude=("Edit",), claude_rules=()),
    # Small models do what a description suggests: "use this for image tasks" sent one to look on
    # disk for a picture it was already looking at. So it says when NOT to call it, too.
    Tool("view_image", view_image, schema(
        "view_image", "Look at an image file of the workspace (PNG, JPEG or WebP) or an image "
                      "at an http(s) URL, when you need to see it. An image attached to the "
                      "user's message is already visible to you: do not call this for it.",
        path="image path relative to the workspace, or an http(s) URL"),
        reads_only=True, paths=("path",), urls=True, claude=("Read",), extras=("images",)),
)


def built_in(name):
    """The record of a tool offered in every request, or None."""
    return next((tool for tool in BUILT_IN if tool.name == name), None)


def record(name):
    """The record of any tool of the package (the task tool too), or None: an MCP tool, or none."""
    return TASK if name == TASK.name else built_in(name)


def names():
    return [tool.name for tool in BUILT_IN]


def schemas():
    """What every request offers the model (extensions.py adds MCP's and the task tool)."""
    return [tool.schema for tool in BUILT_IN]


def parameters(name):
    return built_in(name).schema["function"]["parameters"]["required"]


def known():
    """Every record of the package: the built-in tools and the task tool."""
    return (*BUILT_IN, TASK)


def run_tool(workspace, name, arguments, shell_timeout=SHELL_TIMEOUT, images=None, sandbox=None):
    """Run one call. Whatever goes wrong comes back as text that says what was wrong and what is
    valid; the loop never crashes here. `sandbox`: how shell commands run (the run's
    sandbox.Sandbox; None: shell runs nothing); `images`: where the loop collects this turn's
    pictures. A tool gets those of them its record's `extras` names."""
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
    tool = built_in(name)
    given = {"timeout": shell_timeout, "sandbox": sandbox, "images": images}
    try:
        return tool.function(workspace, **arguments, **{k: given[k] for k in tool.extras})
    except ImageError as e:  # the image loader's own words: what is wrong and what to do
        return f"ERROR: {e}"
    except OSError as e:
        if not tool.verb:
            return f"ERROR: cannot run the command: {e}"
        path = arguments[tool.paths[0]]
        return f"ERROR: cannot {tool.verb} {path}: {explain(e, workspace, path)}"
    except Exception as e:  # noqa: BLE001 - a NUL byte in a path...: words for the model
        return f"ERROR: {name} failed: {type(e).__name__}: {e}"


def check_call(name, arguments):
    """(the arguments as a dict, None) for a call that can run, or (None, an ERROR result saying
    what is wrong and what is valid). The hooks in loop.py only ever see calls that passed here."""
    if built_in(name) is None:
        return None, (f"ERROR: there is no tool named {name!r}. The tools are: "
                      f"{', '.join(names())}.")
    arguments, problem = parse_arguments(arguments)
    problem = problem or check_arguments(name, arguments)
    if problem:
        return None, f"ERROR: {problem}. {name} takes {usage(name)}."
    return arguments, None


def check_arguments(name, arguments):
    """What is wrong with the arguments of a known tool, in words, or None."""
    expected = parameters(name)
    problems = {"missing": [p for p in expected if p not in arguments],
                "not expected": [p for p in arguments if p not in expected],
                "not a string": [p for p in expected if p in arguments
                                 and not isinstance(arguments[p], str)]}
    found = [f"{what}: {', '.join(names)}" for what, names in problems.items() if names]
    return f"wrong arguments for {name} ({'; '.join(found)})" if found else None


def usage(name):
    """How to call a tool, as JSON: {"path": "<string>", "content": "<string>"}."""
    return json.dumps({p: "<string>" for p in parameters(name)})


def explain(error, workspace, path):
    """The OS error in words about this path, then the system's own words ([Errno 2] No such
    file...)."""
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
    """The first step from the workspace towards `path` that passes `test`: 'scratch' for
    'scratch/a.txt'."""
    parts = Path(path).parts
    for i in range(1, len(parts) + 1):
        if test(Path(workspace, *parts[:i])):
            return Path(*parts[:i]).as_posix()
    return path
