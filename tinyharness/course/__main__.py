"""`python -m tinyharness.course flatten STAGE [--eval]`: one stage's lesson (or its eval) as one
file's text, the way docs/m8-lesson.py and docs/m8-eval.py were made."""
import sys

from . import course_flatten

if sys.argv[1:2] != ["flatten"] or len(sys.argv) < 3 or sys.argv[3:] not in ([], ["--eval"]):
    sys.exit("usage: python -m tinyharness.course flatten STAGE [--eval]")
sys.exit(course_flatten(sys.argv[2], part="eval" if sys.argv[3:] else "lesson"))
