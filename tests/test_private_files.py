"""Private by default: every file the harness writes that holds the conversation - the --transcript, the
session, view's pages, chat's /save, eval's report and page, the chat's input history - is made 0600, in
folders it makes 0700, whatever the umask; and a second user of the machine reads none of them.

The model reads a secret (a 0600 file of the user's) into the conversation; every file then holds it. The
second user is `nobody`, reached by os.setuid in a forked child when the tests run as root. Everything lives
in a folder of /tmp that nobody may enter (tmp_path is under a 0700 folder of root's, where nobody reaches
nothing, and the test would prove nothing): a control file of the same folders, 0644, which nobody does
read, shows that the vantage point works."""
import errno
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.ladder import FINAL, ROOT, calls, run_stage, tool_call
from tinyharness import eval as ev
from tinyharness import filedoor
from tinyharness.testing import ScriptedServer

SECRET = "the-user-s-secret-7c1e"


def other_user():
    """The passwd entry of a user to read as (nobody), or a reason why there is none."""
    if os.geteuid() != 0:
        return None, "not root: no other user to read as (the modes are still checked)"
    try:
        return pwd.getpwnam("nobody"), None
    except KeyError:
        return None, "running as root, but this machine has no user nobody"


def read_as(user, paths):
    """{path: what USER got from it}: its text, the names in a folder, or the error's name. In a forked
    child that drops to the user with os.setuid."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os calls, then _exit
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            got = {}
            for path in paths:
                try:
                    if os.path.isdir(path):
                        got[path] = " ".join(os.listdir(path))
                    else:
                        with open(path, "rb") as file:
                            got[path] = file.read().decode("utf-8", "replace")
                except OSError as e:
                    got[path] = errno.errorcode.get(e.errno, str(e.errno))
            data = json.dumps(got).encode()
            while data:
                data = data[os.write(write, data):]
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    with os.fdopen(read, "rb") as pipe:
        chunks.append(pipe.read())
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b"{}")


@pytest.fixture
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


@pytest.fixture
def box():
    """A folder nobody may enter and read (0755 all the way from /), with the workspace and the data folder
    the harness makes its own folders in."""
    root = Path(tempfile.mkdtemp(prefix="tinyharness-private-"))
    try:
        ws, data = root / "ws", root / "data"
        for folder in (root, ws, data):
            folder.mkdir(exist_ok=True)
            folder.chmod(0o755)
        (ws / "secret.txt").write_text(SECRET + "\n")
        (ws / "secret.txt").chmod(0o600)
        (ws / "control.txt").write_text("anyone may read this\n")
        (ws / "control.txt").chmod(0o644)
        yield root, ws, data
    finally:
        shutil.rmtree(root, ignore_errors=True)


def cli(ws, data, *args, stdin=""):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8", XDG_DATA_HOME=str(data), TERM="dumb")
    return subprocess.run([sys.executable, "-m", "tinyharness", *args], cwd=ws, input=stdin, capture_output=True,
                          text=True, encoding="utf-8", errors="replace", timeout=60, env=env)


def write_everything(ws, data, tmp_path):
    """A run with --transcript, view of its session and of the transcript, a chat that /saves, an eval's
    --out: each holds the secret. Returns the files and the folders the harness wrote."""
    read_secret = calls(tool_call("read_file", path="secret.txt"))
    with ScriptedServer([read_secret, f"It says {SECRET}."]) as server:
        done = run_stage(FINAL, ws, "--yes", "--transcript", "t.json", "--base-url", server.base_url, "read it",
                         env={"XDG_DATA_HOME": str(data)})
    assert done.returncode == 0, done.stderr
    sessions = data / "tinyharness" / "sessions"
    [session] = sessions.glob("*.jsonl")
    for target in (session.stem, "t.json"):
        shown = cli(ws, data, "view", target)
        assert shown.returncode == 0, shown.stderr
    with ScriptedServer([read_secret, f"It says {SECRET}."]) as server:
        chat = cli(ws, data, "chat", "--yes", "--base-url", server.base_url, stdin="read it\n/save saved.json\n/quit\n")
    assert chat.returncode == 0 and (ws / "saved.json").exists(), chat.stderr
    with ScriptedServer(script=[]) as server:  # answers GET /models; the runner below stands for the harness
        runner = lambda job: ev.Output(0, f"The secret is {SECRET}.\n", "[stats] turns=1 tool_calls=0")
        assert ev.main(["--base-url", server.base_url, "--models", "m", "--tasks", "fact", "--out",
                        str(ws / "report.json")], runner=runner) == 0
    files = [ws / "t.json", ws / "t.html", session, session.with_suffix(".html"), ws / "saved.json",
             ws / "report.json", ws / "report.html", *sorted(set(sessions.glob("*.jsonl")) - {session})]
    # the eval's page shows verdicts and reasons, not answers: every other file holds the secret
    assert [p.name for p in files if SECRET not in p.read_text()] == ["report.html"]
    return files, [data / "tinyharness", sessions]


@pytest.mark.parametrize("umask", [0o022, 0o000], indirect=True, ids=["umask022", "umask000"])
def test_a_second_user_reads_nothing_the_harness_wrote(umask, box, tmp_path):
    root, ws, data = box
    files, folders = write_everything(ws, data, tmp_path)
    user, why = other_user()
    if user is not None:
        control = ws / "control.txt"
        got = read_as(user, [str(control)] + [str(p) for p in files + folders])
        assert got.pop(str(control)) == "anyone may read this\n"  # the vantage point works
        assert [path for path, text in got.items() if SECRET in text] == []
        assert got == {str(p): "EACCES" for p in files + folders}
    modes = {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in files + folders}
    assert modes == {**{str(p): "0o600" for p in files}, **{str(p): "0o700" for p in folders}}
    if user is None:
        pytest.skip(why)


@pytest.mark.parametrize("umask", [0o000], indirect=True)
def test_a_file_the_harness_rewrites_is_0600_from_its_first_byte(umask, tmp_path, monkeypatch):
    """The new file is created 0600 (never chmod'ed after its content is in it), and a name the model made
    0666 beforehand does not open the rewrite to others."""
    seen, real_open = [], os.open

    def watching_open(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if str(path).endswith(".tinyharness.tmp"):
            seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return fd
    monkeypatch.setattr(os, "open", watching_open)
    planted = tmp_path / "t.json"
    planted.write_text("[]")
    planted.chmod(0o666)
    filedoor.write_text("t.json", f'["{SECRET}"]', tmp_path)
    filedoor.write_text("new.json", f'["{SECRET}"]', tmp_path)
    assert seen == [0o600, 0o600]
    assert [stat.S_IMODE(p.stat().st_mode) for p in (planted, tmp_path / "new.json")] == [0o600, 0o600]


@pytest.mark.parametrize("umask", [0o000], indirect=True)
def test_the_harness_own_folders_are_0700_and_an_old_open_one_is_closed(umask, tmp_path, monkeypatch):
    """The data folder's tinyharness/sessions and tinyharness/mcp-logs, made 0700 (as the XDG base directory
    rule asks); a sessions folder an earlier version left 0755 is closed at the next session; the chat's input
    history is 0600."""
    from tinyharness.mcp.client import Log
    from tinyharness.sessions import SessionWriter
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    old = data / "tinyharness" / "sessions"
    old.mkdir(parents=True, mode=0o755)
    old.chmod(0o755)
    writer = SessionWriter.start(tmp_path, "m")
    writer.close()
    log = Log(data / "tinyharness" / "mcp-logs", "notes")
    os.close(log.fd)
    assert oct(stat.S_IMODE(old.stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE((data / "tinyharness" / "mcp-logs").stat().st_mode)) == "0o700"
    assert oct(stat.S_IMODE(writer.path.stat().st_mode)) == "0o600"
    pytest.importorskip("readline")
    from tinyharness.chat.input import Input
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("XDG_DATA_HOME", str(fresh))
    Input(True).close()
    history = fresh / "tinyharness" / "chat_history"
    assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in (history.parent, history)] == ["0o700", "0o600"]


@pytest.mark.parametrize("umask", [0o022], indirect=True)
def test_the_trust_store_is_private_and_written_whole(tmp_path, monkeypatch, umask):
    # which projects a user trusts is theirs: 0600 in a 0700 folder, a new file renamed over the old
    from tinyharness import trust
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    listed = tmp_path / "ws" / ".mcp.json"
    listed.parent.mkdir()
    listed.write_text('{"mcpServers": {}}')
    trust.remember(listed)
    store = trust.store_path()
    before = store.stat().st_ino
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    trust.remember(listed)
    assert store.stat().st_ino != before, "rewritten in place: a crash could leave half a store"
    assert trust.is_trusted(listed)
