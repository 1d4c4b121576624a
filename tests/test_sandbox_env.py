"""The sandbox against doors to programs outside it: an SSH agent's socket, a tmux server, leaked names.

Scrubbing SSH_AUTH_SOCK is not enough: the agent's socket is listed in /proc/net/unix, and Landlock
does not check `connect()` on a socket file. What stops it is that the command does not see the
socket's folder: /tmp, /run and the home folder are empty in its mount namespace. Each canary here is
a real listener (a unix socket, an ssh-agent, a tmux server) outside the workspace; each attack goes
through `tinyharness run --yes`; the canary must see no connection, sign nothing, run nothing.
"""
import os
import shutil
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.ladder import run_stage, tool_results
from tinyharness import sandbox as sandbox_module
from tinyharness.sandbox import namespaces as sandbox_namespaces
from tinyharness import tools
from tinyharness.sandbox import Sandbox, unavailable_reason
from tinyharness.sandbox.namespaces import NOT_ISOLATED
from tinyharness.testing import ScriptedServer

NO_SANDBOX = unavailable_reason()
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
needs_namespaces = pytest.mark.skipif(NO_SANDBOX is not None or not sandbox_module.namespaces_work(),
                                      reason="needs the sandbox with user namespaces (without them a socket in /tmp "
                                             "stays reachable: the [sandbox] line at start says so)")
PY = sys.executable


@pytest.fixture
def place(tmp_path):
    ws, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    for folder in (ws, outside, home / ".1password", home / "keys"):
        folder.mkdir(parents=True)
    return SimpleNamespace(ws=ws, outside=outside, home=home, root=tmp_path)


@pytest.fixture
def listeners(place):
    """Unix sockets listening outside the workspace: beside it (in /tmp, like /tmp/ssh-*/agent.*) and in home."""
    made = []
    for path in (place.outside / "agent.sock", place.home / ".1password" / "agent.sock"):
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen(5)
        server.setblocking(False)
        made.append(server)
    yield made
    for server in made:
        server.close()


def reached(servers):
    for server in servers:
        try:
            server.accept()[0].close()
            return True
        except BlockingIOError:
            pass
    return False


def attack(place, commands, env=None, flags=()):
    calls = [{"name": "shell", "arguments": {"command": c}, "id": family} for family, c in commands.items()]
    with ScriptedServer(script=[{"tool_calls": calls}, "done"]) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", *flags, "--base-url", server.base_url,
                           "attack", env={"HOME": str(place.home), **(env or {})}, timeout=60, in_process=False)
    results = tool_results(server.requests[-1])
    assert result.returncode == 0 and set(results) == set(commands), result.stderr
    assert not any(r.startswith("BLOCKED") for r in results.values()), results  # the regex did not stop them
    return result, results


CONNECT = "{py} -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('REACHED')\" {path}"
FROM_PROC_NET = ("for s in $(awk 'NR > 1 && $8 ~ /^\\// {{print $8}}' /proc/net/unix); do "
                 "{py} -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                 "print('REACHED', sys.argv[1])\" $s 2>/dev/null; done; echo listed $(wc -l < /proc/net/unix)")


def test_the_unix_socket_canary_is_real_without_isolation(place, listeners):
    """Landlock and seccomp alone let a command connect to a socket file it can name."""
    result = tools.shell(str(place.ws), CONNECT.format(py=PY, path=place.outside / "agent.sock"),
                         sandbox=Sandbox(isolate=False))
    assert "REACHED" in result and reached(listeners) or NO_SANDBOX, result


@needs_namespaces
def test_no_socket_outside_is_reachable_by_path_or_through_proc_net_unix(place, listeners):
    commands = {"beside": CONNECT.format(py=PY, path=place.outside / "agent.sock"),
                "home": CONNECT.format(py=PY, path=place.home / ".1password" / "agent.sock"),
                "proc-net-unix": FROM_PROC_NET.format(py=PY)}
    result, results = attack(place, commands, env={"SSH_AUTH_SOCK": str(place.outside / "agent.sock")})
    assert not reached(listeners) and not any("REACHED" in r for r in results.values()), results
    assert "listed 1" in results["proc-net-unix"], results  # a network namespace of its own: only the header


@needs_namespaces
@pytest.mark.skipif(shutil.which("ssh-agent") is None or shutil.which("ssh-keygen") is None, reason="needs openssh")
def test_the_users_ssh_agent_signs_nothing(place):
    key = place.home / "keys" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sock = place.outside / "agent.0"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"])
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        listed = subprocess.run(["ssh-add", "-L"], env=env, capture_output=True, text=True).stdout
        assert listed.startswith("ssh-ed25519")  # the canary: the agent holds the key
        (place.ws / "msg").write_text("sign me\n")
        shutil.copy(f"{key}.pub", place.ws / "id.pub")  # public: the private half is only in the agent's hands
        sign = f"SSH_AUTH_SOCK={sock} ssh-keygen -Y sign -n file -f id.pub msg"
        real = tools.shell(str(place.ws), sign, sandbox=Sandbox(isolate=False))  # the canary: Landlock alone...
        assert (place.ws / "msg.sig").exists() or NO_SANDBOX, real  # ...lets the agent sign
        (place.ws / "msg.sig").unlink(missing_ok=True)
        result, results = attack(place, {
            "list": f"ssh-add -L; SSH_AUTH_SOCK={sock} ssh-add -L",
            "sign": sign,
            "scan": "for s in $(awk 'NR > 1 {print $8}' /proc/net/unix); do SSH_AUTH_SOCK=$s ssh-add -L; done"},
            env={"SSH_AUTH_SOCK": str(sock)})
        assert listed.split()[1] not in str(results) and not (place.ws / "msg.sig").exists(), results
    finally:
        agent.kill()
        agent.wait()


@needs_namespaces
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_tmux_server_outside_runs_nothing(place):
    sock, pwned = place.outside / "tmux.sock", place.outside / "pwned"
    env = {**os.environ, "HOME": str(place.home), "TMUX_TMPDIR": str(place.outside)}
    subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "-s", "canary", "sleep 60"], env=env, check=True)
    try:
        subprocess.run(["tmux", "-S", str(sock), "run-shell", f"touch {pwned}.real"], env=env, check=True)
        assert (place.outside / "pwned.real").exists()  # the canary: this server runs what it is sent
        result, results = attack(place, {
            "TMUX": f"tmux run-shell 'touch {pwned}'", "socket": f"tmux -S {sock} run-shell 'touch {pwned}'"},
            env={"TMUX": f"{sock},1,0", "TMUX_TMPDIR": str(place.outside)})
        assert not pwned.exists(), results
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], env=env)


@needs_sandbox
def test_sandbox_env_passes_a_name_and_refuses_the_doors(place):
    result, results = attack(place, {"env": "env"}, env={"DATABASE_URL": "postgres://u:s3cr3t@db/x",
                                                         "PROJECT_MODE": "dev", "TMUX": "/tmp/x,1,0"},
                             flags=("--sandbox-env", "PROJECT_MODE"))
    assert "PROJECT_MODE=dev" in results["env"] and "s3cr3t" not in results["env"] and "TMUX" not in results["env"]
    refused = run_stage("tinyharness", place.ws, "--sandbox-env", "SSH_AUTH_SOCK", "task")
    assert refused.returncode == 2 and "SSH_AUTH_SOCK is never passed" in refused.stderr
    assert "--sandbox-env NAME" in run_stage("tinyharness", place.ws, "--help").stdout


@needs_sandbox
def test_without_namespaces_one_line_at_start_says_what_is_shared(place, monkeypatch):
    monkeypatch.setattr(sandbox_namespaces.namespaces_work, "answer", False)
    with ScriptedServer(script=[{"tool_calls": [{"name": "shell", "id": "c", "arguments": {"command": "echo hi"}}]},
                                "done"]) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", "--base-url", server.base_url, "task",
                           env={"HOME": str(place.home)})
    assert result.returncode == 0 and NOT_ISOLATED in result.stderr, result.stderr
    assert tool_results(server.requests[-1])["c"] == "exit status 0\nhi\n"
    monkeypatch.setattr(sandbox_namespaces.namespaces_work, "answer", True)
    with ScriptedServer(script=["done"]) as server:
        result = run_stage("tinyharness", place.ws, "--yes", "--no-session", "--base-url", server.base_url, "task",
                           env={"HOME": str(place.home)})
    assert "[sandbox]" not in result.stderr


@needs_namespaces
def test_sandbox_read_of_a_whole_hidden_folder_shows_it_and_keeps_the_workspace(place, monkeypatch):
    """--sandbox-read ~ gives the home folder back (read only), on top of the empty one; the workspace
    and TMPDIR mounted inside stay where they are."""
    monkeypatch.setenv("HOME", str(place.home))
    (place.home / "notes.txt").write_text("from home\n")
    result = tools.shell(str(place.ws), 'cat ~/notes.txt; echo x >> ~/notes.txt; echo ok > here.txt; '
                                        'touch "$TMPDIR/t" && echo tmp-ok', sandbox=Sandbox(extra_read=[str(place.home)]))
    assert "from home" in result and "Permission denied" in result and "tmp-ok" in result, result
    assert (place.home / "notes.txt").read_text() == "from home\n" and (place.ws / "here.txt").read_text() == "ok\n"


@needs_sandbox
def test_a_variable_that_names_a_socket_never_passes_even_when_asked_for(place, listeners, monkeypatch):
    monkeypatch.setenv("MY_AGENT", str(place.outside / "agent.sock"))
    monkeypatch.setenv("MY_BUS", "unix:path=/run/user/0/bus")
    monkeypatch.setenv("MY_SETTING", "plain")
    result = tools.shell(str(place.ws), "env", sandbox=Sandbox(extra_env=["MY_AGENT", "MY_BUS", "MY_SETTING"]))
    assert "MY_SETTING=plain" in result and "MY_AGENT" not in result and "MY_BUS" not in result, result
