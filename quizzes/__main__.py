"""python -m quizzes [STAGE [--before]]: take a stage's quiz, or list the stages and your progress."""
from __future__ import annotations

import argparse

from .quiz import BEFORE_HELP, list_stages, load_progress, progress_label, take_quiz


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quizzes",
        description="Take the three-question quiz of a stage. Without a stage, list the stages.")
    parser.add_argument("stage", nargs="?", help="a stage folder, like m1_loop or just m1")
    parser.add_argument("--before", action="store_true", help=BEFORE_HELP)
    args = parser.parse_args(argv)
    if args.before and not args.stage:
        parser.error("--before needs a stage, like: python -m quizzes m1 --before")
    if args.stage:
        return take_quiz(args.stage, before=args.before)
    stages = list_stages()
    if not stages:
        print("No stage folders (m0_llm/, m1_loop/, ...) found next to quizzes/.")
        return 0
    progress = load_progress()
    width = max(len(stage.name) for stage in stages)
    for stage in stages:
        entry = progress.get(stage.name)
        when = f"  (last taken {entry.get('last_date', '?')})" if entry else ""
        print(f"{stage.name:<{width}}  {progress_label(entry)}{when}")
    print("\nTake one with: python -m quizzes m1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
