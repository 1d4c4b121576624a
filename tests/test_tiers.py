"""The suite's two tiers (README, "Tests") and the rule that lets the quick one be quick.

The README's command runs every behaviour at least once; the deep tier (`-m deep`, run by .ci/run after
it) runs the sweeps again on every stage. A test of code that later stages carry byte-identical runs
once per distinct copy (tests/ladder.py:copies): here a test fails when a stage's copy differs from
every tested copy without being tested itself.
"""
import importlib
import shutil

import pytest

from tests import ladder
from tests.ladder import ROOT, STAGES, copies, untested_copies
from tinyharness.course.manifest import ARMOUR, FILES


def test_every_behaviour_has_a_case_in_the_readme_command(request):
    tiers = request.config._tiers
    if len({file for file, _ in tiers}) < len(list((ROOT / "tests").glob("test_*.py"))):
        pytest.skip("only part of the suite was collected; the README's command collects it all")
    only_deep = sorted(f"{file}::{name}" for (file, name), kinds in tiers.items() if kinds == {"deep"})
    assert not only_deep, f"every case of these is marked deep, so the README's command never runs them: {only_deep}"


def test_the_deep_tier_is_what_ci_runs_after_the_readme_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q -m deep" in ci
    assert ci.index("python -m pytest -q'") < ci.index("python -m pytest -q -m deep")


def test_every_stage_copy_of_what_a_test_runs_once_is_tested_or_identical_to_a_tested_one():
    for path in sorted((ROOT / "tests").glob("test_*.py")):        # each records its choices when imported
        importlib.import_module(f"tests.{path.stem}")
    assert ladder.TESTED_COPIES, "no test chose its stages with copies()"
    for first, files, chosen in ladder.TESTED_COPIES:
        assert not untested_copies(first, files, chosen), (first, files, chosen)


def test_every_armour_file_is_byte_identical_where_the_ladder_says_it_is_shared():
    """The manifest's armour, stage by stage: how many distinct copies each has (a later edit to one
    stage's copy makes a new one, which copies() then tests on that stage itself)."""
    shared = {name for files in FILES.values() for name, role in files.items() if role == ARMOUR}
    for name in sorted(shared):
        holders = [stage for stage in STAGES if (ROOT / stage / name).is_file()]
        chosen = copies(holders[0][:2], name, final=False)
        assert chosen[0] == holders[0] and set(chosen) <= set(holders), (name, chosen)


@pytest.fixture
def fake_ladder(tmp_path):
    """Three stages whose wire.py is the same in the first two and edited in the third."""
    for stage in STAGES[:3]:
        (tmp_path / stage).mkdir()
        shutil.copy(ROOT / "m0_llm" / "wire.py", tmp_path / stage / "wire.py")
    edited = tmp_path / STAGES[2] / "wire.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# a fix made in this stage only\n", encoding="utf-8")
    return tmp_path


def test_a_stage_whose_copy_differs_is_chosen_and_a_list_without_it_is_caught(fake_ladder):
    chosen = copies("m0", "wire.py", final=False, root=fake_ladder)
    assert chosen[:2] == [STAGES[0], STAGES[2]]                      # the second stage shares the first's copy
    assert untested_copies("m0", ("wire.py",), [STAGES[0]], root=fake_ladder)[0] == STAGES[2]
    assert STAGES[1] not in untested_copies("m0", ("wire.py",), [STAGES[0]], root=fake_ladder)
    ladder.TESTED_COPIES.pop()                                       # a fake ladder is not the suite's record
