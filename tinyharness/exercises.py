"""Exercises: the learner writes each lesson's key functions, and the stage's own tests grade them.

Reading a harness teaches less than writing one. So each stage marks the one to three functions that
are its lesson, with a comment line right above the `def`:

    # exercise(m3): Write path_guard: return a reason to block a file tool whose path ...

`tinyharness course start m3 DIR` copies the stage into DIR/m3_hooks and replaces the body of each
function marked for m3 (everything below its docstring) with `raise NotImplementedError("<the
marker's sentence>; see README 'Your turn'")`. The exercise is generated from the stage, so it never
drifts from it. Markers naming earlier stages are left alone: their code is given.

`tinyharness course check m3 --mine DIR` runs every test case of m3 against the learner's copy: the
cases of every test file that are parametrised with m3_hooks (the wire, the door, the fuzzers, the
attacks, not only tests/test_m3_*.py), because "done" means the stage's own code could be swapped
for the learner's and nothing would notice. TINYHARNESS_STAGE_DIR tells tests/ladder.py to import
and run the stage from that folder, and tests/exercise_check.py proves it did (the module's
__file__, in the test process and in a subprocess) before any result counts. It counts behaviours (a
test function, all its cases), lists each failing one by name, the stage's own lesson first (then an
earlier lesson before a later one, the lesson before the armour, a known escape last), and says
"done" only when every case passes.

What it cannot do: the tests judge behaviour, not style. A solution that passes them can still be
clumsy, and a mistake no test pins down goes unnoticed; the stage's own code is the model answer.
"""
from __future__ import annotations

import ast
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^[ \t]*# exercise\((m\d+)\): (.+?)\s*$")
# a comment line right below a marker continues its sentence
CONTINUED = re.compile(r"^[ \t]*# (?!exercise\()(.+?)\s*$")
STAGE_DIR_ENV = "TINYHARNESS_STAGE_DIR"      # read by tests/ladder.py and tests/exercise_check.py
REPORT_ENV = "TINYHARNESS_EXERCISE_REPORT"   # where tests/exercise_check.py writes the results
PLUGIN = "tests.exercise_check"
SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}
MESSAGE_LINES = 6                            # of a failure's message, in the report


class ExerciseError(Exception):
    """Something the learner should read, not a traceback."""


@dataclass(frozen=True)
class Hole:
    file: str        # relative to the stage folder, e.g. "hooks.py"
    name: str        # "path_guard", or "Budget.exceeded" for a method
    task: str        # the marker's sentence: what to write
    line: int        # of the def
    first: int       # the body's first and last line (1-based, inclusive), below the docstring
    last: int
    indent: str      # of the body's lines
    stage: str = ""  # the marker's stage, "m3"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.name}"

    @property
    def message(self) -> str:
        return f"{self.task.rstrip('.')}; see README 'Your turn'"


def short_name(stage: str) -> str:
    """m3_hooks -> m3"""
    return stage.split("_")[0]


# --- Finding the holes ----------------------------------------------------------------------------

def functions(tree: ast.Module):
    """(qualified name, node) of every function, methods as Class.method."""
    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + node.name, node
                yield from walk(node.body, prefix + node.name + ".")
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, prefix + node.name + ".")
    yield from walk(tree.body, "")


def body_span(node, lines: list[str]) -> tuple[int, int]:
    """The lines of a function's body below its docstring (1-based, inclusive)."""
    body = node.body
    if body[0].lineno == node.lineno:
        raise ExerciseError(f"line {node.lineno}: {node.name} has its body on the def line")
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):  # the docstring stays: part of the question
        if len(body) == 1:
            raise ExerciseError(f"line {node.lineno}: {node.name} has nothing below its docstring "
                                "to remove")
        return body[0].end_lineno + 1, node.end_lineno
    header_end = node.lineno  # the header may run over several lines: it ends at the first ':' line
    while not lines[header_end - 1].split("#")[0].rstrip().endswith(":"):
        header_end += 1
    return header_end + 1, node.end_lineno


def holes_in(source: str, stage_short: str | None, file: str) -> list[Hole]:
    """The functions of one file marked `# exercise(<stage_short>): ...` (any stage's, when
    stage_short is None), top to bottom."""
    lines = source.splitlines()
    tree = ast.parse(source)
    defs = {node.lineno: (name, node) for name, node in functions(tree)}
    holes = []
    for number, line in enumerate(lines, 1):
        marker = MARKER.match(line)
        if not marker or stage_short not in (None, marker[1]):
            continue
        sentence, below = marker[2], number + 1
        while below <= len(lines) and CONTINUED.match(lines[below - 1]):  # a marker over lines
            sentence += " " + CONTINUED.match(lines[below - 1])[1]
            below += 1
        # markers may stack
        while below <= len(lines) and (MARKER.match(lines[below - 1])
                                       or CONTINUED.match(lines[below - 1])):
            below += 1
        if below not in defs:
            raise ExerciseError(f"{file}:{number}: an exercise marker must stand right above a def")
        name, node = defs[below]
        first, last = body_span(node, lines)
        indent = re.match(r"[ \t]*", lines[node.body[-1].lineno - 1])[0]
        holes.append(Hole(file, name, sentence, node.lineno, first, last, indent, marker[1]))
    return holes


def source_files(stage_dir: Path) -> list[Path]:
    """Every file of a stage folder, sorted, without caches."""
    return sorted(p for p in stage_dir.rglob("*")
                  if p.is_file() and not SKIPPED_PARTS & set(p.relative_to(stage_dir).parts))


def find_holes(stage_dir: Path) -> list[Hole]:
    """The holes of stage `stage_dir`: the functions marked with its own short name (m3)."""
    stage_short = short_name(stage_dir.name)
    holes = []
    for path in source_files(stage_dir):
        if path.suffix == ".py":
            rel = path.relative_to(stage_dir).as_posix()
            holes += holes_in(path.read_text(encoding="utf-8"), stage_short, rel)
    return holes


# --- Writing the learner's copy -------------------------------------------------------------------

def replace_body(source: str, hole: Hole, body: str) -> str:
    """The source with the hole's body lines replaced by `body` (lines without the function's
    indent)."""
    lines = source.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    new = [(hole.indent + line if line.strip() else "") + newline for line in body.splitlines()]
    return "".join(lines[:hole.first - 1] + new + lines[hole.last:])


def body_of(source: str, hole: Hole) -> str:
    """The hole's body as written, without the function's indent (what replace_body puts back)."""
    lines = source.splitlines()[hole.first - 1:hole.last]
    return "".join(line[len(hole.indent):] + "\n" if line.strip() else "\n" for line in lines)


def blank_source(source: str, holes: list[Hole]) -> str:
    """Every hole's body replaced by a raise that says what to write, from the bottom up (so the
    line numbers of the holes above stay true)."""
    for hole in sorted(holes, key=lambda h: h.first, reverse=True):
        message = json.dumps(hole.message, ensure_ascii=False)
        source = replace_body(source, hole, f"raise NotImplementedError({message})")
    return source


def write_exercise(stage_dir: Path, target: Path) -> list[Hole]:
    """Copy the stage into `target` with its holes blanked; return the holes. Deterministic: the
    same stage always gives the same bytes."""
    holes = find_holes(stage_dir)
    if not holes:
        raise ExerciseError(f"{stage_dir.name} has no exercise: no function is marked '# "
                            f"exercise({short_name(stage_dir.name)}): ...'")
    by_file = {}
    for hole in holes:
        by_file.setdefault(hole.file, []).append(hole)
    for path in source_files(stage_dir):
        rel = path.relative_to(stage_dir).as_posix()
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if rel in by_file:
            blanked = blank_source(path.read_bytes().decode("utf-8"), by_file[rel])
            out.write_bytes(blanked.encode("utf-8"))
        else:
            out.write_bytes(path.read_bytes())
    return holes


def start(stage_dir: Path, parent, force=False, output=print) -> int:
    """`course start`: write the learner's copy of the stage into parent/<stage folder name>."""
    target = Path(parent or ".") / stage_dir.name
    if target.exists() and not force:
        print(f"error: {target} already exists; it may hold your work. Pick another folder, or add "
              "--force to replace it with a fresh copy.", file=sys.stderr)
        return 2
    if target.resolve() == stage_dir.resolve():
        print(f"error: {target} is the stage itself; choose another folder for your copy.",
              file=sys.stderr)
        return 2
    try:
        if target.exists():
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        holes = write_exercise(stage_dir, target)
    except (ExerciseError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    output(f"Wrote your copy of {stage_dir.name} to {target}. Write "
           f"{'this function' if len(holes) == 1 else 'these functions'}:")
    for hole in holes:
        output(f"  {target / hole.file}:{hole.line}  {hole.name}")
        output(f"      {hole.task}")
    output(f"\nStuck? `tinyharness course hint {short_name(stage_dir.name)}` gives a hint in three "
           "steps: the rule, the shape, the outline. When you think your code works:")
    output(f"  tinyharness course check {short_name(stage_dir.name)} --mine "
           f"{shlex.quote(str(target))}")
    return 0


# --- Checking the learner's copy ------------------------------------------------------------------

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


def stage_tests(root: Path, stage_dir: Path) -> list[str]:
    """pytest's arguments for every case of one stage: the whole suite, with the cases parametrised
    with another stage deselected (tests/conftest.py's --stage) and the rest chosen by
    tests/exercise_check.py."""
    return ["tests", "--stage", stage_dir.name]


def phrase(test_name: str) -> str:
    """test_tool_results_are_paired_by_the_server_given_id -> 'tool results are paired by the server
    given id'"""
    return test_name.split("[")[0].removeprefix("test_").replace("_", " ")


def behaviours(results: list[dict]) -> list[tuple[str, list[dict]]]:
    """Results grouped by test function, in the order they ran: one behaviour, all its cases."""
    grouped = {}
    for result in results:
        grouped.setdefault(phrase(result["name"]), []).append(result)
    return list(grouped.items())


def still_to_write(copy: Path, holes: list[Hole]) -> list[Hole]:
    """The holes whose body in the learner's copy is still the generated raise."""
    todo = []
    for hole in holes:
        path = copy / hole.file
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        if f"raise NotImplementedError({json.dumps(hole.message, ensure_ascii=False)})" in text:
            todo.append(hole)
    return todo


def run_tests(root: Path, stage_dir: Path, copy: Path, first_failure=False) -> dict:
    """Run the stage's own tests against the copy in a pytest subprocess; the plugin's JSON
    report."""
    with tempfile.TemporaryDirectory(prefix="tinyharness-check-") as scratch:
        report_path = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, "-p", "no:cacheprovider",
                   "-p", "no:xdist",
                   *(["-x"] if first_failure else []), *stage_tests(root, stage_dir)]
        env = ({**os.environ, STAGE_DIR_ENV: str(copy), REPORT_ENV: str(report_path),
                "PYTHONIOENCODING": "utf-8"})
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                              encoding="utf-8", errors="replace")
        if not report_path.is_file():
            raise ExerciseError("the tests did not run; pytest said:\n" + "\n".join(
                (done.stdout + done.stderr).strip().splitlines()[-15:]))
        return json.loads(report_path.read_text(encoding="utf-8"))


def wrapped(message: str, width=100) -> list[str]:
    """A failure's message as short lines (an assert's message can be one long line)."""
    return [part for line in message.splitlines() for part in (textwrap.wrap(line, width) or [""])]


# an XPASS(strict): a known escape that the copy stopped, and the suite fails on
BAD = ("failed", "xpassed")


def failing(groups: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    """The behaviours with a bad case, a real failure before an XPASS, otherwise in the order they
    ran (tests/exercise_check.py runs the most basic cases first)."""
    bad = [(name, cases) for name, cases in groups if any(c["outcome"] in BAD for c in cases)]
    return sorted(bad, key=lambda group: not any(c["outcome"] == "failed" for c in group[1]))


def report(stage_dir: Path, copy: Path, shown_as: str, holes: list[Hole], results: dict,
           output=print) -> bool:
    """The friendly report; True when every case of the stage passed on the learner's own code."""
    stage = stage_dir.name
    if results.get("origin_error"):
        output(f"The check could not run your copy: {results['origin_error']}")
        return False
    groups = behaviours(results["results"])
    output(f"Checking your {stage} ({shown_as}) with the {len(groups)} behaviours the tests of "
           f"{stage} check, its own lesson's first.")
    output(f"Your code is what ran: {stage} was imported from {results['origin']}.\n")
    failed = failing(groups)
    for name, group in failed:
        bad = [c for c in group if c["outcome"] in BAD]
        mark = "FAIL" if any(c["outcome"] == "failed" for c in bad) else "XPASS"
        count = f", {len(group) - len(bad)}/{len(group)} cases pass" if len(group) > 1 else ""
        output(f"  {mark:<5} {name} ({bad[0]['nodeid'].split('::')[0].rsplit('/', 1)[-1]}{count})")
    skipped = sum(all(c["outcome"] == "skipped" for c in group) for _, group in groups)
    passed = len(groups) - len(failed) - skipped
    output(("\n" if failed else "") + f"{passed} of {len(groups)} behaviours pass"
           + (f" ({skipped} skipped on this machine)." if skipped else "."))
    if not groups:
        output("No test ran, so nothing is confirmed.")
        return False
    if failed:
        name, group = failed[0]
        case = next(c for c in group if c["outcome"] in BAD)
        output(f"\nFirst failure: {name}\n  {case['nodeid']}")
        for line in wrapped(case["message"])[:MESSAGE_LINES]:
            output(f"    {line}")
        if case["outcome"] == "xpassed":
            output("    (a known escape: the stage's own code lets this attack through and the "
                   "case says so; yours stopped it. Check that your guard does not refuse more "
                   "than it should.)")
        show_what_is_left(stage_dir, copy, holes, output)
    return not failed


def show_what_is_left(stage_dir: Path, copy: Path, holes: list[Hole], output) -> None:
    """After a failure: the functions still to write, and where the hints are."""
    todo = still_to_write(copy, holes)
    output("\nStill to write: " + ", ".join(h.where for h in todo) if todo else "")
    output(f"Stuck? tinyharness course hint {short_name(stage_dir.name)} gives the hints in steps: "
           "the rule, the shape, the outline.")


def check(stage_dir: Path, mine, root: Path = ROOT, output=print, first_failure=False) -> int:
    """`course check STAGE --mine DIR`: 0 when every behaviour passes, 1 when one fails, 2 for a
    usage error."""
    try:
        copy = find_copy(stage_dir, mine)
        holes = find_holes(stage_dir)
    except ExerciseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown_as = str(mine) if Path(mine).resolve() == copy else str(Path(mine) / stage_dir.name)
    again = f"tinyharness course check {short_name(stage_dir.name)} --mine {shlex.quote(shown_as)}"
    try:
        results = run_tests(root, stage_dir, copy, first_failure)
    except ExerciseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    if report(stage_dir, copy, shown_as, holes, results, output):
        record_pass(stage_dir.name)
        output(f"\nExercise {short_name(stage_dir.name)} done: your "
               f"{' and '.join(h.name for h in holes)} {'passes' if len(holes) == 1 else 'pass'} "
               f"the tests the stage's own code passes. Compare with {stage_dir.name}/ to see "
               f"another way to write {'it' if len(holes) == 1 else 'them'}.")
        return 0
    output(f"\nRun again: {again}")
    return 1


# --- Progress, next to the quiz's -----------------------------------------------------------------

def progress_path() -> Path:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from quizzes import quiz
    return quiz.progress_file()


def load_passed(path=None) -> dict:
    """{stage folder name: date passed}, from the "exercises" entry of the quiz progress file."""
    try:
        data = json.loads(Path(path or progress_path()).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    passed = data.get("exercises") if isinstance(data, dict) else None
    return passed if isinstance(passed, dict) else {}


def record_pass(stage: str, path=None) -> None:
    path = Path(path or progress_path())
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data = data if isinstance(data, dict) else {}
    passed = data.get("exercises") if isinstance(data.get("exercises"), dict) else {}
    passed[stage] = datetime.date.today().isoformat()
    data["exercises"] = passed
    try:
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as e:  # the check passed all the same; only the record is missing
        print(f"warning: could not save your progress to {path}: {e}", file=sys.stderr)


def progress_label(stage_dir: Path, passed: dict) -> str:
    """For `course list`: 'exercise done', 'exercise to do', or '' for a stage without one."""
    if stage_dir.name in passed:
        return "exercise done"
    try:
        return "exercise to do" if find_holes(stage_dir) else ""
    except (ExerciseError, SyntaxError, OSError):
        return ""
