"""The learner's companion: `tinyharness course list|diff|files|quiz|start|hint|check|workspace`,
and `python -m tinyharness.course flatten mK [--eval]`, a stage's harness (or its eval) as one
file (docs/m8-lesson.py, docs/m8-eval.py).

These commands read the stage folders (m0_llm/, m1_loop/, ...) of a checkout of the repository,
next to this package. Each function returns an exit code; cli.py wires them to the command line.

The exercise stays the learner's: `course diff` shows an exercise function's marker, signature and
docstring (the question) and replaces its body (the answer) with one line saying how to see it,
until the learner's own copy has passed `course check mK --mine` (the pass is kept in the progress
file) or `--solutions` asks for it. It hides nothing else: the stage folders themselves stay
readable, and docs/m8-lesson.py and docs/m8-eval.py print the whole lesson.

A lesson's "Try it" block must run as written from wherever the learner's last command left them,
so nothing here depends on the current folder: `course workspace notes DIR` copies a fresh example
(and refuses to copy into a folder that exists, where `cp -r` would nest the copy and a later run
would find an old budget.md), `fake-server --script notes` finds the bundled script by name
(`bundled_script`), and `course check m3 -k attacks` runs pytest from the checkout's root.
"""
from __future__ import annotations

import ast
import difflib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TITLE_PREFIX = re.compile(r"m\d\w*\s*[-:\u2013\u2014]\s*")  # "m1_loop: ", "m1 - "
COLORS = {"header": "\033[1m", "hunk": "\033[36m", "-": "\033[31m", "+": "\033[32m"}
RESET = "\033[0m"
NOT_A_CHECKOUT = (
    "The course commands run from a checkout of the repository: no stage folders "
    "(m0_llm/, m1_loop/, ...) were found next to the tinyharness package. Clone the repository "
    "and install it with `pip install -e .` from inside it.")


def _checkout(root) -> Path | None:
    """The repository root, or None after saying why the course commands need a checkout."""
    root = Path(root or ROOT)
    if any(p.is_dir() for p in root.glob("m[0-9]_*")):
        return root
    print(NOT_A_CHECKOUT, file=sys.stderr)
    return None


def _quiz():
    """The quiz runner lives in quizzes/ at the root of the checkout."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from quizzes import quiz
    return quiz


def stage_title(stage: Path) -> str:
    """The first '# ' heading of the stage's README.md, without its 'm1_loop:' prefix."""
    readme = stage / "README.md"
    if not readme.is_file():
        return "(no README yet)"
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return TITLE_PREFIX.sub("", line[2:].strip(), count=1)
    return "(no title)"


CLOSING = "docs/closing.md"


def course_list(output=print, root=None) -> int:
    root = _checkout(root)
    if root is None:
        return 2
    from . import exercises
    quiz = _quiz()
    progress, passed = quiz.load_progress(), exercises.load_passed()
    stages = quiz.list_stages(root)
    rows = [(s.name, stage_title(s), progress.get(s.name)) for s in stages]
    name_width = max(len(name) for name, _, _ in rows)
    title_width = max(len(title) for _, title, _ in rows)
    quiz_width = max(len(quiz.progress_label(entry)) for _, _, entry in rows)
    for stage, (name, title, entry) in zip(stages, rows):
        line = (f"{name:<{name_width}}  {title:<{title_width}}  "
                f"{quiz.progress_label(entry):<{quiz_width}}  "
                f"{exercises.progress_label(stage, passed)}")
        output(line.rstrip())
    if (root / CLOSING).is_file():  # the course's last page, after the last stage
        output(f"\nAfter {stages[-1].name.split('_')[0]}: {CLOSING} - what the harness is, and is "
               "not")
    todo = [name for name, _, entry in rows if not quiz.passed(entry)]  # passed: all right once
    if todo:
        output(f"\nNext: tinyharness course quiz {todo[0].split('_')[0]}")
    else:
        output("\nEvery quiz answered in full. Well done: you have built an agent harness.")
    return 0


def _code_files(stage: Path, include_docs: bool) -> set[str]:
    patterns = ["*.py", "*.md"] if include_docs else ["*.py"]
    return {p.relative_to(stage).as_posix() for pattern in patterns for p in stage.rglob(pattern)
            if "__pycache__" not in p.relative_to(stage).parts and p.is_file()}


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []


SECTIONS = {  # the order in which `course diff` and `course files` show a stage: the lesson first
    "lesson": "lesson: what the stage teaches; read it first",
    "armour": "armour: read after the lesson, when a real server surprises you",
    "cli": "cli: the command line",
}


def _by_role(stage: Path, files) -> dict[str, list[str]]:
    """The files grouped by their role in the manifest, lesson first, each group sorted."""
    from .manifest import role_of
    groups: dict[str, list[str]] = {role: [] for role in SECTIONS}
    for rel in sorted(files):
        groups[role_of(stage.name, rel)].append(rel)
    return groups


HIDDEN = ("{indent}...  # your exercise ({stage}): hidden until `tinyharness course check {stage} "
          "--mine DIR` passes on your copy; `tinyharness course diff {a} {b} --solutions` shows it")


def unsolved_stages(root: Path) -> set[str]:
    """The short names (m3) of the stages whose exercise the learner's own copy has not passed."""
    from . import exercises
    passed = exercises.load_passed()
    return {short(p.name) for p in root.glob("m[0-9]_*") if p.name not in passed}


def _shown_lines(path: Path, hide: set[str], placeholder: str) -> list[str]:
    """A file's lines, the body of each exercise of a stage in `hide` replaced by one placeholder
    line (signature, marker and docstring stay: they are the question)."""
    lines = _lines(path)
    if not hide or path.suffix != ".py" or "# exercise(" not in "\n".join(lines):
        return lines
    from . import exercises
    try:
        holes = exercises.holes_in("\n".join(lines), None, path.name)
    except (SyntaxError, exercises.ExerciseError):
        return lines
    spans = {(h.first, h.last): h for h in holes if h.stage in hide}
    for (first, last), hole in sorted(spans.items(), reverse=True):
        lines[first - 1:last] = [placeholder.format(indent=hole.indent, stage=hole.stage)]
    return lines


def course_diff(a: str, b: str, output=None, color=None, include_docs=False, root=None,
                solutions=False) -> int:
    """A unified diff of the code of two stages (README.md and QUIZ.md only with include_docs): the
    lesson files first, then the armour, then the command line, each under a heading. The body of
    an exercise is shown only once the learner's copy passed its check, or with `solutions`."""
    output = output or sys.stdout
    root = _checkout(root)
    if root is None:
        return 2
    quiz = _quiz()
    try:
        left, right = quiz.find_stage(a, root), quiz.find_stage(b, root)
    except quiz.UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if color is None:
        color = getattr(output, "isatty", lambda: False)() and not os.environ.get("NO_COLOR")
    hide = set() if solutions else unsolved_stages(root)
    placeholder = HIDDEN.replace("{a}", short(left.name)).replace("{b}", short(right.name))
    files = _code_files(left, include_docs) | _code_files(right, include_docs)
    counts = [0, 0, 0]  # files changed, lines added, lines removed
    for role, group in _by_role(right, files).items():
        heading = False
        for rel in group:
            diff = list(difflib.unified_diff(_shown_lines(left / rel, hide, placeholder),
                                             _shown_lines(right / rel, hide, placeholder),
                                             f"{left.name}/{rel}", f"{right.name}/{rel}", n=3,
                                             lineterm=""))
            if diff and not heading:
                heading = True
                title = f"=== {SECTIONS[role]} ==="
                output.write((f"{COLORS['header']}{title}{RESET}" if color else title) + "\n")
            _write_diff(diff, output, color, counts)
    changed, added, removed = counts
    output.write(f"{changed} file{'' if changed == 1 else 's'} changed, +{added} -{removed} "
                 "lines\n")
    return 0


def _write_diff(diff: list[str], output, color: bool, counts: list[int]) -> None:
    """One file's diff, coloured on request; counts the file and its added and removed lines."""
    counts[0] += bool(diff)
    for i, line in enumerate(diff):
        kind = "header" if i < 2 else "hunk" if line.startswith("@@") else line[:1]
        counts[1] += kind == "+"
        counts[2] += kind == "-"
        if color and kind in COLORS:
            line = f"{COLORS[kind]}{line}{RESET}"
        output.write(line + "\n")


def course_files(stage: str, role: str | None = None, output=print, root=None) -> int:
    """`course files mK [--lesson|--armour|--cli]`: a stage's files by role
    (tinyharness/course/manifest.py), lesson first. With a role, only that role's paths, one a line
    (for `less $(...)`)."""
    root = _checkout(root)
    if root is None:
        return 2
    quiz = _quiz()
    try:
        folder = quiz.find_stage(stage, root)
    except quiz.UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for group_role, group in _by_role(folder, _code_files(folder, False)).items():
        for rel in group:
            path = f"{folder.name}/{rel}"
            if role is None:
                output(f"{group_role:<7} {path:<28} {len(_lines(folder / rel)):>4} lines")
            elif role == group_role:
                output(path)
    if role is None:
        output(f"\nRead the lesson first; the armour after it, when a real server surprises you "
               f"(tinyharness course files {short(folder.name)} --lesson lists only the lesson).")
    return 0


FLAT_HEADER = (  # two paragraphs, each wrapped as comment lines
    ("{what} of {stage} in one file: its {count} lesson files in reading order (the order the "
     "stages bring them in), each under a header line. {apart} Generated by `python -m "
     "tinyharness.course flatten {short}{flag} > {target}`; tests/test_course.py regenerates it "
     "and compares the bytes."),
    ("{total} lines: {code} of code, {comments} of comments, {docstrings} of docstrings, {blank} "
     "blank. The source article's harness, for scale: \"300 lines\" in its title, about 400 "
     "lines of core code in the end."))
APART = {  # what the file leaves out, and where it is
    "lesson": "The eval, which measures the harness, is apart in docs/{short}-eval.py; the armour "
              "and the command line stay in the stage folder (`tinyharness course files {short}`).",
    "eval": "The harness it measures is in docs/{short}-lesson.py; the eval's armour (its process "
            "runner, its tasks) stays in the stage folder (`tinyharness course files {short}`).",
}


DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_lines(text: str) -> set[int]:
    """The line numbers (1-based) of the module's, classes' and functions' docstrings."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (isinstance(node, DOCUMENTED) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return lines


def line_kinds(text: str) -> dict[str, int]:
    """How many lines of Python source are code, comments, docstrings and blank. A line with code
    and a comment is code; a blank line inside a docstring is docstring, inside another string
    code."""
    code: set[int] = set()
    comments = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            comments.add(token.start[0])
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                tokenize.ENDMARKER):
            code.update(range(token.start[0], token.end[0] + 1))
    docs = docstring_lines(text)
    kinds = {"code": len(code - docs), "comments": len(comments - code - docs),
             "docstrings": len(docs)}
    return {**kinds, "blank": len(text.splitlines()) - sum(kinds.values())}


def flat_files(stage: Path, part: str) -> list[str]:
    """The stage's lesson files in the manifest's order (the order the stages bring them in): the
    harness ("lesson"), or the eval alone ("eval")."""
    from .manifest import FILES, LESSON, is_eval
    return [rel for rel, role in FILES[stage.name].items()
            if role == LESSON and (stage / rel).is_file() and is_eval(rel) == (part == "eval")]


def flatten_lesson(stage: Path, part: str = "lesson") -> str:
    """A stage's harness (or its eval) as one readable file: each file under a header line naming it
    and its length, below a header that counts its code, comments, docstrings and blank lines."""
    files, parts = flat_files(stage, part), []
    kinds: dict[str, int] = {}
    for rel in files:
        text = (stage / rel).read_text(encoding="utf-8")
        lines = text.splitlines()
        for kind, n in line_kinds(text).items():
            kinds[kind] = kinds.get(kind, 0) + n
        parts.append(f"\n# {'=' * 20} {stage.name}/{rel} ({len(lines)} lines) {'=' * 20}\n\n"
                     + "\n".join(lines) + "\n")
    name = short(stage.name)
    fields = {"what": "The harness" if part == "lesson" else "The eval", "stage": stage.name,
              "count": len(files), "apart": APART[part].format(short=name), "short": name,
              "flag": " --eval" if part == "eval" else "", "target": f"docs/{name}-{part}.py",
              "total": sum(kinds.values()), **kinds}
    header = "#\n".join(textwrap.fill(paragraph.format(**fields), 100, initial_indent="# ",
                                       subsequent_indent="# ", break_on_hyphens=False,
                                       break_long_words=False) + "\n" for paragraph in FLAT_HEADER)
    return header + "".join(parts)


def course_flatten(stage: str, output=None, root=None, part: str = "lesson") -> int:
    """`python -m tinyharness.course flatten mK [--eval]`: the stage's harness (or its eval) as one
    file, on stdout."""
    root = _checkout(root)
    if root is None:
        return 2
    quiz = _quiz()
    try:
        folder = quiz.find_stage(stage, root)
    except quiz.UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not flat_files(folder, part):
        print(f"error: {folder.name} has no {part} in its lesson files", file=sys.stderr)
        return 2
    (output or sys.stdout).write(flatten_lesson(folder, part))
    return 0


def short(stage_name: str) -> str:
    return stage_name.split("_")[0]


def course_quiz(stage: str, root=None, before=False) -> int:
    """0 finished (the score is in `course list`), 1 stopped before the end (nothing saved), 130
    Ctrl-C. `before`: only the questions that predict what the Try-it shows; the next attempt
    without it asks the rest and records the whole quiz."""
    root = _checkout(root)
    if root is None:
        return 2
    return _quiz().take_quiz(stage, root=root, before=before)


def stage_selection(folder: str, keyword: str | None = None) -> str:
    """The pytest -k expression for one stage's tests: those whose parameter id names the stage
    (`test_x[m4_guards]`, `test_shell_attack[m4_guards-rm-rf]`, `test_table[m3_hooks-m4_guards]`).
    A bare `-k m4_guards` would also match the module name test_m4_guards.py, i.e. every stage's
    runs of it. KEYWORD narrows further, as pytest's own -k."""
    selection = f"[{folder}] or [{folder}- or -{folder}]"
    return f"({selection}) and ({keyword})" if keyword else selection


def _stage(stage: str, root) -> Path | None:
    """The stage folder, or None after saying what the valid names are."""
    quiz = _quiz()
    try:
        return quiz.find_stage(stage, root)
    except quiz.UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def course_start(stage: str, parent=None, force=False, root=None) -> int:
    """Write the learner's copy of a stage, its lesson's functions left to write, into
    parent/<stage>."""
    root = _checkout(root)
    folder = root and _stage(stage, root)
    if folder is None:
        return 2
    from . import exercises
    return exercises.start(folder, parent, force)


def course_hint(stage: str, step: int | None = None, root=None, output=print) -> int:
    """`course hint mK [N]`: the next hint step (or step N) for each of the stage's exercises."""
    root = _checkout(root)
    folder = root and _stage(stage, root)
    if folder is None:
        return 2
    from . import hints
    return hints.show(folder, step, output)


def course_check(stage: str, root=None, mine=None, keyword: str | None = None) -> int:
    """Run the ladder tests of one stage (their ids carry the stage folder name); with `mine`, every
    test case of the stage, against the learner's copy of it (see course/grading.py); `keyword`
    narrows either as pytest's -k."""
    root = _checkout(root)
    folder = root and _stage(stage, root)
    if folder is None:
        return 2
    if importlib.util.find_spec("pytest") is None:
        print("error: the checks need pytest: pip install pytest", file=sys.stderr)
        return 2
    if mine is not None:
        from . import grading
        return grading.check(folder, mine, root, keyword=keyword)
    command = ([sys.executable, "-m", "pytest", "tests", "-q", "--stage", folder.name, "-k",
                stage_selection(folder.name, keyword)])
    print(f"Running: {shlex.join(command)}", flush=True)
    return subprocess.run(command, cwd=root, check=False).returncode


# `course workspace empty DIR`: a new empty folder, with the same refusal and --force
EMPTY = "empty"


def examples_folder(root=None) -> Path:
    return Path(root or ROOT) / "examples"


def example_workspaces(root=None) -> list[str]:
    """The names of the example folders (notes, images, ...) a lesson can copy."""
    folder = examples_folder(root)
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def course_workspace(name: str, destination, force: bool = False, root=None) -> int:
    """Copy the example workspace NAME to DESTINATION, which must not exist yet (force replaces it).

    `cp -r examples/notes /tmp/notes` run twice puts the second copy inside the first, and the next
    run sees the files the last one wrote: a figure compared with the lesson's is then off.
    """
    root = _checkout(root)
    if root is None:
        return 2
    names = example_workspaces(root) + [EMPTY]
    if name not in names:
        print(f"error: no example workspace {name!r}; there are: {', '.join(names)}",
              file=sys.stderr)
        return 2
    source = examples_folder(root) / name
    target = Path(destination).expanduser().absolute()
    if name != EMPTY and target.resolve().is_relative_to(source.resolve()):
        print(f"error: {target} is inside the example itself ({source}); choose a folder "
              "elsewhere, e.g. /tmp/notes", file=sys.stderr)
        return 2
    if target.exists() or target.is_symlink():
        if not force:
            print(f"error: {target} already exists, and copying into it would mix an old run's "
                  "files with the example's. Choose a new folder, or add --force to replace it.",
                  file=sys.stderr)
            return 2
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    if name == EMPTY:
        target.mkdir(parents=True)
        print(f"Made the empty folder {target}: cd {shlex.quote(str(target))}")
        return 0
    shutil.copytree(source, target)
    print(f"Copied the {name} example to {target}: cd {shlex.quote(str(target))}")
    return 0


def bundled_script(name_or_path: str, root=None) -> str:
    """A fake-server script given by path, or by the name of a bundled one (notes ->
    examples/notes.script.json). Returns the path to use; an unknown name comes back unchanged,
    so the server's own error names it."""
    if Path(name_or_path).exists():
        return name_or_path
    bundled = examples_folder(root) / f"{name_or_path}.script.json"
    if "/" not in name_or_path and bundled.is_file():
        return str(bundled)
    return name_or_path


def bundled_script_names(root=None) -> list[str]:
    folder = examples_folder(root)
    return (sorted(p.name[:-len(".script.json")] for p in folder.glob("*.script.json"))
            if folder.is_dir() else [])

