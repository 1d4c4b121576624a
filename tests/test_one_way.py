"""One way from a command line to a run (flags.from_command_line): `run` and `chat` given the same flags
build equal settings and the same client, the hooks are made with the run's sandbox, and nothing below
the flags makes a Sandbox of its own: a sandbox nobody handed over refuses, it never falls back to the
defaults. The sandbox's own registries (the spawner's RESIDENT, the commands it started) are read by the
sandbox alone: the chat's Ctrl-C asks the tools to stop what they started."""
import ast
import io
import json
import sys
from dataclasses import fields

import pytest

from tests.ladder import ROOT
from tinyharness.testing import ScriptedServer

PACKAGE = ROOT / "tinyharness"
HOOK = {"pre_compact": [{"command": "echo never fires here"}]}


def flags(server, tmp_path):
    extra = tmp_path / "tools"
    extra.mkdir(exist_ok=True)
    return ["--base-url", server.base_url, "--api", "openai", "--model", "m1", "--max-turns", "4",
            "--max-seconds", "50", "--max-tokens", "900", "--max-reply-tokens", "300", "--shell-timeout", "7",
            "--context-window", "5000", "--context-policy", "sliding", "--sandbox-read", str(extra),
            "--sandbox-env", "MY_VARIABLE", "--yes", "--trust", "--no-session", "--no-checkpoints",
            "--no-parallel", "--subagent-max-turns", "3", "--subagent-max-seconds", "20", "--deny", "Read(.env)"]


def seen(ready):
    """What a run is handed, in values that compare: every field of its settings, the sandbox's, the
    extensions' knobs, the client's."""
    settings, box, hands, client = ready.settings, ready.settings.sandbox, ready.settings.extensions, ready.client
    skip = ("sandbox", "extensions", "approve", "echo", "transcript")
    return {**{f.name: getattr(settings, f.name) for f in fields(settings) if f.name not in skip},
            "sandbox": (type(box).__name__, box.enabled, box.extra_read, box.extra_env, box.file_bytes),
            "the hooks run in the run's sandbox": hands.hooks.sandbox is box,
            "extensions": {f.name: getattr(hands, f.name) for f in fields(hands) if f.name not in ("mcp", "hooks", "rules")},
            "rules": hands.rules.summary() if hasattr(hands.rules, "summary") else type(hands.rules).__name__,
            "approve": (settings.approve.func, settings.approve.keywords),
            "client": (client.url, client.model, client.api_key, client.timeout, client.stream, client.max_reply_tokens)}


def test_run_and_chat_take_one_way_to_equal_settings_and_the_same_client(tmp_path, monkeypatch):
    from tinyharness import chat, cli, flags as wiring
    workspace = tmp_path / "ws"
    (workspace / ".tinyharness").mkdir(parents=True)
    (workspace / ".tinyharness" / "hooks.json").write_text(json.dumps(HOOK))
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    built = []

    def spy(*args, **kwargs):
        ready = wiring.from_command_line(*args, **kwargs)
        built.append(ready)
        return ready
    monkeypatch.setattr(cli, "from_command_line", spy)   # raises if a command stopped using the one way
    monkeypatch.setattr(chat, "from_command_line", spy)
    closed = io.StringIO()
    closed.close()  # nothing piped to the run
    with ScriptedServer(["Done.", "Hi."]) as server:
        monkeypatch.setattr(sys, "stdin", closed)
        assert cli.main(["run", *flags(server, tmp_path), "the task"]) == 0
        monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
        assert cli.main(["chat", *flags(server, tmp_path)]) == 0
        assert len(server.requests) == 2
    run, chatting = built
    assert seen(run) == seen(chatting)
    assert run.settings.max_turns == 4 and run.settings.sandbox.extra_env == ["MY_VARIABLE"]  # the flags arrived
    assert run.settings.extensions.subagent_max_turns == 3 and run.settings.extensions.parallel is False


def package_modules():
    return [(path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in path.parts]


REGISTRIES = {"RESIDENT", "Spawned", "LIVE", "LOCK", "RUNNING"}


def names_in(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias):
            yield node.name.rsplit(".", 1)[-1]


def sandboxes_made(tree):
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == "Sandbox" or getattr(node.func, "attr", None) == "Sandbox")]


def test_only_the_flags_make_a_sandbox_and_only_the_sandbox_reads_its_registries():
    made, read = [], []
    for name, tree in package_modules():
        if name.startswith("sandbox/"):
            continue
        if name != "flags.py":
            made += [f"{name}:{line}" for line in sandboxes_made(tree)]
        read += [f"{name}: {word}" for word in sorted(set(names_in(tree)) & REGISTRIES)
                 if not (name.startswith("mcp/") and word == "RUNNING")]  # the MCP layer's own
    assert made == [], "a Sandbox made below the flags (a fallback nobody asked for)"
    assert read == [], "the sandbox's registries read outside it"


def test_the_checks_can_fail(tmp_path):
    tree = ast.parse("from .sandbox.spawner import RESIDENT\nbox = Sandbox()\nx = sandbox.Sandbox(enabled=False)\n")
    assert set(names_in(tree)) & REGISTRIES == {"RESIDENT"} and sandboxes_made(tree) == [2, 3]


def test_a_shell_handed_no_sandbox_runs_nothing(tmp_path):
    from tinyharness import tools
    result = tools.shell(str(tmp_path), "touch ran")
    assert result.startswith("ERROR:") and "sandbox" in result and not (tmp_path / "ran").exists()


def test_hooks_handed_no_sandbox_refuse_a_confined_hook_and_run_an_unconfined_one(tmp_path):
    from tinyharness.hooks import commands
    (tmp_path / ".tinyharness").mkdir()
    (tmp_path / ".tinyharness" / "hooks.json").write_text(json.dumps({"pre_tool_use": [
        {"command": "touch confined"}, {"command": "touch loose", "sandbox": False}]}))
    hooks = commands.CommandHooks(commands.load(tmp_path), tmp_path, report=lambda text: None)
    verdict = hooks.run("pre_tool_use", "shell", {"command": "ls"})
    assert not verdict.allowed and "none was given" in verdict.reason
    assert not (tmp_path / "confined").exists() and (tmp_path / "loose").exists()


@pytest.mark.parametrize("enabled", [True, False], ids=["sandboxed", "unsandboxed"])
def test_the_sandbox_stops_what_it_started_and_counts_it(tmp_path, monkeypatch, enabled):
    """chat's Ctrl-C: the shell tool's commands, interrupted and left unreaped, are stopped and counted by
    the sandbox that started them (tools.stop_commands), nothing else."""
    import subprocess
    from tinyharness import tools
    from tinyharness.flags import sandbox_from_args
    from tinyharness.parsers import build_parser
    monkeypatch.chdir(tmp_path)
    args = build_parser("run").parse_args(["run", *(["--sandbox", "off"] if not enabled else []), "t"])
    box = sandbox_from_args(args, None)
    bystander = subprocess.Popen(["sleep", "60"])   # a child of ours no tool started: never touched
    try:
        process, finish = box.start(str(tmp_path), "sleep 60", 30, reuse=True, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        process.interrupt()
        finish(True, reap=False)
        assert tools.stop_commands(box) == 1 and tools.stop_commands(box) == 0
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
