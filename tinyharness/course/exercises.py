"""Exercises: the learner writes each lesson's key functions, and the stage's own tests grade them.

Reading a harness teaches less than writing one. So each stage marks the one to three functions that
are its lesson, with a comment line right above the `def`:

    # exercise(m3): Write path_guard: return a reason to block a file tool whose path ...

`tinyharness course start m3 DIR` copies the stage into DIR/m3_hooks and replaces the body of each
function marked for m3 (everything below its docstring) with `raise NotImplementedError("<the
marker's sentence>; see README 'Your turn'")`. The exercise is generated from the stage, so it never
drifts from it. Markers naming earlier stages are left alone: their code is given.

`tinyharness course check m3 --mine DIR` grades the copy with the stage's own tests
(course/grading.py). `tinyharness course hint m3` gives the hints in steps (course/hints.py);
`course diff` hides the bodies of the functions marked here until the learner's copy passes
(course/__init__.py).

What it cannot do: the tests judge behaviour, not style. A solution that passes them can still be
clumsy, and a mistake no test pins down goes unnoticed; the stage's own code is the model answer.
"""
from __future__ import annotations

import ast
import datetime
import json
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^[ \t]*# exercise\((m\d+)\): (.+?)\s*$")
# a comment line right below a marker continues its sentence
CONTINUED = re.compile(r"^[ \t]*# (?!exercise\()(.+?)\s*$")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}


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
        return (body[0].end_lineno or body[0].lineno) + 1, node.end_lineno
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
        # a marker over lines
        while below <= len(lines) and (more := CONTINUED.match(lines[below - 1])):
            sentence += " " + more[1]
            below += 1
        # markers may stack
        while below <= len(lines) and (MARKER.match(lines[below - 1])
                                       or CONTINUED.match(lines[below - 1])):
            below += 1
        if below not in defs:
            raise ExerciseError(f"{file}:{number}: an exercise marker must stand right above a def")
        name, node = defs[below]
        first, last = body_span(node, lines)
        last_line = lines[node.body[-1].lineno - 1]
        indent = last_line[:len(last_line) - len(last_line.lstrip(" \t"))]
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
    by_file: dict[str, list[Hole]] = {}
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
    passed = given if isinstance(given := data.get("exercises"), dict) else {}
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
