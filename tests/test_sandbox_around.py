"""Around the shell: what runs outside the sandbox, and what the sandbox cannot confine.

The sandbox confines the model's shell commands and the command hooks. The harness itself, the user's
MCP servers and a hook marked "sandbox": false run with all the user's rights: such a hook that runs the
tests imports test files the model wrote; a `view_image` URL is a request the harness sends; a workspace that holds the home folder or
the harness's own code lets a command change what runs unconfined at the next launch. Each case here
is fired through `tinyharness run --yes` and its canary checked.
"""
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from types import SimpleNamespace

import pytest

from tests.ladder import ROOT, run_stage, tool_results
from tinyharness import extensions
from tinyharness.sandbox import unavailable_reason, workspace_problem
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
PY = sys.executable


@pytest.fixture
def place(tmp_path):
    ws, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    for folder in (ws, outside, home):
        folder.mkdir()
    return SimpleNamespace(ws=ws, outside=outside, home=home, pwned=outside / "pwned",
                           env={"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data")})


def run(place, calls, *flags, tty=None):
    """`tinyharness run --yes`; `tty`: the answers typed at its terminal (a trust question, a URL)."""
    calls = [{"name": name, "arguments": arguments, "id": f"c{i}"} for i, (name, arguments) in enumerate(calls)]
    with ScriptedServer(script=[{"tool_calls": calls}, "done"] if calls else ["done"]) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", *flags, "--base-url", server.base_url,
                           "task", env=place.env, tty=tty, timeout=60)
    return result, (tool_results(server.requests[-1]) if len(server.requests) > 1 else {}), server


# --- command hooks run in the sandbox unless their entry says "sandbox": false; the trust question says which -----

def hooks_that_run_the_tests(place, **entry):
    (place.ws / ".tinyharness").mkdir()
    (place.ws / ".tinyharness" / "hooks.json").write_text(json.dumps(
        {"post_tool_use": [{"matcher": "write_file", "command": f"{PY} -m unittest discover -q", **entry}]}))
    # the model's test file: proves it ran (a file in the workspace), then goes for the canary outside
    planted = (f"import pathlib\npathlib.Path('ran').write_text('yes')\n"
               f"pathlib.Path({str(place.pwned)!r}).write_text('pwned')\n")
    return [("write_file", {"path": "test_pwn.py", "content": planted})]


def test_the_trust_question_says_where_hooks_run_and_no_means_they_never_run(place):
    """Untrusted, nothing of the hooks file runs; the question says in words what trusting means."""
    result, _, server = run(place, hooks_that_run_the_tests(place), tty="n\n")
    assert result.returncode == 2 and "was not trusted" in result.stderr, result.stderr
    assert "These commands run in the sandbox" in result.stdout and "UNCONFINED" not in result.stdout
    assert not place.pwned.exists() and not (place.ws / "ran").exists() and server.requests == []


@pytest.mark.skipif(NO_SANDBOX is not None, reason=str(NO_SANDBOX))
def test_a_trusted_hook_that_runs_the_tests_runs_the_models_test_file_confined(place):
    """Issue 28: a trusted post_tool_use hook running `python -m unittest` imports the test file the model
    just wrote. The hook runs in the sandbox: the file ran (it wrote in the workspace), the canary
    outside was never written."""
    result, results, _ = run(place, hooks_that_run_the_tests(place), tty="y\n")
    assert result.returncode == 0, result.stderr
    assert (place.ws / "ran").read_text() == "yes"
    assert not place.pwned.exists()
    assert "FAILED" in results["c0"] or "Error" in results["c0"], results  # its error reached the model


def test_a_hook_with_sandbox_false_runs_unconfined_and_the_question_names_it(place):
    """The same hook with "sandbox": false reaches the canary: the attack above is real, and the
    question named that hook as unconfined before the user said yes."""
    result, _, _ = run(place, hooks_that_run_the_tests(place, sandbox=False), tty="y\n")
    assert result.returncode == 0, result.stderr
    assert f"These run UNCONFINED (\"sandbox\": false): `{PY} -m unittest discover -q`" in result.stdout
    assert place.pwned.read_text() == "pwned"


# --- view_image: a URL asks even under --yes -------------------------------------------------------------------

@pytest.fixture
def listener():
    """An HTTP server that records every path it is asked for: the canary of egress by the harness."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_address[1]}", seen=seen)
    server.shutdown()
    server.server_close()


def test_a_view_image_url_is_asked_even_under_yes(place, listener):
    url = f"{listener.url}/leak.png?data=s3cr3t"
    result, results, _ = run(place, [("view_image", {"path": url})], tty=None)  # no terminal: nobody answers, a no
    assert results["c0"].startswith("DENIED") and listener.seen == [], results
    assert "Allow view_image(" in result.stdout
    result, results, _ = run(place, [("view_image", {"path": url})], tty="y\n")  # the user says yes
    assert listener.seen == ["/leak.png?data=s3cr3t"], results


def test_allow_image_urls_lets_them_through_without_asking(place, listener):
    result, results, _ = run(place, [("view_image", {"path": f"{listener.url}/a.png"})], "--allow-image-urls")
    assert listener.seen == ["/a.png"] and "Allow view_image(" not in result.stdout, results
    result, results, _ = run(place, [("view_image", {"path": f"{listener.url}/b.png"})])  # the next run asks again
    assert listener.seen == ["/a.png"] and results["c0"].startswith("DENIED")


# --- the user's own MCP servers never start in the workspace ----------------------------------------------------

def test_a_user_s_python_dash_m_server_never_imports_a_module_planted_in_the_workspace(place, monkeypatch):
    """~/.config/tinyharness/mcp.json starts `python -m notes_server`; the model left a notes_server.py in
    the workspace. Started in the config's folder with PYTHONSAFEPATH=1, the planted module never runs -
    not even when the user's config asks for the workspace as the server's folder ("cwd": "${PWD}")."""
    config = place.home / ".config"
    (config / "tinyharness").mkdir(parents=True)
    planted = f"import pathlib\npathlib.Path({str(place.pwned)!r}).write_text('pwned')\n"
    (place.ws / "notes_server.py").write_text(planted)
    env = {**place.env, "XDG_CONFIG_HOME": str(config)}
    for extra in ({}, {"cwd": "${PWD}"}):
        (config / "tinyharness" / "mcp.json").write_text(json.dumps(
            {"servers": {"notes": {"command": PY, "args": ["-m", "notes_server"], **extra}}}))
        result, _, server = run(SimpleNamespace(**{**vars(place), "env": env}), [])
        assert result.returncode == 0 and len(server.requests) == 1, result.stderr
        assert "notes" in result.stderr and not place.pwned.exists(), result.stderr
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("PWD", str(place.ws))
    [(_, started, _, trusted)] = extensions.server_configs(place.ws)
    assert started["env"]["PYTHONSAFEPATH"] == "1" and trusted, started


def test_a_user_s_server_starts_in_its_config_s_folder_and_a_workspace_s_in_the_workspace(place, monkeypatch):
    config = place.home / ".config"
    (config / "tinyharness").mkdir(parents=True)
    (config / "tinyharness" / "mcp.json").write_text(json.dumps({"servers": {"mine": {"command": "npx -y some-mcp"}}}))
    (place.ws / ".tinyharness").mkdir()
    (place.ws / ".tinyharness" / "mcp.json").write_text(json.dumps({"servers": {"theirs": {"command": "./srv"}}}))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    found = {name: config for name, config, _, _ in extensions.server_configs(place.ws)}
    assert found["mine"]["cwd"] == str(config / "tinyharness") and "PYTHONSAFEPATH" not in found["mine"]["env"]
    assert "cwd" not in found["theirs"]  # the workspace's own: its folder, behind the trust question


# --- the workspace must not hold what runs outside the sandbox later ---------------------------------------------

def test_no_start_in_home_or_a_folder_holding_it(place):
    for home in (place.ws, place.ws / "me"):
        home.mkdir(exist_ok=True)
        result, _, server = run(SimpleNamespace(**{**vars(place), "env": {**place.env, "HOME": str(home)}}), [])
        assert result.returncode == 2 and "contains your home folder" in result.stderr and server.requests == []
        assert "Traceback" not in result.stderr


def test_no_start_in_a_folder_holding_the_xdg_folders_or_the_harness(place):
    config = place.ws / "cfg"
    config.mkdir()
    result, _, server = run(SimpleNamespace(**{**vars(place), "env": {**place.env, "XDG_CONFIG_HOME": str(config)}}), [])
    assert result.returncode == 2 and "XDG_CONFIG_HOME" in result.stderr and server.requests == []
    data = {**place.env, "XDG_DATA_HOME": str(place.ws / "data")}
    result, _, _ = run(SimpleNamespace(**{**vars(place), "env": data}), [])
    assert result.returncode == 2 and "XDG_DATA_HOME" in result.stderr
    assert "tinyharness's own code" in workspace_problem(ROOT, home=place.home, environ=place.env)
    assert "Python environment" in workspace_problem(sys.prefix, home=place.home, environ=place.env)
    assert workspace_problem(place.ws, home=place.home, environ=place.env) is None


def test_no_start_inside_a_folder_other_programs_read_as_settings_or_run_from(place):
    """Started in ~/.config/tinyharness the model writes an mcp.json every later run starts; in ~/.config/git
    a core.fsmonitor; in ~/.local/bin a fake `git`; in ~/.ssh a `Match exec`; in the data folder a
    trusted.json. Each is refused (exit 2, the reason said) unless --workspace-anyway."""
    home, on_path = place.home, place.outside / "bin"
    environ = {"HOME": str(home), "PATH": os.pathsep.join(["/usr/bin", str(on_path), "relative", str(home)])}
    inside = {".config/tinyharness": "XDG_CONFIG_HOME", ".config/git": "XDG_CONFIG_HOME", ".cache/x": "XDG_CACHE_HOME",
              ".local/share/tinyharness": "XDG_DATA_HOME", ".local/state/x": "XDG_STATE_HOME",
              ".local/bin": "~/.local/bin", ".ssh": "~/.ssh", ".gnupg/x": "GnuPG"}
    for below, what in inside.items():
        (home / below).mkdir(parents=True, exist_ok=True)
        assert what in (workspace_problem(home / below, home=home, environ=environ) or ""), below
    (on_path / "sub").mkdir(parents=True)
    assert "is a folder on PATH" in workspace_problem(on_path, home=home, environ=environ)
    assert "is inside a folder on PATH" in workspace_problem(on_path / "sub", home=home, environ=environ)
    assert workspace_problem(place.ws, home=home, environ=environ) is None
    # home's other folders are fine, even with ~ itself on PATH (PATH is not searched below a folder)
    assert workspace_problem(home / "projects", home=home, environ=environ) is None
    # ~/.claude (its settings.json names hooks this harness runs) and any other dot-folder of home; a folder on
    # PYTHONPATH (a sitecustomize.py there runs at every Python start, the harness's own included)
    for below in (".claude", ".claude/hooks", ".aws"):
        (home / below).mkdir(parents=True, exist_ok=True)
        assert f"~/{below.split('/')[0]}, a folder of some program's settings" in \
            workspace_problem(home / below, home=home, environ=environ), below
    pylib = place.outside / "pylib"
    pylib.mkdir()
    assert "is a folder on PYTHONPATH" in workspace_problem(pylib, home=home, environ={**environ, "PYTHONPATH": str(pylib)})
    started = SimpleNamespace(**{**vars(place), "ws": home / ".config" / "tinyharness",
                                 "env": {**place.env, "XDG_CONFIG_HOME": str(home / ".config")}})
    result, _, server = run(started, [])
    assert result.returncode == 2 and "is inside your config folder" in result.stderr and server.requests == []
    assert "--workspace-anyway" in result.stderr and not (started.ws / ".tinyharness").exists()
    result, _, server = run(started, [], "--workspace-anyway")
    assert result.returncode == 0 and "warning: --workspace-anyway:" in result.stderr and len(server.requests) == 1
    # the harness's settings folder as a link into a dotfiles folder: a workspace holding its real place is refused
    dotfiles = place.outside / "dotfiles"
    (dotfiles / "tinyharness").mkdir(parents=True)
    (home / ".config" / "tinyharness").rmdir()
    (home / ".config" / "tinyharness").symlink_to(dotfiles / "tinyharness")
    assert "contains tinyharness's settings" in workspace_problem(dotfiles, home=home, environ=environ)


# --- what the sandbox leaves behind, and what it cannot cover -------------------------------------------------

@pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
def test_the_private_tmpdir_is_removed_whatever_modes_the_command_left():
    """chmod 000 on a folder inside the private TMPDIR (and 500 on TMPDIR itself) stops a plain rmtree for
    a user who is not root: the harness takes its rights back as it walks. As `nobody` when the tests run as
    root (root's removal ignores modes)."""
    prefix = [] if os.geteuid() != 0 else ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    root = tempfile.mkdtemp(prefix="tinyharness-user-")  # in /tmp: nobody can reach it there
    env = {**os.environ, "HOME": root, "TMPDIR": root, "PYTHONPATH": str(ROOT)}
    as_user = lambda *command: subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=60, env=env)
    try:
        os.chmod(root, 0o777)
        if prefix and as_user(PY, "-c", "from tinyharness import tools").returncode:
            pytest.skip("running as root, and setpriv to nobody does not work here")
        as_user("mkdir", f"{root}/ws")
        command = ('mkdir -p "$TMPDIR/a/b" && touch "$TMPDIR/a/b/f" && chmod 000 "$TMPDIR/a" && chmod 500 "$TMPDIR" '
                   '&& echo "tmp=$TMPDIR"')
        result = as_user(PY, "-c", f"from tinyharness import tools\nfrom tinyharness.sandbox import Sandbox\n"
                                     f"print(tools.shell({root + '/ws'!r}, {command!r}, sandbox=Sandbox()))")
        tmpdir = result.stdout.split("tmp=", 1)[1].split()[0]
        assert tmpdir.startswith(root) and not os.path.lexists(tmpdir), result
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", root])
        shutil.rmtree(root, ignore_errors=True)


def test_a_hard_link_to_a_file_outside_is_named_once_at_start(place):
    """At the start of the commands: the walk is made before the first one (sandbox/links.py), not on
    the way to the first request (tests/test_start_walk.py)."""
    (place.outside / "data.csv").write_text("shared")
    os.link(place.outside / "data.csv", place.ws / "data.csv")
    (place.ws / "a.txt").write_text("inside")
    os.link(place.ws / "a.txt", place.ws / "b.txt")  # two names inside the workspace: nothing to say
    result, _, server = run(place, [("shell", {"command": "true"})])
    assert result.returncode == 0 and len(server.requests) == 2
    [note] = [line for line in result.stderr.splitlines() if "hard link" in line]
    assert note.startswith("[sandbox] not covered: data.csv in the workspace is a hard link to a file outside")


# --- a command's Python finds the workspace's modules, as a developer's does ----------------------------------

@pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
def test_python_dash_m_unittest_imports_the_workspace_s_test_module(place):
    """`python -m unittest test_x` is how a model runs the tests it wrote: the sandbox must not hide the
    current folder from Python (PYTHONSAFEPATH would), and what is imported runs inside the sandbox."""
    (place.ws / "test_x.py").write_text("import unittest\n\nclass T(unittest.TestCase):\n"
                                        "    def test_ok(self):\n        self.assertTrue(True)\n")
    result, results, _ = run(place, [("shell", {"command": f"{PY} -m unittest -q test_x"})])
    assert "Ran 1 test" in results["c0"] and "OK" in results["c0"], results
