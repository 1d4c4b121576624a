"""The workspace files a hooks file or an MCP server list names: what a yes to that list also
covers.

The problem. A workspace's `.mcp.json` says `python server.py`; the user reads it, trusts it, and
the harness remembers the list's SHA-256. The model then rewrites server.py - the list is unchanged,
so the next run starts the model's code with all the user's rights. The list is only as trustworthy
as the files it runs.

The mechanism. Every string in the list (commands, arguments, environment values) is split into
shell words, and each word is looked up in the workspace the way the program it names would find it:
the path itself (`server.py`, `./tools/`, `${workspaceFolder}/x`, `$CLAUDE_PROJECT_DIR/x`), a Python
module (`-m notes` finds `notes.py` or `notes/`; `-m a.b` finds `a/b.py`), a script without its
suffix (`notes` finds `notes.py`), and a package runner's local copy (`npx tool` finds
`node_modules/.bin/tool`). What exists is digested: a file's bytes (read through the file door: a
link leading out of the workspace is digested as its target's name, never followed), a folder's
files in name order. The trust store keeps one digest of the list and all of these.

The yes is checked again where it is used: before each start of an unconfined hook or of a
workspace MCP server, what that entry names is looked up again (`names_in`) and digested, and
compared with the digests taken when the user said yes (trust.Trusted): a file changed, or one
created since under a name the entry names, stops that start.

What it cannot do. It sees only what the list names. Code those files import from elsewhere in the
workspace (a planted `json.py` beside server.py, a changed `node_modules/some-dependency/`) is not
covered, nor a program that finds its files some other way. A folder is digested up to FOLDER_FILES
files and FILE_CAP bytes a file; past that the count and sizes stand in for the rest.
"""
import hashlib
import json
import os
import shlex
import stat

from . import filedoor

FOLDER_FILES = 2000  # files of a named folder that are read; the rest count by name and size
FILE_CAP = 16 << 20  # bytes of one named file that are read; past that its size stands in
# lists kept here name the folder above
SETTINGS_FOLDERS = (".vscode", ".tinyharness", ".claude", ".cursor")
WORKSPACE_VARIABLES = ("${workspaceFolder}", "${PWD}", "${CLAUDE_PROJECT_DIR}",
                       "$CLAUDE_PROJECT_DIR", "$PWD")


def workspace_of(path):
    """The workspace a list belongs to: its folder, or the one above a settings folder."""
    folder = os.path.dirname(os.path.abspath(path))
    return os.path.dirname(folder) if os.path.basename(folder) in SETTINGS_FOLDERS else folder


def named_files(path, data):
    """The workspace-relative names of the files and folders the list names, sorted ([] when
    none)."""
    try:
        values = list(strings_in(json.loads(data.decode("utf-8", errors="replace"))))
    # not JSON: the list's own digest changes with any edit, which is all there is
    except ValueError:
        return []
    return names_in(values, path)


def names_in(values, path):
    """The workspace files and folders these strings of the list at PATH name, looked up now, sorted
    (the list itself left out): a name that resolves to a file created since is among them."""
    workspace = workspace_of(path)
    found = set()
    for word in (w for value in values for w in words(value)):
        found.update(candidates(word, workspace))
    own = os.path.relpath(os.path.abspath(path), workspace)
    return sorted(name for name in found if name != own)


def strings_in(value):
    """Every string value of a JSON document, at any depth (keys are names, not commands)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def words(value):
    """Shell words of one string, with a `--flag=value`'s value, `-mmodule`'s module and a quoted
    command's words as words too."""
    try:
        split = shlex.split(value)
    except ValueError:  # an unbalanced quote: the words as spaces separate them
        split = value.split()
    for word in split:
        if len(word.split()) > 1:  # `sh -c './run --fast'`: the quoted command's own words
            yield from words(word)
            continue
        yield word
        if word.startswith("-") and "=" in word:
            yield word.split("=", 1)[1]
        elif word.startswith("-m") and len(word) > 2:
            yield word[2:]


def candidates(word, workspace):
    """The workspace-relative names that `word` may make a program run or read, of those that
    exist."""
    for variable in WORKSPACE_VARIABLES:
        if word.startswith(variable):
            word = "." + word[len(variable):]
    if not word or word.startswith("-") or "://" in word:
        return []
    names = [word, word + ".py"]
    if "/" not in word:
        names.append(f"node_modules/.bin/{word}")
        if "." in word.strip("."):  # a dotted module name: a.b
            module = word.replace(".", "/")
            names += [module + ".py", module]
    found = []
    for name in names:
        full = os.path.normpath(os.path.join(workspace, name))
        below = filedoor.inside(full, workspace)
        if below not in (None, ".") and not below.startswith(".git") and os.path.lexists(full):
            found.append(below)
    return found


def named_digest(names, workspace=None):
    """One SHA-256 over every named file's content (folders walked in name order)."""
    return combined(digests(names, workspace))


def digests(names, workspace):
    """{name: the digest of its content} (entry_digest), in the names' order."""
    return {name: entry_digest(name, workspace) for name in names}


def combined(found):
    """One SHA-256 over the digests of `digests`."""
    digest = hashlib.sha256()
    for name, one in found.items():
        digest.update(f"{name}\0".encode())
        digest.update(one)
    return digest.hexdigest()


def entry_digest(name, workspace):
    """A folder's files' digests, or a file's; a link is its target's name, never followed out."""
    full = os.path.join(workspace, name)
    try:
        info = os.lstat(full)
    except OSError:
        return b"gone"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return file_digest(name, workspace)
    digest, count = hashlib.sha256(), 0
    for top, folders, files in os.walk(full):  # os.walk follows no link to a folder
        folders.sort()
        for file in sorted(files):
            relative = os.path.relpath(os.path.join(top, file), workspace)
            count += 1
            digest.update(f"{relative}\0".encode())
            digest.update(file_digest(relative, workspace) if count <= FOLDER_FILES
                          else size_of(relative, workspace))
    return digest.digest()


def file_digest(name, workspace):
    try:
        data, size = filedoor.read_bytes(name, FILE_CAP, workspace)
    except OSError as e:  # a link leading out, a FIFO: what it is, not what is behind it
        target = (os.readlink(os.path.join(workspace, name))
                  if os.path.islink(os.path.join(workspace, name)) else "")
        return f"{type(e).__name__}:{target}".encode()
    return hashlib.sha256(data + f"\0{size}".encode()).digest()


def size_of(name, workspace):
    try:
        return str(os.lstat(os.path.join(workspace, name)).st_size).encode()
    except OSError:
        return b"gone"
