"""Task 5: write a function and its tests.

The model writes both, and may run its own tests; the pass is decided by the eval's hidden tests,
run by the eval in a copy of the workspace (plain `assert`-style checks in a subprocess with a
timeout). A model's own tests can agree with a wrong program; these cannot. Easy: slugify with
ordinary titles. Hard: parse_duration, whose hidden cases are mostly the inputs it must reject.
"""
from .common import Task, fail, ok

# (argument, expected result) - or ("raises", ExceptionName) when the call must raise.
SLUG_CASES = [
    ("Hello World", "hello-world"),
    ("  Many   spaces  ", "many-spaces"),
    ("Rock & Roll!", "rock-roll"),
    ("already-a-slug", "already-a-slug"),
    ("Version 2.0 Release", "version-2-0-release"),
]

DURATION_CASES = [
    ("1h30m", 5400), ("45s", 45), ("2h", 7200), ("1h 0m 5s", 3605), ("1H30M", 5400),
    ("  90m ", 5400), ("0s", 0),
    ("", ("raises", "ValueError")), ("   ", ("raises", "ValueError")),
    ("5x", ("raises", "ValueError")),
    ("m", ("raises", "ValueError")), ("10", ("raises", "ValueError")),
    ("-5m", ("raises", "ValueError")),
    ("1.5h", ("raises", "ValueError")), ("30m1h", ("raises", "ValueError")),
    ("1h1h", ("raises", "ValueError")), ("1h30", ("raises", "ValueError")),
]

# The hidden test program, filled in per task. It imports the model's module from the workspace
# copy.
HIDDEN_TEST = '''import builtins, importlib, sys
function = getattr(importlib.import_module({module!r}), {function!r})
failures = 0
for argument, expected in {cases!r}:
    try:
        got = function(argument)
    except Exception as error:
        raised = type(error).__name__
        if isinstance(expected, tuple) and isinstance(error, getattr(builtins, expected[1])):
            continue
        got = ("raises", raised)
    if got != expected or type(got) is not type(expected):
        failures += 1
        print(f"{function}({{argument!r}}) gave {{got!r}}, expected {{expected!r}}")
print(f"{{failures}} of {{len({cases!r})}} hidden cases failed")
sys.exit(1 if failures else 0)
'''
HIDDEN_NAME = "eval_hidden_test.py"


def hidden_tests(module, function, cases):
    def check(judge):
        if judge.read(f"{module}.py") is None:
            return fail(f"{module}.py was not created")
        program = HIDDEN_TEST.format(module=module, function=function, cases=cases)
        code, output = judge.run_python(HIDDEN_NAME, extra_files={HIDDEN_NAME: program})
        lines = output.strip().splitlines()
        if code is None:
            return fail(f"the hidden tests timed out after {judge.timeout:g} s")
        if code != 0:
            shown = lines if len(lines) <= 3 else lines[:2] + lines[-1:]
            return fail(f"hidden tests failed: {'; '.join(shown)}"[:300])
        return ok(f"all {len(cases)} hidden cases pass")
    return check


EASY = Task("function", "easy", marker="slugify(title)",
            prompt="In slug.py write a function slugify(title) that returns the title in lower "
                   "case, with every run of characters that are not letters or digits replaced by "
                   "one '-', and no '-' at the start or the end. Also write tests for it in "
                   "test_slug.py and run them.",
            check=hidden_tests("slug", "slugify", SLUG_CASES))

HARD = Task("function", "hard", marker="parse_duration(text)",
            prompt="In duration.py write a function parse_duration(text) that returns a number of "
                   "seconds as an int. The text has one or more parts, each a whole number "
                   "followed by a unit: h (hours), m (minutes) or s (seconds); units come in that "
                   "order, each at most once, with optional spaces between parts; upper or lower "
                   "case; spaces around the text are ignored. Anything else must raise ValueError. "
                   "Also write tests for it in test_duration.py and run them.",
            check=hidden_tests("duration", "parse_duration", DURATION_CASES))
