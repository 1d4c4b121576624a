"""tests/MAP.md, the map from each part of docs/architecture.json to its test files, kept true.

A map nobody checks drifts the first time a test file is added. Here: every tests/test_*.py is
listed exactly once, every file the map lists exists, and every part that holds package code has a
section with at least one file. Reads files only.
"""
import json
import re

from tests.ladder import ROOT

MAP = ROOT / "tests" / "MAP.md"
LISTED = re.compile(r"`(test_\w+\.py)`")


def sections(text):
    """{heading's first word: [test files listed under it]}."""
    found, current = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].split(" (")[0].strip()
            found[current] = []
        elif current:
            found[current] += LISTED.findall(line)
    return found


def test_every_test_file_is_listed_once_and_every_listed_file_exists():
    listed = [name for files in sections(MAP.read_text(encoding="utf-8")).values() for name in files]
    on_disk = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    twice = sorted({name for name in listed if listed.count(name) > 1})
    assert twice == [], f"listed more than once in tests/MAP.md: {twice}"
    assert sorted(set(on_disk) - set(listed)) == [], "add the new test file to tests/MAP.md"
    assert sorted(set(listed) - set(on_disk)) == [], "tests/MAP.md lists a file that is gone"


def test_every_part_of_the_package_has_tests():
    parts = json.loads((ROOT / "docs" / "architecture.json").read_text(encoding="utf-8"))["parts"]
    package_parts = {name for name, part in parts.items()
                     if any(path.startswith("tinyharness/") for path in part["is"])}
    mapped = sections(MAP.read_text(encoding="utf-8"))
    assert sorted(p for p in package_parts if not mapped.get(p)) == []


def test_the_map_reader_sees_headings_and_names():
    text = "# Title\n## Loop (the agent)\n- `test_a.py`, `test_b.py`\n\n## Door\n- `test_c.py`\n"
    assert sections(text) == {"Loop": ["test_a.py", "test_b.py"], "Door": ["test_c.py"]}
