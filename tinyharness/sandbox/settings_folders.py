"""The folders whose files other programs read as their settings or run.

The problem: shell commands may change anything in the workspace, so a workspace inside such a
folder lets a command plant what runs outside the sandbox later - a `core.fsmonitor` in
~/.config/git, a fake `git` in ~/.local/bin, a `Match exec` in ~/.ssh, a trusted.json in the
harness's own store, a hook in ~/.claude. The mechanism: this module lists them (the XDG folders,
~/.local/bin, ~/.ssh, GnuPG's, every dot-folder of the home folder, every folder on PATH and
PYTHONPATH, and where the settings the harness reads at every start really are when they are
links: its own, ~/.claude, ~/.codex, and the folders of ~/.claude.json and Codex's config.toml), and
`workspace_problem` (sandbox/__init__.py) refuses a workspace in or around one.

What it cannot do: know a program's settings folder that lives elsewhere (a tool configured through
an environment variable it does not know); `--workspace-anyway` is for the user who means it.
"""
import os


def read_or_run_from(environ, home):
    """(what, folder) of every folder whose files other programs read as their settings or run: a
    workspace inside one (~/.config/git, ~/.local/bin, ~/.ssh, the harness's own stores) would let a
    command plant a core.fsmonitor, a fake `git`, a `Match exec` or a trusted.json for later; one
    that is a folder on PATH, a program your shell finds by name."""
    state, cache = (xdg(environ, "XDG_STATE_HOME", home,
                        ".local/state"), xdg(environ, "XDG_CACHE_HOME", home, ".cache"))
    folders = [("your config folder (XDG_CONFIG_HOME; tinyharness's mcp.json too)",
                xdg(environ, "XDG_CONFIG_HOME", home, ".config")),
               ("your data folder (XDG_DATA_HOME; tinyharness's sessions and trust answers too)",
                xdg(environ, "XDG_DATA_HOME", home, ".local/share")),
               ("your state folder (XDG_STATE_HOME)", state),
               ("your cache folder (XDG_CACHE_HOME)", cache),
               ("~/.local/bin", os.path.join(home, ".local", "bin")),
               ("~/.ssh", os.path.join(home, ".ssh")),
               ("your GnuPG folder", os.path.realpath(environ.get("GNUPGHOME")
                                                      or os.path.join(home, ".gnupg")))]
    folders += dot_folders(home)
    # what a shell finds by name; what every Python start imports
    for variable in ("PATH", "PYTHONPATH"):
        on_it = [p for p in environ.get(variable, "").split(os.pathsep) if os.path.isabs(p)]
        folders += [(f"a folder on {variable}", os.path.realpath(p)) for p in on_it]
    return folders


def dot_folders(home):
    """(what, folder) of each folder directly in home whose name starts with a dot: some program's
    settings (~/.claude, whose settings.json names hooks this harness runs, ~/.aws, ~/.kube,
    ~/.cursor...)."""
    try:
        names = (sorted(n for n in os.listdir(home) if n.startswith(".")
                        and os.path.isdir(os.path.join(home, n))))
    except OSError:
        return []
    return [(f"~/{name}, a folder of some program's settings",
             os.path.realpath(os.path.join(home, name))) for name in names]


def settings_targets(environ, home):
    """(what, real folder) of the settings folders this harness reads at every start, where they
    really are: `~/.config/tinyharness` may be a link into a dotfiles folder, and a workspace that
    holds that folder would let a command write the mcp.json or hooks that the next run anywhere
    starts, unconfined."""
    config, data = (xdg(environ, "XDG_CONFIG_HOME", home,
                        ".config"), xdg(environ, "XDG_DATA_HOME", home, ".local/share"))
    codex = environ.get("CODEX_HOME", "")
    codex = codex if os.path.isabs(codex) else os.path.join(home, ".codex")
    folders = [("tinyharness's settings (its mcp.json and hooks.json)",
                os.path.join(config, "tinyharness")),
               ("tinyharness's sessions and trust answers", os.path.join(data, "tinyharness")),
               ("your Claude Code settings (~/.claude: its hooks run here too)",
                os.path.join(home, ".claude")),
               ("Codex's settings (~/.codex: its config.toml's MCP servers start here too)", codex)]
    # where they are not links, read_or_run_from refuses a workspace in or below them
    found = [(what, os.path.realpath(path)) for what, path in folders
             if os.path.realpath(path) != path]
    # two single files whose MCP servers start here too: where a link puts them, their folder
    for what, path in (("your ~/.claude.json (Claude Code's MCP servers)",
                        os.path.join(home, ".claude.json")),
                       ("Codex's config.toml (its MCP servers)",
                        os.path.join(codex, "config.toml"))):
        real = os.path.dirname(os.path.realpath(path))
        if real != os.path.dirname(path):
            found.append((what, real))
    return found


def holds(folder, home):
    """Whether folder is the home folder or above it (a PATH with `~` or `/` in it): then only the
    folder itself is refused as a workspace, not every project below it (PATH is not searched below
    a folder)."""
    return home == folder or home.startswith(folder.rstrip(os.sep) + os.sep)


def xdg(environ, name, home, default):
    value = environ.get(name, "")
    return os.path.realpath(value if os.path.isabs(value) else os.path.join(home, default))
