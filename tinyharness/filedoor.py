"""The harness's own files: one door for every file it reads or writes on a path in, or named from,
the workspace.

The problem. The sandbox confines the model's commands; the harness itself runs with all the user's
rights. The files it keeps (--transcript, chat's /save, view's page, eval's report) and the files it
reads into the prompt (INSTRUCTIONS.md, agent_notes.md, --image) lie in the workspace, where the
model writes what it likes. A plain `write_text` follows a link the model planted at the name, or at
a folder on the way (`logs -> ~/.bashrc`'s folder), and overwrites a file outside; a plain read of
`INSTRUCTIONS.md -> ~/.ssh/id_rsa` sends the key to the model server; a FIFO at the name blocks the
harness forever; a 64 MiB file becomes a 64 MiB request.

The mechanism. A path inside the workspace (as written, relative to it or absolute) is opened from
the workspace folder with openat2 (sandbox/beneath.py): a write's folder follows no symbolic link at
all (RESOLVE_NO_SYMLINKS), a read's path no link leading out (RESOLVE_BENEATH). A path outside the
workspace was named by the user: its folders are followed as the user wrote them, unless one of them
leads into the workspace (where the model could have swapped what comes next). The file itself is
never a link: a write lands in a new file in the same folder, created 0600 whatever the umask (every
file written here holds the conversation, and a second user of the machine must read none of it),
renamed over the name (a crash leaves the old file or the new one, never half; the mode a file had
before is not kept, so a name the model made 0666 opens nothing), and refuses a link, FIFO, socket
or device at the name; a name with a NUL byte is refused in one line (os calls raise ValueError for
it), and a name the harness makes may hold no control or bidi character and no byte that is not
UTF-8 (it would show as another name in a listing); a read opens with O_NOFOLLOW and O_NONBLOCK,
takes only a regular file, and reads at most the cap it is given, saying so. Every refusal is one
line (DoorError); the caller decides whether the run goes on.

What it cannot do. A path outside the workspace that the user reaches through a link of their own
into the workspace is refused, not followed. Files the harness keeps in its own stores (sessions,
trust) are the stores' business (sessions/writer.py); this module only says where its data folder
is (`data_dir`) and makes a folder of its own private (`private_folder`). A user who wants a
report shared chmods it after the run (a file rewritten each turn becomes 0600 again). On Windows
(no folder descriptors) the path is opened as it is, after the same checks of the name. It does
not look inside what it reads.
"""
import errno
import os
import re
import secrets
import stat
import sys
from pathlib import Path

from .sandbox.beneath import BENEATH, open_beneath

PRIVATE_FILE = 0o600  # every file written here holds the conversation
# what no name the harness makes may hold: C0 and C1 controls, DEL, the bidi controls (a name that
# reads backwards), lone surrogates (bytes that are not UTF-8)
ODD = {"a control character": "[\x00-\x1f\x7f-\x9f]",
       "a bidi control (it makes a name read backwards)":
           "[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]",
       "bytes that are not UTF-8": "[\ud800-\udfff]"}

# bytes of INSTRUCTIONS.md (and AGENTS.md, CLAUDE.md) that reach the prompt
CONFIG_CAP = 1024 * 1024  # bytes of a hooks file or server list: a page of JSON, never a megabyte
INSTRUCTIONS_CAP = 64 * 1024
KINDS = {stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
         stat.S_IFBLK: "a device", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symbolic link"}


class DoorError(OSError):
    """A file the harness will not open; str() is the one line to show."""

    def __str__(self):
        return self.strerror


def refuse(path, why):
    return DoorError(errno.EPERM, f"{os.fspath(path)} {why}".strip())


def kind(mode):
    return KINDS.get(stat.S_IFMT(mode), "not a regular file")


def check_name(path, writing=True):
    """Refuse (DoorError) a name with a NUL byte, which no file can have (os calls raise ValueError
    for it); for a name the harness makes, also one with a control or bidi character or bytes that
    are not UTF-8: it would show as something else in every listing."""
    text = os.fspath(path)
    text = text if isinstance(text, str) else os.fsdecode(text)
    if "\0" in text:  # ascii(): the name shown with its odd characters as escapes
        raise refuse(ascii(text), "holds a NUL byte, which no file name can hold")
    for what, pattern in ODD.items() if writing else ():
        if found := re.search(pattern, text):
            raise refuse(ascii(text), f"holds {what}, {found.group()!a}: the harness makes "
                                      "no file with such a name; choose a plain one")


def inside(path, workspace):
    """The part of the absolute path below the workspace ('.' for the workspace itself), or None."""
    for root in dict.fromkeys((os.path.abspath(workspace), os.path.realpath(workspace))):
        if path == root:
            return "."
        if path.startswith(root.rstrip(os.sep) + os.sep):
            return path[len(root.rstrip(os.sep)) + 1:]
    return None


def open_folder(path, workspace, shown):
    """(descriptor of the folder that holds path, the file's name), by the rules above."""
    full = os.path.abspath(os.path.join(workspace, path))
    folder, name = os.path.split(full)
    if name in ("", ".", "..") or os.path.basename(os.fspath(path)) in ("", ".", ".."):
        raise refuse(shown, "names a folder, not a file")
    flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
    below = inside(folder, workspace)
    if below is not None:
        try:
            return open_beneath(os.path.abspath(workspace), below, flags, no_links=True), name
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
                raise refuse(shown, "has a symbolic link (or a non-folder) among its folders "
                                    "inside the workspace, and the harness goes through "
                                    "none") from None
            raise
    real = os.path.realpath(workspace)
    steps = [folder]
    while os.path.dirname(steps[-1]) != steps[-1]:
        steps.append(os.path.dirname(steps[-1]))
    if any(inside(os.path.realpath(step), real) is not None for step in steps):
        raise refuse(shown, "leads into the workspace through a symbolic link; name it by its path "
                            "in the workspace")
    return os.open(folder, flags), name


def write_bytes(path, data, workspace=None):
    """Write data to path (relative to the workspace, by default the current folder) by a new file
    renamed over it, 0600; DoorError (or OSError) says why not."""
    check_name(path)
    workspace = workspace or os.getcwd()
    if not BENEATH:  # Windows: no descriptors; the name is still never written through
        return replace(None, os.path.join(workspace, path), data, path)
    folder, name = open_folder(path, workspace, path)
    try:
        replace(folder, name, data, path)
    finally:
        os.close(folder)


def write_text(path, text, workspace=None, errors="strict"):
    write_bytes(path, text.encode("utf-8", errors), workspace)


def regular_or_none(folder, name, shown):
    """What is at name now (never followed, never opened): a regular file's stat, or None."""
    try:
        old = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(old.st_mode):
        raise refuse(shown, f"is {kind(old.st_mode)}, not a regular file: the harness writes only "
                            "regular files")
    return old


def replace(folder, name, data, shown):
    regular_or_none(folder, name, shown)
    temp = os.path.join(os.path.dirname(name), f".{secrets.token_hex(6)}.tinyharness.tmp")
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    # 0600 from its first byte, whatever the umask (which can only take bits away) and whatever mode
    # the file it replaces had: the model may have made the name 0666 to have it shared
    fd = os.open(temp, flags, PRIVATE_FILE, dir_fd=folder)
    try:
        with open(fd, "wb") as file:
            file.write(data)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=folder)
        except OSError:
            pass
        raise


def check_writable(path, workspace=None):
    """Raise DoorError (or OSError) if write_bytes could not write in path's folder (a link on the
    way, no such folder, no permission); leaves nothing behind. What is at the name itself (a FIFO,
    a device) is refused by each write, so that a run goes on without the file, as when one is
    planted later."""
    check_name(path)
    workspace = workspace or os.getcwd()
    if not BENEATH:
        return
    folder = open_folder(path, workspace, path)[0]
    try:
        temp = f".{secrets.token_hex(6)}.tinyharness.tmp"
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                         dir_fd=folder))
        os.unlink(temp, dir_fd=folder)
    finally:
        os.close(folder)


def open_file(path, workspace=None):
    """The regular file at path open for reading (binary), by the rules above; a relative path is
    the workspace's. DoorError for a link leading out, a FIFO, a socket, a device or a folder."""
    check_name(path, writing=False)
    workspace = workspace or os.getcwd()
    full = os.path.abspath(os.path.join(workspace, path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    below = inside(full, workspace)
    if not BENEATH:
        fd = os.open(full, flags)
    elif below is not None:
        try:
            fd = open_beneath(os.path.abspath(workspace), below, flags)
        # EXDEV from openat2; ELOOP from the walk that follows no link (no openat2)
        except OSError as e:
            if e.errno in (errno.EXDEV, errno.ELOOP):
                raise refuse(path, "leads out of the workspace (a symbolic link), and the harness "
                                   "reads its files only inside") from None
            raise
    else:
        folder, name = open_folder(path, workspace, path)
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=folder)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise refuse(path, "is a symbolic link: name the file it points to") from None
            raise
        finally:
            os.close(folder)
    file = open(fd, "rb")  # noqa: SIM115 - handed to the caller, open
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        file.close()
        raise refuse(path, f"is {kind(mode)}, not a regular file: the harness reads only regular "
                           "files")
    return file


def read_bytes(path, cap, workspace=None, tail=False):
    """(at most cap bytes of the regular file at path, its whole size): the first cap bytes, or the
    last with tail=True. A relative path is the workspace's; DoorError as open_file says."""
    with open_file(path, workspace) as file:
        size = os.fstat(file.fileno()).st_size
        if tail and size > cap:
            return os.pread(file.fileno(), cap, size - cap), size
        # one byte more: a file that grew since fstat is still seen as cut
        data = file.read(cap + 1)
        return data[:cap], max(len(data), size)


def read_workspace_text(workspace, name, cap=INSTRUCTIONS_CAP, err=None):
    """The text of a file the workspace keeps for the harness (INSTRUCTIONS.md, AGENTS.md,
    CLAUDE.md), at most cap bytes of it with a last line that says it was cut; None when there is
    none, or when the door refuses it (a link leading out, a FIFO): then one line on stderr says
    why, and the run goes on."""
    try:
        data, size = read_bytes(name, cap, workspace)
    except FileNotFoundError:
        return None
    except OSError as e:
        print(f"warning: not read: {e}", file=err or sys.stderr, flush=True)
        return None
    text = data.decode("utf-8", errors="replace")
    if size > cap:
        text += f"\n[{name} is {size:,} bytes; only its first {cap // 1024} KiB were read]"
    return text


def read_config(path, own, workspace=None):
    """(at most CONFIG_CAP bytes, the whole size) of a hooks file or server list: the user's own
    where its links lead (a dotfiles manager links it), a workspace's with no link leading out and
    no FIFO, like every other read here."""
    if own:
        real = os.path.realpath(path)
        return read_bytes(os.path.basename(real), CONFIG_CAP, os.path.dirname(real))
    return read_bytes(os.path.abspath(path), CONFIG_CAP, workspace)


# --- The harness's own data folder -------------------------------------------------------------

def data_dir():
    """The harness's data folder: $XDG_DATA_HOME/tinyharness, or ~/.local/share/tinyharness (its
    sessions, chat history, MCP logs)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    # the XDG rule: a relative path is invalid (it would land in the workspace)
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "tinyharness"


def private_folder(path):
    """Make the folder (and each missing one above it) 0700, whatever the umask, as the XDG base
    directory rule asks of the data folder; a folder of the harness's own (its sessions, its logs)
    that an earlier version left open to others is closed. Returns the path."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        parent = os.path.dirname(os.path.abspath(path))
        if parent != os.path.abspath(path) and not os.path.isdir(parent):
            private_folder(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    info = os.stat(path)
    if info.st_mode & 0o077 and info.st_uid == getattr(os, "geteuid", lambda: info.st_uid)():
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077)
    return path
