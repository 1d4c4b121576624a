"""The "always" answer: a yes that also allows the same kind of call from now on, saved where
Claude Code saves it.

The problem. A run asks before every write and command; the twentieth `npm test` of a session is
asked about like the first, and people learn to say yes without reading (m3's README). Claude
Code's answer is "yes, and don't ask again": a permission rule that covers the call
(`Bash(npm test:*)`, `Edit(src/app.py)`), saved in the workspace's `.claude/settings.local.json`,
the user's own settings file that is not committed, and honoured from then on.

The mechanism. `rule_for` spells the rule a call would need: for a command, Claude's prefix form of
its first two words (`npm test --watch` -> `Bash(npm test:*)`; one word when the second is not a
plain word: `python -c '...'` -> `Bash(python -c:*)`, `ls` -> `Bash(ls:*)`); for a write, the path
in the workspace (`Edit(src/app.py)`, `Edit(./notes.md)` at the top: anchored, so it covers no
other folder's notes.md); for an MCP tool, its name. Each rule is parsed and checked to cover the
call before it is offered (permissions.py); none is offered for a chain (`a && b`: no allow rule
covers one), a path with glob characters, a view_image URL or a hook's confirmation. `allow` adds
the rule to the running rules (the next call it covers runs without asking) and merges it into the
file's `permissions.allow`, every other key kept, written through the file door (filedoor.py: no
link followed, a new file renamed over the old), mode 0600. Since a workspace file with allow rules
is trusted before it is used (trust.py: by its SHA-256), the new bytes are remembered as trusted -
but only when the file as it was before the merge was trusted or needed no trust (no hooks, no
allow rules): a file someone else changed is never vouched for by a yes to one call.

What it cannot do. The file lies in the workspace, where the model writes: a rule the model adds
itself (by write_file or a command, each asked about) changes the file's digest, so the next run
asks the trust question and shows the whole file - it is never used unasked. A prefix rule trusts
the words, not the program: `Bash(python -c:*)` allows every `python -c`. A file that is not valid
JSON, or whose `permissions.allow` is not a list, is left as it is: the rule then holds for this
run only, and the line says so.
"""
import json
import os
import re

from . import filedoor, trust
from .permissions import CHAIN, Rules

LOCAL_SETTINGS = os.path.join(".claude", "settings.local.json")
PLAIN_WORD = re.compile(r"[\w./:@%+=,~-]+")  # a word a prefix rule can spell as it is
GLOB = re.compile(r"[*?\[\]()]")  # a path with these would be a pattern, covering other files


def rule_for(name, arguments, workspace):
    """The allow rule an "always" answer would save for this call, or None when none covers it
    alone."""
    text = spelled(name, arguments or {}, workspace)
    if text is None:
        return None
    rules = Rules(workspace)
    try:
        rules.add([text], "allow", "always", [])
    except ValueError:
        return None
    return text if rules.rules and rules.decide(name, arguments or {}) is not None else None


def spelled(name, arguments, workspace):
    if name == "shell" and isinstance(arguments.get("command"), str):
        return command_rule(arguments["command"])
    if name == "write_file" and isinstance(arguments.get("path"), str):
        return edit_rule(arguments["path"], workspace)
    if name.startswith("mcp__"):
        return name
    return None


def command_rule(command):
    """`Bash(first two words:*)`, or None for a chain or a command that starts with no plain
    word."""
    words = command.split()
    if not words or CHAIN.search(command) or not PLAIN_WORD.fullmatch(words[0]):
        return None
    prefix = words[:2] if len(words) > 1 and PLAIN_WORD.fullmatch(words[1]) else words[:1]
    return f"Bash({' '.join(prefix)}:*)"


def edit_rule(path, workspace):
    """`Edit(dir/file)`, `Edit(./file)` at the top; None outside the workspace or for a path a
    pattern would spell."""
    root = os.path.abspath(workspace)
    relative = os.path.relpath(os.path.normpath(os.path.join(root, path)), root)
    if relative == "." or relative.startswith("..") or GLOB.search(relative) or relative.strip() \
            != relative or "\n" in relative:
        return None
    return f"Edit({relative if '/' in relative else './' + relative})"


def allow(rule, workspace, rules):
    """Allow RULE for the rest of the run (`rules`: the run's permissions.Rules, or None) and save
    it in the workspace's .claude/settings.local.json. The one line to show the user."""
    if rules is not None:
        rules.add([rule], "allow", f"{LOCAL_SETTINGS} (always)", [])
    try:
        where = save(rule, workspace)
    except (OSError, ValueError) as e:
        return (f"[permissions] allowed {rule} for this run only: {LOCAL_SETTINGS} was not "
                f"changed ({e})")
    return f"[permissions] allowed {rule} from now on; saved in {where}"


def save(rule, workspace):
    """Merge RULE into the file's permissions.allow; the file's name. Raises OSError (the door
    refused, a folder could not be made) or ValueError (the file is not a settings object)."""
    path = os.path.join(os.path.abspath(workspace), LOCAL_SETTINGS)
    data, vouched = current(path, workspace)
    permissions = data.setdefault("permissions", {})
    allowed = permissions.setdefault("allow", []) if isinstance(permissions, dict) else None
    if not isinstance(allowed, list):  # a ValueError, as its docstring says: allow() catches it
        raise ValueError("its \"permissions\" has no \"allow\" list to add to")  # noqa: TRY004
    if rule not in allowed:
        allowed.append(rule)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # the door: no link followed, a new file renamed over the old, 0600
    filedoor.write_bytes(LOCAL_SETTINGS, (json.dumps(data, indent=2) + "\n").encode(),
                         os.path.abspath(workspace))
    if vouched:
        trust.remember(path)  # the user's own answer: the next run does not ask about it again
    return LOCAL_SETTINGS


def current(path, workspace):
    """(the file's settings as a dict, whether its bytes before the merge were the user's:
    trusted, or with nothing to trust). ValueError for a file that is not a JSON object."""
    try:
        raw, size = filedoor.read_config(path, False, os.path.abspath(workspace))
    except FileNotFoundError:
        return {}, True
    if size > len(raw):
        raise ValueError(f"it is over {filedoor.CONFIG_CAP:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise ValueError("it is not valid JSON; fix it and answer again") from None
    if not isinstance(data, dict):  # a ValueError, as its docstring says: allow() catches it
        raise ValueError("it is not a JSON object")  # noqa: TRY004
    permissions = data.get("permissions")
    inert = not data.get("hooks") and not (isinstance(permissions, dict)
                                           and permissions.get("allow"))
    return data, inert or trust.is_trusted(path)
