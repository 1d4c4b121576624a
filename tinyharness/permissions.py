"""Permission rules: what may run without asking, what always asks and what never runs, in Claude
Code's spelling.

The problem. A user arrives with rules written for Claude Code - `"permissions": {"allow":
["Bash(npm test:*)"], "ask": ["Bash(git commit:*)"], "deny": ["Read(./.env)"], "defaultMode":
"acceptEdits"}` in `.claude/settings.json` - and expects them to hold here: a deny rule dropped
silently is a secret read or a push made, an ask rule beaten by an allow rule or --yes is a commit
made unasked. And a script that runs the harness without a terminal needs to say "these commands
may run" without `--yes` for all.

The mechanism. A rule is `Tool` or `Tool(specifier)`, from `--allow`/`--ask`/`--deny` (repeatable)
or a settings file's `permissions.allow`/`.ask`/`.deny`. Claude's tool names map to ours: Bash ->
shell, Read -> read_file, list_dir, view_image (LS and Glob -> list_dir), Edit/Write/MultiEdit ->
write_file; our own names and `mcp__server__tool` work as they are, and `mcp__server` or
`mcp__server__*` is every tool of that server. A Bash specifier is the command exactly (`Bash(git
status)`), a prefix (`Bash(npm test:*)`: `npm test` and `npm test --watch`), or a pattern with `*`.
A file specifier is a path pattern in the workspace (gitignore-like: `./.env` or `/x` is at the top,
`.env` in any folder, `src/**` everything under src, a folder stands for what is in it;
`//abs/path` and `~/path` are absolute). It is checked against the path as written and as resolved
(its links followed): a deny or ask rule holds when either matches, so a link to `.env` is `.env`;
an allow rule needs both, so `Edit(src/**)` does not reach through a link `src/shared -> ..`.
A file a Read deny covers when the run starts is also known by what it is (device and inode):
moved, or renamed with its folder, it is still refused to the file tools and the harness's reads.
`Rules.judge` decides in Claude Code's order: a deny rule refuses (over every allow rule and
`--yes`; the model reads the rule and where it came from), then an ask rule puts the call to the
person at the terminal (extensions.py; never answered by --yes or an allow rule, and with nobody
there a denial that says so), then an allow rule runs it without the prompt; where no rule decides,
the settings' `defaultMode` does: `acceptEdits` runs write_file unasked (commands still ask),
`plan` refuses every call that would ask (reads run), `dontAsk` refuses what would ask, ask rules
too; `default` is as without a mode; `bypassPermissions` and the rest are refused with one line (a
file never approves every call). A rule that can match nothing the run offers is named in one line
at the start, and so is every settings key the harness does not use (`unused_keys`).

Whose mode holds. The files are read in Claude Code's order (the user's `~/.claude/settings.json`,
then the workspace's settings.json, settings.local.json), and a later file's mode replaced an
earlier one's, trusted or not - so a workspace file saying `"default"`, which asks no trust
question and which the model can write with an Edit it is allowed, took away the user's own plan
or dontAsk, and `--yes` ran what the user's mode refused. Now the modes have one order, MODES,
strictest first, by what runs with nobody asked: `plan` (only calls that would not ask),
`dontAsk` (those and what an allow rule names), `default` (and whatever the person, or --yes, says
yes to), `acceptEdits` (and every write in the workspace unasked); `bypassPermissions` would be
loosest and is never honoured. `Rules.set_mode` holds three kinds of file: the user's own sets the
mode (its `"default"` is as without one); a workspace file the user trusted (it had hooks, allow
rules or acceptEdits, and the trust question was answered yes) replaces the mode as before, but
never with one looser than the user's own - the trust question speaks of the file's hooks and
rules, not of lifting the user's plan; a workspace file nobody trusted only makes the mode
stricter. A mode that does not apply is said in one line. One mode holds, not a blend: between
plan and dontAsk, plan, so a read an ask rule covers is put to the person where dontAsk would
refuse it (nothing runs unasked either way).

A Read deny is more than the read_file tool. Every file the harness itself reads for the model -
INSTRUCTIONS.md, AGENTS.md, CLAUDE.md (settings.py), agent_notes.md at `/compact`
(chat/compact.py), a subagent's (it has its parent's rules) - is looked up with `read_refusal`
before and after the read, and skipped with one line naming the rule. And shell commands:
`fence_commands` gives the sandbox every regular file in the workspace a Read deny covers when the
run starts (a bounded walk), and the sandbox binds an empty read-only file over each in the
commands' mount namespace (sandbox/namespaces.py): `cat .env` reads nothing, and a link, a copy or
a hard link made by a command gets nothing either.

What it cannot do. A rule reads the command's text, as the regex policy does (hooks.py): a deny rule
for `rm` does not see `x=rm; $x -rf`. Deny rules are split at `;`, `&&`, `|`, `$(`... and match any
part; an allow rule never approves a command with such operators (`npm test && curl ... | sh`), so a
chain still asks. The kernel sandbox, not a rule, is the wall. For commands a Read deny covers only
the files that existed when the run started: not a file created later, not a copy or a hard link
made before the run (it has another name), not with `--sandbox off` or where mount namespaces are
switched off (one `[sandbox]` line says so), and not past WALK_ENTRIES names or HIDDEN_FILES files
(said too). A path is resolved when the call is checked: a link swapped between the check and the
tool's own open, by something running beside the run (an MCP server), is not seen. Rules other
tools have and we do not (WebFetch, WebSearch) are ignored with a note; so are the modes that need
Claude Code's own machinery (`auto`'s classifier).
"""
import functools
import json
import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from .tools import known, record

RULE = re.compile(r"\s*([A-Za-z_][\w-]*\*?)\s*(?:\((.*)\))?\s*", re.DOTALL)
MCP = "mcp__"
WALK_ENTRIES = 50000  # names looked at to find the files a Read deny rule covers (sandbox mounts)
HIDDEN_FILES = 256    # files bound empty for commands at most (each is a mount per command)
# the modes honoured, strictest first, by what runs with nobody asked (the module's docstring)
MODES = ("plan", "dontAsk", "default", "acceptEdits")
MODES_REFUSED = {
    "bypassPermissions": "a file never approves every call; pass --yes yourself if you want that "
                         "(deny and ask rules still hold)",
    "auto": "it needs Claude Code's classifier, which tinyharness does not have",
}
# the settings keys the harness reads; any other is named once at the start (unused_keys)
USED_KEYS = {"hooks": (), "permissions": ("allow", "ask", "deny", "defaultMode")}
CHAIN = re.compile(r"&&|\|\||[;&|\n`<>]|\$\(")  # what makes one command line several commands


@dataclass(frozen=True)
class Rule:
    kind: str      # "allow", "ask" or "deny"
    text: str      # as the user wrote it
    source: str    # --allow, --ask, --deny, or the settings file
    tools: tuple   # our tool names it covers
    spec: str      # the specifier ("" for the whole tool)

    def takes(self, tool):
        """Is TOOL one this rule names? `mcp__notes__` (from `mcp__notes` or `mcp__notes__*`)
        names every tool of the server notes."""
        return any(tool == t or (t.endswith("__") and tool.startswith(t)) for t in self.tools)

    def covers(self, tool, arguments, workspace):
        if not self.takes(tool):
            return False
        if self.spec in ("", "*"):
            return True
        if tool == "shell":
            return command_matches(self.spec, str(arguments.get("command", "")), self.kind)
        paths = paths_of(tool, arguments)
        if paths:  # an allow rule must cover every path of the call, a deny or ask rule one
            hits = [path_matches(self.spec, p, workspace, both=self.kind == "allow") for p in paths]
            return all(hits) if self.kind == "allow" else any(hits)
        return False


def rule_tools(name):
    """Our tools a rule's tool name covers, from the tools' records: a Claude Code name (Read:
    list_dir, read_file, view_image), one of ours, or an MCP name; None for a tool we do not
    have."""
    claude = tuple(tool.name for tool in known() if name in tool.rule_names())
    return claude or ((name,) if record(name) else mcp_tools(name))


def takes_paths(tool):
    found = record(tool)
    return bool(found and found.paths)


def paths_of(tool, arguments):
    """The workspace paths a call of a file tool names (its record's path arguments), or [] when it
    names none or one of them is not text."""
    found = record(tool)
    paths = [arguments.get(p) for p in found.paths] if found else []
    return paths if all(isinstance(p, str) for p in paths) else []


def parse_rule(text, kind, source, notes):
    """The Rule TEXT spells, or None (with a note) for a tool tinyharness does not have. Raises
    ValueError for text that is not `Tool` or `Tool(specifier)`."""
    match = RULE.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{source}: {str(text)[:80]!r} is not a rule; write Tool or "
                         "Tool(specifier), e.g. Bash(npm test:*) or Read(./.env)")
    name, spec = match.group(1), (match.group(2) or "").strip()
    tools = rule_tools(name)
    if name.endswith("*") and not tools:
        raise ValueError(f"{source}: {text[:80]!r} is not a rule: a name ends with * only as "
                         "mcp__server__* (every tool of an MCP server)")
    if tools is None:
        notes.append(f"[permissions] {source}: {kind} rule {text!r} names a tool tinyharness does "
                     "not have; it is ignored")
        return None
    return Rule(kind, text.strip(), source, tools, spec)


def mcp_tools(name):
    """The tools an MCP rule name covers: ('mcp__s__t',) for one tool, ('mcp__s__',) for every
    tool of the server s (`mcp__s` and `mcp__s__*`, as Claude Code spells them); else None."""
    if not name.startswith(MCP) or len(name) == len(MCP):
        return None
    server, _, tool = name[len(MCP):].partition("__")
    if not server or server.endswith("*") or (tool.endswith("*") and tool != "*"):
        return None
    return (f"{MCP}{server}__",) if tool in ("", "*") else (name,)


def command_matches(spec, command, kind):
    """Does the Bash specifier SPEC cover COMMAND? A deny or ask rule matches any part of a chain;
    an allow rule only a command that is one simple command."""
    if kind == "allow" and CHAIN.search(command):
        return False
    parts = ([" ".join(part.split()) for part in (CHAIN.split(command) if kind != "allow"
                                                  else [command])])
    if spec.endswith(":*"):
        prefix = " ".join(spec[:-2].split())
        spaced = prefix + (" " if kind == "allow" else "")
        return any(part == prefix or part.startswith(spaced) for part in parts)
    wanted = " ".join(spec.split())
    return any(fnmatchcase(part, wanted) if "*" in wanted else part == wanted for part in parts)


def path_matches(spec, path, workspace, both=False):
    """Does the file specifier SPEC cover PATH as written in the workspace, or as resolved (its
    links followed)? With both=True (an allow rule), it must cover the two: a link cannot carry an
    allowed path to a file the rule does not name; a deny rule holds when either matches."""
    pattern, anchored, absolute = spec_pattern(spec)
    lexical = os.path.normpath(os.path.join(workspace, os.path.expanduser(path)))
    found = [name_matches(pattern, target if absolute else os.path.relpath(target, base),
                          anchored, absolute)
             for target, base in ((lexical, os.path.normpath(workspace)),
                                  (os.path.realpath(lexical), os.path.realpath(workspace)))]
    return all(found) if both else any(found)


@functools.lru_cache(maxsize=256)
def spec_pattern(spec):
    """(compiled pattern, anchored, absolute) of a file specifier."""
    absolute = spec.startswith(("//", "~/"))
    pattern = os.path.expanduser(spec[1:] if spec.startswith("//") else spec) if absolute else spec
    anchored = absolute or pattern.startswith(("./", "/")) or "/" in pattern.strip("/")
    pattern = pattern if absolute else pattern.removeprefix("./").lstrip("/")
    return glob_regex(pattern.rstrip("/")), anchored, absolute


def name_matches(pattern, name, anchored, absolute):
    """Does the compiled PATTERN cover NAME (relative to the workspace, or absolute)? A name
    outside the workspace is covered only by an absolute pattern."""
    if not absolute and (name == ".." or name.startswith("../")):
        return False
    parts = name.split("/")
    if not anchored:
        return any(pattern.fullmatch(part) for part in parts)
    # the path and each folder above it
    return any(pattern.fullmatch(c) for c in ("/".join(parts[:i]) for i in range(len(parts), 0, -1))
               if c)


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
    """Every rule of a run and the settings' defaultMode; `decide` answers for one call: the deny
    rule that covers it, else the ask rule, else the allow rule, else None; `judge` adds the
    mode."""

    def __init__(self, workspace, rules=()):
        self.workspace, self.rules = str(workspace), list(rules)
        self.mode, self.mode_source = "default", None
        self.users = None  # (mode, file) of the user's own file, when not "default"
        self.identities = {}  # (st_dev, st_ino) of each file a Read deny covered at the start: rule

    def add(self, texts, kind, source, notes):
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{source}: permissions.{kind} must be a list of rules (strings)")
        self.rules += [rule for text in texts if (rule := parse_rule(text, kind, source, notes))]

    def allows_any(self):
        """Whether anything may run without a person's yes (an allow rule, acceptEdits)."""
        return self.mode == "acceptEdits" or any(rule.kind == "allow" for rule in self.rules)

    def decide(self, tool, arguments):
        if held := self.held_by_identity(tool, arguments or {}):
            return held
        for kind in ("deny", "ask", "allow"):
            for rule in self.rules:
                if rule.kind == kind and rule.covers(tool, arguments or {}, self.workspace):
                    return rule
        return None

    def judge(self, tool, arguments, asks):
        """What the rules and the mode say of one call that would ask (`asks`) or not: ("deny",
        the DENIED text), ("ask", the ask rule: the person at the terminal decides), ("run", None:
        no question) or ("usual", None: the prompt asks if the call asks). Claude Code's order:
        deny rules, then ask rules, then allow rules; the mode where no rule decides, but plan
        refuses every call that would ask whatever allows it (a read an ask rule covers asks)."""
        rule, mode = self.decide(tool, arguments), self.mode
        where = f'defaultMode "{mode}", {self.mode_source}'
        if rule and rule.kind == "deny":
            return "deny", (f"DENIED: the rule {rule.text} ({rule.source}) denies this {tool} "
                            "call, so it did not run.")
        if mode == "plan" and asks:
            return "deny", (f"DENIED: plan mode ({where}): this {tool} call would change "
                            "something, and a plan-mode run only reads and plans, so it did not "
                            "run. Say what you would do instead.")
        if mode == "dontAsk" and (rule and rule.kind == "ask" or asks and not rule):
            return "deny", (f'DENIED: defaultMode "dontAsk" ({self.mode_source}) denies every call '
                            f"that would ask, without asking, so this {tool} call did not run.")
        if rule:
            return ("ask", rule) if rule.kind == "ask" else ("run", None)
        if mode == "acceptEdits" and tool == "write_file":
            return "run", None  # the path guard keeps it in the workspace (hooks.py)
        return "usual", None

    def set_mode(self, mode, source, notes, own=False, trusted=False):
        """One file's defaultMode (the others are refused with one line): the user's OWN file sets
        it; a TRUSTED workspace file replaces it, never with one looser than the user's own; a
        file nobody trusted (the model can write one) only makes it stricter (MODES)."""
        if mode is None:
            return
        if mode not in MODES:
            why = (MODES_REFUSED.get(mode) if isinstance(mode, str) else None) or \
                "it is not a mode Claude Code has (default, acceptEdits, plan, dontAsk)"
            notes.append(f'[permissions] {source}: defaultMode {json.dumps(mode)[:60]} is not '
                         f"honoured here: {why}; it changes nothing")
            return
        if own:  # "default" is as without a mode: it sets no limit on a workspace file
            self.users = None if mode == "default" else (mode, source)
        kept = own or trusted
        limit, holder = (self.users or (None, None)) if kept else (self.mode, self.mode_source)
        if limit is None or MODES.index(mode) < MODES.index(limit) or kept and mode == limit:
            self.mode, self.mode_source = mode, source
        elif mode != limit:
            self.mode, self.mode_source = limit, holder
            why = ("a workspace file never lifts your own mode" if kept else
                   "a file you have not trusted (the model can write it) only makes it stricter")
            notes.append(f'[permissions] {source}: defaultMode "{mode}" does not apply: it lets '
                         f'more run than "{limit}"' + (f" ({holder})" if holder else "")
                         + f', and {why}; "{limit}" holds')

    def remember_denied(self, files):
        """Note what each file a Read deny covers now is (device and inode), with its rule: a rule
        names a path, and the model can move the file away from it (`mv data data2`, a link)."""
        root = os.path.realpath(self.workspace)
        for path in files:
            call = {"path": os.path.relpath(path, root)}
            rule = next((r for r in self.read_denials() if r.covers("read_file", call, root)), None)
            try:
                status = os.stat(path)
            except OSError:
                continue
            if rule:
                self.identities[(status.st_dev, status.st_ino)] = rule

    def held_by_identity(self, tool, arguments):
        """The Read deny rule of the file a path tool's call would reach, when that file was denied
        at the start under another name (moved, renamed with its folder, linked), else None."""
        for path in paths_of(tool, arguments) if self.identities else []:
            try:
                status = os.stat(os.path.join(self.workspace, path))
            except (OSError, ValueError):
                continue
            rule = self.identities.get((status.st_dev, status.st_ino))
            if rule and rule.takes(tool):
                return rule
        return None

    def read_denials(self):
        return [rule for rule in self.rules if rule.kind == "deny" and rule.takes("read_file")]

    def read_refusal(self, path):
        """Why the harness does not read the workspace file PATH for the model (a file the prompt
        quotes, the notes): the Read deny rule that covers it, as written or resolved; else None."""
        path = os.fspath(path)
        if held := self.held_by_identity("read_file", {"path": path}):
            return (f"is denied by the rule {held.text} ({held.source}): it is the file that rule "
                    "denied, moved")
        for rule in self.read_denials():
            if rule.covers("read_file", {"path": path}, self.workspace):
                real = os.path.realpath(os.path.join(self.workspace, path))
                lead = os.path.relpath(real, os.path.realpath(self.workspace))
                shown = os.path.normpath(path)
                return (f"is denied by the rule {rule.text} ({rule.source})"
                        + (f": it leads to {lead}" if lead not in (shown, path) else ""))
        return None

    def unmatched(self, offered):
        """One line for each rule that can match nothing of OFFERED (the names of the tools this
        run offers): an MCP server not configured, a tool we do not offer, a specifier on a tool
        that takes none. It stays a rule (an MCP server may add tools later); it is only said."""
        lines = []
        for rule in self.rules:
            if not any(rule.takes(tool) for tool in offered):
                server = next((t[len(MCP):-2] for t in rule.tools if t.endswith("__")), None)
                why = (f"no MCP server named {server!r} is running" if server
                       else f"this run offers no tool {rule.tools[0]!r}")
            elif rule.spec not in ("", "*") and not any(t == "shell" or takes_paths(t)
                                                        for t in rule.tools):
                why = "a specifier in ( ) is read only for Bash and file tools"
            else:
                continue
            lines.append(f"[permissions] {rule.source}: the {rule.kind} rule {rule.text!r} "
                         f"matches nothing this run offers ({why}); it has no effect")
        return lines

    def denied_files(self):
        """(the real paths of the regular files in the workspace a Read deny rule covers, a note
        or None): what the sandbox binds empty for commands. A walk of at most WALK_ENTRIES names
        (a rule that names one path without a wildcard is looked up, not walked for), at most
        HIDDEN_FILES files; the note says when a bound was reached."""
        rules = [r for r in self.read_denials() if r.spec not in ("", "*")
                 and not r.spec.startswith(("//", "~/"))]
        if not rules:
            return [], None
        root = os.path.realpath(self.workspace)
        literal = all(not re.search(r"[*?\[]", r.spec) and r.spec.startswith(("./", "/"))
                      for r in rules)
        starts = ([os.path.join(root, r.spec.removeprefix("./").strip("/")) for r in rules]
                  if literal else [root])
        found: dict = {}
        patterns = [spec_pattern(r.spec) for r in rules]
        for seen, (rel, link) in enumerate(walk_names(root, starts)):
            if seen == WALK_ENTRIES or len(found) > HIDDEN_FILES:
                return list(found)[:HIDDEN_FILES], (
                    f"[sandbox] the search for files a Read deny rule covers stopped at "
                    f"{seen:,} names or {HIDDEN_FILES} files: commands can still read any others")
            # the walk follows no link: only a link's name and target differ
            real = os.path.realpath(os.path.join(root, rel)) if link else os.path.join(root, rel)
            names = (rel, os.path.relpath(real, root)) if link else (rel,)
            if (any(name_matches(p, name, anchored, False) for p, anchored, _ in patterns
                    for name in names)
                    and real.startswith(root + os.sep) and os.path.isfile(real)):
                found[real] = None
        return list(found), None


def walk_names(root, starts):
    """(path relative to root, is a link) of every file, link and folder under each of STARTS (a
    file is itself), links not followed."""
    folders = []
    for start in starts:
        if os.path.isdir(start) and not os.path.islink(start):
            folders.append(start)
        elif os.path.lexists(start):
            yield os.path.relpath(start, root), os.path.islink(start)
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            link = entry.is_symlink()
            if not link and entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            yield entry.path[len(root) + 1:], link


def fence_commands(sandbox, rules, report):
    """Make each file a Read deny rule covers unreadable to shell commands: the sandbox binds an
    empty file over it in the commands' mount namespace (sandbox/namespaces.py). Where that cannot
    be (no mount namespaces, --sandbox off), one line says the rules hold for the harness's own
    reads and the file tools, not for commands."""
    denials = rules.read_denials() if rules else []
    if not denials:
        return
    names = ", ".join(rule.text for rule in denials)[:200]
    files, note = rules.denied_files()
    rules.remember_denied(files)  # the file tools and the harness's reads know them when moved
    if sandbox is None or not sandbox.enabled or not sandbox.isolated:
        why = ("--sandbox off" if sandbox is None or not sandbox.enabled
               else "no mount namespaces here")
        report(f"[sandbox] {why}: the Read deny rules ({names}) hold for the file tools and what "
               "the harness reads, not for shell commands, which can still read those files")
        return
    sandbox.deny_read = files
    if note:
        report(note)


def from_settings(data, source, rules, notes):
    """Add the rules of a settings file's DATA to RULES: (lets calls run without asking: allow
    rules or acceptEdits, narrows: deny or ask rules, plan, dontAsk, its defaultMode - which the
    caller sets once it knows the file's trust: Rules.set_mode)."""
    permissions = data.get("permissions") if isinstance(data, dict) else None
    if permissions is None:
        return False, False, None
    if not isinstance(permissions, dict):  # a settings file's mistake: callers catch ValueError
        raise ValueError(  # noqa: TRY004
            f"{source}: \"permissions\" must be an object with \"allow\", \"ask\" "
            "and \"deny\" lists")
    for kind in ("allow", "ask", "deny"):
        rules.add(permissions.get(kind, []), kind, source, notes)
    mode = permissions.get("defaultMode")  # set once the file's trust is known (Rules.set_mode)
    return (bool(permissions.get("allow")) or mode == "acceptEdits",
            bool(permissions.get("deny") or permissions.get("ask")) or mode in ("plan", "dontAsk"),
            mode)


def unused_keys(data):
    """The keys of a settings file the harness does not read (`env`, `model`,
    `permissions.additionalDirectories`...); `$schema` and the like are not settings."""
    if not isinstance(data, dict):
        return []
    unused = [key for key in data if key not in USED_KEYS and not key.startswith("$")]
    permissions = data.get("permissions")
    if isinstance(permissions, dict):
        unused += [f"permissions.{key}" for key in permissions
                   if key not in USED_KEYS["permissions"]]
    return unused


def allowed_note(data):
    """What a settings file lets run without asking, for its trust question; "" when nothing."""
    permissions = data.get("permissions") if isinstance(data, dict) else None
    if not isinstance(permissions, dict):
        return ""
    allowed = [str(rule) for rule in permissions.get("allow") or []
               if isinstance(permissions.get("allow"), list)]
    text = f"it allows these calls without asking: {', '.join(allowed)[:600]}" if allowed else ""
    if permissions.get("defaultMode") == "acceptEdits":
        text += ("; and " if text else "its ") + ('defaultMode "acceptEdits" lets every write in '
                                                  "the workspace run without asking")
    return text
