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
  failure" name what the stage teaches before what it carries;
- makes the test process import the stage from the copy (tests/ladder.py does it for the stage's
  subprocesses), and proves it did, here and in a subprocess, before any test runs;
- writes each test's outcome and the first lines of its failure to TINYHARNESS_EXERCISE_REPORT (JSON).
"""
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
STATE = {"results": {}, "origin": None, "origin_error": None}
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
    keep = sorted((item for item in items if is_this_stage(item, stage)), key=lambda item: basic_first(item, stage))
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
    use_the_copy(stage, copy)
    here, there = importlib.import_module(stage).__file__, origin_in_a_subprocess(stage)
    if inside(here, copy) and inside(there, copy):
        STATE["origin"] = str(copy)
    else:  # never grade the repository's stage by accident
        STATE["origin_error"] = (f"{stage} was imported from {here} in the tests and from {there} in a "
                                 f"subprocess, not from {copy}.")
        items[:] = []


def pytest_runtest_logreport(report):
    entry = STATE["results"].setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "passed", "message": ""})
    entry["name"] = report.nodeid.split("::")[-1]
    if report.failed and entry["outcome"] not in ("failed", "xpassed"):
        strict_xpass = str(report.longrepr or "").startswith("[XPASS(strict)]")
        entry["outcome"] = "xpassed" if strict_xpass else "failed"
        entry["message"] = str(report.longrepr) if strict_xpass else failure_message(report)
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
