"""The model's hands, and what they report back.

A tool result is all the model knows about what happened, so every result is written for a colleague
who cannot see your screen: a failure says what went wrong, with the operating system's own words; a
success gives evidence (how many characters, how many entries).
"""
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

from .imageload import ImageError, load_image
from .safeio import Output, append_note, check_arguments, decode, parse_arguments, read_regular, replace_file, usage
from .vision import image_part, view_image_result

SHELL_TIMEOUT = 60  # seconds; --shell-timeout changes it
KEEP_CHARS = 2900  # shown from each end of long output: about 6000 characters in all, for a small window


def list_dir(workspace, path="."):
    folder = Path(workspace) / path
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    if not names:
        return f"OK: {path} is an empty folder"
    return f"OK: {path} has {len(names)} entr{'y' if len(names) == 1 else 'ies'}:\n" + "\n".join(names)


def read_file(workspace, path):
    data = read_regular(Path(workspace) / path)  # None: a named pipe or a device, which could wait forever
    if data is None:
        return f"ERROR: cannot read {path}: it is not a regular file (a named pipe, socket or device could wait forever)"
    text = decode(data)
    return text or f"OK: {path} is empty (0 characters)"


def write_file(workspace, path, content):
    replace_file(Path(workspace) / path, content)  # a new file renamed over the old: never written through a link
    return f"OK: wrote {len(content)} characters to {path}"


NOTES_FILE = "agent_notes.md"


def save_note(workspace, text):
    """Append a note to agent_notes.md at the top of the workspace: memory that the scissors never cut.
    One fixed name, append only: no path to guard and nothing to overwrite, so it needs no permission.
    What it must refuse is a link planted at that name, which would carry the note to a file elsewhere."""
    if not text.strip():
        return "ERROR: the note is empty; write the facts you will need later"
    refused = append_note(Path(workspace) / NOTES_FILE, text.strip() + "\n\n")
    return refused or f"OK: saved a note of {len(text.strip())} characters to {NOTES_FILE}"


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


def view_image(workspace, path, images):
    """Load an image (a workspace path or an http(s) URL) for the model to see. A tool message can
    only hold text, so the picture goes into `images`; the loop sends it after all of this turn's results."""
    mime, data = load_image(path, workspace)
    images.append((path, image_part(mime, data)))
    return view_image_result(path, mime, data)


TOOLS = {"list_dir": list_dir, "read_file": read_file, "write_file": write_file, "shell": shell, "save_note": save_note,
         "view_image": view_image}
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
    schema("save_note", f"Append a note to {NOTES_FILE} in the workspace. Old tool results get cut from the "
                        "conversation to save room; notes survive. Write down what you will need later, "
                        "specifically: facts with their file names, numbers, decisions.",
           text="the note: specific facts, with where they came from"),
    # Small models do what a description suggests: "use this for image tasks" sent one to look on disk
    # for a picture it was already looking at. So it says when NOT to call it, too.
    schema("view_image", "Look at an image file of the workspace (PNG, JPEG or WebP) or an image at an "
                         "http(s) URL, when you need to see it. An image attached to the user's message is "
                         "already visible to you: do not call this for it.",
           path="image path relative to the workspace, or an http(s) URL"),
]
PARAMETERS = {s["function"]["name"]: s["function"]["parameters"]["required"] for s in SCHEMAS}


def run_tool(workspace, name, arguments, shell_timeout=SHELL_TIMEOUT, images=None):
    """Run one call. Whatever goes wrong comes back as text that says what was wrong and what is valid;
    the loop never crashes here."""
    arguments, problem = check_call(name, arguments)
    if problem:
        return problem
    try:
        if name == "shell":
            return shell(workspace, arguments["command"], timeout=shell_timeout)
        if name == "view_image":  # images: where the loop collects this turn's pictures
            return view_image(workspace, arguments["path"], images)
        return TOOLS[name](workspace, **arguments)
    except ImageError as e:  # the image loader's own words: what is wrong and what to do
        return f"ERROR: {e}"
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
    problem = problem or check_arguments(name, arguments, PARAMETERS[name])
    if problem:
        return None, f"ERROR: {problem}. {name} takes {usage(PARAMETERS[name])}."
    return arguments, None



def canonical(arguments):
    """One spelling for the same arguments: what the [tool] line shows and what the history keeps."""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


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
