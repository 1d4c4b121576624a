"""`tinyharness course`: list, diff, quiz and check, on fake stage folders."""
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tinyharness import course


@pytest.fixture(autouse=True)
def progress(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TINYHARNESS_PROGRESS", str(path))
    return path


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def root(tmp_path):
    """Two fake stages: m1_b changes one line of llm.py and adds loop.py."""
    root = tmp_path / "repo"
    write(root / "m0_a" / "llm.py", "import json\n\ndef chat():\n    return 'old'\n")
    write(root / "m0_a" / "README.md", "# m0_a: One door to the model\n")
    write(root / "m1_b" / "llm.py", "import json\n\ndef chat():\n    return 'new'\n")
    write(root / "m1_b" / "loop.py", "def run():\n    pass\n")
    write(root / "m1_b" / "__pycache__" / "junk.py", "ignored = True\n")
    write(root / "m1_b" / "README.md", "Intro\n# m1_b - The loop\n")
    return root


def diff(root, *stages, **options):
    out = io.StringIO()
    assert course.course_diff(*stages, output=out, root=root, **options) == 0
    return out.getvalue()


def test_diff_shows_the_lesson_and_a_summary(root):
    lines = diff(root, "m0", "m1_b", color=False).splitlines()
    assert lines[:4] == [f"=== {course.SECTIONS['lesson']} ===", "--- m0_a/llm.py", "+++ m1_b/llm.py", "@@ -1,4 +1,4 @@"]
    assert "-    return 'old'" in lines and "+    return 'new'" in lines
    assert "--- m0_a/loop.py" in lines and "+def run():" in lines
    assert not any("junk" in line or "README" in line for line in lines)
    assert lines[-1] == "2 files changed, +3 -1 lines"
    assert "\033" not in "\n".join(lines)


def test_diff_shows_the_lesson_first_then_the_armour_then_the_cli(root):
    # files sorted by name would put __main__.py (the CLI) first and wire.py (armour) before zoo.py (lesson)
    write(root / "m1_b" / "__main__.py", "import sys\n")
    write(root / "m1_b" / "wire.py", "def repair():\n    pass\n")
    write(root / "m1_b" / "zoo.py", "def lesson():\n    pass\n")
    lines = diff(root, "m0", "m1_b", color=False).splitlines()
    headings = [line for line in lines if line.startswith("=== ")]
    assert headings == [f"=== {course.SECTIONS[role]} ===" for role in ("lesson", "armour", "cli")]
    where = {name: lines.index(f"+++ m1_b/{name}") for name in ("llm.py", "zoo.py", "wire.py", "__main__.py")}
    assert lines.index(headings[0]) < where["llm.py"] < where["zoo.py"] < lines.index(headings[1]) \
        < where["wire.py"] < lines.index(headings[2]) < where["__main__.py"]


def test_files_lists_a_stage_by_role(root, capsys):
    write(root / "m1_b" / "wire.py", "def repair():\n    pass\n")
    write(root / "m1_b" / "__main__.py", "import sys\n")
    out = []
    assert course.course_files("m1", output=out.append, root=root) == 0
    assert [line.split()[:2] for line in out[:4]] == [["lesson", "m1_b/llm.py"], ["lesson", "m1_b/loop.py"],
                                                      ["armour", "m1_b/wire.py"], ["cli", "m1_b/__main__.py"]]
    only = []
    assert course.course_files("m1", "armour", output=only.append, root=root) == 0
    assert only == ["m1_b/wire.py"]
    assert course.course_files("m9", output=out.append, root=root) == 2
    assert "unknown stage 'm9'" in capsys.readouterr().err


def test_every_real_stage_file_has_a_role_in_the_manifest():
    from tests.ladder import ROOT, STAGES
    from tinyharness.course.manifest import FILES
    assert set(FILES) == set(STAGES)
    for stage in STAGES:
        present = {p.relative_to(ROOT / stage).as_posix() for p in (ROOT / stage).rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert present == set(FILES[stage]), f"{stage}: files and manifest differ: {present ^ set(FILES[stage])}"


def test_the_files_command_on_the_real_course():
    done = subprocess.run([sys.executable, "-m", "tinyharness", "course", "files", "m1", "--lesson"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["m1_loop/llm.py", "m1_loop/loop.py", "m1_loop/tools.py"]


def flattened(*args):
    done = subprocess.run([sys.executable, "-m", "tinyharness.course", "flatten", *args], capture_output=True,
                          text=True, encoding="utf-8", timeout=60, cwd=course.ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def flat_files(text):
    return [line.split()[2].removeprefix("m8_vision/") for line in text.splitlines() if line.startswith("# ==")]


@pytest.mark.parametrize("args, target, files", [
    ((), "m8-lesson.py", ["llm.py", "loop.py", "tools.py", "hooks.py", "guards.py", "context.py", "verify.py",
                          "vision.py"]),
    (("--eval",), "m8-eval.py", ["eval.py", "evals/__init__.py", "evals/claims.py", "evals/common.py"])])
def test_the_final_harness_and_its_eval_in_one_file_each_are_regenerated_byte_for_byte(args, target, files):
    # docs/m8-lesson.py is the harness alone (python -m tinyharness.course flatten m8); the eval, which
    # measures it, is docs/m8-eval.py (flatten m8 --eval). The READMEs point to both, and give no stale count.
    committed = (Path(course.ROOT) / "docs" / target).read_text(encoding="utf-8")
    assert flattened("m8", *args) == committed, f"docs/{target} is stale: python -m tinyharness.course flatten " \
                                                f"m8 {' '.join(args)} > docs/{target}"
    assert flat_files(committed) == files
    assert f"(docs/{target.replace('-eval', '-lesson')})" in (Path(course.ROOT) / "README.md").read_text(encoding="utf-8")
    assert f"`docs/{target}`" in (Path(course.ROOT) / "m8_vision" / "README.md").read_text(encoding="utf-8")


def test_the_flat_header_counts_code_docstrings_comments_and_blank_lines_beside_the_article():
    sample = '"""Doc.\n\nmore"""\nimport os\n\n# note\nx = 1  # trailing\ns = """\n# not a comment\n"""\n'
    assert course.line_kinds(sample) == {"code": 5, "comments": 1, "docstrings": 3, "blank": 1}
    header = flattened("m8").split("\n# ==")[0]
    kinds = {}
    for rel in flat_files(flattened("m8")):
        for kind, n in course.line_kinds((Path(course.ROOT) / "m8_vision" / rel).read_text(encoding="utf-8")).items():
            kinds[kind] = kinds.get(kind, 0) + n
    told = " ".join(line.lstrip("# ") for line in header.splitlines())
    assert f"{sum(kinds.values())} lines: {kinds['code']} of code, {kinds['comments']} of comments, " \
           f"{kinds['docstrings']} of docstrings, {kinds['blank']} blank" in told, told
    assert "300 lines" in told and "docs/m8-eval.py" in told


def test_flatten_eval_of_a_stage_without_one_says_so(capsys):
    assert course.course_flatten("m3", part="eval") == 2 and "m3_hooks has no eval" in capsys.readouterr().err


def test_flatten_names_an_unknown_stage(capsys):
    assert course.course_flatten("m99") == 2 and "m99" in capsys.readouterr().err


def test_diff_colours_on_request_and_not_into_a_pipe(root, monkeypatch):
    coloured = diff(root, "m0", "m1", color=True)
    assert "\033[31m-    return 'old'\033[0m" in coloured
    assert "\033[32m+    return 'new'\033[0m" in coloured
    assert "\033[36m@@" in coloured and "\033[1m--- m0_a/llm.py" in coloured
    assert "\033" not in diff(root, "m0", "m1")  # StringIO is not a terminal


def test_diff_includes_docs_on_request(root):
    text = diff(root, "m0", "m1", color=False, include_docs=True)
    assert "+# m1_b - The loop" in text
    assert text.splitlines()[-1] == "3 files changed, +5 -2 lines"


def test_diff_of_a_stage_with_itself(root):
    assert diff(root, "m1", "m1_b") == "0 files changed, +0 -0 lines\n"


def test_unknown_stage_and_missing_checkout_exit_2(root, tmp_path, capsys):
    assert course.course_diff("m0", "m7", output=io.StringIO(), root=root) == 2
    assert "unknown stage 'm7'; valid stages: m0_a, m1_b" in capsys.readouterr().err
    assert course.course_check("m7", root=root) == 2
    assert course.course_quiz("m7", root=root) == 2
    empty = tmp_path / "site-packages"
    empty.mkdir()
    assert course.course_list(root=empty) == 2
    assert "run from a checkout of the repository" in capsys.readouterr().err


def test_list_shows_titles_progress_and_what_is_next(root, progress):
    write(root / "m2_c" / "loop.py", "")
    progress.write_text(json.dumps({"m0_a": {"best": 3, "total": 3}, "m1_b": {"best": 2, "total": 3}}))
    printed = []
    assert course.course_list(output=printed.append, root=root) == 0
    assert printed[:3] == [
        "m0_a  One door to the model  quiz 3/3 passed",
        "m1_b  The loop               quiz 2/3",
        "m2_c  (no README yet)        quiz not taken",
    ]
    assert printed[-1].strip() == "Next: tinyharness course quiz m1"


def test_next_is_the_first_stage_whose_quiz_is_not_passed(root, progress):
    write(root / "m2_c" / "loop.py", "")
    progress.write_text(json.dumps({"m1_b": {"best": 3, "total": 3}, "m2_c": {"best": 3, "total": 3}}))
    printed = []
    course.course_list(output=printed.append, root=root)
    assert printed[-1].strip() == "Next: tinyharness course quiz m0"   # later passes do not skip m0
    progress.write_text(json.dumps({"m0_a": {"best": 3, "total": 3}, "m1_b": {"best": 3, "total": 3},
                                    "m2_c": "garbage"}))
    printed = []
    course.course_list(output=printed.append, root=root)
    assert printed[-1].strip() == "Next: tinyharness course quiz m2"


def test_list_congratulates_when_every_quiz_is_full_marks(root, progress):
    progress.write_text(json.dumps({"m0_a": {"best": 3, "total": 3}, "m1_b": {"best": 3, "total": 3}}))
    printed = []
    course.course_list(output=printed.append, root=root)
    assert "Well done" in printed[-1]


def test_quiz_runs_and_records(root, progress, monkeypatch):
    quiz_text = "# Quiz: m1_b\n" + "".join(f"\n## {n}. Q{n}?\n\n- A) a\n- B) a\n- C) a\n" for n in (1, 2, 3))
    write(root / "m1_b" / "QUIZ.md", quiz_text)
    write(root / "quizzes" / "keys" / "m1_b.json", json.dumps({"questions": [
        {"answer": "A", "explanation": "`loop.py:run`."}] * 3}))
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\n"))
    assert course.course_quiz("m1", root=root) == 1          # end of input after two: not finished
    assert not progress.exists()
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\nc\n"))
    assert course.course_quiz("m1", root=root) == 0
    assert json.loads(progress.read_text())["m1_b"]["total"] == 3   # the score depends on the shuffle


def test_check_runs_the_stage_tests_from_the_root(root, monkeypatch, capsys):
    calls = []

    def fake_run(argv, **kwargs):
        calls.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, 5)
    monkeypatch.setattr(course.subprocess, "run", fake_run)
    assert course.course_check("m1", root=root) == 5
    assert calls == [([sys.executable, "-m", "pytest", "tests", "-q", "--stage", "m1_b", "-k",
                       "[m1_b] or [m1_b- or -m1_b]"], {"cwd": root, "check": False})]
    assert "Running:" in capsys.readouterr().out


def test_the_stage_option_keeps_only_that_stage_s_cases():
    # `course check mK` runs `pytest --stage FOLDER -k ...`: a case of another stage, or one that reruns the stage's
    # tests in a nested pytest (the exercise sweeps), is left out; a case naming the stage among others stays
    from types import SimpleNamespace

    from tests import conftest

    class Item:                                                        # what the hook reads of a pytest item
        def __init__(self, stage, marker):
            if stage:
                self.callspec = SimpleNamespace(params={"stage": stage, "value": "x"})
            self.marker = marker

        def get_closest_marker(self, name):
            return self.marker if name == self.marker else None

    def item(stage=None, marker=None):
        return Item(stage, marker)
    mine, later, package, plain, nested = item("m4_guards"), item("m5_context"), item("tinyharness"), item(), \
        item("m4_guards", "reruns_the_stage")
    pair = item("m3_hooks")
    pair.callspec.params["other"] = "m4_guards"                        # e.g. a table of m3 against m4
    items, deselected = [mine, later, package, plain, nested, pair], []
    config = SimpleNamespace(getoption=lambda name: "m4_guards",
                             hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    conftest.pytest_collection_modifyitems(config, items)
    assert items == [mine, plain, pair] and deselected == [later, package, nested]


def exercise_lines(stage):
    """The lines of a real stage's own exercise bodies that appear nowhere else in the stage's code: a
    diff that shows one of them shows the solution."""
    from tinyharness.course import exercises
    folder = Path(course.ROOT) / stage
    holes, found = exercises.find_holes(folder), []
    text = {h.file: (folder / h.file).read_text(encoding="utf-8").splitlines() for h in holes}
    rest = [line for path in folder.rglob("*.py") if path.relative_to(folder).as_posix() not in text
            for line in path.read_text(encoding="utf-8").splitlines()]
    for file, lines in text.items():
        spans = [(h.first, h.last) for h in holes if h.file == file]
        rest += [line for n, line in enumerate(lines, 1) if not any(a <= n <= b for a, b in spans)]
    for hole in holes:
        body = text[hole.file][hole.first - 1:hole.last]
        found += [line for line in body if line.strip() and line not in rest]
    return found


def test_diff_hides_the_exercise_bodies_until_the_learner_s_copy_passes(progress):
    from tinyharness.course import exercises
    secret = exercise_lines("m3_hooks")
    assert len(secret) > 10
    hidden = io.StringIO()
    assert course.course_diff("m2", "m3", output=hidden, color=False) == 0
    text = hidden.getvalue().splitlines()
    assert not [line for line in secret if "+" + line in text or " " + line in text]
    assert any(line.startswith("+# exercise(m3): Write path_guard: return a reason") for line in text)
    assert "+def path_guard(workspace, name, args):" in text and \
        '+    """File tools stay inside the workspace. Resolve first (follow \'..\' and symlinks), then compare."""' in text
    placeholder = [line for line in text if "hidden" in line and "course diff m2 m3 --solutions" in line]
    holes = exercises.find_holes(Path(course.ROOT) / "m3_hooks")         # path_guard, recursive_delete, checked_run
    assert sum("your exercise (m3)" in line and "course check m3 --mine" in line for line in placeholder) == len(holes) == 3
    shown = io.StringIO()
    assert course.course_diff("m2", "m3", output=shown, color=False, solutions=True) == 0
    assert all("+" + line in shown.getvalue().splitlines() for line in secret)
    exercises.record_pass("m3_hooks")                                  # the learner's own copy passed
    after = io.StringIO()
    assert course.course_diff("m2", "m3", output=after, color=False) == 0
    assert all("+" + line in after.getvalue().splitlines() for line in secret)
