"""NOTES.md's own measurements agree with what their commands measure today (benchmarks/notes.py).

The exact figures that measure quickly are measured once for the module; the timings (ranges) and
the eval's figures (30 runs each) are left to `python -m benchmarks.notes`."""
import re

import pytest

from benchmarks import notes

FAST = [f for f in notes.FIGURES if f.kind == "exact" and not f.slow]


@pytest.fixture(scope="module")
def measured():
    return notes.measure_all(FAST)


@pytest.fixture(scope="module")
def text():
    return notes.NOTES.read_text(encoding="utf-8")


def test_every_figure_is_found_once_in_notes(text):
    for figure in notes.FIGURES:
        notes.find(figure, notes.text_of(figure, text))   # raises LookupError naming the figure


def test_the_stated_figures_are_what_their_commands_measure(text, measured):
    drifted = [f"{figure.name}: NOTES.md says {stated}, measured {value}"
               for figure, stated, value, ok in notes.compare(text, FAST, measured) if not ok]
    assert not drifted, "\n".join(drifted) + "\n(re-measure: python -m benchmarks.notes --fix)"


def bumped(text, figure):
    """text with the figure's stated number changed by one (in its last digit)."""
    match = notes.find(figure, text)
    stated = match.group(1)
    value = notes.parse(stated) + 10 ** -notes.decimals(stated)
    return text[:match.start(1)] + notes.formatted(value, stated) + text[match.end(1):]


@pytest.mark.parametrize("name", ["m1 notes task, prompt tokens", "m5 40-turn batch+cap, prompt tokens",
                                  "m8 with red-blue.png, prompt tokens", "m5 page 40-turn sliding, peak",
                                  "m5 page 40-turn batch+cap, re-processed vs none"])
def test_a_figure_changed_by_one_is_caught(text, measured, name):
    figure = next(f for f in FAST if f.name == name)
    texts = {file: notes.fix(notes.text_of(f, text), FAST, measured, file)   # independent of other drift
             for file, f in {f.file: f for f in FAST}.items()}
    notes_text = texts.pop("NOTES.md")
    assert all(row[3] for row in notes.compare(notes_text, FAST, measured, texts))
    if figure.file == "NOTES.md":
        notes_text = bumped(notes_text, figure)
    else:
        texts[figure.file] = bumped(texts[figure.file], figure)
    rows = notes.compare(notes_text, FAST, measured, texts)
    assert [row[0].name for row in rows if not row[3]] == [name]


def test_fix_rewrites_a_drifted_figure_in_its_own_format(text, measured):
    figure = next(f for f in FAST if f.name == "m5 40-turn batch+cap, prompt tokens")
    wrong = bumped(text, figure)
    assert "185,218" in wrong or notes.find(figure, wrong).group(1) != notes.find(figure, text).group(1)
    assert notes.fix(wrong, FAST, measured) == notes.fix(text, FAST, measured)
    fixed = notes.fix(wrong, FAST, measured)
    assert notes.find(figure, fixed).group(1) == f"{measured[figure.name]:,}"


def test_timings_pass_as_ranges_only():
    timing = notes.Figure("t", r"took ([\d.]+) s", lambda: 0, kind="range")
    assert notes.agrees(timing, 2.0, 2.9) and notes.agrees(timing, 2.0, 0.7)
    assert not notes.agrees(timing, 2.0, 7.0)
    assert notes.fix("took 2.0 s", [timing], {"t": 5.0}) == "took 2.0 s"   # --fix leaves timings alone


def test_figures_of_other_sources_are_kept_apart(text):
    """Numbers from other projects are not filed under the source articles' numbers."""
    for section in re.split(r"\n(?=Source articles' numbers|Our measurements|Other public sources|## )", text):
        if section.startswith("Source articles' numbers"):
            for other in ("opencode", "Agents SDK", "smolagents", "aider", "FIELD_NOTES"):
                assert other not in section, f"{other} under the source articles' numbers"
