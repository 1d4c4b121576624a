"""Each stage README opens with its lesson and keeps the edge cases for later: the problem, how it
works, try it, your turn (before the diff step, so the exercise is tried before the code is read),
what changed; then Hardening; and it ends by pointing at the quiz and the next stage."""
import re

import pytest

from tests.ladder import ROOT, STAGES

LESSON = ["The problem", "How it works", "Try it", "Your turn", "What changed", "Hardening"]
LESSON_WORDS = 750   # about a page of prose for the problem and the mechanism (code and tables aside)
README_LINES = 150   # one sitting (COURSE.md, stage rule 6): long measurements live in NOTES.md or docs/


def readme(stage):
    return (ROOT / stage / "README.md").read_text(encoding="utf-8")


def headings(text):
    return re.findall(r"^## (.+?)\s*$", text, re.M)


@pytest.mark.parametrize("stage", STAGES)
def test_the_lesson_comes_first_and_hardening_after(stage):
    found = headings(readme(stage))
    assert found[:len(LESSON)] == LESSON, f"{stage}/README.md: ## headings {found}"
    assert found[len(LESSON):] == [], f"{stage}/README.md: nothing after Hardening: {found}"


@pytest.mark.parametrize("stage", STAGES)
def test_the_problem_and_the_mechanism_fit_on_about_a_page(stage):
    text = readme(stage)
    lesson = text[:text.index("\n## Try it")]
    prose = re.sub(r"```.*?```", "", lesson, flags=re.S)
    words = len(" ".join(line for line in prose.splitlines() if not line.startswith("|")).split())
    assert words <= LESSON_WORDS, f"{stage}: {words} words before Try it; move edge cases to Hardening"


@pytest.mark.parametrize("stage", STAGES)
def test_the_readme_is_read_in_one_sitting(stage):
    lines = len(readme(stage).splitlines())
    assert lines <= README_LINES, f"{stage}/README.md is {lines} lines (at most {README_LINES}): move measurements to NOTES.md or docs/"


@pytest.mark.parametrize("stage", STAGES)
def test_the_readme_ends_with_the_quiz_and_the_next_stage(stage):
    last = readme(stage).rstrip().splitlines()[-1]
    short = stage.split("_")[0]
    assert last.startswith(f"Next: take the quiz (`tinyharness course quiz {short}`) / go on to "), last
    following = [s for s in STAGES if s > stage]
    if following:
        assert f"`{following[0]}/README.md`" in last
    else:
        assert "Beyond m8" in last
