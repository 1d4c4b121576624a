"""The places in the home folder that hold keys: the harness reads none of them for the model and
grants none of them to a hook.

The problem. Two features reach into the home folder on the user's behalf: an instruction file may
import another (`@~/notes/style.md`, instructions.py), and a sandboxed hook may run the programs on
the user's PATH, which live in `~/.local/bin`, `~/.cargo/bin`, `~/.nvm/...` (hooks/run.py). A
link, an import or a PATH entry that leads into `~/.ssh` must not carry a private key to the model
server or to a hook that runs code the model wrote.

The mechanism. One list, `PRIVATE`, of the folders and files in the home folder that hold
credentials (SSH and GnuPG keys, cloud and registry tokens, Claude Code's and Codex's own login).
`private(path)` says whether a real path is one of them, lies in one, or holds one (a folder that
holds `~/.ssh`, the home folder itself, is private too: granting it grants the key).

What it cannot do. It knows the usual places, not every program's: a token kept in a file of
another name is not on the list. The sandbox's empty home folder is the wall for commands; this list
guards only what the harness itself reaches into the home folder for.
"""
import os

# relative to the home folder
PRIVATE = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json",
           ".netrc", ".pgpass", ".git-credentials", ".config/gh", ".npmrc", ".pypirc",
           ".cargo/credentials", ".cargo/credentials.toml", ".claude/.credentials.json",
           ".codex/auth.json", ".local/share/keyrings", ".password-store", ".vault-token")


def home():
    return os.path.realpath(os.path.expanduser("~"))


def private(path, home_folder=None):
    """True when the real PATH is one of the PRIVATE places, lies inside one, or holds one."""
    real = os.path.realpath(path)
    base = home_folder or home()
    for place in PRIVATE:
        secret = os.path.join(base, place)
        if real == secret or real.startswith(secret + os.sep) or \
                secret.startswith(real.rstrip(os.sep) + os.sep):
            return True
    return False
