"""Hints for the exercises, in steps, on request: `tinyharness course hint mK [N]`.

A hint printed next to the exercise is read before the learner has tried, and a hint close to the
code is the solution by another name: the exercise is done before it starts. So the hints live
apart from the stage's README, in quizzes/hints/<stage folder>.json, three for each exercise
function (each `# exercise(mK)` marker): 1 the rule, in words (what must hold, and why); 2 the
shape (the names, the inputs, the outputs); 3 an outline in steps, still not the code.
`course hint m3` gives the next step the learner has not seen yet, for every exercise of the stage
(the step reached is kept in the progress file, next to the quiz scores, under "hints");
`course hint m3 2` gives step 2 again. tests/test_exercises.py checks that each exercise has its
three hints and that no line of the stage's own code is in them.

What it cannot do: know which step the learner needed, or keep a determined learner from reading
the stage folder itself; the hints only make not reading it easy.
"""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from .exercises import find_holes, progress_path, short_name

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("the rule", "the shape", "the outline, not the code")
ENTRY = "hints"  # in the progress file: {stage folder name: the last step shown}


def hints_path(stage_dir: Path) -> Path:
    return stage_dir.parent / "quizzes" / "hints" / f"{stage_dir.name}.json"


def load_hints(stage_dir: Path) -> dict[str, list[str]]:
    """'file.py:name' -> its hints, in order; {} when the stage has no hint file."""
    try:
        data = json.loads(hints_path(stage_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = data.get("hints") if isinstance(data, dict) else None
    return {where: [str(step) for step in steps] for where, steps in (found or {}).items()
            if isinstance(steps, list)}


def _progress() -> dict:
    try:
        data = json.loads(progress_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def step_seen(stage: str) -> int:
    """The last hint step shown for a stage (0: none yet)."""
    seen = _progress().get(ENTRY)
    step = seen.get(stage) if isinstance(seen, dict) else None
    return step if isinstance(step, int) and 0 <= step <= len(STEPS) else 0


def record_step(stage: str, step: int) -> None:
    """Keep the furthest step shown; a failure to save loses only the count."""
    data = _progress()
    seen = given if isinstance(given := data.get(ENTRY), dict) else {}
    seen[stage] = max(step, seen.get(stage, 0) if isinstance(seen.get(stage), int) else 0)
    data[ENTRY] = seen
    try:
        progress_path().write_text(json.dumps(data, indent=2, sort_keys=True) + "\n",
                                   encoding="utf-8")
    except OSError as e:
        print(f"warning: could not save which hint you saw to {progress_path()}: {e}",
              file=sys.stderr)


def show(stage_dir: Path, step: int | None = None, output=print) -> int:
    """`course hint STAGE [N]`: step N (default: the next one not seen) of every exercise's hints.
    0 shown, 2 usage error, 1 when the stage has an exercise without hints."""
    if step is not None and not 1 <= step <= len(STEPS):
        print(f"error: there are three hints for each exercise: ask for hint 1, 2 or 3 (not "
              f"{step}).", file=sys.stderr)
        return 2
    stage, name = short_name(stage_dir.name), stage_dir.name
    holes, known = find_holes(stage_dir), load_hints(stage_dir)
    missing = [hole.where for hole in holes if len(known.get(hole.where, ())) != len(STEPS)]
    if missing:
        print(f"error: no hints for {', '.join(missing)} ({hints_path(stage_dir).name} in "
              "quizzes/hints/)", file=sys.stderr)
        return 1
    step = step or min(step_seen(name) + 1, len(STEPS))
    output(f"Hint {step} of {len(STEPS)} for {name}: {STEPS[step - 1]}.")
    for hole in holes:
        output(f"\n{hole.where}")
        output(textwrap.fill(known[hole.where][step - 1], 100, initial_indent="  ",
                             subsequent_indent="  "))
    record_step(name, step)
    check = f"tinyharness course check {stage} --mine DIR"
    if step < len(STEPS):
        output(f"\nNext: tinyharness course hint {stage} (hint {step + 1}: {STEPS[step]}). "
               f"Try first: {check}")
    else:
        output(f"\nThat was the last hint: the code is yours to write ({check} grades it). "
               + solutions(stage_dir, holes))
    return 0



def solutions(stage_dir: Path, holes) -> str:
    """Where the stage's own code is shown: the diff from the stage before (bodies hidden until the
    learner's copy passes), or, for the first stage, its files."""
    stage = short_name(stage_dir.name)
    if stage == "m0":
        return ("Once it passes, compare with the stage's own: "
                + ", ".join(sorted({f"{stage_dir.name}/{hole.file}" for hole in holes})) + ".")
    diff = f"tinyharness course diff m{int(stage[1:]) - 1} {stage}"
    return (f"Once it passes, `{diff}` shows the stage's own; to read it now: `{diff} "
            "--solutions`.")
