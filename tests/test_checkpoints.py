"""Nothing lost: what a run changes - by write_file or by a shell command, `.git` included - is undone to the byte.

Each test drives the real command line (`tinyharness run --yes`, then `tinyharness checkpoints` and `tinyharness
undo`) against the scripted server, whose model runs the commands a careless agent runs: `rm -rf .git src`
(spelled so that m3's regex lets it through, as a model finds a way), files overwritten, a history rewritten
and pruned, a pack truncated. The judge is the disk: every path, its bytes, its mode, its link target, and
the user's own `git log`.
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from tinyharness.sandbox import unavailable_reason
from tinyharness.testing import ScriptedServer

VARIANTS_DEEP = True  # the first way of destroying the history runs in the quick tier, the rest in the deep one
pytestmark = [pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]
SANDBOX = ["--sandbox", "off"] if unavailable_reason() else []  # confined where the machine can
RM = "x=rm; $x -rf"  # what m3's regex does not read as a recursive delete


class Place:
    """A git workspace with two commits (packed), a data folder of its own for the store, a home for git."""

    def __init__(self, root):
        self.ws, self.data, self.home = root / "ws", root / "data", root / "home"
        for folder in (self.ws, self.data, self.home):
            folder.mkdir()
        self.env = {**os.environ, "XDG_DATA_HOME": str(self.data), "HOME": str(self.home), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com", "GIT_COMMITTER_NAME": "Ann",
                    "GIT_COMMITTER_EMAIL": "ann@example.com", "PYTHONIOENCODING": "utf-8"}
        self.env = {k: v for k, v in self.env.items() if not k.startswith("TINYHARNESS_")}

    def git(self, *args):
        """git as the user runs it, outside any sandbox."""
        return subprocess.run(["git", *args], cwd=self.ws, env=self.env, capture_output=True, text=True, timeout=60)

    def cli(self, *args, timeout=120):
        return subprocess.run([sys.executable, "-m", "tinyharness", *args], cwd=self.ws, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def run(self, *calls, flags=()):
        """One scripted turn per call under `tinyharness run --yes`."""
        script = [{"tool_calls": [{"name": name, "arguments": arguments}]} for name, arguments in calls] + ["done"]
        with ScriptedServer(script=script) as server:
            done = self.cli("run", "--yes", "--no-session", *SANDBOX, *flags, "--base-url", server.base_url,
                            "the task")
        assert done.returncode == 0, done.stderr
        return done


@pytest.fixture
def place(tmp_path):
    place = Place(tmp_path)
    ws = place.ws
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("print('hello')\n")
    (ws / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(ws / "run.sh", 0o755)
    for name, text in (("a.txt", "alpha\n"), ("b.txt", "beta\n"), ("c.txt", "gamma\n"), ("notes.md", "notes\n")):
        (ws / name).write_text(text)
    os.symlink("src/main.py", ws / "link")
    place.git("init", "-q")
    place.git("add", "-A")
    place.git("commit", "-qm", "first")
    (ws / "src" / "util.py").write_text("X = 1\n")
    place.git("add", "-A")
    place.git("commit", "-qm", "second")
    place.git("gc", "-q")  # the objects in a pack, as in a repository that has lived a while
    return place


def tree(root):
    """{path: what it is} for every path under root: a folder's mode, a link's target, a file's mode and bytes."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            relative = os.path.relpath(path, root)
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("folder", stat.S_IMODE(info.st_mode))
            else:
                with open(path, "rb") as file:
                    found[relative] = ("file", stat.S_IMODE(info.st_mode), file.read())
    return found


def shell(command):
    return ("shell", {"command": command})


def test_a_run_that_deletes_git_and_src_and_rewrites_three_files_is_undone_to_the_byte(place):
    before, history = tree(place.ws), place.git("log", "--format=%H %s").stdout
    place.run(shell(f"{RM} .git src"),
              ("write_file", {"path": "a.txt", "content": "rewritten by the model\n"}),
              shell("printf 'new\\n' > b.txt && : > c.txt && chmod 600 run.sh && mv notes.md notes.txt "
                    "&& ln -sfn a.txt link"))
    assert not (place.ws / ".git").exists() and not (place.ws / "src").exists()  # the damage is real
    assert place.git("log").returncode != 0
    listed = place.cli("checkpoints")
    assert listed.returncode == 0 and "$x -rf .git src" in listed.stdout and "write_file: a.txt" in listed.stdout
    undone = place.cli("undo", "--to", "1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "Undid 3 changes" in undone.stdout
    assert tree(place.ws) == before  # every path, its bytes, its mode, its link target
    assert place.git("log", "--format=%H %s").stdout == history and place.git("fsck", "--strict").returncode == 0


HISTORY_LOSSES = {
    "rm -rf .git": f"{RM} .git",
    "reset --hard, then gc --prune=now": "git reset -q --hard HEAD~1 && git reflog expire --expire=now --all "
                                         "&& git gc -q --prune=now",
    "a truncated pack": "chmod u+w .git/objects/pack/*.pack && truncate -s 100 .git/objects/pack/*.pack",
}


@pytest.mark.parametrize("loss", HISTORY_LOSSES)
def test_a_lost_history_comes_back_whole_with_undo(place, loss):
    history = place.git("log", "--format=%H %s").stdout
    place.run(shell(HISTORY_LOSSES[loss]))
    assert place.git("log", "--format=%H %s").stdout != history  # the history really was lost
    undone = place.cli("undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert place.git("log", "--format=%H %s").stdout == history
    assert place.git("fsck", "--strict").returncode == 0


def test_a_file_the_user_changed_after_the_run_is_named_and_kept_unless_force(place):
    place.run(("write_file", {"path": "a.txt", "content": "model\n"}), shell("echo model > b.txt"))
    (place.ws / "b.txt").write_text("mine\n")  # the user's edit, after the run
    undone = place.cli("undo", "--to", "1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (place.ws / "a.txt").read_text() == "alpha\n"
    assert (place.ws / "b.txt").read_text() == "mine\n"
    assert "kept: b.txt" in undone.stdout
    place.run(shell("echo model > c.txt"))
    (place.ws / "c.txt").write_text("mine\n")
    forced = place.cli("undo", "--force")
    assert forced.returncode == 0 and (place.ws / "c.txt").read_text() == "gamma\n", forced.stdout


def test_undo_works_after_the_harness_is_killed_mid_command(place):
    before = tree(place.ws)
    command = f"echo changed > a.txt && {RM} src .git && echo > started && sleep 60"
    script = [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}, "done"]
    with ScriptedServer(script=script) as server:
        harness = subprocess.Popen([sys.executable, "-m", "tinyharness", "run", "--yes", "--no-session", *SANDBOX,
                                    "--base-url", server.base_url, "the task"], cwd=place.ws, env=place.env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (place.ws / "started").exists():  # the command is running: the harness is mid-call
                assert harness.poll() is None and time.monotonic() < deadline, "the command never started"
                time.sleep(0.05)
        finally:
            harness.send_signal(signal.SIGKILL)
            harness.wait(timeout=30)
    listed = place.cli("checkpoints")
    assert "ended mid-call" in listed.stdout, listed.stdout
    undone = place.cli("undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "ended mid-call" in undone.stdout
    assert tree(place.ws) == before


def test_the_users_git_is_byte_identical_after_a_run_that_made_checkpoints(place):
    git = place.ws / ".git"
    before = {path: (entry, os.lstat(git / path).st_mtime_ns) for path, entry in tree(git).items()}
    place.run(("write_file", {"path": "a.txt", "content": "model\n"}), shell("echo more >> b.txt"))
    assert place.cli("checkpoints").stdout.count("->") == 2  # two changes recorded
    after = {path: (entry, os.lstat(git / path).st_mtime_ns) for path, entry in tree(git).items()}
    assert after == before  # not a byte, mode or time of .git changed: no index, no ref, no object written


def test_chat_undo_and_rewind(place):
    script = [{"tool_calls": [{"name": "shell", "arguments": {"command": f"{RM} src && echo gone > a.txt"}}]},
              "done", {"tool_calls": [{"name": "write_file", "arguments": {"path": "d.txt", "content": "d\n"}}]},
              "done"]
    before = tree(place.ws)
    with ScriptedServer(script=script) as server:
        done = subprocess.run([sys.executable, "-m", "tinyharness", "chat", "--yes", *SANDBOX, "--base-url",
                               server.base_url], cwd=place.ws, env=place.env, capture_output=True, text=True,
                              input="clean up\nwrite d\n/rewind\n/undo\n/rewind 1\n", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1  " in done.stdout and "write_file: d.txt" in done.stdout  # /rewind lists the changes
    assert done.stdout.count("Undid 1 change") == 2
    assert tree(place.ws) == before


def test_links_the_model_left_where_a_folder_and_a_file_were_lead_the_restore_nowhere(place, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary").write_text("keep\n")
    before, canary = tree(place.ws), tree(outside)
    place.run(shell(f"{RM} src a.txt && ln -s ../outside src && ln -s ../outside/canary a.txt"))
    undone = place.cli("undo")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert tree(place.ws) == before  # src a folder again, a.txt a file again
    assert tree(outside) == canary  # nothing written through either link


def test_a_write_through_one_name_of_a_hard_linked_file_is_seen_under_the_other(place):
    (place.ws / "b").mkdir()
    os.link(place.ws / "a.txt", place.ws / "b" / "same.txt")  # one file, two names in two folders
    place.run(shell("echo more >> a.txt"), shell("echo new > c.txt"))
    undone = place.cli("undo", "--to", "1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "kept" not in undone.stdout  # the other name's change was the run's, not the user's
    assert (place.ws / "b" / "same.txt").read_text() == (place.ws / "a.txt").read_text() == "alpha\n"


def test_a_tree_deeper_than_pythons_recursion_is_kept_and_restored(place):
    make = "import os\nfor _ in range(1100): os.mkdir('d'); os.chdir('d')\nopen('f', 'w').write('deep')"
    try:
        place.run(shell(f"python3 -c \"{make}\""), shell(f"{RM} d"))
        undone = place.cli("undo")
        assert undone.returncode == 0, undone.stdout + undone.stderr
        assert (place.ws / ("d/" * 1100) / "f").read_text() == "deep"
    finally:
        subprocess.run(["rm", "-rf", "d"], cwd=place.ws)  # shutil.rmtree recurses: pytest's clean-up could not


def test_no_checkpoints_keeps_none_and_undo_says_there_is_nothing(place):
    place.run(shell("echo model > a.txt"), flags=["--no-checkpoints"])
    listed, undone = place.cli("checkpoints"), place.cli("undo")
    assert listed.returncode == undone.returncode == 1
    assert "Nothing to undo" in undone.stdout and (place.ws / "a.txt").read_text() == "model\n"
    assert not (place.data / "tinyharness" / "checkpoints").exists()  # not a byte stored


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"needs the sandbox: {unavailable_reason()}")
def test_a_command_can_neither_reach_nor_destroy_the_store(place):
    store = place.data / "tinyharness" / "checkpoints"
    place.run(("write_file", {"path": "a.txt", "content": "model\n"}))  # the store exists from here on
    kept = tree(store)
    done = place.run(shell(f"ls -R {store}; {RM} {store} {place.data}; echo x > new.txt"))
    assert "new.txt" in place.cli("checkpoints").stdout
    assert {path: entry for path, entry in tree(store).items() if path in kept} == kept  # nothing of it lost
    assert str(store / "runs") not in done.stdout  # nor listed to the model
    first, second = place.cli("undo"), place.cli("undo")  # the last run's change, then the run's before it
    assert first.returncode == second.returncode == 0, first.stdout + second.stdout
    assert not (place.ws / "new.txt").exists() and (place.ws / "a.txt").read_text() == "alpha\n"
