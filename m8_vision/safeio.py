"""Armour for the tools: input and output that survive an endless command and a hostile workspace.
Read it after the lesson (tools.py), when a real command or workspace surprises you.

- A command that prints forever (`yes`, a runaway loop): only the first and last KEEP_BYTES of its output
  are held while it runs (`Output`), so memory stays bounded and the head and tail still reach the model.
- Arguments as servers send them (`parse_arguments`): a JSON string, an object, or nothing at all.
- Output in an encoding that is not UTF-8 (`decode`): the locale's encoding next, then a replacement
  mark for each byte that fits neither; never a crash.
- Arguments the model gets wrong (`check_arguments`): missing, unexpected or not strings, said in words
  with how to call the tool (`usage`).
- A FIFO, socket or device where a file should be (`read_regular`): opening it to read would wait
  forever, so it is opened without blocking and refused.
- A write that dies halfway, or that would go through a hard link, FIFO or symlink planted at the name
  (`replace_file`): a new file is written beside the target and renamed over it.
- A link planted at the notes file's name (`append_note`): the note would be carried to a file elsewhere.
"""
import errno
import json
import locale
import os
import secrets
import stat


KEEP_BYTES = 100_000  # held from each end while a command runs, so one that prints forever cannot fill memory


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


def check_arguments(name, arguments, expected):
    """What is wrong with the arguments of a known tool (`expected`: its parameters), in words, or None."""
    problems = {"missing": [p for p in expected if p not in arguments],
                "not expected": [p for p in arguments if p not in expected],
                "not a string": [p for p in expected if p in arguments and not isinstance(arguments[p], str)]}
    found = [f"{what}: {', '.join(names)}" for what, names in problems.items() if names]
    return f"wrong arguments for {name} ({'; '.join(found)})" if found else None


def usage(expected):
    """How to call a tool with these parameters, as JSON: {"path": "<string>", "content": "<string>"}."""
    return json.dumps({p: "<string>" for p in expected})


def read_regular(path):
    """The bytes of a regular file, or None for a FIFO, socket or device. O_NONBLOCK: opening a FIFO that
    nobody writes to would otherwise wait forever. A folder raises IsADirectoryError, as reading one does."""
    with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
        kind = os.fstat(file.fileno()).st_mode
        if stat.S_ISDIR(kind):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        return file.read() if stat.S_ISREG(kind) else None


def replace_file(target, content):
    """Write a new file beside the target, then rename it over the target. A rename replaces what was
    there - a hard link to another file, a FIFO, a symlink - instead of writing through it, and a harness
    that dies halfway leaves the old file or the new one, never half of one."""
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


def append_note(path, text):
    """Append to the notes file; an ERROR result when it is a link or not a plain file of its own, else None.
    O_NOFOLLOW makes a symlink an error (ELOOP) instead of a way out; a hard link is refused by its count."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        with open(os.open(path, flags, 0o666), "a", encoding="utf-8") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                return (f"ERROR: cannot save the note: {path.name} is not a plain file of its own (a hard link or "
                        "a special file), and notes are never written through one. Tell the user about it.")
            file.write(text)
    except OSError as e:
        link = " (it is a symbolic link, and notes are never written through one)" if e.errno == errno.ELOOP else ""
        return f"ERROR: cannot save the note to {path.name}{link}: [Errno {e.errno}] {e.strerror}"
    return None
