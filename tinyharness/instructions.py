"""Instruction files: what the user and the project tell every run, found where Claude Code and
Codex find theirs.

The problem. People arrive with instruction files written for the tools they use: Codex reads
`~/.codex/AGENTS.md` and every `AGENTS.md` (or `AGENTS.override.md`) from the project's git root
down to the folder it starts in; Claude Code reads `~/.claude/CLAUDE.md`, `CLAUDE.md`,
`CLAUDE.local.md` in the folders above, and follows `@path` imports in them. A harness that reads
only the start folder's AGENTS.md misses the rules of a monorepo's root, sends `@docs/style.md` to
the model as the literal text, and drops CLAUDE.md without a word when both files are there.

The mechanism. `gather` reads, in this order (general first, nearer later - a later file refines an
earlier one, as Codex says of its chain):
  1. INSTRUCTIONS.md of the workspace (this harness's own file);
  2. the user's own: `$CODEX_HOME/AGENTS.override.md`, else `$CODEX_HOME/AGENTS.md` (CODEX_HOME is
     `~/.codex` when unset; the first that is not empty), then `~/.claude/CLAUDE.md`;
  3. for each folder from the project root (the nearest folder at or above the workspace that
     holds `.git`; the workspace itself when none does) down to the workspace: `AGENTS.override.md`
     in place of `AGENTS.md` where it exists, then `CLAUDE.md` (else `.claude/CLAUDE.md`), then
     `CLAUDE.local.md`.
Each CLAUDE-family file (and each file it imports) has its `@path` imports read after it, in the
order they appear: relative to the importing file's folder, `~/` for the home folder, at most 5
imports deep, none inside a code span or a fenced code block. A file already read (a CLAUDE.md that
is a link to AGENTS.md, an `@AGENTS.md` import) or one with the same text is not read twice; an
empty file is skipped.

Every file goes through the harness's one door (filedoor.py: no FIFO, a regular file only, capped):
a workspace file with no link leading out of the workspace, a file above the workspace with none
leading out of the project root, the user's own files where their links lead. A project file's
import must stay inside the project (the model writes the workspace's files: an `@~/.ssh/id_rsa` it
planted must not send the key); the user's own files may import from anywhere but the private places
of the home folder (private_places.py). Each file, as written and where its links lead, is judged by
the run's Read deny rules (`Rules.read_refusal`) before and after the read. The whole is capped at
64 KiB (INSTRUCTIONS_CAP): a file is cut where the cap ends (the cut said in the prompt), the files
after it are skipped. One `[instructions]` line on stderr names what was read, what was skipped and
why, and the bytes used against the cap; a refused file also gets its own warning line.

What it cannot do. It reads the files once, when the prompt is built: Claude's lazily loaded
CLAUDE.md of a subfolder the model reads later, Codex's `project_doc_fallback_filenames` and
`project_root_markers`, and Claude's managed (enterprise) file are not read. It does not judge what
the files say: an instruction file is text the model follows, whoever wrote it.
"""
import os
import re

from .filedoor import INSTRUCTIONS_CAP, read_bytes
from .private_places import private

MAX_DEPTH = 5  # imports of imports, as Claude Code allows
HARNESS = ("INSTRUCTIONS.md", "Instructions from the workspace")
CLAUDE_FAMILY = ("CLAUDE.md", "CLAUDE.local.md")
# an @path that starts a word; what ends it: white space, a backtick
IMPORT = re.compile(r"(?:^|(?<=\s))@((?:~/|\.{1,2}/|/)?[^\s`@][^\s`]*)")
FENCE = re.compile(r"^ {0,3}(```|~~~).*?(?:^ {0,3}\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"(`+).+?\1", re.DOTALL)


def project_root(workspace):
    """The nearest folder at or above the workspace that holds `.git` (a folder or a worktree's
    file); the workspace itself when none does."""
    folder = os.path.abspath(workspace)
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.abspath(workspace)
        folder = parent


def chain(workspace):
    """The folders from the project root down to the workspace, the root first."""
    root, folder = project_root(workspace), os.path.abspath(workspace)
    folders = [folder]
    while folder != root:
        folder = os.path.dirname(folder)
        folders.append(folder)
    return root, folders[::-1]


def codex_home():
    value = os.environ.get("CODEX_HOME", "")
    return value if os.path.isabs(value) else os.path.join(os.path.expanduser("~"), ".codex")


def imports_in(text):
    """The @path imports of a Markdown text, in order, outside code spans and fenced blocks."""
    text = SPAN.sub(" ", FENCE.sub(" ", text))
    return [path.rstrip(".,;:!?)]}'\"") for path in IMPORT.findall(text)]


class Gathering:
    """One reading of the instruction files: the prompt's sections, what was read and skipped, the
    bytes left under the cap."""

    def __init__(self, workspace, rules=None, say=print):
        self.workspace = os.path.abspath(workspace)
        self.root, self.folders = chain(workspace)
        self.rules, self.say = rules, say
        self.home = os.path.expanduser("~")
        self.left, self.sections, self.read, self.skipped = INSTRUCTIONS_CAP, [], [], []
        self.seen, self.texts = {}, {}  # real path -> shown; text -> shown

    def all(self):
        """Read every file in the order of the docstring; return the prompt's added text."""
        self.add(os.path.join(self.workspace, HARNESS[0]), HARNESS[1], "workspace")
        codex = codex_home()
        for name in ("AGENTS.override.md", "AGENTS.md"):
            if self.add(os.path.join(codex, name), "Your own instructions", "own"):
                break
        self.add(os.path.join(self.home, ".claude", "CLAUDE.md"), "Your own instructions", "own")
        for folder in self.folders:
            self.folder(folder)
        return "".join(self.sections)

    def folder(self, folder):
        override = os.path.join(folder, "AGENTS.override.md")
        agents = override if os.path.lexists(override) else os.path.join(folder, "AGENTS.md")
        kind = "workspace" if self.inside(folder, self.workspace) else "project"
        self.add(agents, "Project instructions", kind)
        claude = os.path.join(folder, "CLAUDE.md")
        if not os.path.lexists(claude):
            claude = os.path.join(folder, ".claude", "CLAUDE.md")
        self.add(claude, "Project instructions", kind)
        self.add(os.path.join(folder, "CLAUDE.local.md"), "Project instructions", kind)

    @staticmethod
    def inside(path, folder):
        return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

    def shown(self, path):
        """How a file is named to the user and the model: from the workspace when it is in the
        project, `~/...` in the home folder, else as it is."""
        if self.inside(path, self.root):
            return os.path.relpath(path, self.workspace)
        if self.inside(path, self.home):
            return "~/" + os.path.relpath(path, self.home)
        return path

    def add(self, path, heading, kind, depth=0, importer=None, written=None):
        """Read one file into the prompt, then its imports; True when it was read. An import is
        named in the skipped list as written in its file (`@docs/x.md in CLAUDE.md`)."""
        shown = self.shown(path)
        label = f"@{written} in {importer}" if importer else shown
        text = self.load(path, shown, kind, label, importer)
        if text is None:
            return False
        self.read.append(shown + (f" (imported by {importer})" if importer else ""))
        self.sections.append(f"\n\n{heading} ({shown}):\n{text}")
        if os.path.basename(path) in CLAUDE_FAMILY or importer:
            self.imports(path, shown, kind, text, depth)
        return True

    def skip(self, label, why):
        self.skipped.append(f"{label} ({why})")

    def load(self, path, shown, kind, label, importer=None):
        """The file's text (cut at what is left of the cap, the cut said), or None: missing,
        refused, empty, already read, or no room left."""
        if not os.path.lexists(path):
            return self.skip(label, "not found") if importer else None
        if self.left <= 0:
            return self.skip(label, f"the {INSTRUCTIONS_CAP // 1024} KiB cap is spent")
        refusal = self.refusal(path)
        if refusal:
            self.say(f"warning: not read into the prompt: {shown} {refusal}")
            return self.skip(label, "a Read deny rule")
        try:
            data, size = self.open(path, kind)
        except FileNotFoundError:  # a link to nothing
            return self.skip(label, "not found") if importer else None
        except OSError as e:  # the door's refusal, said in one line; the run goes on
            self.say(f"warning: not read: {e}")
            return self.skip(label, "refused by the file door")
        if (refusal := self.refusal(path)):  # a link changed while it was read
            self.say(f"warning: not read into the prompt: {shown} {refusal}")
            return self.skip(label, "a Read deny rule")
        return self.accepted(path, shown, data, size, label)

    def accepted(self, path, shown, data, size, label):
        """The text of a file read, or None when it adds nothing (empty, read before)."""
        text = data.decode("utf-8", errors="replace")
        real = os.path.realpath(path)
        if not text.strip():
            return self.skip(label, "empty")
        first = self.seen.get(real) or self.texts.get(text.strip())
        if first:
            return self.skip(label, f"the same as {first}")
        self.seen[real] = self.texts[text.strip()] = shown
        self.left -= len(data)
        if size > len(data):
            cap = (f"{len(data) // 1024} KiB" if len(data) % 1024 == 0
                   else f"{len(data):,} bytes")
            text += f"\n[{shown} is {size:,} bytes; only its first {cap} were read]"
        return text

    def refusal(self, path):
        """The Read deny rule that covers the file, as written or where its links lead."""
        if not self.rules:
            return None
        inside = self.inside(path, self.workspace)
        return self.rules.read_refusal(os.path.relpath(path, self.workspace) if inside else path)

    def open(self, path, kind):
        """(data, size) through the door: beneath the workspace, beneath the project root, or (the
        user's own) where the links lead."""
        if kind == "own":
            real = os.path.realpath(path)
            return read_bytes(os.path.basename(real), self.left, os.path.dirname(real))
        base = self.workspace if kind == "workspace" else self.root
        return read_bytes(os.path.relpath(path, base), self.left, base)

    def imports(self, path, shown, kind, text, depth):
        """Read the @path imports of a CLAUDE-family file, each where the importing file allows."""
        for written in imports_in(text):
            target = self.target(path, written)
            label, where = f"@{written} in {shown}", self.import_kind(target, kind)
            if depth >= MAX_DEPTH:
                self.skip(label, f"deeper than {MAX_DEPTH} imports")
            elif where is None:
                self.skip(label, "outside the project: only your own files (~/.claude/CLAUDE.md, "
                                 "~/.codex/AGENTS.md) may import from outside it")
            elif private(target, os.path.realpath(self.home)):
                self.skip(label, "a private place of the home folder")
            else:
                self.add(target, f"Imported by {shown}", where, depth + 1, shown, written)

    def target(self, path, written):
        if written.startswith("~/"):
            return os.path.normpath(os.path.join(self.home, written[2:]))
        return os.path.normpath(os.path.join(os.path.dirname(path), written))

    def import_kind(self, target, kind):
        """How an import is read: as a workspace or project file when it lies there, as the user's
        own when a file of the user's imports it, else None (not read)."""
        if self.inside(target, self.workspace):
            return "workspace"
        if self.inside(target, self.root):
            return "project"
        return "own" if kind == "own" else None

    def summary(self):
        """The one line on stderr, or None when there were no instruction files at all."""
        if not self.read and not self.skipped:
            return None
        used = INSTRUCTIONS_CAP - max(self.left, 0)
        line = (f"[instructions] read {', '.join(self.read) or 'nothing'}: {used:,} of "
                f"{INSTRUCTIONS_CAP:,} bytes")
        return line + (f"; skipped {', '.join(self.skipped)}" if self.skipped else "")


def gather(workspace, rules=None, say=print, summary=True):
    """The text the system prompt adds for the instruction files (see the module's docstring);
    `say` gets the warnings and, with `summary`, the one `[instructions]` line."""
    gathering = Gathering(workspace, rules, say)
    text = gathering.all()
    line = gathering.summary() if summary else None
    if line:
        say(line)
    return text
