"""A yes to a workspace's hooks or server list covers the workspace files it names (tinyharness/trusted_files.py).

The attack: the user trusts `.mcp.json` that runs `python3 server.py`; the model then rewrites server.py.
The list is unchanged, so a trust tied to its bytes alone would start the model's code, unconfined, at the
next run. Judged by a canary outside the workspace that each version of server.py writes when it starts.
"""
import json
import os
import subprocess
import sys

import pytest

from tests.ladder import ROOT
from tinyharness import trust, trusted_files

PY = sys.executable


def server_writing(canary, word):
    return f"open({str(canary)!r}, 'a').write({word!r})\n"


def mcp_list(workspace, env):
    return subprocess.run([PY, "-m", "tinyharness", "mcp", "list"], cwd=workspace, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def remember(path, env):
    subprocess.run([PY, "-c", "import sys; from tinyharness import trust; trust.remember(sys.argv[1])", str(path)],
                   env={**os.environ, **env}, check=True, cwd=ROOT)


@pytest.mark.parametrize("where, args", [
    (".mcp.json", ["server.py"]),
    (".vscode/mcp.json", ["${workspaceFolder}/server.py"]),
    (".mcp.json", ["-m", "server"]),
])
def test_a_server_file_the_model_changes_after_the_yes_never_starts(tmp_path, where, args):
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / ".vscode").mkdir(parents=True)
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text("")
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    key = "servers" if where.startswith(".vscode") else "mcpServers"
    (workspace / where).write_text(json.dumps({key: {"s": {"command": PY, "args": args}}}))
    (workspace / "server.py").write_text(server_writing(canary, "the user's server ran;"))
    remember(workspace / where, env)
    mcp_list(workspace, env)  # the control: trusted, it starts (and fails the handshake: it only writes)
    assert canary.read_text() == "the user's server ran;"
    (workspace / "server.py").write_text(server_writing(canary, "THE MODEL'S CODE RAN"))  # the model's edit
    result = mcp_list(workspace, env)
    assert canary.read_text() == "the user's server ran;"
    assert "NOT trusted yet" in result.stdout, result.stdout + result.stderr


def test_the_question_names_the_files_the_yes_covers(tmp_path, capsys):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "server.py").write_text("pass\n")
    config = workspace / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": "python3", "args": ["server.py"]}}}))
    os.environ["XDG_DATA_HOME"] = str(tmp_path / "data")  # the store; conftest gives every test its own HOME
    try:
        assert trust.ensure_trusted(config, "an MCP server list", lambda question: True)
        assert trust.is_trusted(config)
        (workspace / "server.py").write_text("import os\n")
        assert not trust.is_trusted(config)
    finally:
        del os.environ["XDG_DATA_HOME"]
    shown = capsys.readouterr().out
    assert "Your yes also covers the workspace files it names, as they are now: server.py." in shown


def test_a_list_that_names_no_workspace_file_keeps_its_plain_digest(tmp_path):
    """An earlier yes (the list's SHA-256 alone) still holds when the list names nothing in the workspace."""
    import hashlib
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": "npx", "args": ["-y", "some-mcp"]}}}))
    assert trust.fingerprint(config) == hashlib.sha256(config.read_bytes()).hexdigest()


def test_what_a_list_names_is_found_as_its_program_would_find_it(tmp_path):
    workspace = tmp_path / "ws"
    for folder in (".vscode", "node_modules/.bin", "pkg/sub", "tools", ".git/hooks"):
        (workspace / folder).mkdir(parents=True)
    for name in ("server.py", "notes.py", "pkg/sub/mod.py", "tools/a.sh", "run", ".git/hooks/x"):
        (workspace / name).write_text(name)
    (workspace / "node_modules/.bin/tool").symlink_to("/etc/hostname")
    config = workspace / ".vscode" / "mcp.json"
    config.write_text(json.dumps({"servers": {
        "a": {"command": "python3", "args": ["${workspaceFolder}/server.py", "-m", "notes", "--dir=tools"]},
        "b": {"command": "npx", "args": ["-y", "tool", "https://example.org/run"]},
        "c": {"command": "python", "args": ["-mpkg.sub.mod", "/etc/hostname", "../outside", ".git/hooks/x"]},
        "d": {"command": "sh -c './run --fast'", "env": {"X": "missing.py"}}}}))
    assert trusted_files.named_files(config, config.read_bytes()) == [
        "node_modules/.bin/tool", "notes.py", "pkg/sub/mod.py", "run", "server.py", "tools"]
    before = trust.fingerprint(config)
    (workspace / "tools" / "a.sh").write_text("changed")  # a file inside a named folder
    assert trust.fingerprint(config) != before
    before = trust.fingerprint(config)
    (workspace / "node_modules/.bin/tool").unlink()
    (workspace / "node_modules/.bin/tool").symlink_to("/etc/passwd")  # a link out: its target's name counts
    assert trust.fingerprint(config) != before


def test_a_list_behind_a_link_or_a_fifo_is_never_trusted(tmp_path, capsys):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    (workspace / ".mcp.json").symlink_to(elsewhere)
    os.mkfifo(workspace / "hooks.json")
    for path in (workspace / ".mcp.json", workspace / "hooks.json"):
        assert not trust.is_trusted(path)
        assert not trust.ensure_trusted(path, "a list", lambda question: True)
    assert "was not read, so nothing it lists runs" in capsys.readouterr().err


def test_a_server_list_is_read_capped_and_a_users_own_may_be_a_link(tmp_path):
    """A server list is read through the door: a workspace's that is 1 GiB is refused with its size, not read
    (it used to be read whole), and the user's own may be a link into a dotfiles folder, as managers make it."""
    from tinyharness.filedoor import CONFIG_CAP
    from tinyharness.mcp.config import load_config
    workspace = tmp_path / "ws"
    workspace.mkdir()
    huge = workspace / ".mcp.json"
    with open(huge, "wb") as file:
        file.write(b'{"mcpServers": {}, "x": "')
        file.truncate(1 << 30)
    with pytest.raises(ValueError, match=f"it is {1 << 30:,} bytes, more than the {CONFIG_CAP:,}"):
        load_config(huge, workspace)
    dotfiles = tmp_path / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps({"mcpServers": {"notes": {"command": "notes-server"}}}))
    own = tmp_path / "config" / "tinyharness" / "mcp.json"
    own.parent.mkdir(parents=True)
    own.symlink_to(dotfiles)
    assert list(load_config(own, workspace)) == ["notes"]
