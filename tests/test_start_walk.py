"""Start-up does not walk the workspace (tinyharness/sandbox/links.py): the hard-link note is worked
out once, before the first sandboxed command, never on the way to the first request, and it leaves
out the read-only object files a local `git clone` hard-links to its source repository."""
import os
import shutil
import subprocess

import pytest

from tests.ladder import run_stage
from tinyharness.sandbox import unavailable_reason
from tinyharness.sandbox.links import hard_link_note
from tinyharness.testing import ScriptedServer


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_local_clones_read_only_git_objects_are_not_named_and_a_real_link_is(tmp_path):
    source, ws, outside = tmp_path / "source", tmp_path / "ws", tmp_path / "outside"
    source.mkdir(), outside.mkdir()
    (source / "app.py").write_text("print('hello')\n")
    git("init", "-q", cwd=source)
    git("add", "app.py", cwd=source)
    git("commit", "-q", "-m", "one", cwd=source)
    git("gc", "-q", cwd=source)                                      # the objects in a pack, as a real repository's
    git("clone", "-q", str(source), str(ws), cwd=tmp_path)           # a local clone hard-links them
    linked = [p for p in (ws / ".git" / "objects").rglob("*") if p.is_file() and p.stat().st_nlink > 1]
    if not linked:
        pytest.skip("this filesystem made copies, not hard links")
    assert any(p.parent.name == "pack" and not p.stat().st_mode & 0o222 for p in linked)   # read-only packs
    assert hard_link_note(ws) is None                                # nothing git would ever write through
    (outside / "data.csv").write_text("shared")
    os.link(outside / "data.csv", ws / "data.csv")
    assert hard_link_note(ws).startswith("[sandbox] not covered: data.csv in the workspace is a hard link to a "
                                         "file outside")            # and no word of the clone's objects


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"needs the sandbox: {unavailable_reason()}")
@pytest.mark.parametrize("commands", [0, 2])
def test_the_note_is_worked_out_before_the_first_command_not_at_start(tmp_path, commands):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir(), outside.mkdir()
    (outside / "data.csv").write_text("shared")
    os.link(outside / "data.csv", ws / "data.csv")
    script = [{"tool_calls": [{"name": "shell", "arguments": {"command": f"echo {i}"}}]} for i in range(commands)]
    with ScriptedServer(script + ["done"]) as server:
        result = run_stage("tinyharness", ws, "--yes", "--no-session", "--base-url", server.base_url, "task",
                           env={"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}, timeout=60)
    assert result.returncode == 0 and len(server.requests) == commands + 1, result.stderr
    notes = [line for line in result.stderr.splitlines() if "hard link" in line]
    assert len(notes) == (1 if commands else 0), result.stderr       # none in a run that runs no command
