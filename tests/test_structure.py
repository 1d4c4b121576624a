"""The ladder's rules, checked: stages stand alone, and every difference between stages is explained."""
import ast
import filecmp
import re

import pytest

from tests.ladder import ROOT, STAGES

DOCS = {"README.md", "QUIZ.md"}


def stage_files(stage):
    folder = ROOT / stage
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.name not in DOCS}


def changed_files(earlier, later):
    """Files added, removed or edited between two consecutive stages."""
    before, after = stage_files(earlier), stage_files(later)
    edited = {f for f in before & after if not filecmp.cmp(ROOT / earlier / f, ROOT / later / f, shallow=False)}
    return (before ^ after) | edited


def what_changed_rows(stage):
    """{file: [its other cells]} from the README's "What changed" table (file, role, why)."""
    text = (ROOT / stage / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^##+ What changed\s*$(.*?)(?=^##? |\Z)", text, re.M | re.S)
    assert section, f"{stage}/README.md has no '## What changed' section"
    rows = [line for line in section.group(1).splitlines() if line.strip().startswith("|")]
    cells = [[cell.strip() for cell in row.strip().strip("|").split(" | ")] for row in rows[2:]]
    return {row[0].strip("`"): row[1:] for row in cells if row and row[0]}


def what_changed_table(stage):
    """The file names in the first column of the README's "What changed" table."""
    return set(what_changed_rows(stage))


def imported_modules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_there_are_stages():
    assert STAGES[:2] == ["m0_llm", "m1_loop"]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_imports_no_other_stage_or_the_package(stage):
    forbidden = set(STAGES) - {stage} | {"tinyharness", "quizzes", "tests"}
    for path in (ROOT / stage).rglob("*.py"):
        bad = set(imported_modules(path)) & forbidden
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("stage", STAGES)
def test_stage_has_lesson_and_quiz(stage):
    for name in ("README.md", "QUIZ.md", "__main__.py", "__init__.py"):
        assert (ROOT / stage / name).is_file(), f"{stage}/{name} is missing"


@pytest.mark.parametrize("earlier, later", list(zip(STAGES, STAGES[1:])))
def test_every_changed_file_is_in_the_what_changed_table(earlier, later):
    missing = changed_files(earlier, later) - what_changed_table(later)
    assert not missing, f"{later}/README.md 'What changed' does not name {sorted(missing)}"


@pytest.mark.parametrize("earlier, later", list(zip(STAGES, STAGES[1:])))
def test_every_file_the_what_changed_table_names_differs_from_the_previous_stage(earlier, later):
    # the table says what this stage changed, not what the learner has by now: `course files` lists that
    unchanged = what_changed_table(later) - changed_files(earlier, later)
    assert not unchanged, f"{later}/README.md 'What changed' names {sorted(unchanged)}, which {later} did not change"


@pytest.mark.parametrize("stage", STAGES)
def test_the_what_changed_table_gives_each_file_its_role_from_the_manifest(stage):
    from tinyharness.course.manifest import FILES
    roles = {file: cells[0].lower() if cells else "" for file, cells in what_changed_rows(stage).items()}
    wrong = {file: role for file, role in roles.items() if role != FILES[stage].get(file)}
    assert not wrong, f"{stage}/README.md 'What changed': the role column (lesson, armour, CLI) says {wrong}"


def test_first_stage_table_names_its_files():
    assert stage_files(STAGES[0]) - {"__init__.py"} <= what_changed_table(STAGES[0])


def test_changed_files_detects_an_edit(tmp_path, monkeypatch):
    # the guard itself must be able to fail: an edited, an added and a removed file are all reported
    for stage, files in {"m0_a": {"x.py": "1", "gone.py": ""}, "m1_b": {"x.py": "2", "new.py": ""}}.items():
        (tmp_path / stage).mkdir()
        for name, text in files.items():
            (tmp_path / stage / name).write_text(text)
    monkeypatch.setattr("tests.test_structure.ROOT", tmp_path)
    assert changed_files("m0_a", "m1_b") == {"x.py", "gone.py", "new.py"}
    # and the table's reader: a row for a file that did not change is seen, with its role
    (tmp_path / "m1_b" / "README.md").write_text("## What changed\n| file | role | why |\n|---|---|---|\n"
                                               "| `x.py` | lesson | edited |\n| `same.py` | armour | not edited |\n")
    assert what_changed_rows("m1_b") == {"x.py": ["lesson", "edited"], "same.py": ["armour", "not edited"]}


def named_attacks(readme):
    """(module, test) for every `module::test_name` a README table row names, and the `file.py` rows."""
    rows = [line for line in readme.splitlines() if line.startswith("|")]
    pairs = {pair for row in rows for pair in re.findall(r"`(\w+)::(test_\w+)`", row)}
    files = {name for row in rows for name in re.findall(r"`(\w+)\.py`", row) if name.startswith("sandbox")}
    return pairs, files


def test_every_test_a_readme_row_names_exists():
    """A row that claims protection names the test that attacks it: a renamed or deleted test must not
    leave the claim standing on nothing."""
    pairs, files = named_attacks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(pairs) >= 20 and files   # the sandbox tables are there to check
    missing = []
    for module, name in sorted(pairs):
        path = ROOT / "tests" / f"test_{module}.py"
        defined = path.is_file() and {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                                      if isinstance(n, ast.FunctionDef)}
        if not defined or name not in defined:
            missing.append(f"{module}::{name}")
    missing += [f"{name}.py" for name in sorted(files) if not (ROOT / "tests" / f"test_{name}.py").is_file()]
    assert missing == []
