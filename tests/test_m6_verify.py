"""m6: done is what the evidence says. Run on m6, every later stage and `tinyharness run`.

A post_tool_use hook compiles every .py file write_file writes and appends the compiler's message
to that call's result; after 3 failing writes of one file in a row it says it stops and stops.
Two stories are played by a scripted model that decides from what it reads in the tool results:
the closed loop (a NameError found by running the tests, read, fixed, green) and its limit (a
wrong expectation in the model's own test, "fixed" into the program, green and wrong).
"""
import calendar
import importlib
import json
import re
import shlex
import subprocess
import sys

import pytest

from tests.ladder import calls, run_stage, stages_from, stats_line, tool_call, tool_results
from tinyharness.testing import ScriptedServer

LADDER = stages_from("m6")
BROKEN = "def area(width, height):\n    return width * height)\n"
GOOD = "def area(width, height):\n    return width * height\n"


def run(stage, workspace, script=None, *args, policy=None, stdin="", task="go", approve=True, tty=None):
    with ScriptedServer(script=script, policy=policy) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, *args, task, stdin=stdin,
                           approve=approve, tty=tty)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result, server


def results_in_order(server):
    """The result of each tool call as the model first read it (m5's scissors cut it later), in the
    order the calls were made (ids are the server's call_N)."""
    found = {}
    for request in server.requests:
        for call_id, result in tool_results(request).items():
            found.setdefault(call_id, result)
    return [found[f"call_{n}"] for n in range(1, len(found) + 1)]


def written(path, content):
    return f"OK: wrote {len(content)} characters to {path}"


# --- the hook ----------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_a_syntax_error_reaches_the_model_with_file_and_line(stage, workspace):
    (workspace / "geometry").mkdir()
    _, server = run(stage, workspace, [calls(tool_call("write_file", path="geometry/area.py", content=BROKEN)),
                                       "done"])
    result = tool_results(server.requests[1])["call_1"]
    assert result.startswith(written("geometry/area.py", BROKEN) + "\n\n[harness] ")  # the write did happen...
    assert 'File "geometry/area.py", line 2' in result  # ...and the next request says where and what
    assert "return width * height)" in result and "SyntaxError: unmatched ')'" in result
    assert (workspace / "geometry" / "area.py").read_text() == BROKEN


@pytest.mark.parametrize("stage", LADDER)
def test_code_that_compiles_leaves_the_result_exactly_as_it_was(stage, workspace):
    _, server = run(stage, workspace, [calls(tool_call("write_file", path="area.py", content=GOOD)), "done"])
    assert tool_results(server.requests[1])["call_1"] == written("area.py", GOOD)


@pytest.mark.parametrize("stage", LADDER)
def test_only_python_files_that_were_written_are_checked(stage, workspace):
    script = [calls(tool_call("write_file", path="notes.txt", content=BROKEN),
                    tool_call("write_file", path="area.py.bak", content=BROKEN),
                    tool_call("write_file", path="../outside.py", content=BROKEN),  # blocked: never ran
                    tool_call("write_file", path="missing/area.py", content=BROKEN),  # ran, wrote nothing
                    tool_call("read_file", path="notes.txt")), "done"]
    _, server = run(stage, workspace, script)
    text, backup, blocked, failed, read = results_in_order(server)
    assert text == written("notes.txt", BROKEN) and backup == written("area.py.bak", BROKEN)
    assert blocked.startswith("BLOCKED: ") and "[harness]" not in blocked
    assert failed.startswith("ERROR: ") and "missing" in failed and "[harness]" not in failed
    assert read == BROKEN


@pytest.mark.parametrize("stage", LADDER)
def test_a_denied_write_is_not_checked(stage, workspace):
    script = [calls(tool_call("write_file", path="area.py", content=BROKEN)), "done"]
    _, server = run(stage, workspace, script, tty="n\n", approve=False)
    result = tool_results(server.requests[1])["call_1"]
    assert result.startswith("DENIED: ") and "[harness]" not in result


@pytest.mark.parametrize("stage", LADDER)
def test_no_pycache_is_left_in_the_workspace(stage, workspace):
    (workspace / "pkg").mkdir()
    script = [calls(tool_call("write_file", path="pkg/__init__.py", content=""),
                    tool_call("write_file", path="pkg/area.py", content=GOOD),
                    tool_call("write_file", path="broken.py", content=BROKEN)), "done"]
    _, server = run(stage, workspace, script)
    assert "SyntaxError" in results_in_order(server)[2]  # the files really were compiled
    left = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*"))
    assert left == ["broken.py", "pkg", "pkg/__init__.py", "pkg/area.py"]  # no __pycache__, no .pyc


# --- the cap -----------------------------------------------------------------------------------

CAP = "stops checking area.py automatically"


@pytest.mark.parametrize("stage", LADDER)
def test_after_three_failing_writes_of_one_file_the_harness_says_so_and_stops(stage, workspace):
    attempts = [BROKEN, "def area(width, height)\n    return width * height\n",  # each try a new mistake,
                "def area(width height):\n    return width * height\n",      # as a model makes them
                "def area(width, height):\nreturn width * height\n"]
    script = [calls(tool_call("write_file", path=path, content=text))
              for path, text in zip(["area.py", "./area.py", "area.py", "area.py"], attempts)]
    script += [calls(tool_call("write_file", path="volume.py", content=BROKEN)), "done"]
    _, server = run(stage, workspace, script)
    first, second, third, fourth, other = results_in_order(server)
    for result in (first, second, third):
        assert "[harness]" in result and "SyntaxError" in result
    assert "stops checking" not in first + second
    assert third.endswith("or tell the user what stops you.") and CAP in third and "3 writes" in third
    assert fourth == written("area.py", attempts[3])  # no longer checked, though it does not compile
    assert "[harness]" in other and "SyntaxError" in other and "stops checking" not in other  # the cap is per file


@pytest.mark.parametrize("stage", LADDER)
def test_a_write_that_compiles_starts_the_count_again(stage, workspace):
    order = [BROKEN, BROKEN.replace("width", "w"), GOOD, BROKEN.replace("width", "x"),
             BROKEN.replace("width", "y"), BROKEN.replace("width", "z")]
    script = [calls(tool_call("write_file", path="area.py", content=text)) for text in order] + ["done"]
    _, server = run(stage, workspace, script)
    results = results_in_order(server)
    assert ["SyntaxError" in r for r in results] == [True, True, False, True, True, True]
    assert [CAP in r for r in results] == [False, False, False, False, False, True]


def stage_module(stage, name):
    return importlib.import_module(f"{stage}.{name}")


@pytest.mark.parametrize("stage", LADDER)
def test_a_check_that_crashes_says_so_and_keeps_the_result(stage, monkeypatch, workspace):
    verify = stage_module(stage, "verify")

    def broken(workspace, name, args, result, memory):
        raise KeyError("oops")
    monkeypatch.setattr(verify, "POST_TOOL_USE", [broken])
    result = verify.post_tool_use(str(workspace), "write_file", {"path": "a.py", "content": ""}, "OK: wrote", {})
    assert result.startswith("OK: wrote\n\n[harness] ") and "broken" in result and "unchecked" in result


# --- the stories: a scripted model that reads its tool results -----------------------------------

PYTHON = shlex.quote(sys.executable)
RUN_TESTS = f"{PYTHON} -m unittest -q test_dates"
KNOWN_IMPORTS = {"date": "from datetime import date\n", "timedelta": "from datetime import timedelta\n"}


class SelfTestingModel:
    """Plays a model that writes a program and its tests, runs them, and reacts to what it reads:
    a NameError in a file -> read that file, add the missing import; a failed assertion -> it trusts
    its own test, reads the program and makes it agree (`beliefs`: what it changes); a green run ->
    it says the work is done. It keeps no state: every decision comes from the messages it is sent."""

    def __init__(self, program, tests, beliefs=()):
        self.program, self.tests, self.beliefs = program, tests, list(beliefs)

    def __call__(self, body, index):
        messages = body["messages"]
        if not any(m["role"] == "assistant" for m in messages):  # the first turn
            return calls(tool_call("write_file", path="dates.py", content=self.program),
                         tool_call("write_file", path="test_dates.py", content=self.tests))
        name, args, result = last_call(messages)
        if name == "write_file":
            return calls(tool_call("shell", command=RUN_TESTS))
        if name == "read_file":
            return calls(tool_call("write_file", path=args["path"], content=self.fix(result, messages)))
        if result.startswith("exit status 0"):
            return "Done: dates.py and its tests are written, and all tests pass."
        missing = re.search(r"NameError: name '(\w+)' is not defined", result)
        if missing and missing.group(1) in KNOWN_IMPORTS:
            return calls(tool_call("read_file", path=failing_file(result)))
        if "AssertionError" in result and self.beliefs:
            return calls(tool_call("read_file", path="dates.py"))  # the test says what I meant: fix the code
        return "The tests fail and I do not know why; here is the output:\n" + result

    def fix(self, source, messages):
        """The file as read, changed the way the last test run suggests."""
        traceback = last_shell_output(messages)
        missing = re.search(r"NameError: name '(\w+)' is not defined", traceback)
        if missing:
            return KNOWN_IMPORTS[missing.group(1)] + source
        for old, new in self.beliefs:
            source = source.replace(old, new)
        return source


def last_call(messages):
    """The newest tool call (name, arguments) and its result."""
    result = messages[-1]
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if call["id"] == result["tool_call_id"]:
                arguments = call["function"]["arguments"]
                return call["function"]["name"], json_loads(arguments), result["content"]
    raise AssertionError("no call for the newest result")


def json_loads(arguments):
    return arguments if isinstance(arguments, dict) else json.loads(arguments)


def last_shell_output(messages):
    """The newest shell result: the test run the model is answering."""
    shell_ids = {c["id"] for m in messages for c in m.get("tool_calls") or [] if c["function"]["name"] == "shell"}
    return next(m["content"] for m in reversed(messages) if m.get("tool_call_id") in shell_ids)


def failing_file(traceback):
    """The workspace file of the innermost frame a traceback names: the line that failed."""
    frames = re.findall(r'File "(?:[^"]*/)?([\w.]+\.py)", line \d+', traceback)
    return next(f for f in reversed(frames) if f in ("dates.py", "test_dates.py"))


DATES = '''from datetime import timedelta


def next_weekday(day):
    """The first Monday-to-Friday date after `day`."""
    day += timedelta(days=1)
    while day.weekday() >= 5:  # 5 and 6 are Saturday and Sunday
        day += timedelta(days=1)
    return day
'''

TEST_DATES = '''import unittest

from dates import next_weekday


class NextWeekdayTest(unittest.TestCase):
    def test_friday_is_followed_by_monday(self):
        self.assertEqual(next_weekday(date(2024, 3, 8)), date(2024, 3, 11))

    def test_tuesday_is_followed_by_wednesday(self):
        self.assertEqual(next_weekday(date(2024, 3, 5)), date(2024, 3, 6))
'''


@pytest.mark.parametrize("stage", LADDER)
def test_the_closed_loop_write_run_read_fix_green(stage, workspace):
    """The source article's loop: a date function and its test; the test forgot an import, so running
    it raises NameError; the model reads the traceback, fixes the file it names, runs again: green,
    with no human in between. The compile check stays silent: a NameError only shows when code runs."""
    result, server = run(stage, workspace, policy=SelfTestingModel(DATES, TEST_DATES),
                         task="Write dates.py with next_weekday(day) and unittest tests in test_dates.py.")
    echoed = [line.split("(")[0].strip() for line in result.stdout.splitlines() if line.startswith("  [tool] ")]
    assert echoed == ["[tool] write_file", "[tool] write_file", "[tool] shell", "[tool] read_file",
                      "[tool] write_file", "[tool] shell"]
    wrote_code, wrote_tests, red, read, fixed, green = results_in_order(server)
    assert wrote_code == written("dates.py", DATES) and wrote_tests == written("test_dates.py", TEST_DATES)
    assert red.startswith("exit status 1") and "NameError: name 'date' is not defined" in red
    assert 'test_dates.py", line 8' in red  # the traceback named the file and line the model then read
    assert read == TEST_DATES and fixed.startswith("OK: wrote")
    assert green.startswith("exit status 0") and "Ran 2 tests" in green and "OK" in green
    assert result.stdout.rstrip().endswith("all tests pass.")
    assert (workspace / "test_dates.py").read_text().startswith("from datetime import date\n")
    assert stats_line(result.stderr)["turns"] == "6" and stats_line(result.stderr)["tool_calls"] == "6"


LEAP = '''def is_leap_year(year):
    """True for the years that have a 29 February."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
'''

TEST_LEAP = '''import unittest

from dates import is_leap_year


class LeapYearTest(unittest.TestCase):
    def test_leap_years(self):
        self.assertTrue(is_leap_year(2024))
        self.assertTrue(is_leap_year(1900))  # the model's mistake: 1900 had no 29 February
        self.assertFalse(is_leap_year(2023))
'''

MODEL_BELIEF = ("year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)", "year % 4 == 0")


@pytest.mark.parametrize("stage", LADDER)
def test_tests_the_model_wrote_can_agree_with_a_wrong_program(stage, workspace):
    """The limit of the loop: the program starts right and the model's test is wrong. The test fails,
    the model trusts its test and "fixes" the program into agreement. The loop ends green, the model
    says done, and the program is now wrong. Only a referee from outside the model sees it."""
    result, server = run(stage, workspace, policy=SelfTestingModel(LEAP, TEST_LEAP, [MODEL_BELIEF]),
                         task="Write dates.py with is_leap_year(year) and unittest tests in test_dates.py.")
    _, _, red, _, fixed, green = results_in_order(server)
    assert "AssertionError: False is not true" in red and "is_leap_year(1900)" in red  # the right answer, refused
    assert fixed == written("dates.py", LEAP.replace(*MODEL_BELIEF))  # compiles, so the hook says nothing
    assert green.startswith("exit status 0") and "OK" in green  # green, by the model's own tests
    assert result.stdout.rstrip().endswith("all tests pass.")
    referee = subprocess.run([sys.executable, "-B", "-c", "from dates import is_leap_year as f; "
                              "print([y for y in (1900, 2000, 2023, 2024) if f(y)])"],
                             cwd=workspace, capture_output=True, text=True, timeout=30)
    assert referee.stdout.strip() == "[1900, 2000, 2024]"  # what the program says now...
    assert [y for y in (1900, 2000, 2023, 2024) if calendar.isleap(y)] == [2000, 2024]  # ...and the truth
