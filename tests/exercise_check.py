"""A pytest plugin for `tinyharness course check STAGE --mine DIR` (loaded with -p tests.exercise_check).

TINYHARNESS_STAGE_DIR names the learner's copy of one stage (a folder named like the stage). The plugin
- keeps every case of that stage, in every test file: a parametrised test whose id names the stage, and
  a test without parameters in the stage's own files (tests/test_m3_*.py for m3) whose code names the
  stage folder. Files that check the repository's text rather than the code that runs (REPOSITORY_TEXT:
  the README tables, the quizzes, the exercise generator) are left out: they would pass whatever the
  learner wrote;
- runs the stage's own tests first (tests/test_m5_*.py for m5: the lesson the learner just wrote), then
  the earlier lessons in ladder order (test_m0_* before test_m1_*), then the armour's files (wire, door,
  command line, fuzzers), and the known escapes (strict xfails) last, so `-x` and the report's "First
  failure" name what the stage teaches before what it carries. TINYHARNESS_EXERCISE_PASS=lesson keeps
  only the stage's own lesson cases (no known escape): the check's first pass, its verdict in seconds;
  =rest keeps the others;
- watches the copy's exercise functions (the ones marked for the stage): an exception that leaves one of
  them, unless the stage's own code raises it on purpose, is recorded as the case's cause, with the
  learner's file and line, so the report can say that fifteen failures share one KeyError;
- makes the test process import the stage from the copy (tests/ladder.py does it for the stage's
  subprocesses), and proves it did, here and in a subprocess, before any test runs;
- writes each test's outcome, the first lines of its failure, its cause and its docstring to
  TINYHARNESS_EXERCISE_REPORT (JSON).
"""
import ast
import functools
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.ladder import STAGE_DIR_ENV, import_roots

REPORT_ENV = "TINYHARNESS_EXERCISE_REPORT"
PASS_ENV = "TINYHARNESS_EXERCISE_PASS"
STATE = {"results": {}, "origin": None, "origin_error": None, "causes": [], "docs": {}}
REPOSITORY_TEXT = {"test_structure.py", "test_lessons.py", "test_quizzes.py", "test_quiz_confirms.py",
                   "test_exercises.py", "test_tryit.py"}
LESSON_FILE = re.compile(r"test_m(\d+)_")


def learner_copy():
    return Path(os.environ[STAGE_DIR_ENV]).resolve()


def is_this_stage(item, stage):
    """A case of `stage`: its parameter id names the stage, or, without parameters, it is in the stage's own
    test file and its code names the stage folder. Never a check of the repository's text."""
    file = item.path.name
    if file in REPOSITORY_TEXT:
        return False
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        return stage in callspec.id.split("-")
    if not file.startswith(f"test_{stage.split('_')[0]}_"):
        return False
    try:
        return f'"{stage}"' in inspect.getsource(item.function)
    except (OSError, TypeError, AttributeError):
        return False


def basic_first(item, stage):
    """The sort key of a case: a known escape last; before it, the stage's own lesson files, then the earlier
    lessons in ladder order (test_m0_* first), then the armour's files in name order. A stable sort keeps each
    file's own order."""
    lesson = LESSON_FILE.match(item.path.name)
    own = bool(lesson) and f"m{lesson[1]}" == stage.split("_")[0]
    return (item.get_closest_marker("xfail") is not None, not own, 0 if lesson else 1, int(lesson[1]) if lesson else 0)


def own_lesson(item, stage):
    """A case of the stage's own lesson files that is not a known escape: the check's first pass."""
    lesson = LESSON_FILE.match(item.path.name)
    return bool(lesson) and f"m{lesson[1]}" == stage.split("_")[0] and item.get_closest_marker("xfail") is None


def in_this_pass(item, stage):
    which = os.environ.get(PASS_ENV, "")
    return which not in ("lesson", "rest") or own_lesson(item, stage) == (which == "lesson")


def use_the_copy(stage, copy):
    """Import `stage` from the learner's folder in this process, whatever sys.path says."""
    for name in [n for n in sys.modules if n == stage or n.startswith(stage + ".")]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location(stage, copy / "__init__.py", submodule_search_locations=[str(copy)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[stage] = module
    spec.loader.exec_module(module)


def origin_in_a_subprocess(stage):
    """Where a stage's subprocess (tests/ladder.py:run_stage) imports the stage from."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env["PYTHONPATH"] = os.pathsep.join(import_roots(stage) + [env.get("PYTHONPATH", "")])
    probe = f"import {stage}; print({stage}.__file__)"
    with tempfile.TemporaryDirectory() as empty:  # like a workspace: no stage folder in the cwd
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                              cwd=empty, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


def inside(path, folder):
    try:
        return Path(path).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if not os.environ.get(STAGE_DIR_ENV):
        return
    copy = learner_copy()
    stage = copy.name
    keep = sorted((item for item in items if is_this_stage(item, stage) and in_this_pass(item, stage)),
                  key=lambda item: basic_first(item, stage))
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
    use_the_copy(stage, copy)
    here, there = importlib.import_module(stage).__file__, origin_in_a_subprocess(stage)
    if inside(here, copy) and inside(there, copy):
        STATE["origin"] = str(copy)
        watch_the_exercises(stage, copy)
    else:  # never grade the repository's stage by accident
        STATE["origin_error"] = (f"{stage} was imported from {here} in the tests and from {there} in a "
                                 f"subprocess, not from {copy}.")
        items[:] = []


# --- What the learner's code did: the exceptions that leave its exercise functions -------------------

def designed_exceptions(stage):
    """The exception names the stage's own exercise functions raise on purpose (`raise ValueError(...)`)."""
    from tinyharness.course.exercises import body_of, find_holes
    folder, names = Path(__file__).resolve().parents[1] / stage, set()
    for hole in find_holes(folder):
        body = body_of((folder / hole.file).read_text(encoding="utf-8"), hole)
        for node in ast.walk(ast.parse(body)):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                names.add(getattr(target, "id", getattr(target, "attr", "")))
    return names


def cause_of(error, copy):
    """'KeyError: 'path' in path_guard (hooks.py line 23)': the error and the deepest line of the copy it
    passed through."""
    where, tb = None, error.__traceback__
    while tb is not None:
        if inside(tb.tb_frame.f_code.co_filename, copy):
            where = (tb.tb_frame.f_code.co_name, Path(tb.tb_frame.f_code.co_filename).resolve().relative_to(copy), tb.tb_lineno)
        tb = tb.tb_next
    text = str(error).splitlines()[0] if str(error).strip() else ""
    if isinstance(error, NotImplementedError) and text.endswith("see README 'Your turn'") and where:
        return f"{where[0]} is not written yet: it still raises NotImplementedError ({where[1].as_posix()} line {where[2]})"
    text = text if len(text) <= 120 else text[:117] + "..."
    said = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return said + (f" in {where[0]} ({where[1].as_posix()} line {where[2]})" if where else "")


def watched(function, stage, copy, designed):
    """The exercise function as written, noting an exception that leaves it (and letting it go on)."""
    @functools.wraps(function)
    def watching(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as e:
            if type(e).__name__ not in designed and not type(e).__module__.startswith(stage):
                STATE["causes"].append(cause_of(e, copy))
            raise
    return watching


def swap_everywhere(stage, old, new):
    """Every reference the stage's modules hold to `old` (a name, an item of a list, tuple or dict) now `new`."""
    for name, module in list(sys.modules.items()):
        if not (name == stage or name.startswith(stage + ".")):
            continue
        for key, value in list(vars(module).items()):
            if value is old:
                setattr(module, key, new)
            elif isinstance(value, list) and any(v is old for v in value):
                value[:] = [new if v is old else v for v in value]
            elif isinstance(value, tuple) and any(v is old for v in value):
                setattr(module, key, tuple(new if v is old else v for v in value))
            elif isinstance(value, dict) and any(v is old for v in value.values()):
                value.update({k: new for k, v in value.items() if v is old})


def watch_the_exercises(stage, copy):
    """Wrap each exercise function of the copy (after the whole stage is imported, so every reference is
    found); a copy that does not import is left to fail its tests."""
    from tinyharness.course.exercises import find_holes
    try:
        importlib.import_module(f"{stage}.__main__")
        holes, designed = find_holes(copy), designed_exceptions(stage)
        for hole in holes:
            owner = importlib.import_module(f"{stage}." + hole.file[:-3].replace("/", "."))
            *classes, name = hole.name.split(".")
            for part in classes:
                owner = getattr(owner, part)
            original = getattr(owner, name)
            setattr(owner, name, watched(original, stage, copy, designed))
            if not classes:
                swap_everywhere(stage, original, getattr(owner, name))
    except Exception:
        return


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    STATE["causes"].clear()
    doc = inspect.getdoc(getattr(item, "function", None)) or ""
    STATE["docs"][item.nodeid] = " ".join(doc.split("\n\n")[0].split())


def pytest_runtest_logreport(report):
    entry = STATE["results"].setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "passed", "message": ""})
    entry["name"] = report.nodeid.split("::")[-1]
    if report.failed and entry["outcome"] not in ("failed", "xpassed"):
        strict_xpass = str(report.longrepr or "").startswith("[XPASS(strict)]")
        entry["outcome"] = "xpassed" if strict_xpass else "failed"
        entry["message"] = str(report.longrepr) if strict_xpass else failure_message(report)
        entry["cause"] = STATE["causes"][0] if STATE["causes"] else None
        entry["doc"] = STATE["docs"].get(report.nodeid, "")
    elif report.skipped and hasattr(report, "wasxfail") and entry["outcome"] == "passed":
        entry["outcome"] = "xfailed"  # a known escape escaped, as the stage's own code lets it
    elif report.skipped and report.when != "teardown" and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"


def failure_message(report):
    """The words that say what went wrong: a NotImplementedError from the copy first, else the crash message."""
    text = report.longreprtext or ""
    for line in text.splitlines():
        if "NotImplementedError:" in line:
            return "your code raised " + line.strip()[line.strip().index("NotImplementedError:"):]
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    return crash or text.strip()[-1000:]


def pytest_sessionfinish(session):
    path = os.environ.get(REPORT_ENV)
    if not path or not os.environ.get(STAGE_DIR_ENV):
        return
    Path(path).write_text(json.dumps({"origin": STATE["origin"], "origin_error": STATE["origin_error"],
                                      "results": list(STATE["results"].values())}, indent=2), encoding="utf-8")
