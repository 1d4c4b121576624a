"""The armour pinned: which copies of each armour file must be byte-identical, and why the others differ.

Armour is carried over byte-identical unless a lesson changes it (the stage rules), and the package
keeps some of it under the same names. The manifest (tinyharness/course/manifest.py, ARMOUR_COPIES) lists,
for every armour file, the groups of stages (and the package) that share one content, each with why
it is a version of its own; here every copy is hashed and the groups compared. Reads files only.
"""
import hashlib

from tests.ladder import ROOT, STAGES
from tinyharness.course.manifest import ARMOUR, ARMOUR_COPIES, FILES, package_path

PACKAGE = "tinyharness"


def copy_groups(name, root=ROOT):
    """The holders of `name` (stage folders, then the package), grouped by content: {frozenset}."""
    groups = {}
    for holder in [*STAGES, PACKAGE]:
        path = root / holder / (package_path(name) if holder == PACKAGE else name)
        if path.is_file():
            groups.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), set()).add(holder)
    return {frozenset(group) for group in groups.values()}


def mismatch(name, expected, root=ROOT):
    """What differs between the copies found and the manifest's groups, in words ("" when they agree)."""
    found, wanted = copy_groups(name, root), {frozenset(group) for group in expected}
    if found == wanted:
        return ""
    return (f"{name}: the copies now fall into {sorted(sorted(g) for g in found)}, the manifest says "
            f"{sorted(sorted(g) for g in wanted)}. Carry the fix to every copy of its group, or say in "
            "ARMOUR_COPIES why this copy is a version of its own")


def test_every_armour_file_has_its_groups_in_the_manifest():
    armour = {name for files in FILES.values() for name, role in files.items() if role == ARMOUR}
    assert set(ARMOUR_COPIES) == armour
    for name, groups in ARMOUR_COPIES.items():
        holders = [h for group in groups for h in group]
        assert len(holders) == len(set(holders)), f"{name}: a holder in two groups"
        stages = {stage for stage, files in FILES.items() if name in files}
        assert stages <= set(holders) <= stages | {PACKAGE}, name
        assert all(isinstance(why, str) and len(why.split()) >= 5 for why in groups.values()), name


def test_the_copies_are_byte_identical_where_the_manifest_says_so():
    problems = [m for name, groups in sorted(ARMOUR_COPIES.items()) for m in [mismatch(name, groups)] if m]
    assert not problems, "\n".join(problems)


def test_the_pin_fails_on_a_copy_edited_alone(tmp_path):
    for holder, text in {STAGES[0]: "x = 1\n", STAGES[1]: "x = 1\n", STAGES[2]: "x = 1\n"}.items():
        (tmp_path / holder).mkdir()
        (tmp_path / holder / "wire.py").write_text(text)
    groups = {tuple(STAGES[:3]): "one copy"}
    assert mismatch("wire.py", groups, tmp_path) == ""
    (tmp_path / STAGES[1] / "wire.py").write_text("x = 2\n")                 # a fix carried to one stage only
    assert STAGES[1] in mismatch("wire.py", groups, tmp_path)
    (tmp_path / PACKAGE).mkdir()
    (tmp_path / PACKAGE / "wire.py").write_text("x = 1\n")                   # a package copy the manifest omits
    assert PACKAGE in mismatch("wire.py", {(STAGES[0], STAGES[2]): "a", (STAGES[1],): "b"}, tmp_path)
