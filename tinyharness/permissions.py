"""Permission rules: what may run without asking and what never runs, in Claude Code's spelling.

The problem. A user arrives with rules written for Claude Code - `"permissions": {"allow":
["Bash(npm test:*)"], "deny": ["Read(./.env)", "Bash(git push:*)"]}` in `.claude/settings.json` -
and expects them to hold here: a deny rule dropped silently is a secret read or a push made. And a
script that runs the harness without a terminal needs to say "these commands may run" without
`--yes` for all.

The mechanism. A rule is `Tool` or `Tool(specifier)`, from `--allow`/`--deny` (repeatable) or a
settings file's `permissions.allow`/`permissions.deny`. Claude's tool names map to ours: Bash ->
shell, Read -> read_file, list_dir, view_image (LS and Glob -> list_dir), Edit/Write/MultiEdit ->
write_file; our own names and `mcp__server__tool` work as they are. A Bash specifier is the command
exactly (`Bash(git status)`), a prefix (`Bash(npm test:*)`: `npm test` and `npm test --watch`), or a
pattern with `*`. A file specifier is a path pattern in the workspace (gitignore-like: `./.env` or
`/x` is at the top, `.env` in any folder, `src/**` everything under src, a folder stands for what is
in it; `//abs/path` and `~/path` are absolute); it is checked against the path as written and as
resolved, so a link to `.env` is `.env`. Deny is asked first and wins over every allow rule and over
`--yes`; the result the model reads names the rule and where it came from. An allowed call runs
without the prompt.

What it cannot do. A rule reads the command's text, as the regex policy does (hooks.py): a deny rule
for `rm` does not see `x=rm; $x -rf`. Deny rules are split at `;`, `&&`, `|`, `$(`... and match any
part; an allow rule never approves a command with such operators (`npm test && curl ... | sh`), so a
chain still asks. The kernel sandbox, not a rule, is the wall. Rules other tools have and we do not
(WebFetch, WebSearch, `ask` lists) are ignored with a note.
"""
import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

CLAUDE_TOOLS = {"Bash": ("shell",), "Read": ("read_file", "list_dir", "view_image"),
                "LS": ("list_dir",),
                "Glob": ("list_dir",), "Edit": ("write_file",), "Write": ("write_file",),
                "MultiEdit": ("write_file",), "NotebookEdit": ("write_file",)}
OUR_TOOLS = ("shell", "read_file", "list_dir", "write_file", "view_image", "save_note", "task")
PATH_TOOLS = ("read_file", "list_dir", "write_file", "view_image")
RULE = re.compile(r"\s*([A-Za-z_][\w-]*)\s*(?:\((.*)\))?\s*", re.S)
CHAIN = re.compile(r"&&|\|\||[;&|\n`<>]|\$\(")  # what makes one command line several commands


@dataclass(frozen=True)
class Rule:
    kind: str      # "allow" or "deny"
    text: str      # as the user wrote it
    source: str    # --allow, --deny, or the settings file
    tools: tuple   # our tool names it covers
    spec: str      # the specifier ("" for the whole tool)

    def covers(self, tool, arguments, workspace):
        if tool not in self.tools:
            return False
        if self.spec in ("", "*"):
            return True
        if tool == "shell":
            return command_matches(self.spec, str(arguments.get("command", "")), self.kind)
        if tool in PATH_TOOLS and isinstance(arguments.get("path"), str):
            return path_matches(self.spec, arguments["path"], workspace)
        return False


def parse_rule(text, kind, source, notes):
    """The Rule TEXT spells, or None (with a note) for a tool tinyharness does not have. Raises
    ValueError for text that is not `Tool` or `Tool(specifier)`."""
    match = RULE.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{source}: {str(text)[:80]!r} is not a rule; write Tool or "
                         "Tool(specifier), e.g. Bash(npm test:*) or Read(./.env)")
    name, spec = match.group(1), (match.group(2) or "").strip()
    tools = (CLAUDE_TOOLS.get(name)
             or ((name,) if name in OUR_TOOLS or name.startswith("mcp__") else None))
    if tools is None:
        notes.append(f"[permissions] {source}: {kind} rule {text!r} names a tool tinyharness does "
                     "not have; it is ignored")
        return None
    return Rule(kind, text.strip(), source, tools, spec)


def command_matches(spec, command, kind):
    """Does the Bash specifier SPEC cover COMMAND? A deny rule matches any part of a chain; an allow
    rule only a command that is one simple command."""
    if kind == "allow" and CHAIN.search(command):
        return False
    parts = ([" ".join(part.split()) for part in (CHAIN.split(command) if kind == "deny"
                                                  else [command])])
    if spec.endswith(":*"):
        prefix = " ".join(spec[:-2].split())
        return (any(part == prefix
                    or part.startswith(prefix + ("" if kind == "deny" else " ")) for part in parts))
    wanted = " ".join(spec.split())
    return any(fnmatchcase(part, wanted) if "*" in wanted else part == wanted for part in parts)


def path_matches(spec, path, workspace):
    """Does the file specifier SPEC cover PATH (as written in the workspace, or resolved)?"""
    absolute = spec.startswith(("//", "~/"))
    pattern = os.path.expanduser(spec[1:] if spec.startswith("//") else spec) if absolute else spec
    anchored = absolute or pattern.startswith(("./", "/")) or "/" in pattern.strip("/")
    pattern = pattern if absolute else pattern.removeprefix("./").lstrip("/")
    pattern = glob_regex(pattern.rstrip("/"))
    lexical = os.path.normpath(os.path.join(workspace, os.path.expanduser(path)))
    for target, base in ((lexical, os.path.normpath(workspace)),
                         (os.path.realpath(lexical), os.path.realpath(workspace))):
        name = target if absolute else os.path.relpath(target, base)
        if not absolute and (name == ".." or name.startswith("../")):
            continue
        parts = name.split("/")
        # the path and each folder above it
        candidates = ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]
        if anchored and any(pattern.fullmatch(c) for c in candidates if c):
            return True
        if not anchored and any(pattern.fullmatch(part) for part in parts):
            return True
    return False


def glob_regex(pattern):
    """A compiled regex for a gitignore-like glob: ** crosses folders, * and ? do not."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out, i = out + {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i])), i + 1
    return re.compile(out)


class Rules:
    """Every rule of a run; `decide` answers for one call: the deny rule that covers it, else the
    allow rule, else None (the permission prompt decides, as without rules)."""

    def __init__(self, workspace, rules=()):
        self.workspace, self.rules = str(workspace), list(rules)

    def add(self, texts, kind, source, notes):
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{source}: permissions.{kind} must be a list of rules (strings)")
        self.rules += [rule for text in texts if (rule := parse_rule(text, kind, source, notes))]

    def allows_any(self):
        return any(rule.kind == "allow" for rule in self.rules)

    def decide(self, tool, arguments):
        for kind in ("deny", "allow"):
            for rule in self.rules:
                if rule.kind == kind and rule.covers(tool, arguments or {}, self.workspace):
                    return rule
        return None


def from_settings(data, source, rules, notes):
    """Add the `permissions` of a settings file's DATA to RULES: (has allow rules, has deny
    rules)."""
    permissions = data.get("permissions") if isinstance(data, dict) else None
    if permissions is None:
        return False, False
    if not isinstance(permissions, dict):
        raise ValueError(f"{source}: \"permissions\" must be an object with \"allow\" and \"deny\" "
                         "lists")
    for kind in ("allow", "deny"):
        rules.add(permissions.get(kind, []), kind, source, notes)
    if permissions.get("ask"):
        notes.append(f"[permissions] {source}: \"ask\" rules are not supported here; each write "
                     "and command asks anyway unless an allow rule or --yes lets it run")
    return bool(permissions.get("allow")), bool(permissions.get("deny"))
