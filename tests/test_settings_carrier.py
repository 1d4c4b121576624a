"""One carrier for a run's configuration (tinyharness/settings.py): the command line becomes RunSettings in
one place, a chat and a subagent derive theirs with dataclasses.replace, per-run state is the run's own,
and the core speaks to the user through one warn line.

The two-edit rule is tested the way a maintainer would meet it: in a copy of the package, a new knob is
added with exactly two edits (its flag in flags.py, its field in settings.py), and a run, a chat message
and a subagent all see it."""
import ast
import os
import shutil
import subprocess
import sys
from dataclasses import FrozenInstanceError

import pytest

from tests.ladder import ROOT

PACKAGE = ROOT / "tinyharness"

FLAG = ('    parser.add_argument("--shell-timeout",',
        '    parser.add_argument("--dummy-knob", type=int, default=0)\n    parser.add_argument("--shell-timeout",')
FIELD = ("    shell_timeout: float = SHELL_TIMEOUT\n", "    shell_timeout: float = SHELL_TIMEOUT\n    dummy_knob: int = 0\n")

SEES_IT = """
import sys
from tinyharness import cli, loop
from tinyharness.chat import Conversation, chat_settings
from tinyharness.counts import Stats
from tinyharness.extensions import Extensions
from tinyharness.flags import settings_from_args
from tinyharness.parsers import build_parser
from tinyharness.subagents import Parent, child_settings

def run_agent(task, client, workspace, settings=None, stats=None, messages=None):
    print("run", settings.dummy_knob)
    child = child_settings(Parent(None, client, workspace, stats, settings))
    print("subagent", child.dummy_knob)
    return "done"

loop.run_agent = run_agent  # the run is real up to the loop: flags, checks, settings_from_args
code = cli.main(["run", "--dummy-knob", "7", "--no-session", "--yes", "--api", "openai",
                 "--base-url", "http://127.0.0.1:9/v1", "task"])
args = build_parser("chat").parse_args(["chat", "--dummy-knob", "8"])
chatting = chat_settings(args, settings_from_args(args, 4096, extensions=Extensions(subagents=True)))
print("chat message", Conversation(None, ".", chatting).run_settings(print).dummy_knob)
sys.exit(code)
"""


def test_a_new_run_knob_is_two_edits_its_flag_and_its_field(tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "tinyharness", ignore=shutil.ignore_patterns("__pycache__"))
    for name, (old, new) in (("flags.py", FLAG), ("settings.py", FIELD)):
        path = copy / "tinyharness" / name
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, name
        path.write_text(text.replace(old, new), encoding="utf-8")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-c", SEES_IT], cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-4:] == ["run 7", "subagent 7", "done", "chat message 8"], done.stdout


def test_no_run_writes_to_a_shared_object():
    from tinyharness.extensions import NONE, Extensions, RunHands
    from tinyharness.settings import RunSettings
    with pytest.raises(FrozenInstanceError):
        NONE.subagents = True
    first, second = RunHands(RunSettings()), RunHands(RunSettings(max_seconds=5))
    assert first.ext is second.ext is NONE                      # shared, and frozen
    assert second.user_prompt_submit("task") is None and first.deadline is None and second.deadline is not None
    assert Extensions(subagents=True).for_child() == Extensions(subagents=False)


def test_the_url_permission_is_bound_into_the_prompt_not_kept_in_a_global(monkeypatch):
    from tinyharness import hooks
    from tinyharness.flags import approver
    from tinyharness.parsers import build_parser
    asked = []
    monkeypatch.setattr(hooks, "ask_user", lambda prompt: asked.append(prompt) or False)
    parse = build_parser("run").parse_args
    allowing = approver(parse(["run", "--yes", "--allow-image-urls", "t"]), None)
    asking = approver(parse(["run", "--yes", "t"]), None)
    url = 'Allow view_image({"path": "https://example.com/a.png"})? [y/N] '
    assert allowing(url) and not asking(url) and asked == [url] and allowing(url)
    assert not hasattr(hooks, "_URLS")


CORE = ["loop", "edges", "overflow", "extensions", "subagents", "settings", "chat/__init__", "chat/input", "chat/json_mode",
        "cli", "chat/compact", "hooks/commands", "hooks/run", "hooks/decide", "permissions", "parallel", "guards", "run_end",
        "hooks/__init__", "flags"]
# None: a usage error is raised to the command (flags.UsageError), which says it through warn.
ALLOWED = set()


def stderr_prints(name):
    tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for call in ast.walk(function):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print" and any(
                    k.arg == "file" and "stderr" in ast.unparse(k.value) or k.arg == "file" and
                    ast.unparse(k.value) in ("err", "self.err") for k in call.keywords):
                found.append((name, function.name))
    return found


def test_the_core_speaks_to_the_user_through_one_warn_line():
    found = [hit for name in CORE for hit in stderr_prints(name)]
    assert set(found) <= ALLOWED, f"print(..., file=sys.stderr) outside settings.warn: {found}"


def test_the_warn_line_makes_control_characters_visible(capsys):
    from tinyharness.settings import RunSettings
    RunSettings().warn("error: \x1b]0;owned\x07 from the server")
    assert capsys.readouterr().err == "error: \\x1b]0;owned\\x07 from the server\n"


def test_record_has_one_home_the_edges_module_in_the_stages_and_the_package():
    def record(path):
        source = path.read_text(encoding="utf-8")
        found = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Record"]
        return "\n".join(source.splitlines()[found[0].lineno - 1:found[0].end_lineno]) if found else None
    homes = {path.parent.name: record(path) for path in sorted(ROOT.glob("*/edges.py")) if record(path)}
    assert {"m4_guards", "m5_context", "m6_verify", "m7_eval", "m8_vision", "tinyharness"} == set(homes)
    assert len(set(homes.values())) == 1, "Record differs between the edges.py copies"
    assert record(PACKAGE / "guards.py") is None
