"""`tinyharness course start` and `course check --mine`: the exercises are generated from the stages,
and the stages' own tests grade them.

The sweeps run the real check (a pytest subprocess over every test case of the stage, in every test
file) on copies: the copy with its holes filled back in passes; a copy with only one hole open fails;
and wrong solutions, the subtle ones and the ones learners really write, fail with the behaviour they
break named in the report. The README's command does it for m0 and one wrong solution of m1; the deep
tier (`python -m pytest -q -m deep`) for every stage and every wrong solution.
"""
import json
import os
import re
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.ladder import ROOT, STAGES
from tinyharness import course
from tinyharness.course import exercises, grading, hints


@pytest.fixture(autouse=True)
def progress(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TINYHARNESS_PROGRESS", str(path))
    return path


def stage_dir(stage):
    return ROOT / stage


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in exercises.source_files(folder)}


def stage_bodies(stage):
    """{(file, function): its body as the stage writes it}"""
    folder = stage_dir(stage)
    return {(h.file, h.name): exercises.body_of((folder / h.file).read_text(encoding="utf-8"), h)
            for h in exercises.find_holes(folder)}


def fill(copy, bodies):
    """Write bodies into the copy's holes: {(file, function): body}."""
    short = exercises.short_name(copy.name)
    for file in sorted({f for f, _ in bodies}):
        path = copy / file
        text = path.read_text(encoding="utf-8")
        for hole in sorted(exercises.holes_in(text, short, file), key=lambda h: h.first, reverse=True):
            if (file, hole.name) in bodies:
                text = exercises.replace_body(text, hole, bodies[(file, hole.name)])
        path.write_text(text, encoding="utf-8")


def start(stage, parent):
    assert course.course_start(stage, parent) == 0
    return Path(parent) / next(s for s in STAGES if stage in (s, exercises.short_name(s)))


def check(copy, first_failure=False):
    """Run the real check on a copy; (exit code, the report as text)."""
    printed = []
    code = grading.check(stage_dir(copy.name), copy, output=printed.append, first_failure=first_failure)
    return code, "\n".join(printed)


# --- Generation: in-process, every stage ---------------------------------------------------------

@pytest.mark.parametrize("stage", STAGES)
def test_the_copy_differs_from_the_stage_only_in_the_hole_bodies(stage, tmp_path, capsys):
    holes = exercises.find_holes(stage_dir(stage))
    assert 1 <= len(holes) <= 3, f"{stage} should mark one to three functions, marks {[h.where for h in holes]}"
    copy = start(stage, tmp_path / "a")
    assert files(start(stage, tmp_path / "b")) == files(copy)          # deterministic, to the byte
    original, generated = files(stage_dir(stage)), files(copy)
    assert original.keys() == generated.keys()
    changed = {f for f in original if original[f] != generated[f]}
    assert changed == {h.file for h in holes}
    for hole in holes:
        text = (copy / hole.file).read_text(encoding="utf-8")
        stage_lines = (stage_dir(stage) / hole.file).read_text(encoding="utf-8").splitlines()
        assert stage_lines[hole.line - 1] in text.splitlines()         # the def line stays (and its docstring)
        assert f"raise NotImplementedError({json.dumps(hole.message, ensure_ascii=False)})" in text
        assert "see README 'Your turn'" in hole.message
    fill(copy, stage_bodies(stage))
    assert files(copy) == original                                     # the bodies put back: the stage again
    assert "check " + exercises.short_name(stage) + " --mine" in capsys.readouterr().out


def body_lines(stage):
    """The lines of the stage's exercise bodies long enough to be code a learner would copy."""
    return [line.strip() for body in stage_bodies(stage).values() for line in body.splitlines()
            if len(line.strip()) >= 16]


@pytest.mark.parametrize("stage", STAGES)
def test_every_hole_has_three_hints_and_none_is_its_code(stage):
    known = hints.load_hints(stage_dir(stage))
    assert set(known) == {hole.where for hole in exercises.find_holes(stage_dir(stage))}, \
        f"quizzes/hints/{stage}.json: one entry per exercise"
    for where, steps in known.items():
        assert len(steps) == 3 and all(len(step) > 40 for step in steps), where
    written = " ".join(step for steps in known.values() for step in steps)
    assert [line for line in body_lines(stage) if line in written] == []


@pytest.mark.parametrize("stage", STAGES)
def test_the_readme_puts_your_turn_before_the_diff_and_points_to_the_hints_not_the_code(stage):
    text = (stage_dir(stage) / "README.md").read_text(encoding="utf-8")
    assert text.index("\n## Your turn\n") < text.index("\n## What changed\n"), \
        f"{stage}/README.md: 'Your turn' comes before the diff step"
    turn = text[text.index("\n## Your turn\n"):].split("\n## ", 2)[1]
    assert f"tinyharness course hint {exercises.short_name(stage)}" in turn and "Hint:" not in turn
    assert [line for line in body_lines(stage) if line in turn] == []


def test_hints_come_in_steps_on_request(progress, capsys):
    said = []
    for _ in range(4):                                                 # 1, 2, 3, then 3 again
        assert course.course_hint("m3", output=said.append) == 0
    text = "\n".join(said)
    steps = [line for line in said if line.startswith("Hint ")]
    assert steps == ["Hint 1 of 3 for m3_hooks: the rule.", "Hint 2 of 3 for m3_hooks: the shape.",
                     "Hint 3 of 3 for m3_hooks: the outline, not the code.",
                     "Hint 3 of 3 for m3_hooks: the outline, not the code."]
    first = text.split("Hint 2 of 3")[0]
    assert "hooks.py:path_guard" in first and "loop.py:checked_run" in first
    assert "Judge where the OS will really go" in first and "In: workspace" not in first
    assert "Next: tinyharness course hint m3 (hint 2: the shape)" in first
    assert "--solutions" in text.split("Hint 3 of 3")[1]
    said.clear()
    assert course.course_hint("m3", 1, output=said.append) == 0 and said[0] == "Hint 1 of 3 for m3_hooks: the rule."
    assert course.course_hint("m3", 4, output=said.append) == 2
    assert "hint 1, 2 or 3" in capsys.readouterr().err
    said.clear()
    assert course.course_hint("m4", output=said.append) == 0 and said[0].startswith("Hint 1 of 3")  # each stage its own


def test_a_body_without_a_docstring_and_a_method_are_blanked_and_restored():
    source = textwrap.dedent('''\
        class Guard:
            # exercise(m9): Write see.
            def see(self, call):
                """Docstring stays."""

                self.last = call
                return None


        # exercise(m9): Write kill.
        def kill(pid,
                 sig=9):  # a comment
            try:
                return pid
            finally:
                pass
        ''')
    holes = exercises.holes_in(source, "m9", "x.py")
    assert [(h.name, h.first, h.last) for h in holes] == [("Guard.see", 5, 7), ("kill", 13, 16)]
    blank = exercises.blank_source(source, holes)
    assert '        """Docstring stays."""\n        raise NotImplementedError("Write see; see README' in blank
    assert '         sig=9):  # a comment\n    raise NotImplementedError("Write kill; see README' in blank
    compile(blank, "x.py", "exec")
    bodies = {h.name: exercises.body_of(source, h) for h in holes}
    for hole in sorted(exercises.holes_in(blank, "m9", "x.py"), key=lambda h: h.first, reverse=True):
        blank = exercises.replace_body(blank, hole, bodies[hole.name])
    assert blank == source


def test_a_marker_must_stand_above_a_def():
    with pytest.raises(exercises.ExerciseError, match="right above a def"):
        exercises.holes_in("# exercise(m1): Write x.\nX = 1\n", "m1", "x.py")


# --- start and check on the command line's terms ------------------------------------------------

def test_start_refuses_to_overwrite_without_force(tmp_path, capsys):
    copy = start("m1", tmp_path)
    (copy / "loop.py").write_text("my work\n")
    assert course.course_start("m1", tmp_path) == 2
    assert "already exists" in capsys.readouterr().err and (copy / "loop.py").read_text() == "my work\n"
    assert course.course_start("m1", tmp_path, force=True) == 0
    assert (copy / "loop.py").read_bytes() != b"my work\n" and "NotImplementedError" in (copy / "loop.py").read_text()


def test_start_and_check_name_the_valid_stages_and_folders(tmp_path, capsys):
    assert course.course_start("m42", tmp_path) == 2
    assert "valid stages" in capsys.readouterr().err
    assert course.course_check("m1", mine=tmp_path) == 2
    assert "is not a copy of m1_loop" in capsys.readouterr().err
    for mine in (ROOT, ROOT / "m1_loop"):                              # never grade the stage itself
        assert course.course_check("m1", mine=mine) == 2
        assert "the repository's own m1_loop, not your copy" in capsys.readouterr().err


def test_list_shows_the_exercise_progress(progress, tmp_path):
    printed = []
    exercises.record_pass("m3_hooks")
    progress.write_text(json.dumps({**json.loads(progress.read_text()), "m3_hooks": {"best": 2, "total": 3}}))
    assert course.course_list(output=printed.append) == 0
    m3 = next(line for line in printed if line.startswith("m3_hooks"))
    m4 = next(line for line in printed if line.startswith("m4_guards"))
    assert "quiz 2/3" in m3 and m3.endswith("exercise done") and m4.endswith("exercise to do")


def result(name, outcome, message="", cause=None, file="test_x.py"):
    """One case as tests/exercise_check.py reports it."""
    return {"nodeid": f"tests/{file}::{name}", "name": name, "outcome": outcome, "message": message, "cause": cause}


def report(results, stage="m3_hooks", count=None, tmp_path=Path(".")):
    """The report of one pass and the verdict after it, as text; and the verdict's exit code."""
    printed = []
    failed = grading.report_pass(stage_dir(stage), {"results": results}, f"Your {stage}", output=printed.append)
    count = count if count is not None else len(grading.behaviours(results))
    code = grading.verdict(stage_dir(stage), tmp_path, [], (failed, count, False), None, "again", printed.append)
    return code, "\n".join(printed)


def test_the_report_shows_a_real_failure_before_an_xpass_and_is_not_done_with_either(tmp_path):
    # in the order they ran: a known escape that the copy stopped (XPASS), then a real failure
    results = [result("test_shell_attack[m3_hooks-fork-bomb]", "xpassed", "[XPASS(strict)] known escape: a fork bomb"),
               result("test_path_attack[m3_hooks-dotdot]", "failed", "assert 'BLOCKED' in 'OK: wrote'"),
               result("test_path_attack[m3_hooks-absolute]", "passed"),
               result("test_a_known_escape_escapes[m3_hooks]", "xfailed"),
               result("test_sandbox_holds[m3_hooks]", "skipped")]
    code, text = report(results, tmp_path=tmp_path)
    assert code == 1 and "done" not in text
    assert text.index("  FAIL  path attack (test_x.py, 1/2 cases pass)") < text.index("  XPASS shell attack (test_x.py)")
    assert "First failure: path attack\n  tests/test_x.py::test_path_attack[m3_hooks-dotdot]" in text
    assert "Your m3_hooks: 1 of 4 behaviours pass (1 skipped on this machine)." in text  # the xfail counts as a pass
    assert "Yours: assert 'BLOCKED' in 'OK: wrote'" in text
    code, text = report(results[:1], tmp_path=tmp_path)
    assert code == 1 and "First failure: shell attack" in text and "a known escape" in text


def test_failures_with_one_cause_are_grouped_first_and_each_is_told_as_its_scenario(tmp_path):
    # m3's learner: one KeyError in path_guard failed 15 behaviours and stopped a known escape (an XPASS)
    key_error = "KeyError: 'path' in path_guard (hooks.py line 20)"
    results = [result("test_policy_lets_ordinary_work_through[m3_hooks-ls]", "failed", "assert 'OK' in ...",
                      file="test_m3_attacks.py"),
               *[result(f"test_b{n}[m3_hooks]", "failed", "assert ...", key_error) for n in range(15)],
               result("test_shell_attack[m3_hooks-eval]", "xpassed", "[XPASS(strict)]", key_error),
               result("test_a_blocked_shell_command_says_what_and_why[m3_hooks]", "passed")]
    code, text = report(results, tmp_path=tmp_path)
    lines = text.splitlines()
    group = next(i for i, line in enumerate(lines) if "fail with the same error" in line)
    assert lines[group] + " " + lines[group + 1].strip() == \
        f"16 behaviours fail with the same error: {key_error}. Fix that first: it may be the only mistake."
    assert group < text.index("FAIL  policy lets ordinary work through")      # the shared cause comes first
    assert f"In all, 16 of the 17 failing behaviours fail with the same error: {key_error}" in " ".join(text.split())
    # the behaviour on its own is told as a story (quizzes/hints/m3_hooks.json), then what the copy did
    told = " ".join(text[text.index("FAIL  policy lets ordinary work through"):].split())
    assert "An ordinary command (tests, a build, a git status) is put to the command policy. It should pass" in told
    assert "Yours: assert 'OK' in ..." in told
    assert "Omitting" not in text and "-vv" not in text


def test_every_scenario_names_a_test_that_exists():
    names = {n for path in (ROOT / "tests").glob("test_*.py")
             for n in re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.M)}
    for stage in STAGES:
        assert set(grading.load_scenarios(stage_dir(stage))) <= names, f"quizzes/hints/{stage}.json: a stale scenario"


def test_check_mine_passes_k_on(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(grading, "check", lambda folder, mine, root, keyword=None: seen.append(keyword) or 0)
    assert course.course_check("m3", mine=tmp_path, keyword="blocked") == 0 and seen == ["blocked"]


@pytest.mark.reruns_the_stage
def test_the_first_pass_names_the_one_mistake_behind_many_failures_and_k_narrows_it(tmp_path):
    # the learner's path_guard judges every tool's "path": a shell call has none, so each one is refused with a
    # KeyError the hook's fail-closed wrapper hides in a BLOCKED: result. Only the lesson's own files run here.
    copy = start("m3", tmp_path)
    fill(copy, {**stage_bodies("m3_hooks"), ("hooks.py", "path_guard"):
                without_the_skip(stage_bodies("m3_hooks")[("hooks.py", "path_guard")])})
    line = next(n for n, text in enumerate((copy / "hooks.py").read_text().splitlines(), 1) if 'args["path"]' in text)
    results = grading.run_tests(ROOT, stage_dir("m3_hooks"), copy, which="lesson", keyword="shell or blocked")
    assert results["origin"] == str(copy.resolve())
    ids = [r["name"].lower() for r in results["results"]]
    assert ids and all("shell" in n or "blocked" in n for n in ids)         # -k chose them (names or parameters)
    assert "test_reading_never_asks[m3_hooks]" not in ids
    assert all(r["nodeid"].startswith("tests/test_m3_") for r in results["results"])
    printed = []
    failed = grading.report_pass(stage_dir("m3_hooks"), results, "Your m3_hooks", output=printed.append)
    text = " ".join("\n".join(printed).split())
    assert len(failed) >= 2
    assert f"{len(failed)} behaviours fail with the same error: KeyError: 'path' in path_guard (hooks.py line {line})" \
        in text


def test_the_check_runs_the_stage_s_own_lesson_first_and_the_known_escapes_last():
    # m5's first failure names the scissors, not an m3 attack that the scissors happened to break
    from types import SimpleNamespace
    from tests import exercise_check
    case = lambda name, xfail=False: SimpleNamespace(path=Path(name), get_closest_marker=lambda mark: xfail or None)
    cases = [case(n) for n in ("test_door.py", "test_m3_attacks.py", "test_m5_context.py", "test_m0_llm.py")]
    cases.insert(0, case("test_m5_context.py", xfail=True))
    ordered = sorted(cases, key=lambda c: exercise_check.basic_first(c, "m5_context"))
    assert [(c.path.name, bool(c.get_closest_marker("xfail"))) for c in ordered] == [
        ("test_m5_context.py", False), ("test_m0_llm.py", False), ("test_m3_attacks.py", False),
        ("test_door.py", False), ("test_m5_context.py", True)]


# --- The real check: the sweeps -------------------------------------------------------------------
#
# Each check is a pytest subprocess over the stage's tests, the slowest thing in this file. A stage's
# checks (its copy filled back, each hole left open alone, its subtly wrong solutions) are independent
# copies in their own folders: they run side by side, two at a time, once per test session, and each
# test below asserts on its own part of the results. `course check mK` (pytest --stage) leaves them to the
# full suite: it runs those same tests on the stage itself.

def counted_ids(body):
    """m1's own run_agent, except that it pairs each result to an id it counted itself."""
    assert '"tool_call_id": call["id"]' in body
    return body.replace('"tool_call_id": call["id"]', '"tool_call_id": f"call_{stats.tool_calls}"')


# The source article's loop (ask, append, no tool calls means done, run each call, answer it by the server's
# id, a turn limit), written from m1's lesson in the stage's names and not copied from it: a while with its own
# counter, short names. The display and the bookkeeping are given (edges.ask, edges.run), so it passes.
SEED_LOOP = '''\
messages = [{"role": "system", "content": system_prompt(workspace)}, {"role": "user", "content": task}]
edges = Edges(client, echo, stats, transcript, max_turns)
turns = 0
while turns < max_turns:
    turns += 1
    msg = edges.ask(messages, SCHEMAS)
    messages.append(msg)
    if not msg.get("tool_calls"):
        return msg["content"]
    for call in msg["tool_calls"]:
        result = edges.run(call, run_tool, workspace)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
raise Stopped(f"gave up after {max_turns} turns")
'''


def first_id_for_all(body):
    """The seed-style loop, except that every result of a turn answers the turn's first call."""
    assert 'messages.append({"role": "tool", "tool_call_id": call["id"]' in body
    return body.replace('    for call in msg["tool_calls"]:\n', '    first = msg["tool_calls"][0]["id"]\n'
                        '    for call in msg["tool_calls"]:\n').replace('"tool_call_id": call["id"]', '"tool_call_id": first')


def without_the_skip(body):
    """m3's own path_guard, except that it judges every tool's "path", shell's too (which has none)."""
    skip = "if name not in FILE_TOOLS:\n    return None\n"
    assert body.startswith(skip)
    return body[len(skip):]


def in_place(body):
    """m5's own sliding_scissors, except that it cuts the list it was given and returns that list."""
    assert body.startswith("old = set(older_results(messages, keep))\n")
    return """\
described = describe_calls(messages)
for i in older_results(messages, keep):
    if cuttable(messages[i], limit):
        messages[i] = stub(messages[i], described)
return messages
"""


# Wrong solutions: each differs from the stage's in one idea, and the report names the behaviour it breaks
# (as its first failure, when `first` is True; among the failures listed, else).
WRONG = {
    "m1 pairs a result to an id it counted itself": ("m1_loop", "loop.py", "run_agent",
                                                     counted_ids(stage_bodies("m1_loop")[("loop.py", "run_agent")]),
                                                     "tool results are paired by the server given id", True),
    "m3 compares path strings instead of resolved paths": ("m3_hooks", "hooks.py", "path_guard", '''\
import os  # hooks.py itself needs no os: the learner brings it
if name not in FILE_TOOLS:
    return None
path = args["path"]
if "\\x00" in path:
    return "the path contains a NUL byte, which no file name can hold"
if Path(path).parts[:1] and Path(path).parts[0].startswith("~"):
    return f"{path!r}: file tools never expand '~'; give a path relative to the workspace"
target = os.path.normpath(os.path.join(workspace, path))  # '..' folded away as text: symlinks are not followed
if not target.startswith(str(workspace)):
    return f"{path!r} is outside the workspace"
if name == "read_file" and hard_links(Path(target)) > 1:
    return f"{path!r} has hard links"
return None
''', "path attack is stopped by the file tools", True),
    "m5 cuts the newest results too": ("m5_context", "context.py", "older_results", '''\
last_reply = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
return [i for i, m in enumerate(messages) if m.get("role") == "tool" and i < last_reply]
''', "old long results are stubbed and the newest two kept", True),
    # The seed-style loop that breaks the one rule the lesson teaches: the failure names it first.
    "m1 answers every result with the turn's first id": ("m1_loop", "loop.py", "run_agent",
                                                         first_id_for_all(SEED_LOOP),
                                                         "tool results are paired by the server given id", True),
    "m3 path_guard does not skip non-file tools": ("m3_hooks", "hooks.py", "path_guard",
                                                   without_the_skip(stage_bodies("m3_hooks")[("hooks.py", "path_guard")]),
                                                   "a blocked shell command says what and why", True),
    "m5 scissors mutate their input list": ("m5_context", "context.py", "sliding_scissors",
                                            in_place(stage_bodies("m5_context")[("context.py", "sliding_scissors")]),
                                            "the scissors return a new list and leave their input alone", True),
}

# Right solutions that are not the stage's own code: each passes the check.
RIGHT = {"m1 seed-style loop": ("m1_loop", "loop.py", "run_agent", SEED_LOOP)}

SWEEP_WORKERS = 2  # the test process only waits on its checks: two keep both cores of a small machine busy
SWEEP_TIME_LIMIT = 1800  # seconds, for the test that runs a stage's sweep: up to five runs of its suite
# (m5's five took over 900 s on a 2-core machine at load 37)
_SWEEPS = {}


@pytest.fixture
def time_for_a_sweep():
    """The first test of a stage runs its sweep: several runs of the stage's whole suite, which on a busy
    machine take longer than the per-test limit of tests/conftest.py. A longer limit, still a limit."""
    import signal

    def give_up(signum, frame):
        raise TimeoutError(f"the sweep ran longer than {SWEEP_TIME_LIMIT} s (tests/test_exercises.py SWEEP_TIME_LIMIT)")
    if hasattr(signal, "SIGALRM") and signal.alarm(0):  # conftest's limit was armed: arm a longer one
        signal.signal(signal.SIGALRM, give_up)          # (conftest disarms it and puts its handler back)
        signal.alarm(SWEEP_TIME_LIMIT)
    yield


def jobs_asked_for(stage, items):
    """What the selected tests of this file ask of one stage's sweep: "filled", each hole, each wrong case.
    The first test of a stage runs them all at once (two at a time), so a run of every tier waits once."""
    wanted = set()
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params
        if not params or item.module is not sys.modules[__name__]:
            continue
        if params.get("stage") == stage and item.originalname == "test_every_hole_alone_fails_the_check":
            wanted.update(stage_bodies(stage))
        elif params.get("stage") == stage and item.originalname == "test_the_copy_with_its_holes_filled_back_passes_the_check":
            wanted.add("filled")
        elif params.get("case") in {**WRONG, **RIGHT} and {**WRONG, **RIGHT}[params["case"]][0] == stage:
            wanted.add(params["case"])
    return wanted


def sweep(stage, request, tmp_path_factory, *keys):
    """The stage's real checks, each run once: {"filled": (code, report, copy, passed), each hole and each
    wrong case: (code, report, copy)}; `passed` is the exercise progress read right after the checks.
    Runs what `keys` name and whatever else the session's selected tests will ask of this stage."""
    results = _SWEEPS.setdefault(stage, {})
    todo = (set(keys) | jobs_asked_for(stage, request.session.items)) - set(results)
    bodies, jobs = stage_bodies(stage), {}
    if "filled" in todo:
        copy = start(stage, tmp_path_factory.mktemp("filled"))
        fill(copy, bodies)
        jobs["filled"] = (copy, False)
    for open_hole in bodies:                                           # every hole alone
        if open_hole in todo:
            copy = tmp_path_factory.mktemp("hole") / stage
            exercises.write_exercise(stage_dir(stage), copy)
            fill(copy, {key: body for key, body in bodies.items() if key != open_hole})
            jobs[open_hole] = (copy, True)
    for case, (case_stage, file, function, body, _, first) in WRONG.items():
        if case_stage == stage and case in todo:                       # all the failures, unless the first will do
            copy = start(stage, tmp_path_factory.mktemp("wrong"))
            fill(copy, {**bodies, (file, function): body})
            jobs[case] = (copy, first)
    for case, (case_stage, file, function, body) in RIGHT.items():
        if case_stage == stage and case in todo:
            copy = start(stage, tmp_path_factory.mktemp("right"))
            fill(copy, {**bodies, (file, function): body})
            jobs[case] = (copy, False)
    with ThreadPoolExecutor(SWEEP_WORKERS) as pool:
        futures = {key: pool.submit(check, copy, first_failure) for key, (copy, first_failure) in jobs.items()}
        results.update({key: (*future.result(), jobs[key][0]) for key, future in futures.items()})
    if "filled" in jobs:
        results["filled"] += (exercises.load_passed(),)
    return results


# Two tiers (README, "Tests"). The README's command grades one stage's copies whole - m0's filled copy and
# each of its holes alone - and one wrong solution, m1's most basic: every behaviour of the checker once.
# The deep tier (`-m deep`, which .ci/run runs after the README's command) does it for every stage: the
# filled copy's check is a whole run of the stage's tests on a copy that is the stage to the byte (the
# generation test above shows it), and each hole or wrong solution another run up to its first failure.
IN_THE_QUICK_TIER = ("m0_llm",)
WRONG_IN_THE_QUICK_TIER = ("m1 pairs a result to an id it counted itself", "m1 answers every result with the turn's first id")


def tiered(values, quick):
    return [value if value in quick else pytest.param(value, marks=pytest.mark.deep) for value in values]


@pytest.mark.reruns_the_stage
@pytest.mark.parametrize("stage", tiered(STAGES, IN_THE_QUICK_TIER))
def test_the_copy_with_its_holes_filled_back_passes_the_check(stage, request, tmp_path_factory, time_for_a_sweep):
    code, text, copy, passed = sweep(stage, request, tmp_path_factory, "filled")["filled"]
    assert code == 0, text
    assert f"{stage} was imported from {copy.resolve()}" in text       # the copy ran, not the repository's stage
    assert "FAIL" not in text and f"Exercise {exercises.short_name(stage)} done" in text
    assert stage in passed


@pytest.mark.reruns_the_stage
@pytest.mark.parametrize("stage", tiered(STAGES, IN_THE_QUICK_TIER))
def test_every_hole_alone_fails_the_check(stage, request, tmp_path_factory, time_for_a_sweep):
    results = sweep(stage, request, tmp_path_factory, *stage_bodies(stage))
    for open_hole in stage_bodies(stage):
        code, text, _ = results[open_hole]
        assert code == 1, f"no test of {stage} fails while {open_hole} is not written:\n{text}"
        assert "First failure: " in text and "Run again: tinyharness course check" in text
        assert f"Still to write: {open_hole[0]}:{open_hole[1]}" in text


@pytest.mark.reruns_the_stage
@pytest.mark.parametrize("case", tiered(list(WRONG), WRONG_IN_THE_QUICK_TIER))
def test_a_wrong_solution_fails_and_the_report_names_the_behaviour(case, request, tmp_path_factory, time_for_a_sweep):
    stage, file, function, body, behaviour, first = WRONG[case]
    code, text, copy = sweep(stage, request, tmp_path_factory, case)[case]
    assert code == 1 and f"Exercise {stage[:2]} done" not in text, text
    assert f"  FAIL  {behaviour} (" in text, text
    if first:
        assert f"First failure: {behaviour}\n" in text, text
    assert "Still to write" not in text                                # everything is written, just wrong
    assert f"Stuck? tinyharness course hint {stage[:2]}" in text
    assert f"Run again: tinyharness course check {stage[:2]} --mine {copy}" in text


@pytest.mark.reruns_the_stage
@pytest.mark.parametrize("case", list(RIGHT))
def test_a_loop_written_from_the_lesson_passes_the_check(case, request, tmp_path_factory, time_for_a_sweep):
    # m1's Done when: the seed-style loop, in the stage's names, with the display and the bookkeeping given
    stage = RIGHT[case][0]
    code, text, copy = sweep(stage, request, tmp_path_factory, case)[case]
    assert code == 0, text
    assert f"{stage} was imported from {copy.resolve()}" in text and "FAIL" not in text
    assert f"Exercise {exercises.short_name(stage)} done" in text


@pytest.mark.reruns_the_stage
def test_the_check_runs_the_copy_even_from_a_parent_folder(tmp_path):
    copy = start("m0", tmp_path)
    fill(copy, stage_bodies("m0_llm"))
    (copy / "llm.py").write_text((copy / "llm.py").read_text().replace('"messages": messages', '"messages": []'))
    printed = []                                                       # DIR, not DIR/m0_llm:
    code = grading.check(stage_dir("m0_llm"), tmp_path, output=printed.append, first_failure=True)
    text = "\n".join(printed)
    assert code == 1 and "First failure: " in text
    assert f"m0_llm was imported from {copy.resolve()}" in text
    assert os.environ.get("TINYHARNESS_STAGE_DIR") is None


def test_exercise_and_quiz_progress_share_one_file_without_losing_each_other(progress):
    from quizzes import quiz
    exercises.record_pass("m1_loop")
    quiz.record_score("m1_loop", 2, 3)
    exercises.record_pass("m2_tools")
    assert set(exercises.load_passed()) == {"m1_loop", "m2_tools"}
    assert quiz.load_progress()["m1_loop"]["best"] == 2


def test_start_never_replaces_the_stage_itself(tmp_path, capsys):
    fake = tmp_path / "repo"                                           # a fake checkout: a failure costs nothing
    (fake / "m1_b").mkdir(parents=True)
    (fake / "m1_b" / "loop.py").write_text('# exercise(m1): Write run.\ndef run():\n    """Doc."""\n    return 1\n')
    assert course.course_start("m1", fake, force=True, root=fake) == 2
    assert "is the stage itself" in capsys.readouterr().err
    assert (fake / "m1_b" / "loop.py").read_text().endswith("return 1\n")
    assert course.course_start("m1", tmp_path, root=fake) == 0
    assert (tmp_path / "m1_b" / "loop.py").read_text().endswith('"""Doc."""\n    raise NotImplementedError("Write run; see README \'Your turn\'")\n')
