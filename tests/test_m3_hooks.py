"""m3: hooks at the choke point, and the permission prompt. Run on m3, every later stage and `tinyharness run`."""
import importlib
import json
import re
import time

import pytest

from tests.ladder import FINAL, ROOT, calls, copies, load_json, run_stage, stages_from, tool_call, tool_results
from tinyharness.testing import ScriptedServer, load_script

LADDER = stages_from("m3")
TASK = "Find the testing budget in my notes and save it to budget.md."


def prompt(name, **arguments):
    """The permission prompt exactly as the contract spells it (arguments as the [tool] line shows them)."""
    return f"Allow {name}({json.dumps(arguments, ensure_ascii=False, sort_keys=True)})? [y/N] "


def asked(stage, name, **arguments):
    """The question as the stage asks it: the contract's, or the package's, where a write names its path (its
    diff is shown above) and `/a` offers "always" for a call a rule can cover (tests/test_prompt_answers.py)."""
    if stage == FINAL and name == "write_file":
        return f"Allow write_file({arguments['path']})? [y/N/a] "
    return prompt(name, **arguments)


def run(stage, workspace, script, *args, stdin="", code=0, tty=None):
    """The stage's run; `tty`: the answers typed (the stages read them from stdin, the package at its terminal)."""
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *args, "go", stdin=stdin, tty=tty)
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr
    return result, server


@pytest.mark.parametrize("stage", LADDER)
def test_a_blocked_call_reaches_the_model_and_the_loop_goes_on(stage, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "here.txt").write_text("inside")
    script = [calls(tool_call("write_file", path="../escaped.txt", content="x"), tool_call("read_file", path="here.txt")),
              "I could not write outside the workspace."]
    result, server = run(stage, workspace, script, "--yes")
    blocked, allowed = tool_results(server.requests[1]).values()
    assert blocked.startswith("BLOCKED: ") and "outside the workspace" in blocked
    assert allowed == "inside"  # the next call in the same reply still ran
    assert not (tmp_path / "escaped.txt").exists()
    assert len(server.requests) == 2 and result.stdout.rstrip().endswith("I could not write outside the workspace.")


@pytest.mark.parametrize("stage", LADDER)
def test_a_blocked_shell_command_says_what_and_why(stage, workspace):
    (workspace / "keep").mkdir()
    _, server = run(stage, workspace, [calls(tool_call("shell", command="rm -r -f keep")), "ok"], "--yes")
    result = tool_results(server.requests[1])["call_1"]
    assert result.startswith("BLOCKED: ") and "recursive delete" in result
    assert (workspace / "keep").is_dir()


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("answer, approved", [("y\n", True), ("Y\n", True), ("  y  \n", True), ("yes\n", True),
                                              ("YES\n", True), (" Yes \n", True), ("n\n", False), ("no\n", False),
                                              ("NO\n", False), ("\n", False), ("", False), ("sure\n", False),
                                              ("yess\n", False)])
def test_y_or_yes_approves_a_write(stage, answer, approved, workspace):
    script = [calls(tool_call("write_file", path="a.txt", content="hi")), "done"]
    nobody = stage == FINAL and not answer  # nobody there to answer at all: the package says nothing was allowed
    result, server = run(stage, workspace, script, tty=answer, code=3 if nobody else 0)
    assert asked(stage, "write_file", path="a.txt", content="hi") in result.stdout
    assert (workspace / "a.txt").exists() == approved
    outcome = tool_results(server.requests[1])["call_1"]
    assert outcome.startswith("OK: wrote 2 characters") if approved else outcome.startswith("DENIED: ")
    lines = result.stdout.rstrip().splitlines()
    if nobody:
        assert lines[-2] == "done", result.stdout
        assert lines[-1].startswith("Stopped: nothing was allowed: the 1 call(s) that needed approval")
    else:
        assert lines[-1] == "done"  # the answer still ends stdout, on its own line


@pytest.mark.parametrize("stage", LADDER)
def test_shell_asks_too_and_a_no_means_it_never_ran(stage, workspace):
    script = [calls(tool_call("shell", command="echo ran > marker.txt")), "done"]
    result, server = run(stage, workspace, script, tty="n\n")
    assert prompt("shell", command="echo ran > marker.txt") in result.stdout
    assert not (workspace / "marker.txt").exists()
    assert tool_results(server.requests[1])["call_1"].startswith("DENIED: ")


@pytest.mark.parametrize("stage", LADDER)
def test_reading_never_asks(stage, workspace):
    (workspace / "a.txt").write_text("alpha")
    script = [calls(tool_call("read_file", path="a.txt"), tool_call("list_dir", path=".")), "done"]
    result, server = run(stage, workspace, script)  # no answer on stdin at all
    assert "Allow" not in result.stdout
    assert list(tool_results(server.requests[1]).values())[0] == "alpha"


@pytest.mark.parametrize("stage", LADDER)
def test_a_blocked_call_never_asks(stage, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [calls(tool_call("write_file", path="../x.txt", content="x"), tool_call("shell", command="sudo true")), "ok"]
    result, server = run(stage, workspace, script, tty="y\ny\n")
    assert "Allow" not in result.stdout
    assert all(r.startswith("BLOCKED: ") for r in tool_results(server.requests[1]).values())
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize("stage", LADDER)
def test_yes_approves_what_the_hooks_allow(stage, workspace):
    script = [calls(tool_call("write_file", path="a.txt", content="hi"), tool_call("shell", command="echo ran > b.txt")),
              "done"]
    result, _ = run(stage, workspace, script, "--yes")
    assert "Allow" not in result.stdout
    assert (workspace / "a.txt").read_text() == "hi" and (workspace / "b.txt").read_text().strip() == "ran"


@pytest.mark.parametrize("stage", LADDER)
def test_the_denied_write_story(stage, notes_workspace, tmp_path):
    """The source article's story: the write was denied, the model said it saved the file anyway.
    The prompt stopped the write; it did not stop the claim. Check the files, not the report."""
    script = load_script(ROOT / "examples" / "notes.script.json")
    transcript = tmp_path / "run.json"
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, notes_workspace, "--base-url", server.base_url, "--transcript", str(transcript),
                           TASK, tty="n\n")
    assert result.returncode == 0, result.stderr
    assert "saved it to budget.md" in result.stdout.rstrip().splitlines()[-1]  # what the model claims...
    assert not (notes_workspace / "budget.md").exists()  # ...and what is true
    denial = [m for m in server.requests[-1]["messages"] if m["role"] == "tool" and m["content"].startswith("DENIED: ")]
    assert len(denial) == 1 and "write_file" in denial[0]["content"]
    assert denial[0] in load_json(transcript)


@pytest.mark.parametrize("stage", LADDER)
def test_write_replaces_the_file_and_leaves_nothing_behind(stage, workspace):
    (workspace / "script.sh").write_text("old")
    (workspace / "script.sh").chmod(0o755)
    script = [calls(tool_call("write_file", path="script.sh", content="echo new\n"),
                    tool_call("write_file", path=".", content="x")), "done"]
    _, server = run(stage, workspace, script, "--yes")
    ok, folder = tool_results(server.requests[1]).values()
    assert ok.startswith("OK: ") and (workspace / "script.sh").read_text() == "echo new\n"
    assert (workspace / "script.sh").stat().st_mode & 0o777 == 0o755  # a script stays executable
    assert folder.startswith("ERROR: ") and "folder" in folder
    assert sorted(p.name for p in workspace.iterdir()) == ["script.sh"]  # no temporary file left


def stage_hooks(stage):
    return importlib.import_module(f"{stage}.hooks")


def file_tools(hooks):
    """A stage's FILE_TOOLS; the package's tools with a path, from their records (tools.BUILT_IN)."""
    if hasattr(hooks, "FILE_TOOLS"):
        return hooks.FILE_TOOLS
    from tinyharness import tools
    return [tool.name for tool in tools.BUILT_IN if tool.paths]


HOOK_COPIES = copies("m3", "hooks.py", "fences.py")   # the hooks alone: once per distinct copy (m4..m7 carry m3's)


@pytest.mark.parametrize("stage", HOOK_COPIES)
def test_a_hook_that_crashes_blocks_the_call(stage, monkeypatch, workspace):
    hooks = stage_hooks(stage)

    def broken(workspace, name, args):
        raise KeyError("oops")
    monkeypatch.setattr(hooks, "PRE_TOOL_USE", [broken])
    assert "broken" in hooks.pre_tool_use(str(workspace), "read_file", {"path": "a.txt"})


# --- Judging time: a long command or path must be judged at once, never hang the harness ---------

MEGABYTE = 1_000_000


def hard_texts(size):
    """Texts that made a backtracking rule rescan the rest for every start: a long word, a word then its
    own name (the fork-bomb rule), many `rm`, `git push`, `kill`, `curl`, pipes, and deep paths."""
    shapes = {"word": "a", "rm": "rm ", "git-push": "git push ", "kill": "kill ", "curl-data": "curl --data",
              "pipes": "|", "sh-subshell": "sh $(", "definitions": "f(){ ", "deep-path": "a/", "dot-dot": "../"}
    texts = {shape: unit * (size // len(unit)) for shape, unit in shapes.items()}
    texts["name-then-name"] = "a" * (size // 2) + "(){" + "a" * (size // 2)
    return texts


def judged_in_time(judge):
    """What `judge()` returned and how long it took; the caller asserts on both."""
    start = time.perf_counter()
    verdict = judge()
    return verdict, time.perf_counter() - start


@pytest.mark.parametrize("stage", HOOK_COPIES)
@pytest.mark.parametrize("shape", ["word", "name-then-name", "rm", "deep-path"])
def test_a_megabyte_command_or_path_is_refused_at_once_by_every_hook(stage, shape, workspace):
    hooks, text = stage_hooks(stage), hard_texts(MEGABYTE)[shape]
    calls = [("shell", {"command": text})] + [(tool, {"path": text, "content": "x"}) for tool in file_tools(hooks)]
    for name, args in calls:
        verdict, seconds = judged_in_time(lambda: hooks.pre_tool_use(str(workspace), name, args))
        assert seconds < 5, f"{name} took {seconds:.1f} s to judge a {len(text):,}-character {shape}"
        assert isinstance(verdict, str) and f"{len(text):,} characters long" in verdict, (name, verdict[:200])
        assert len(verdict) < 400, "the reason must not quote the megabyte back to the model"
    assert "write_file" in hooks.pre_tool_use(str(workspace), "shell", {"command": text}), "it says what to do instead"


@pytest.mark.parametrize("stage", HOOK_COPIES)
def test_every_command_rule_runs_in_linear_time(stage):
    """Past the length limit the rules never run; this feeds them 50,000 characters directly, so a rule
    that backtracks (quadratic or worse: minutes at this size) fails here, not in a learner's run."""
    for pattern, why in stage_hooks(stage).COMMAND_RULES:
        for shape, text in hard_texts(50_000).items():
            _, seconds = judged_in_time(lambda: re.search(pattern, text))
            assert seconds < 5, f"the rule for {why[:40]!r} took {seconds:.1f} s on 50,000 characters of {shape}"


@pytest.mark.parametrize("stage", HOOK_COPIES)
def test_the_length_limits_sit_just_past_what_is_judged(stage, workspace):
    hooks = stage_hooks(stage)
    judge = lambda name, **args: hooks.pre_tool_use(str(workspace), name, args)
    limits = importlib.import_module(hooks.length_guard.__module__)  # a stage keeps them in its armour, fences.py
    padding = " " * (limits.MAX_COMMAND_CHARS - len("echo ") - len("rm -rf build"))
    assert judge("shell", command="echo " + padding + "rm -rf build").startswith("the command looks like a recursive")
    assert judge("shell", command="echo " + "x" * (limits.MAX_COMMAND_CHARS - 5)) is None
    assert "characters long" in judge("shell", command="echo " + "x" * (limits.MAX_COMMAND_CHARS - 4))
    long_name = "n" * limits.MAX_PATH_CHARS
    assert judge("read_file", path=long_name) is None  # the OS says ERROR, as before
    assert "characters long" in judge("read_file", path=long_name + "n")
    assert hooks.PRE_TOOL_USE[0] is hooks.length_guard, "the other hooks never see what is too long to judge"


@pytest.mark.parametrize("stage", copies("m3", "hooks.py"))   # once per distinct copy of the path guard
def test_the_path_guard_at_the_workspace_edge(stage, tmp_path):
    # The edge itself: the workspace's own folder, however spelled, is inside; one step past it is not.
    guard = importlib.import_module(f"{stage}.hooks").path_guard
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    for inside in (".", "sub/..", "../ws", "./sub/../sub", str(workspace)):
        assert guard(workspace, "list_dir", {"path": inside}) is None, inside
    for outside in ("..", "sub/../..", "../ws/..", str(tmp_path)):
        assert "outside the workspace" in guard(workspace, "list_dir", {"path": outside}), outside


# --- The lesson's own rule: a regex over the shape, and a spelling it cannot see -------------------------
# hooks.py:recursive_delete is m3's exercise: the learner writes the rule. Run once per distinct copy of the
# stages' hooks.py (the package keeps its own, hardened rules: tinyharness/hooks/__init__.py).
RULE_COPIES = copies("m3", "hooks.py", final=False)
SHAPES_OF_A_TREE_DELETE = ["rm -r -f build", "rm -fr build", "rm -R build", "rm --recursive build",
                           "rm -f build.log notes/ -r", "Remove-Item -Path build -Force -Recurse",
                           "remove-item build -recurse", "ls; rm -rf build"]
NOT_A_TREE_DELETE = ["rm file", "git rm --cached x", "rm -f build.log", "rm notes.txt; ls -R", "grep -r rm ."]


@pytest.mark.parametrize("stage", RULE_COPIES)
@pytest.mark.parametrize("command", SHAPES_OF_A_TREE_DELETE)
def test_the_recursive_delete_rule_catches_the_shape_in_any_spelling(stage, command):
    why = stage_hooks(stage).recursive_delete(command)
    assert why and "recursive delete" in why, f"{command!r} deletes a whole tree, and the rule let it through"


@pytest.mark.parametrize("stage", RULE_COPIES)
@pytest.mark.parametrize("command", NOT_A_TREE_DELETE)
def test_the_recursive_delete_rule_lets_an_ordinary_delete_through(stage, command):
    assert not stage_hooks(stage).recursive_delete(command), f"{command!r} deletes no tree, and the rule refused it"


@pytest.mark.parametrize("stage", RULE_COPIES)
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="known escape: the shell builds `rm -rf` from a variable when it runs; the regex reads the text before")
def test_a_spelling_the_recursive_delete_rule_cannot_see(stage):
    command = "x=rm; $x -rf build"
    assert stage_hooks(stage).recursive_delete(command), f"{command!r} escapes the rule: it says rm nowhere"


@pytest.mark.parametrize("stage", RULE_COPIES)
def test_the_recursive_delete_rule_judges_the_longest_command_at_once(stage):
    """The length guard lets commands of up to MAX_COMMAND_CHARS through to the rules. A plain regex that
    rescans the rest of the command for every `rm` still judges that many characters in well under a
    second; one that backtracks over nested repeats (`(\\w+\\s*)*-r`) takes minutes, and fails here."""
    hooks = stage_hooks(stage)
    limits = importlib.import_module(hooks.length_guard.__module__)
    for shape, text in hard_texts(limits.MAX_COMMAND_CHARS).items():
        _, seconds = judged_in_time(lambda: hooks.recursive_delete(text))
        assert seconds < 5, f"the rule took {seconds:.1f} s on {len(text):,} characters of {shape}"
