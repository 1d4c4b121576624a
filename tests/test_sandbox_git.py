"""The sandbox against git takeovers: code that would run outside the sandbox at the user's next `git`.

A command in the sandbox cannot write outside the workspace, but `.git` is inside it, and git runs
programs named in its config and hooks. Each attack here plants such a program (one that touches a
canary file outside the workspace) through `tinyharness run --yes`, by a route that does not touch
`.git/config` or `.git/hooks` of the repository itself; then the test plays the user: a plain
`git status` and `git commit` outside any sandbox. The canary must not appear.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ladder import run_stage, tool_results
from tinyharness.sandbox import git as sandbox_git
from tinyharness import tools
from tinyharness.sandbox import unavailable_reason
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
pytestmark = [pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")


@pytest.fixture
def place(tmp_path):
    """A git workspace with one commit, a home of its own for git, and the canary's folder outside."""
    ws, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    for folder in (ws, outside, home):
        folder.mkdir()
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Ann",
           "GIT_AUTHOR_EMAIL": "ann@example.com", "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "ann@example.com"}
    place = SimpleNamespace(ws=ws, outside=outside, pwned=outside / "pwned", env=env)
    git(place, "init", "-q")
    (ws / "a.txt").write_text("a\n")
    git(place, "add", "a.txt")
    git(place, "commit", "-qm", "first")
    return place


def git(place, *args, cwd=None):
    """git as the user runs it: outside the sandbox, with all the user's rights."""
    return subprocess.run(["git", *args], cwd=cwd or place.ws, env=place.env, capture_output=True, text=True, timeout=30)


def user_runs_git(place, cwd=None):
    """What the user does next: status (config, fsmonitor), a commit (hooks). Returns whether the canary fired."""
    git(place, "status", cwd=cwd)
    (Path(cwd or place.ws) / "b.txt").write_text("b\n")
    git(place, "add", "b.txt", cwd=cwd)
    git(place, "commit", "-qm", "second", cwd=cwd)
    return place.pwned.exists()


def attack(place, *calls):
    """One scripted turn of tool calls under `tinyharness run --yes`; returns (process, {id: result})."""
    calls = [{"name": name, "arguments": arguments, "id": f"c{i}"} for i, (name, arguments) in enumerate(calls)]
    with ScriptedServer(script=[{"tool_calls": calls}, "done"]) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", "--base-url", server.base_url, "attack",
                           env={"HOME": place.env["HOME"]}, timeout=60)
    results = tool_results(server.requests[-1]) if len(server.requests) > 1 else {}
    assert not any(r.startswith("BLOCKED") for r in results.values()), results  # the regex did not stop it
    return result, results


def shell(command):
    return ("shell", {"command": command})


def hook(place):
    return f"#!/bin/sh\\ntouch {place.pwned}\\n"


def test_the_canary_is_real_without_the_sandbox(place):
    """The route works: with --sandbox off, the planted config runs at the user's next git command."""
    command = (f"git init -q --bare evil && git --git-dir=evil config core.bare false && "
               f"git --git-dir=evil config core.fsmonitor 'touch {place.pwned}' && echo ../evil > .git/commondir")
    with ScriptedServer(script=[{"tool_calls": [{"name": "shell", "id": "c", "arguments": {"command": command}}]},
                                "done"]) as server:
        run_stage("tinyharness", place.ws, "--yes", "--no-session", "--sandbox", "off", "--base-url", server.base_url,
                  "attack", env={"HOME": place.env["HOME"]})
    assert user_runs_git(place)


@needs_sandbox
def test_commondir_pointing_at_a_planted_config_is_undone(place):
    result, results = attack(place, shell(
        f"git init -q --bare evil && git --git-dir=evil config core.bare false && "
        f"git --git-dir=evil config core.fsmonitor 'touch {place.pwned}' && mkdir -p evil/hooks && "
        f"printf '{hook(place)}' > evil/hooks/pre-commit && chmod +x evil/hooks/pre-commit && echo ../evil > .git/commondir"),
        ("write_file", {"path": ".git/commondir", "content": "../evil\n"}))
    assert result.returncode == 0 and ".git/commondir (created)" in results["c0"], results
    assert results["c1"].startswith("ERROR") and "protected" in results["c1"]
    assert not (place.ws / ".git" / "commondir").exists() and not user_runs_git(place)


@needs_sandbox
def test_a_git_file_where_there_was_no_git_is_removed(place):
    shutil.rmtree(place.ws / ".git")
    result, results = attack(place, shell(
        f"git init -q x && mv x/.git evil && rmdir x && git --git-dir=evil config core.fsmonitor 'touch {place.pwned}' "
        "&& echo 'gitdir: evil' > .git"), ("write_file", {"path": ".git", "content": "gitdir: evil\n"}))
    assert ".git (created)" in results["c0"] and results["c1"].startswith("ERROR") and "protected" in results["c1"]
    assert not (place.ws / ".git").exists()
    git(place, "status")
    assert not place.pwned.exists()


@needs_sandbox
def test_a_moved_git_folder_is_moved_back_and_its_config_put_back(place):
    config = (place.ws / ".git" / "config").read_bytes()
    result, results = attack(place, shell(
        f"mv .git .git-real && echo 'gitdir: .git-real' > .git && git config core.fsmonitor 'touch {place.pwned}' && "
        f"printf '{hook(place)}' > .git-real/hooks/pre-commit && chmod +x .git-real/hooks/pre-commit"))
    assert ".git (moved to .git-real; moved back)" in results["c0"], results
    assert (place.ws / ".git").is_dir() and not (place.ws / ".git-real").exists()
    assert (place.ws / ".git" / "config").read_bytes() == config and not user_runs_git(place)
    assert "first" in git(place, "log", "--format=%s").stdout  # the history is all there


@needs_sandbox
def test_a_submodule_hook_and_config_are_undone(place):
    """An absorbed submodule: its git folder is .git/modules/sub, with hooks and config of its own."""
    git(place, "init", "-q", "sub")
    (place.ws / "sub" / "s.txt").write_text("s\n")
    git(place, "add", "s.txt", cwd=place.ws / "sub")
    git(place, "commit", "-qm", "sub first", cwd=place.ws / "sub")
    (place.ws / ".git" / "modules").mkdir()
    shutil.move(place.ws / "sub" / ".git", place.ws / ".git" / "modules" / "sub")
    (place.ws / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    git(place, "config", "core.worktree", "../../../sub", cwd=place.ws / "sub")
    deep = ".git/modules/sub/hooks/pre-commit"
    result, results = attack(place, shell(
        f"printf '{hook(place)}' > {deep} && chmod 755 {deep} && git -C sub config core.fsmonitor 'touch {place.pwned}'"),
        ("write_file", {"path": deep, "content": f"#!/bin/sh\ntouch {place.pwned}\n"}))
    assert f"{deep} (created)" in results["c0"] and ".git/modules/sub/config (changed)" in results["c0"], results
    assert results["c1"].startswith("ERROR") and "protected" in results["c1"]
    assert not (place.ws / deep).exists() and not user_runs_git(place, cwd=place.ws / "sub")


@needs_sandbox
def test_a_hooks_folder_made_unreadable_is_still_checked(place):
    """chmod 111 hides a planted hook from a non-root reader, not from git; the harness takes its
    rights on the folder back before it looks, and puts the folder's mode back after."""
    mode = (place.ws / ".git" / "hooks").stat().st_mode
    result, results = attack(place, shell(f"printf '{hook(place)}' > .git/hooks/pre-commit && chmod +x "
                                          ".git/hooks/pre-commit && chmod 111 .git/hooks && chmod 000 .git/info"))
    assert ".git/hooks/pre-commit (created)" in results["c0"], results
    assert (place.ws / ".git" / "hooks").stat().st_mode == mode and not user_runs_git(place)


@needs_sandbox
def test_worktree_config_and_attributes_are_undone(place):
    result, results = attack(place, shell(
        "git config extensions.worktreeConfig true; "
        f"printf '[core]\\n\\tfsmonitor = touch {place.pwned}\\n' > .git/config.worktree; "
        "echo '* diff=evil' > .git/info/attributes"))
    assert ".git/config.worktree (created)" in results["c0"] and ".git/info/attributes (created)" in results["c0"]
    assert not (place.ws / ".git" / "config.worktree").exists() and not user_runs_git(place)


def test_the_file_tools_refuse_git_and_the_harness_folder_at_any_depth_and_through_a_link(place):
    (place.ws / "g").symlink_to(".git", target_is_directory=True)
    for path in [".git", ".git/commondir", ".git/modules/sub/hooks/pre-commit", "sub/.git", ".GIT/config",
                 ".tinyharness/hooks.json", "g/hooks/pre-commit", "g/config", "./.git/info/attributes"]:
        result = tools.run_tool(str(place.ws), "write_file", {"path": path, "content": "#!/bin/sh\ntouch pwned\n"})
        assert result.startswith("ERROR") and "protected" in result, (path, result)
    assert not (place.ws / ".git" / "hooks" / "pre-commit").exists() and not user_runs_git(place)


@needs_sandbox
def test_when_the_restore_fails_the_run_stops_and_the_user_is_told(place, monkeypatch):
    """A harness that cannot put things back (EMFILE, a full disk) must not carry on as if it had."""
    def crippled(*args):
        raise OSError(24, "Too many open files")
    monkeypatch.setattr(sandbox_git, "put_git_back", crippled)
    with ScriptedServer(script=[{"tool_calls": [{"name": "shell", "id": "c", "arguments": {"command": "echo hi"}}]},
                                "done"]) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", "--base-url", server.base_url, "task",
                           env={"HOME": place.env["HOME"]})
    assert result.returncode == 1 and len(server.requests) == 1, result
    assert "could not check or put back" in result.stderr and ".git/hooks" in result.stderr, result.stderr
    assert "Too many open files" in result.stderr


@needs_sandbox
def test_as_a_user_a_hook_behind_chmod_111_is_still_found(tmp_path):
    """The permission trick needs an ordinary user (root reads through any mode): as root, the test
    runs the harness as nobody with setpriv. chmod 111 on .git/hooks after planting a hook: the harness
    takes its rights back, finds the hook, removes it, and puts the mode back."""
    prefix = [] if os.geteuid() != 0 else ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    # the probe imports what the driver below imports (the package alone may load where `requests` does not)
    if prefix and subprocess.run([*prefix, sys.executable, "-c", "from tinyharness import tools"],
                                 capture_output=True).returncode:
        pytest.skip("running as root, and setpriv to nobody does not work here")
    root = tempfile.mkdtemp(prefix="tinyharness-user-")  # in /tmp: nobody can reach it there
    try:
        os.chmod(root, 0o777)
        ws, outside = Path(root, "ws"), Path(root, "outside")
        as_user = lambda *command: subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=60,
                                                  env={**os.environ, "HOME": root, "GIT_CONFIG_NOSYSTEM": "1"})
        as_user("mkdir", str(ws), str(outside))
        as_user("git", "init", "-q", str(ws))
        mode = (ws / ".git" / "hooks").stat().st_mode
        pwned = outside / "pwned"
        command = (f"printf '#!/bin/sh\\\\ntouch {pwned}\\\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit "
                   "&& chmod 111 .git/hooks")
        driver = (f"from tinyharness import tools\nfrom tinyharness.sandbox import Sandbox\n"
                  f"print(tools.shell({str(ws)!r}, {command!r}, sandbox=Sandbox()))")
        result = as_user(sys.executable, "-c", driver)
        assert ".git/hooks/pre-commit (created)" in result.stdout, result
        assert (ws / ".git" / "hooks").stat().st_mode == mode and not (ws / ".git" / "hooks" / "pre-commit").exists()
        as_user("git", "-C", str(ws), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty",
                "-m", "x")
        assert not pwned.exists()
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", root])
        shutil.rmtree(root, ignore_errors=True)


def test_a_settled_file_read_from_memory_is_still_checked_by_its_stamp(tmp_path, monkeypatch):
    """The snapshot keeps what a settled watched file held (known_digest): the same inode, size, times and mode
    give the same digest without a read; a change of the same size moves ctime, and is seen and put back."""
    import time
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    config = tmp_path / ".git" / "config"
    monkeypatch.setattr(sandbox_git, "SETTLED_NS", 0)  # every file counts as settled: the stamp alone decides
    monkeypatch.setattr(sandbox_git, "KNOWN", {})
    contents = {}
    before = sandbox_git.snapshot(str(tmp_path), contents)
    assert str(config) in sandbox_git.KNOWN
    original = config.read_bytes()
    time.sleep(0.05)  # past the clock's tick: a write now gets a later ctime
    planted = original.replace(b"bare = false", b"editor = vim")  # the same size: a key that runs a program
    assert len(planted) == len(original) and planted != original
    config.write_bytes(planted)
    undone = sandbox_git.restore(str(tmp_path), before, contents)
    assert undone == [".git/config (changed)"] and config.read_bytes() == original


def test_a_file_changed_just_before_it_was_read_is_read_again(tmp_path, monkeypatch):
    """A file whose ctime is within SETTLED_NS of the read may change again within the same clock tick,
    unseen by its stamp: it is not kept (git's racily-clean rule)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(sandbox_git, "KNOWN", {})
    (tmp_path / ".git" / "config").write_text("[core]\n")
    sandbox_git.snapshot(str(tmp_path), {})
    assert str(tmp_path / ".git" / "config") not in sandbox_git.KNOWN
