"""How soon `tinyharness course check mK --mine DIR` says something useful, and how long it takes.

    python -m benchmarks.check              # m3, its first exercise function left unwritten
    python -m benchmarks.check m1           # another stage
    python -m benchmarks.check m3 --hole loop.py:checked_run --runs 3

A learner waits for the check after every change, so its first verdict must come in seconds: the
check runs the stage's own lesson tests in a first pytest pass and prints their verdict before it
runs the rest (tinyharness/course/grading.py). This writes a learner's copy the way `course start` does,
fills every exercise function back with the stage's own code but one (the hole left open, as a
learner who has written all but one), runs the real check on it, and prints two figures per run:
the seconds to the first verdict (the lesson pass's summary line) and to the end. The progress
file goes to a temporary folder: a benchmark never marks an exercise done.

What it cannot do: the figures are this machine's, at its load when it ran (it prints the load
average); the first verdict of a copy with no hole open takes as long as one with a hole, but
says less.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_VERDICT = "its own lesson first:"   # the summary line of the lesson pass (grading.report_pass)
TARGET = 5.0                              # seconds, issue 38: the first verdict on a 2-core machine


def learner_copy(stage_dir: Path, parent: Path, open_hole: str | None) -> tuple[Path, str]:
    """A copy of the stage with every exercise function written back but `open_hole`."""
    from tinyharness.course import exercises
    holes = exercises.find_holes(stage_dir)
    chosen = next((h for h in holes if h.where == open_hole), None) if open_hole else holes[0]
    if chosen is None:
        raise SystemExit(f"error: {stage_dir.name} has no exercise {open_hole!r}; there are: "
                         + ", ".join(h.where for h in holes))
    copy = parent / stage_dir.name
    exercises.write_exercise(stage_dir, copy)
    for file in sorted({h.file for h in holes}):
        text = (copy / file).read_text(encoding="utf-8")
        original = (stage_dir / file).read_text(encoding="utf-8")
        for hole in sorted(exercises.holes_in(text, exercises.short_name(stage_dir.name), file),
                           key=lambda h: h.first, reverse=True):
            if hole.where != chosen.where:
                stage_hole = next(h for h in holes if h.where == hole.where)
                text = exercises.replace_body(text, hole, exercises.body_of(original, stage_hole))
        (copy / file).write_text(text, encoding="utf-8")
    return copy, chosen.where


def one_run(stage_dir: Path, copy: Path) -> tuple[float | None, float, int]:
    """(seconds to the first verdict, seconds to the end, the check's exit code)."""
    from tinyharness.course import grading
    started, first = time.monotonic(), []

    def output(line: str) -> None:
        if not first and FIRST_VERDICT in line:
            first.append(time.monotonic() - started)
    code = grading.check(stage_dir, copy, ROOT, output=output)
    return (first[0] if first else None), time.monotonic() - started, code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Time course check --mine on a copy with one "
                                                 "exercise function left unwritten.")
    parser.add_argument("stage", nargs="?", default="m3", help="a stage, e.g. m3 (default)")
    parser.add_argument("--hole", help="the function to leave open, as file.py:name (default: the "
                                       "stage's first)")
    parser.add_argument("--runs", type=int, default=1, help="how many checks to time (default 1)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from quizzes import quiz
    try:
        stage_dir = quiz.find_stage(args.stage, ROOT)
    except quiz.UnknownStage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tinyharness-bench-check-") as scratch:
        os.environ["TINYHARNESS_PROGRESS"] = str(Path(scratch) / "progress.json")
        copy, hole = learner_copy(stage_dir, Path(scratch), args.hole)
        print(f"{stage_dir.name}, {hole} left open; {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.2f}")
        firsts, totals = [], []
        for run in range(1, args.runs + 1):
            first, total, code = one_run(stage_dir, copy)
            shown = f"{first:.1f} s" if first is not None else "none"
            print(f"run {run}: first verdict {shown}, whole check {total:.1f} s (exit {code})")
            firsts += [first] if first is not None else []
            totals.append(total)
    if firsts:
        median = statistics.median(firsts)
        print(f"first verdict: median {median:.1f} s (target {TARGET:.0f} s: "
              f"{'met' if median <= TARGET else 'missed'}); whole check: median "
              f"{statistics.median(totals):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
