"""The command's environment: an allowlist, not a denylist.

The problem: the harness's environment holds secrets under names no list can guess (`DATABASE_URL`,
`GITHUB_PAT`, `MYSQL_PWD`, `SENTRY_DSN`...), and some variables are doors to programs outside the
sandbox. The mechanism: commands get `PATH`, `HOME`, `LANG`, `LANGUAGE`, `LC_*`, `TERM`, `USER`,
`LOGNAME`, `SHELL`, `TZ`, and what `--sandbox-env NAME` adds; `TMPDIR` is the private folder, `PWD`
the workspace. (Not `PYTHONSAFEPATH`: `python -m unittest test_x` must import the workspace's
`test_x.py`, and whatever a command imports from the workspace runs inside the same sandbox.)
`SSH_AUTH_SOCK`, `TMUX`, `STY`, `DBUS_SESSION_BUS_ADDRESS` and any value that names a socket never
pass, even when asked for.

What it cannot do: a secret the user passes with `--sandbox-env` is the command's to read and print,
and what the command prints reaches the model.
"""
import os
import stat

# An allowlist: a denylist of secret-looking names leaks DATABASE_URL, GITHUB_PAT, MYSQL_PWD,
# SENTRY_DSN...
# and LC_*
ENV_ALLOWED = {"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "USER", "LOGNAME", "SHELL", "TZ"}
# Never passed, even when asked for: each is a door to a program outside the sandbox (the SSH agent
# signs with your key, `tmux run-shell` and `screen -X` run commands in your terminal, D-Bus starts
# services).
ENV_NEVER = {"SSH_AUTH_SOCK", "SSH_AGENT_PID", "TMUX", "TMUX_PANE", "STY",
             "DBUS_SESSION_BUS_ADDRESS",
             "GPG_AGENT_INFO", "XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY",
             "TINYHARNESS_API_KEY"}


def env_refusal(name):
    """Why --sandbox-env NAME is refused, or None."""
    if name.upper() in ENV_NEVER:
        return (f"{name} is never passed to sandboxed commands: it leads to a program outside the "
                "sandbox")
    if not name or "=" in name:
        return f"{name!r} is not a variable name"
    return None


def names_a_socket(value):
    """True when the value is (or lists) a path to a socket, or a D-Bus style `unix:path=`
    address."""
    if value.startswith(("unix:", "tcp:", "abstract=")):
        return True
    for piece in value.split(os.pathsep):
        if piece.startswith("/"):
            try:
                if stat.S_ISSOCK(os.stat(piece).st_mode):
                    return True
            except (OSError, ValueError):
                pass
    return False


def clean_environment(environ, tmpdir, workspace=None, extra=()):
    """The command's environment: the allowed names (and `extra`, from --sandbox-env) that hold no
    socket path; TMPDIR the private folder; PWD the workspace."""
    allowed = set(ENV_ALLOWED) | set(extra)
    env = {k: v for k, v in environ.items()
           if (k in allowed or k.startswith("LC_")) and k.upper() not in ENV_NEVER
           and not names_a_socket(v)}
    env.update(TMPDIR=tmpdir)
    if workspace:
        env["PWD"] = workspace
    return env
