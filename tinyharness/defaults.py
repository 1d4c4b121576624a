"""The defaults file: the model, the endpoint and the flags a user types every time, written once.

The problem. A user who always runs `--model llama3.2:3b --base-url http://gpu-box:11434/v1
--max-turns 50` types it on every run, or sets variables in a shell profile that other tools read
too. Claude Code and Codex keep such choices in a file of the user's own; without one, each run
starts from the built-in defaults, and nothing says where a value came from.

The mechanism. `$XDG_CONFIG_HOME/tinyharness/config.toml` (else `~/.config/...`): flat TOML, one
`key = value` a line, keys named as the flags (`max_turns` for --max-turns; the list is `KEYS`). One
order, for every command: the flag, then its variable where it has one (TINYHARNESS_MODEL,
TINYHARNESS_API, the endpoint's variables: endpoint.py), then this file, then the built-in default.
`apply` reads the file once and writes its values into the parsers' defaults before the command
line is parsed (so `--help` shows them); the model and the API become `Sourced` strings that carry
where they came from, which `said` and `tinyharness doctor` report; the endpoint keeps its own
`base_url_source`. It is the user's own file, read through the harness's file door
(filedoor.read_config) at most CAP bytes, and refused when its path leads into the workspace, where
the model writes. It is parsed by tomlread.loads: tomllib (Python 3.11+), tomli where installed,
else the subset of TOML the project's two TOML files use, read as tomllib reads it.

Each unknown key and each bad value is named in one line, and the run goes on without it; a file
that is not TOML is named and left out whole. One value is a usage error instead (exit 2):
`max_tokens`, because without it a run has no token limit at all (a cloud bill, not a default).
Keys that widen what a run may do (`yes`, `trust`, `sandbox_read`, `allow`...) are not read from the
file: each is named, and given on the command line when meant.

What it cannot do. No tables, arrays or per-command sections; the keys apply to every command that
has the flag (`tinyharness eval` reads none of them). The file's values are checked for type and
range here, and a base URL only for its shape: a server that is down is found by the run.
"""
import argparse
import json
import os
import re
from urllib.parse import urlsplit

from .tomlread import loads

CAP = 64 * 1024  # bytes: a page of settings, never more
LABEL = "config.toml"  # how a value's source is named (the full path in doctor's defaults line)
ENV = {"model": ("TINYHARNESS_MODEL",), "api": ("TINYHARNESS_API",)}
SOURCED = ("model", "api")  # the values that carry their source (doctor, /status)
# key: (what it must be, its check)
KEYS = {
    "model": ("a model name", lambda v: isinstance(v, str) and bool(v.strip())),
    "base_url": ("an http(s) URL with a host", lambda v: isinstance(v, str) and url_ok(v)),
    "api": ("one of auto, openai, ollama", lambda v: v in ("auto", "openai", "ollama")),
    "max_turns": ("a whole number of 1 or more", lambda v: whole(v, 1)),
    "max_seconds": ("a number of seconds above 0, at most 10,000,000", lambda v: seconds(v)),
    "max_tokens": ("a whole number of 1 or more", lambda v: whole(v, 1)),
    "max_reply_tokens": ("a whole number of 1 or more", lambda v: whole(v, 1)),
    "shell_timeout": ("a number of seconds above 0, at most 10,000,000", lambda v: seconds(v)),
    "context_window": ("a whole number of 1 or more", lambda v: whole(v, 1)),
    "context_policy": ("a policy name", lambda v: isinstance(v, str)),
    "stream": ("true or false", lambda v: isinstance(v, bool)),
    "think": ("true or false", lambda v: isinstance(v, bool)),
    "checkpoints": ("true or false", lambda v: isinstance(v, bool)),
    "sandbox": ('"on" or "off"', lambda v: v in ("on", "off")),
    "compact_at": ("a fraction above 0, at most 1", lambda v: number(v) and 0 < v <= 1),
    "keep_turns": ("a whole number of 0 or more", lambda v: whole(v, 0)),
}
DANGEROUS = ("max_tokens",)  # a bad value is a usage error: ignored, the run would have no limit
# widen what a run may do: given on the command line, each time
PER_RUN = {"yes": "--yes", "trust": "--trust", "workspace_anyway": "--workspace-anyway",
           "allow_image_urls": "--allow-image-urls", "sandbox_read": "--sandbox-read",
           "sandbox_env": "--sandbox-env", "allow": "--allow", "deny": "--deny", "mcp": "--mcp"}
ORDER = ("each default: the flag, else its TINYHARNESS_* (or endpoint) variable, else "
         "$XDG_CONFIG_HOME/tinyharness/config.toml (else ~/.config/...), else the built-in one; "
         "`tinyharness doctor` says which")


class Sourced(str):
    """A value that did not come from its flag, and where it came from ("env TINYHARNESS_MODEL",
    "config.toml", "default"); a plain str is the flag's."""

    source: str

    def __new__(cls, value, source):
        made = super().__new__(cls, value)
        made.source = source
        return made


def whole(value, lowest):
    return isinstance(value, int) and not isinstance(value, bool) and value >= lowest


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def seconds(value):
    """A time limit: above 0, at most 10**7 (past that the clocks it is added to overflow)."""
    return number(value) and 0 < value <= 10 ** 7


def url_ok(text):
    try:
        url = urlsplit(text)
        return url.scheme in ("http", "https") and bool(url.hostname) and url.port != 0
    except ValueError:  # a port that is not a number up to 65535
        return False


def path():
    """Where the file is: $XDG_CONFIG_HOME/tinyharness/config.toml (a relative XDG path is ignored,
    as the XDG rule says), else ~/.config/tinyharness/config.toml."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    base = base if os.path.isabs(base) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "tinyharness", "config.toml")


def read(where, workspace):
    """The file's text, or None when there is none. OSError (a refusal of the door, one that leads
    into the workspace, too big) or ValueError (not UTF-8) say why it was not read."""
    from .filedoor import inside, read_config
    if not os.path.lexists(where):
        return None
    real = os.path.realpath(where)
    if inside(real, workspace) is not None and inside(os.path.abspath(where), workspace) is None:
        raise OSError(f"it leads into the workspace ({real}), where the model writes; it was not "
                      "read")
    data, size = read_config(where, True)
    if size > CAP:
        raise OSError(f"it is {size:,} bytes, more than the {CAP:,} it may have")
    return data.decode("utf-8")


def load(workspace, warn):
    """(the checked {key: value}, the file's path, a usage error or None); each problem that is not
    a usage error is said with WARN, one line each."""
    where, text = path(), None
    try:
        text = read(where, workspace)
        values = loads(text) if text is not None else {}
    except (OSError, ValueError) as e:
        if re.search(r"^\s*max_tokens\s*=", text or "", re.MULTILINE):
            return {}, where, ("max_tokens", (f"{where}: cannot be read ({e}), and it sets "
                                              "max_tokens: a token budget is never dropped "
                                              "silently; fix the file"))
        warn(f"warning: {where}: not read ({getattr(e, 'strerror', None) or e}); the built-in "
             "defaults stand.")
        return {}, where, None
    return checked(values, where, warn)


def checked(values, where, warn):
    """(the usable values, where, a usage error or None), each other problem said once."""
    good, problem = {}, None
    for key, value in values.items():
        shown = json.dumps(value) if not isinstance(value, dict) else "a table"
        if key in PER_RUN:
            warn(f"warning: {where}: {key} is not read from this file: it widens what a run may "
                 f"do, so give {PER_RUN[key]} on the command line when you mean it.")
        elif key not in KEYS:
            warn(f"warning: {where}: unknown key {key!r} ignored (it reads: {', '.join(KEYS)}).")
        elif not KEYS[key][1](value):
            what = f"{key} = {shown} is not {KEYS[key][0]}"
            if key in DANGEROUS:
                problem = (key, (f"{where}: {what}; a token budget is never dropped silently (the "
                                 "run would have no limit): fix the line or remove it"))
            else:
                warn(f"warning: {where}: {what}; ignored (the default stands).")
        else:
            good[key] = value
    return good, where, problem


def apply(parser, workspace, warn):
    """Write the file's values into the defaults of PARSER and its subcommands' parsers, below the
    flags and the variables (ORDER); the model and the API become Sourced. Returns the usage error
    of the file, or None: (the key, the text), said by the caller after parsing with its command's
    usage line, unless the flag gave the value (refusal)."""
    values, where, problem = load(workspace, warn)
    told = set()
    for each in parsers(parser):
        dests = {action.dest: action for action in each._actions}
        for key in SOURCED:
            if key in dests:
                env = next((name for name in ENV[key] if os.environ.get(name)), None)
                value, source = ((os.environ[env], f"env {env}") if env else
                                 (values[key], LABEL) if key in values else
                                 (dests[key].default, "default"))
                each.set_defaults(**{key: Sourced(value, source)})
        for key, value in values.items():
            if key in SOURCED or key not in dests:
                continue
            if key == "base_url":
                if each.get_default("base_url_source") == "default":  # no variable gave it
                    each.set_defaults(base_url=value, base_url_source=LABEL)
            elif dests[key].choices is not None and value not in dests[key].choices:
                if key not in told:
                    warn(f"warning: {where}: {key} = {json.dumps(value)} is not one of "
                         f"{', '.join(map(str, dests[key].choices))}; ignored.")
                told.add(key)
            else:
                each.set_defaults(**{key: value})
    return problem


def refusal(problem, args):
    """The usage error of the file's PROBLEM (apply's) for this command line, or None: none when the
    command has no such flag, or the flag gave the value."""
    key, text = problem or (None, None)
    return text if key and hasattr(args, key) and getattr(args, key) is None else None


def parsers(parser):
    """PARSER and every subcommand's parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from parsers(sub)


def source(args, key):
    """Where args.KEY came from: "--model" (the flag), "env NAME", "config.toml", "default"."""
    if key == "base_url":
        return getattr(args, "base_url_source", "--base-url")
    return getattr(getattr(args, key, None), "source", "--" + key.replace("_", "-"))


def undo_hint(args, key):
    """How to take back the value of KEY where it was set."""
    value, where = getattr(args, key), source(args, key)
    if where.startswith("env "):
        return f"unset {where[4:]}, which says {value}"
    if where == LABEL:
        return f"remove `{key} = {json.dumps(str(value))}` from {path()}"
    return f"drop --{key.replace('_', '-')} {value}"


def said(args):
    """doctor's lines: [(check, text)] for the defaults file and the model and the API's
    sources."""
    where = path()
    return [("defaults", where + ("" if os.path.lexists(where) else " (none)") + ": a flag "
             "beats its variable, which beats this file, which beats the built-in default."),
            ("model", f"{args.model} (from {source(args, 'model')})."),
            ("api", f"{args.api} (from {source(args, 'api')}).")]
