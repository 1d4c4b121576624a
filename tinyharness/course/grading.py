"""`tinyharness course check mK --mine DIR`: the stage's own tests grade the learner's copy, and
the report teaches rather than dumps.

"Done" means the stage's own code could be swapped for the learner's and nothing would notice, so
every test case of the stage runs on the copy: the cases of every test file parametrised with the
stage (the wire, the door, the fuzzers, the attacks), not only tests/test_mK_*.py.
TINYHARNESS_STAGE_DIR tells tests/ladder.py to import and run the stage from the copy, and
tests/exercise_check.py proves it did (the module's __file__, in the test process and in a
subprocess) before any result counts.

A failure should teach, and soon. So the check runs in two pytest passes: first the stage's own
lesson files (tests/test_m3_*.py for m3, the known escapes aside) - a few seconds - and prints
that verdict; then the rest. Each failing behaviour (a test function, all its cases) is told as
its scenario in words: what the model did and what the harness should have done (a line of
quizzes/hints/<stage>.json's "scenarios", else the test's docstring, else its name in words),
then what the learner's code did. That last part comes from the plugin, which watches the
exercise functions of the copy: an exception that leaves one of them (and is not one the stage's
own code raises on purpose) is the case's cause, with its file and line. Behaviours that fail with
one cause are grouped under it, first: one KeyError that fails fifteen behaviours is one bug.
`-k EXPR` narrows both passes as pytest's own -k does; a run narrowed by -k never counts as done.

What it cannot do: the tests judge behaviour, not style, and a cause is found only for an
exception raised in the test process (a stage run in a subprocess shows its failure alone).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .exercises import ExerciseError, Hole, find_holes, record_pass, short_name
from .hints import hints_path

ROOT = Path(__file__).resolve().parents[2]
STAGE_DIR_ENV = "TINYHARNESS_STAGE_DIR"      # read by tests/ladder.py and tests/exercise_check.py
REPORT_ENV = "TINYHARNESS_EXERCISE_REPORT"   # where tests/exercise_check.py writes the results
PASS_ENV = "TINYHARNESS_EXERCISE_PASS"       # "lesson" or "rest": which cases a pass runs
PLUGIN = "tests.exercise_check"
BAD = ("failed", "xpassed")  # an XPASS(strict): a known escape the copy stopped; the suite fails
WIDTH = 100


# --- Running the tests ----------------------------------------------------------------------------

def find_copy(stage_dir: Path, mine) -> Path:
    """The learner's stage folder: `mine` itself, or `mine`/<stage folder name>."""
    mine = Path(mine)
    for folder in (mine / stage_dir.name, mine):
        if folder.name == stage_dir.name and (folder / "__main__.py").is_file():
            if folder.resolve() == stage_dir.resolve():
                raise ExerciseError(f"{folder} is the repository's own {stage_dir.name}, not your "
                                    "copy: give the folder `tinyharness course start "
                                    f"{short_name(stage_dir.name)} DIR` wrote.")
            return folder.resolve()
    raise ExerciseError(
        f"{mine} is not a copy of {stage_dir.name}: the checks run a folder named {stage_dir.name} "
        f"that holds __main__.py (as `tinyharness course start {short_name(stage_dir.name)} DIR` "
        "writes it into DIR).")


def lesson_files(root: Path, stage_dir: Path) -> list[str]:
    """The stage's own lesson test files (tests/test_m3_*.py for m3), relative to the root."""
    return sorted(p.relative_to(root).as_posix()
                  for p in (root / "tests").glob(f"test_{short_name(stage_dir.name)}_*.py"))


def stage_tests(root: Path, stage_dir: Path, which: str) -> list[str]:
    """pytest's arguments for one pass: the lesson pass collects only the stage's own lesson files
    (a second of collection, not the whole suite's); the other pass collects all and leaves out
    what the first ran (tests/exercise_check.py). --stage deselects other stages' cases."""
    files = lesson_files(root, stage_dir) if which == "lesson" else []
    return [*(files or ["tests"]), "--stage", stage_dir.name]


def run_tests(root: Path, stage_dir: Path, copy: Path, first_failure=False, which="",
              keyword=None) -> dict:
    """Run one pass of the stage's tests against the copy in a pytest subprocess; the plugin's
    JSON report."""
    with tempfile.TemporaryDirectory(prefix="tinyharness-check-") as scratch:
        report_path = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, "-p", "no:cacheprovider",
                   "-p", "no:xdist", *(["-x"] if first_failure else []),
                   *(["-k", keyword] if keyword else []), *stage_tests(root, stage_dir, which)]
        env = ({**os.environ, STAGE_DIR_ENV: str(copy), REPORT_ENV: str(report_path),
                PASS_ENV: which, "PYTHONIOENCODING": "utf-8"})
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", check=False)
        if not report_path.is_file():
            raise ExerciseError("the tests did not run; pytest said:\n" + "\n".join(
                (done.stdout + done.stderr).strip().splitlines()[-15:]))
        return json.loads(report_path.read_text(encoding="utf-8"))


# --- Reading the results --------------------------------------------------------------------------

def phrase(test_name: str) -> str:
    """test_tool_results_are_paired_by_the_server_given_id -> 'tool results are paired by the server
    given id'"""
    return test_name.split("[")[0].removeprefix("test_").replace("_", " ")


def behaviours(results: list[dict]) -> list[tuple[str, list[dict]]]:
    """Results grouped by test function, in the order they ran: one behaviour, all its cases."""
    grouped: dict[str, list[dict]] = {}
    for result in results:
        grouped.setdefault(phrase(result["name"]), []).append(result)
    return list(grouped.items())


def failing(groups: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    """The behaviours with a bad case, a real failure before an XPASS, otherwise in the order they
    ran (tests/exercise_check.py runs the most basic cases first)."""
    bad = [(name, cases) for name, cases in groups if any(c["outcome"] in BAD for c in cases)]
    return sorted(bad, key=lambda group: not any(c["outcome"] == "failed" for c in group[1]))


def first_bad(cases: list[dict]) -> dict:
    return next(c for c in cases if c["outcome"] in BAD)


def shared_causes(failed: list[tuple[str, list[dict]]]) -> list[tuple[str, list[str]]]:
    """(cause, the behaviours it fails) for each cause behind two or more failing behaviours, the
    most first."""
    by_cause: dict[str, list[str]] = {}
    for name, cases in failed:
        cause = next((c.get("cause") for c in cases if c["outcome"] in BAD and c.get("cause")),
                     None)
        if cause:
            by_cause.setdefault(cause, []).append(name)
    shared = [(cause, names) for cause, names in by_cause.items() if len(names) > 1]
    return sorted(shared, key=lambda item: -len(item[1]))


def load_scenarios(stage_dir: Path) -> dict[str, str]:
    """test function name -> its scenario in words, from quizzes/hints/<stage>.json."""
    try:
        data = json.loads(hints_path(stage_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = data.get("scenarios") if isinstance(data, dict) else None
    return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def short_failure(case: dict) -> str:
    """What the learner's code did, in one line: the cause the plugin found, else the first line of
    the failure (an assert's message, not pytest's diff of it)."""
    if case.get("cause"):
        return case["cause"]
    if case["outcome"] == "xpassed":
        return ("a known escape that the stage's own code lets through was stopped: check that "
                "your code does not refuse more than it should")
    lines = [line.strip() for line in case.get("message", "").splitlines() if line.strip()]
    text = lines[0] if lines else "the test failed"
    return text if len(text) <= 240 else text[:237] + "..."


def scenario(scenarios: dict, case: dict, name: str) -> str:
    """The behaviour as a story: the scenario file's words, the test's docstring, or its name."""
    function = case["name"].split("[")[0]
    told = scenarios.get(function) or case.get("doc")
    return told or f"Expected: {name}."


# --- The report -----------------------------------------------------------------------------------

def say(output, text: str, indent: str = "  ") -> None:
    output(textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  "))


def report_pass(stage_dir: Path, results: dict, title: str, output=print) -> list:
    """One pass's part of the report: the shared causes first, each with the behaviours it fails,
    then every other failing behaviour as its scenario and what the learner's code did; returns
    the pass's failing behaviours."""
    groups = behaviours(results["results"])
    failed, scenarios = failing(groups), load_scenarios(stage_dir)
    skipped = sum(all(c["outcome"] == "skipped" for c in cases) for _, cases in groups)
    if not groups:
        output(f"\n{title}: no behaviour selected.")
        return []
    output(f"\n{title}: {len(groups) - len(failed) - skipped} of {len(groups)} behaviours pass"
           + (f" ({skipped} skipped on this machine)." if skipped else "."))
    told = set()
    for cause, names in shared_causes(failed):
        output("")
        say(output, f"{len(names)} behaviours fail with the same error: {cause}. Fix that first: "
                    "it may be the only mistake.", indent="")
        for name, cases in failed:
            if name in names:
                output(failure_line(name, cases))
        name, cases = next(item for item in failed if item[0] == names[0])
        say(output, "The first of them: " + scenario(scenarios, first_bad(cases), name),
            indent="        ")
        told.update(names)
    for name, cases in failed:
        if name not in told:
            output(failure_line(name, cases))
            say(output, scenario(scenarios, first_bad(cases), name), indent="        ")
            say(output, "Yours: " + short_failure(first_bad(cases)), indent="        ")
    return failed


def failure_line(name: str, cases: list[dict]) -> str:
    """'  FAIL  path attack (test_x.py, 1/2 cases pass)'"""
    bad = [c for c in cases if c["outcome"] in BAD]
    mark = "FAIL" if any(c["outcome"] == "failed" for c in bad) else "XPASS"
    count = f", {len(cases) - len(bad)}/{len(cases)} cases pass" if len(cases) > 1 else ""
    return f"  {mark:<5} {name} ({bad[0]['nodeid'].split('::')[0].rsplit('/', 1)[-1]}{count})"


def origin_told(results: dict, stage: str, output, tell=True) -> bool:
    """Say where the stage was imported from; False when it was not the copy."""
    if results.get("origin_error"):
        output(f"The check could not run your copy: {results['origin_error']}")
        return False
    if results.get("origin") and tell:
        output(f"Your code is what ran: {stage} was imported from {results['origin']}.")
    return True


def first_failure_told(stage_dir: Path, failed: list, output) -> None:
    name, cases = failed[0]
    case = first_bad(cases)
    output(f"\nFirst failure: {name}\n  {case['nodeid']}")
    say(output, scenario(load_scenarios(stage_dir), case, name), indent="    ")
    say(output, "Yours: " + short_failure(case), indent="    ")


def show_what_is_left(stage_dir: Path, copy: Path, holes: list[Hole], output) -> None:
    """After a failure: the functions still to write, and where the hints are."""
    todo = still_to_write(copy, holes)
    output("\nStill to write: " + ", ".join(h.where for h in todo) if todo else "")
    output(f"Stuck? tinyharness course hint {short_name(stage_dir.name)} gives the hints in steps: "
           "the rule, the shape, the outline.")


def still_to_write(copy: Path, holes: list[Hole]) -> list[Hole]:
    """The holes whose body in the learner's copy is still the generated raise."""
    todo = []
    for hole in holes:
        path = copy / hole.file
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        if f"raise NotImplementedError({json.dumps(hole.message, ensure_ascii=False)})" in text:
            todo.append(hole)
    return todo


# --- The command ----------------------------------------------------------------------------------

def two_passes(stage_dir: Path, copy: Path, root: Path, output, first_failure,
               keyword) -> tuple | None:
    """Run the lesson pass and report it (the first verdict), then the rest; (failing behaviours,
    behaviours run, the rest skipped after a failure under -x), or None when the copy did not
    run."""
    lesson = run_tests(root, stage_dir, copy, first_failure, "lesson", keyword)
    if not origin_told(lesson, stage_dir.name, output):
        return None
    failed = report_pass(stage_dir, lesson, f"Your {stage_dir.name}, its own lesson first", output)
    count = len(behaviours(lesson["results"]))
    if failed and first_failure:
        return failed, count, True
    output("\nNow every other behaviour the stage carries (the wire, the door, the attacks, the "
           "earlier lessons)...")
    rest = run_tests(root, stage_dir, copy, first_failure, "rest", keyword)
    if not origin_told(rest, stage_dir.name, output, tell=not lesson.get("origin")):
        return None
    failed += report_pass(stage_dir, rest, "The rest", output)
    return failed, count + len(behaviours(rest["results"])), False


def check(stage_dir: Path, mine, root: Path = ROOT, output=print, first_failure=False,
          keyword=None) -> int:
    """`course check STAGE --mine DIR [-k EXPR]`: 0 when every behaviour passes, 1 when one fails,
    2 for a usage error."""
    try:
        copy = find_copy(stage_dir, mine)
        holes = find_holes(stage_dir)
    except ExerciseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown_as = str(mine) if Path(mine).resolve() == copy else str(Path(mine) / stage_dir.name)
    short = short_name(stage_dir.name)
    again = (f"tinyharness course check {short} --mine {shlex.quote(shown_as)}"
             + (f" -k {shlex.quote(keyword)}" if keyword else ""))
    output(f"Checking your {stage_dir.name} ({shown_as}) with the tests of {stage_dir.name}"
           + (f" that -k {keyword!r} selects" if keyword else "") + ", its own lesson's first.")
    try:
        outcome = two_passes(stage_dir, copy, root, output, first_failure, keyword)
    except ExerciseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    if outcome is None:
        return 1
    return verdict(stage_dir, copy, holes, outcome, keyword, again, output)


def verdict(stage_dir: Path, copy: Path, holes: list[Hole], outcome: tuple, keyword, again: str,
            output) -> int:
    """The last lines: done (and recorded), or the first failure, what is left and how to rerun."""
    failed, count, cut_short = outcome
    if count == 0:
        output("\nNo test ran" + (f" (-k {keyword!r} selects none)" if keyword else "")
               + ", so nothing is confirmed.")
        return 1
    if failed:
        for cause, names in shared_causes(failed)[:1]:
            output("")
            say(output, f"In all, {len(names)} of the {len(failed)} failing behaviours fail with "
                        f"the same error: {cause}.", indent="")
        first_failure_told(stage_dir, failed, output)
        if cut_short:
            output("(The other behaviours were not run: a lesson's behaviour failed first.)")
        show_what_is_left(stage_dir, copy, holes, output)
        output(f"\nRun again: {again}")
        return 1
    if keyword:
        output(f"\nThe {count} behaviours -k chose pass. Run without -k to finish the exercise.")
        return 0
    record_pass(stage_dir.name)
    n = len(holes)
    output(f"\nExercise {short_name(stage_dir.name)} done: your "
           f"{' and '.join(h.name for h in holes)} {'passes' if n == 1 else 'pass'} the tests the "
           f"stage's own code passes. Compare with {stage_dir.name}/ to see another way to write "
           f"{'it' if n == 1 else 'them'}.")
    return 0
