"""MCP servers from every scope users keep them in, and the values VS Code would ask them for.

The problem. A server added with `claude mcp add` lives in `~/.claude.json` (its top-level
`mcpServers`, the user scope, or `projects["/abs/path"].mcpServers`, the local scope), one added
to Codex in `~/.codex/config.toml` (`[mcp_servers.NAME]` tables); a VS Code file may hold
`${input:ID}`, a value VS Code asks for in a prompt of its own. A harness that reads none of these
has "no servers" where the user has several, and one that stops at an `${input:...}` stops a run
over a value somebody could have typed.

The mechanism. `sources` lists every place looked at, in order, a later one overriding a server of
the same name: the user's own (`~/.config/tinyharness/mcp.json`, `~/.claude.json`'s user scope,
`$CODEX_HOME/config.toml`), the workspace's (`.mcp.json`, `.vscode/mcp.json`,
`.tinyharness/mcp.json`), then `~/.claude.json`'s entry for this workspace (Claude's local scope
wins over its project scope). The user's own servers need no trust question and start in their
file's folder, never the workspace (config.outside_the_workspace); a workspace file's are trusted
first (trust.py). Codex's tables become our config (`command`, `args`, `env`, `cwd`, `url`,
`bearer_token_env_var` as an Authorization header, `enabled = false`, `tool_timeout_sec`), read
with tomlread.loads (tomllib on Python 3.11+; on 3.10 the subset of TOML server tables use).
`fill_inputs` asks for each `${input:ID}` at the terminal (asking.py's /dev/tty, never standard
input) once the file is trusted; with no terminal the server is skipped with one line and the run
goes on. `tinyharness mcp list` (`list_servers`) names every file looked at, found or not.

What it cannot do. Codex's project `.codex/config.toml` and Claude's managed or plugin servers are
not read; an answer typed for a password input is echoed as the terminal echoes it.
"""
import json
import os
from pathlib import Path

from .. import asking, trust
from ..console import printable
from ..filedoor import read_bytes
from ..tomlread import loads
from . import Slots
from . import config as mcp_config

CLAUDE_JSON_CAP = 32 * 1024 * 1024  # ~/.claude.json keeps Claude's whole state: it grows
CODEX_KEYS = ("command", "args", "env", "cwd", "url")
CODEX_KNOWN = CODEX_KEYS + ("enabled", "bearer_token_env_var", "tool_timeout_sec", "env_vars",
                            "startup_timeout_sec", "startup_timeout_ms", "http_headers")


class SetupError(ValueError):
    """A hooks or MCP configuration that cannot be used: a usage error, found before the first model
    call."""


def codex_home():
    value = os.environ.get("CODEX_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".codex"


def sources(workspace):
    """[(path, label, own, load)]: every place servers may be, in order; `load()` gives {name:
    config} (ValueError for a file that cannot be used)."""
    home_list, *workspace_lists = mcp_config.config_files(workspace)
    claude, codex = Path.home() / ".claude.json", codex_home() / "config.toml"
    key = os.path.realpath(workspace)
    return [(home_list, "your own", True, lambda: mcp_config.load_config(home_list, workspace)),
            (claude, "Claude Code's user scope", True, lambda: claude_servers(claude, None)),
            (codex, "Codex", True, lambda: codex_servers(codex)),
            *((path, "this workspace's", False,
               lambda path=path: mcp_config.load_config(path, workspace))
              for path in workspace_lists),
            (claude, f"Claude Code's local scope for {key}", True,
             lambda: claude_servers(claude, key))]


def claude_servers(path, project):
    """The servers of ~/.claude.json: its top-level mcpServers, or those of projects[PROJECT]."""
    data = read_json(path)
    if project is not None:
        projects = data.get("projects") if isinstance(data, dict) else None
        data = projects.get(project) if isinstance(projects, dict) else None
    block = data.get("mcpServers") if isinstance(data, dict) else None
    if block is None:
        return {}
    if not isinstance(block, dict):  # a bad file is a ValueError: the callers catch that
        raise ValueError(f'{path}: "mcpServers" must be an object of servers')  # noqa: TRY004
    where = f"{path}" + (f' (projects["{project}"])' if project else "")
    return mcp_config.servers_of(block, where, str(path.parent), str(path.parent))


def read_json(path):
    try:
        raw, size = read_bytes(os.path.realpath(path), CLAUDE_JSON_CAP)
        if size > CLAUDE_JSON_CAP:
            raise OSError(f"it is more than {CLAUDE_JSON_CAP:,} bytes")
        return json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({e})") from None


def codex_servers(path):
    """The [mcp_servers.NAME] tables of Codex's config.toml, as our configs."""
    try:
        raw = read_bytes(os.path.realpath(path), mcp_config.CONFIG_CAP)[0]
        text = raw.decode("utf-8")
        data = loads(text)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read it as TOML ({e})") from None
    block = data.get("mcp_servers", {})
    if not isinstance(block, dict) or not all(isinstance(v, dict) for v in block.values()):
        raise ValueError(f"{path}: mcp_servers must be tables, [mcp_servers.NAME]")
    servers = {}
    for name, entry in block.items():
        config = {key: entry[key] for key in CODEX_KEYS if key in entry}
        config["disabled"] = not switched_on(entry, path, name)
        if isinstance(entry.get("bearer_token_env_var"), str):
            config["headers"] = {"Authorization": f"Bearer ${{{entry['bearer_token_env_var']}}}"}
        if isinstance(entry.get("http_headers"), dict):
            config["headers"] = {**entry["http_headers"], **config.get("headers", {})}
        if "tool_timeout_sec" in entry:
            config["timeout"] = entry["tool_timeout_sec"]
        servers[name] = config
    return mcp_config.servers_of(servers, path, str(path.parent), str(path.parent))


def switched_on(entry, path, name):
    """Codex's `enabled`: true unless it says false; anything but a boolean ("false" in quotes,
    which would read as on) is a ValueError, as Codex refuses it."""
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):  # a bad file is a ValueError: the callers catch that
        raise ValueError(  # noqa: TRY004
            f"{path}: [mcp_servers.{name}] enabled must be true or false, not "
            f"{json.dumps(enabled)}")
    return enabled


def server_configs(workspace, flags=(), looked=None):
    """[(name, config, source, trusted)] of every configured MCP server, the later file overriding
    the earlier: trusted is True (the user's own file, a --mcp flag), a trust.Trusted (a trusted
    workspace file: what was trusted) or None (a workspace file not trusted yet). `looked`: a list
    that gets (path, label, found) of every place looked at. Raises SetupError for a file that
    cannot be used."""
    found = {}
    for path, label, own, load in sources(workspace):
        try:
            configs = load() if path.exists() else None
        except ValueError as e:
            raise SetupError(str(e)) from None
        if looked is not None:
            looked.append((path, label, configs is not None))
        trusted = True if own or not configs else trust.trusted_now(path)
        for name, config in (configs or {}).items():  # the user's own never start in the workspace
            found[name] = (name, mcp_config.outside_the_workspace(config, path.parent) if own
                           else config, path, trusted)
    for text in flags:
        name, config = mcp_config.parse_flag(text)
        found[name] = (name, config, "--mcp", True)
    return list(found.values())


def fill_inputs(name, config, report):
    """CONFIG with each ${input:ID} replaced by what the user types at the terminal, or None (said
    in one line) when there is none to ask at or the input ended: the server is skipped."""
    inputs = config.get("inputs")
    if not inputs or config.get("disabled"):
        return config
    answers = {}
    for key, description in inputs.items():
        # the workspace wrote the description: shown on one line, never obeyed (an escape or a
        # newline could redraw the screen, or draw a question of the harness's own)
        question = printable(f"[mcp] {name} needs ${{input:{key}}}"
                             + (f" ({description})" if description else "")).replace("\n", "\\n")
        answer = ask_text(question + ": ")
        if answer is None:
            report(f"[mcp] {name}: skipped: it needs ${{input:{key}}}, which is asked for at a "
                   "terminal, and there is none to ask at (set an environment variable and write "
                   "${env:NAME} instead). The run goes on.")
            return None
        answers[key] = answer

    def put(value):
        if isinstance(value, str):
            return mcp_config.INPUT.sub(lambda m: answers.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [put(v) for v in value]
        return {k: put(v) for k, v in value.items()} if isinstance(value, dict) else value
    return {key: put(value) for key, value in config.items() if key != "inputs"}


def ask_text(question):
    """One line typed at the terminal (/dev/tty), or None when there is none or its input ended."""
    ends = asking.open_terminal()
    if ends is None:
        return None
    try:
        asking.write(ends[1], question)
        return asking.read_line(ends[0])
    finally:
        for fd in set(ends):
            os.close(fd)


def list_servers(workspace, flags=(), out=print):
    """`tinyharness mcp list`: every place looked at, then each server, where it comes from,
    whether it is trusted, and its tools (started to ask them; a workspace file not trusted yet is
    never started). 0, or 1 when a server failed."""
    looked: list[tuple] = []
    try:
        servers = server_configs(workspace, flags, looked)
    except SetupError as e:
        out(f"error: {e}")
        return 2
    out("Looked at:")
    for path, label, found in looked:
        out(f"  {path} ({label}): {'read' if found else 'not there'}")
    if not servers:
        out("No MCP servers are configured in any of them, nor with --mcp.")
        return 0
    status = 0
    for name, config, source, trusted in servers:
        status = max(status, show_server(name, config, source, trusted, workspace, out))
    return status


def show_server(name, config, source, trusted, workspace, out):
    where = config["url"] if config["type"] != "stdio" else " ".join(config["command"])
    trust_text = ("trusted: a --mcp flag" if source == "--mcp" else
                  f"trusted: your own file {source}"
                  if Path(workspace) not in Path(source).parents else
                  f"trusted: you trusted {source}" if trusted else
                  f"NOT trusted yet: {source} (run or chat asks once; until then it is never "
                  "started)")
    out(f"{name}  [{config['type']}] {where[:100]}")
    out(f"  {trust_text}")
    if config.get("disabled"):
        out("  disabled in its config: not started")
        return 0
    if config.get("inputs"):
        out(f"  needs {', '.join('${input:' + key + '}' for key in config['inputs'])}: asked for "
            "at the terminal when run or chat starts; not started here")
        return 0
    return show_server_tools(name, config, out, trusted) if trusted else 0


def show_server_tools(name, config, out, trusted=True):
    """Start one trusted server and list its tools: 0, or 1 when it did not start."""
    notes: list[str] = []
    slots = Slots.start({name: config}, report=notes.append,
                        trusted={name: trusted} if isinstance(trusted, trust.Trusted) else None)
    try:
        server = slots.servers.get(name)
        if server is None or server.dead:
            why = (notes or ["it did not start"])[-1].removeprefix("[mcp] ")
            out(f"  failed: {why.removesuffix(' Its tools are not offered; the run goes on.')}")
            return 1
        out(f"  protocol {server.version}, {len(slots.names)} tool(s), {server.timeout:g} s a call")
        for note in notes[:-1]:  # what was mapped or skipped; the last is the count above
            out(f"  note: {note.removeprefix(f'[mcp] {name}: ')}")
        width = max(map(len, slots.names), default=0)
        for model_name, (_, tool) in sorted(slots.names.items()):
            asks = ("read-only, runs without asking" if server.is_read_only(tool)
                    else "asks permission")
            description = str(server.tools[tool].get("description") or "").strip().splitlines()
            out(f"    {model_name:<{width}}  "
                f"{asks:<30}{'  ' + description[0][:70] if description else ''}")
        return 0
    finally:
        slots.close()
