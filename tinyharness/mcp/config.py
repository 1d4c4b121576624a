"""MCP configuration: which servers to start, read from mcp.json files and --mcp flags, checked
whole.

The problem. The configuration names programs to run and URLs to call, with secrets in environment
variables, in a file that may come from another tool (Claude Code, Cursor and VS Code each write
their own shape) or from a workspace we do not trust yet. A mistake found half-way through a run, or
a value taken on faith, costs more than a refusal at the start.

The mechanism. `load_config` reads one file (`servers` or `mcpServers`), `parse_flag` one
`--mcp NAME=COMMAND`, `servers_of` a block of servers from elsewhere (~/.claude.json, Codex's
config.toml: mcp/scopes.py); `parse_server` checks each server's every field, accepts the known
shapes (`command` as a list, or a program with `args`; `type` stdio, http or sse) and replaces
`${VAR}`, `${VAR:-default}` and `${env:VAR}` from the environment. A VS Code `${input:ID}` is left
in place and the server's config lists it under "inputs" (with the file's description of it):
mcp/scopes.py asks for it at the terminal once the file is trusted, or skips the server. Anything
else malformed is a ValueError naming the file and the server; the caller stops the run before it
starts (exit 2).

What it cannot do. It checks the form of a command, not what the program does; whether a
workspace's file may be used at all is the caller's question (trust.py), asked before this reads it.
"""
import json
import os
import re
import shlex
import stat
from pathlib import Path

from ..filedoor import CONFIG_CAP, read_config
from .client import CALL_TIMEOUT

# no "__": it separates server and tool
SERVER_NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
MAX_SERVER_NAME = 40


def check_server_name(name, where):
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name) or len(name) > MAX_SERVER_NAME:
        raise ValueError(f"{where}: the server name {str(name)[:60]!r} must be letters, digits, "
                         f"'-' or single '_' (at most {MAX_SERVER_NAME}; '__' separates server and "
                         "tool in mcp__SERVER__TOOL)")


def parse_flag(text):
    """`--mcp NAME=COMMAND` -> (name, config); COMMAND is split as a shell would split it."""
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise ValueError("--mcp wants NAME=COMMAND, e.g. --mcp notes='python3 notes_server.py', "
                         f"not {text!r}")
    check_server_name(name, "--mcp")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise ValueError(f"--mcp {name}: cannot split the command ({e})") from e
    return (name, {"type": "stdio", "command": argv, "env": {}, "read_only": (),
                   "timeout": CALL_TIMEOUT})


# Where users keep their servers, in the workspace: Claude Code's project scope, VS Code's, then
# ours (a later file overrides a server of the same name in an earlier one).
WORKSPACE_FILES = (Path(".mcp.json"), Path(".vscode") / "mcp.json",
                   Path(".tinyharness") / "mcp.json")


def config_files(workspace):
    """The user's own file first, then the workspace's (which may override a server of the same
    name)."""
    config = Path(os.environ.get("XDG_CONFIG_HOME", ""))
    # the XDG rule: a relative path is ignored
    config = config if config.is_absolute() else Path.home() / ".config"
    home = config / "tinyharness" / "mcp.json"
    return [home, *(Path(workspace) / name for name in WORKSPACE_FILES)]


def load_config(path, workspace=None):
    """{name: config} from one mcp.json; raises ValueError with the file's name on anything
    malformed. VS Code's ${workspaceFolder} is WORKSPACE (default: the folder that holds the file's
    folder)."""
    path = Path(path)
    # a relative envFile is the file's own folder's when it is the user's own file: never the
    # workspace's
    own = workspace is None or os.path.realpath(workspace) not in map(str, path.resolve().parents)
    try:
        raw, size = read_config(path, own, None if workspace is None else str(workspace))
        if size > CONFIG_CAP:
            raise OSError(f"it is {size:,} bytes, more than the {CONFIG_CAP:,} a server list may "
                          "have")
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({e})") from e
    folder = str(workspace or path.resolve().parent.parent)
    env_folder = str(path.parent) if own else folder
    if (not isinstance(data, dict)
        or not any(isinstance(data.get(key), dict) for key in ("servers", "mcpServers"))):
        raise ValueError(f'{path}: expected {{"servers": {{"NAME": {{"command": ...}}}}}} '
                         '(or "mcpServers", as Claude Code and Cursor write it)')
    configs, inputs = {}, declared_inputs(data.get("inputs"))
    for key in ("mcpServers", "servers"):
        block = data.get(key)
        if block is None:
            continue
        if not isinstance(block, dict):  # a bad file is a ValueError: the callers catch that
            raise ValueError(f'{path}: "{key}" must be an object of servers')  # noqa: TRY004
        configs.update(servers_of(block, path, folder, env_folder, inputs))
    return configs


def servers_of(block, where, folder, env_folder=None, inputs=None):
    """{name: checked config} of a block of servers ({"NAME": {...}}) found in WHERE."""
    configs = {}
    for name, config in block.items():
        at = f"{where}: server {name!r}"
        config = vs_code_variables(config, folder, at, env_folder)
        checked = parse_server(name, config, at)
        if isinstance(config, dict) and config.get("inputs"):
            checked["inputs"] = {key: (inputs or {}).get(key, "") for key in config["inputs"]}
        configs[name] = checked
    return configs


def declared_inputs(entries):
    """{id: its description} of a VS Code file's "inputs" list (what the prompt says)."""
    if not isinstance(entries, list):
        return {}
    return {entry["id"]: str(entry.get("description") or "")[:200] for entry in entries
            if isinstance(entry, dict) and isinstance(entry.get("id"), str)}


VS_CODE_VARIABLE = re.compile(r"\$\{(workspaceFolder|workspaceFolderBasename|userHome"
                              r"|pathSeparator|/)\}")
# ${command:x}, ${config:x} (${input:x} is asked for: mcp/scopes.py)
OTHER_VARIABLE = re.compile(r"\$\{(?!env:|input:)([A-Za-z]+):(?!-)([^}]*)\}")
INPUT = re.compile(r"\$\{input:([^}]*)\}")


def vs_code_variables(config, folder, where, env_folder=None):
    """CONFIG with VS Code's variables replaced (${workspaceFolder}, ${userHome}...) and its envFile
    read into env (env's own entries win). ${input:ID} - a value VS Code asks for in its own prompt
    - stays, and "inputs" lists the ids (mcp/scopes.py asks for them); ${command:...} is an error
    that says what to write instead: neither is ever sent as it is."""
    names = {"workspaceFolder": folder, "workspaceFolderBasename": os.path.basename(folder),
             "userHome": str(Path.home()), "pathSeparator": os.sep, "/": os.sep}

    def replace(value):
        if isinstance(value, str):
            if other := OTHER_VARIABLE.search(value):
                kind, name = other.groups()
                raise ValueError(f"{where}: ${{{kind}:{name}}} is a VS Code {kind} variable (VS "
                                 "Code asks for or computes it), which tinyharness cannot; put "
                                 f"the value in an environment variable and write ${{env:NAME}} "
                                 "instead (it is never sent as it is)")
            return VS_CODE_VARIABLE.sub(lambda m: names[m.group(1)], value)
        if isinstance(value, list):
            return [replace(v) for v in value]
        return {k: replace(v) for k, v in value.items()} if isinstance(value, dict) else value
    config = replace(config)
    if isinstance(config, dict) and (used := sorted(set(INPUT.findall(json.dumps(config))))):
        config = {**config, "inputs": used}
    if isinstance(config, dict) and config.get("envFile") is not None:
        config = ({**config, "env": {**read_env_file(config["envFile"], env_folder or folder,
                                                     where), **(config.get("env") or {})}})
    return config


def read_env_file(name, folder, where, cap=64 * 1024):
    """{NAME: value} from a dotenv file (NAME=value lines; # comments, `export `, quotes), relative
    to FOLDER. Opened without following a link, a regular file only, at most CAP bytes."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: \"envFile\" must be a path")
    path = os.path.join(folder, os.path.expanduser(name))
    try:
        fd = (os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                      | getattr(os, "O_NONBLOCK", 0)))
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise OSError("not a regular file")
            text = file.read(cap).decode("utf-8", errors="replace")
    except OSError as e:
        raise ValueError(f"{where}: \"envFile\" {path} cannot be read "
                         f"({e.strerror or e})") from None
    env = {}
    for line in text.splitlines():
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            value = value.strip()
            env[key.strip()] = (value[1:-1] if len(value) > 1 and value[0] == value[-1]
                                and value[0] in "'\"" else value)
    return env


def parse_server(name, config, where):
    """One server's config, checked and with ${VAR} replaced: {"type", "command"|"url", ...}."""
    check_server_name(name, where.rsplit(":", 1)[0])
    if not isinstance(config, dict):  # a bad file is a ValueError: the callers catch that
        raise ValueError(  # noqa: TRY004
            f"{where} must be an object, e.g. {{\"command\": \"python3\", \"args\": "
            f"[\"server.py\"]}}")
    kind = config.get("type", "http" if "url" in config and "command" not in config else "stdio")
    if kind in ("streamable-http", "streamableHttp"):
        kind = "http"
    if kind not in ("stdio", "http", "sse"):
        raise ValueError(f"{where}: \"type\" must be \"stdio\", \"http\" or \"sse\", not "
                         f"{json.dumps(kind)[:40]}")
    disabled = config.get("disabled", False)
    if not isinstance(disabled, bool):  # a bad file is a ValueError: the callers catch that
        raise ValueError(f"{where}: \"disabled\" must be true or false")  # noqa: TRY004
    read_only = config.get("read_only", [])
    if not (read_only is True or read_only is False or
            (isinstance(read_only, (list, tuple)) and all(isinstance(t, str) for t in read_only))):
        raise ValueError(f"{where}: \"read_only\" must be true or a list of tool names")
    timeout = config.get("timeout", CALL_TIMEOUT)
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
        or not 0 < timeout <= 86400):
        raise ValueError(f"{where}: \"timeout\" must be a number of seconds above 0")
    checked = ({"type": kind, "disabled": disabled, "read_only": read_only or (),
                "timeout": float(timeout)})
    if kind in ("http", "sse"):
        return {**checked, **http_part(config, where, kind)}
    return {**checked, **stdio_part(config, where)}


def stdio_part(config, where):
    command, args = config.get("command"), config.get("args")
    if args is not None and not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise ValueError(f"{where}: \"args\" must be a list of strings")
    if isinstance(command, str) and command.strip():
        if args is None:
            try:
                command = shlex.split(command)
            except ValueError as e:
                raise ValueError(f"{where}: cannot split \"command\" ({e})") from e
        else:
            command = [command]
    if (not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)
             and command[0])):
        raise ValueError(f"{where} needs \"command\": a program (with \"args\": [...]) or a list "
                         "of strings")
    argv = [expand(part, where) for part in command + list(args or [])]
    env = config.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        bad = (next((k for k, v in env.items() if not isinstance(v, str)), None)
               if isinstance(env, dict) else None)
        which = "" if bad is None else f" ({bad!r} is {json.dumps(env[bad])[:40]})"
        raise ValueError(f"{where}: \"env\" must map names to strings{which}")
    if not all(k and "=" not in k and "\0" not in k for k in env):
        raise ValueError(f"{where}: an \"env\" name is empty or holds '=' or NUL")
    cwd = config.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"{where}: \"cwd\" must be a string")
    expanded = {k: expand(v, where) for k, v in env.items()}
    part = {"command": argv, "env": expanded}
    if any("\0" in a for a in argv + list(expanded.values())):
        raise ValueError(f"{where}: the command or env holds a NUL character")
    return {**part, **({"cwd": expand(cwd, where)} if cwd else {})}


def http_part(config, where, kind="http"):
    url = config.get("url")
    if not isinstance(url, str) or not re.match(r"https?://[^/\s]", expand(url, where)):
        raise ValueError(f"{where}: \"type\": \"{kind}\" needs \"url\": an http:// or https:// "
                         "address")
    headers = config.get("headers", {})
    if (not isinstance(headers, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
        raise ValueError(f"{where}: \"headers\" must map names to strings")
    headers = {k: expand(v, where) for k, v in headers.items()}
    if (any(not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", k)
            or re.search(r"[\r\n\0]", v) for k, v in headers.items())):
        raise ValueError(f"{where}: a header name is not a token, or a value holds a line break")
    return {"url": expand(url, where), "headers": headers}


PYTHON = re.compile(r"python[0-9.]*(?:\.exe)?")


def outside_the_workspace(config, folder):
    """A stdio server from the user's own config, started in that config's folder (one the model
    cannot write; a "cwd" of the config's own wins), never in the workspace, where a planted
    notes_server.py or node_modules/.bin/ would run in its place, unconfined. A `python -m` server
    gets PYTHONSAFEPATH=1 too, so that no folder but the installed packages is searched for its
    module. The workspace reaches the server only where the config asks for it: "${PWD}" in "args"
    or "env"."""
    if config.get("type") != "stdio":
        return config
    argv, env = config["command"], config.get("env", {})
    if (PYTHON.fullmatch(os.path.basename(argv[0]))
        and any(a == "-m" or a.startswith("-m") for a in argv[1:])):
        env = {"PYTHONSAFEPATH": "1", **env}
    cwd = (os.path.join(folder, os.path.expanduser(config["cwd"])) if config.get("cwd")
           else str(folder))
    # a relative "cwd" is the config's folder's, never the workspace's
    return {**config, "cwd": cwd, "env": env}


VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(text, where):
    """${VAR}, ${VAR:-default} and VS Code's ${env:VAR}, from the environment."""
    def value(match):
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ValueError(f"{where}: ${{{name}}} is used but the variable is not set")
    return VARIABLE.sub(value, text)
