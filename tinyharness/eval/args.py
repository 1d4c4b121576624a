"""The eval's command line: its flags, their checks, and the settings `--compare` names.

The problem. The eval's runner (eval.py) is about tasks, runs and tables; its flags and their
usage checks are as long again, and a usage error must be found before the first run starts (exit
2), not after minutes of runs.

The mechanism. `build_parser` declares the flags with their help; `parse_args` glues on values
argparse would take for flags (`--harness-args "--no-scissors"`), then checks what argparse cannot:
unique model names, positive counts, a base URL that parses, a scripted policy for each
`scripted:` name, an --out that names a JSON file, known task names, and the harness arguments and
--compare settings split as a shell would.

What it cannot do. It checks the shape of the flags, not the world: an unreachable server or a
harness that does not run is found by eval.py when the runs start (exit 1).
"""
import argparse
import shlex
import sys
from pathlib import Path

from ..flags import base_url_problem
from .evals import TASK_NAMES
from .evals.policies import POLICIES, SCRIPTED
from .page import page_path

DEFAULT_HARNESS = (__package__ or "tinyharness").split(".")[0]  # the package, not its eval family
DEFAULT_BASE_URL = "http://localhost:11434/v1"

DESCRIPTION = (
    "Run five tasks (easy and hard tier) through a harness, each in a fresh temporary workspace,\n"
    "judged only by the end state (files, the eval's own hidden tests, a canary outside the\n"
    "workspace), never by what the model says. Prints a Markdown table and writes a JSON file\n"
    "and, beside it, an HTML page of the results as bars. Runs that claim success but fail "
    "their\n"
    "check are counted. Each run's line starts with [k/N] and an estimate of the time left.")
EXAMPLES = (
    "examples:\n"
    "  compare models:           %(prog)s --models qwen3:8b,qwen3:14b --repeat 3\n"
    "  compare harness settings: %(prog)s --models qwen3:8b \\\n"
    "                                --compare \"scissors=;noscissors=--no-scissors\"\n"
    "                            (same model, every task once per setting; one row per model "
    "and setting)\n"
    "  measure another harness:  %(prog)s --models qwen3:8b --harness m6_verify\n"
    "  check the eval offline:   %(prog)s --models "
    "scripted:competent,scripted:liar,scripted:clumsy\n"
    "                            (no --base-url: one scripted model server plays all three;\n"
    "                            `tinyharness fake-server --eval-models` serves them for a "
    "stage's eval)\n"
    "\nexit codes: 0 the eval ran (whatever the scores), 1 runtime failure (server unreachable,\n"
    "harness not runnable), 2 usage error.")


def parse_compare(text):
    """`name=ARGS;name=ARGS` -> [(name, [args])]; ValueError when malformed."""
    settings = []
    for part in filter(str.strip, text.split(";")):
        name, sep, args = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{part.strip()!r} is not NAME=ARGS")
        settings.append((name.strip(), shlex.split(args)))
    names = [n for n, _ in settings]
    if not settings or len(set(names)) != len(names):
        raise ValueError("give at least one setting, each with its own name")
    return settings


def build_parser(prog="tinyharness eval"):
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=DESCRIPTION, epilog=EXAMPLES)
    parser.add_argument("--models", required=True, help="comma-separated model names")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: env "
                                           "TINYHARNESS_BASE_URL, OPENAI_BASE_URL or OLLAMA_HOST, "
                                           f"else {DEFAULT_BASE_URL}; scripted:* models get a "
                                           "scripted server)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per model and task (default %(default)s)")
    parser.add_argument("--tier", choices=["easy", "hard", "all"], default="all",
                        help="default %(default)s")
    parser.add_argument("--tasks", help=f"comma-separated subset of {','.join(TASK_NAMES)} "
                                        "(default: all)")
    parser.add_argument("--harness", default=DEFAULT_HARNESS,
                        help="module run as `python -m HARNESS` (`tinyharness` adds `run`; default "
                             "%(default)s)")
    parser.add_argument("--harness-args", default="",
                        help='extra harness flags for every run, e.g. "--no-scissors"')
    parser.add_argument("--compare", metavar="NAME=ARGS;...",
                        help='harness settings to compare on the same models, e.g. '
                             '"scissors=;noscissors=--no-scissors": every task runs under each; '
                             'one row per (model, setting)')
    parser.add_argument("--max-turns", type=int, default=20,
                        help="passed to the harness (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="wall-clock seconds per run (default %(default)s)")
    parser.add_argument("--check-timeout", type=float, default=20,
                        help="seconds for each program the checks run (default %(default)s)")
    parser.add_argument("--out", default="eval-results.json",
                        help="JSON results file (default %(default)s); a page of the results as "
                             "bars is written beside it, with the same name ending .html")
    parser.add_argument("--keep", action="store_true",
                        help="keep the run folders (workspaces, transcripts)")
    return parser


def parse_args(parser, argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse refuses `--harness-args "--no-scissors"` (a value that looks like a flag): glue it
    # on.
    i = 0
    while i < len(argv) - 1:
        if argv[i] in ("--harness-args", "--compare"):
            argv[i:i + 2] = [f"{argv[i]}={argv[i + 1]}"]
        i += 1
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models:
        parser.error("--models needs at least one model name")
    if len(set(args.models)) != len(args.models):
        parser.error("--models names a model twice")
    if args.repeat < 1 or args.max_turns < 1 or args.timeout <= 0 or args.check_timeout <= 0:
        parser.error("--repeat and --max-turns must be 1 or more, the timeouts more than 0")
    if args.base_url is not None and (problem := base_url_problem(args.base_url)):
        # a typo is a usage error, not "Could not connect ... ollama serve"
        parser.error(problem)
    unknown = ([m for m in args.models if m.startswith(SCRIPTED)
                and m[len(SCRIPTED):] not in POLICIES])
    if unknown and args.base_url is None:
        parser.error(f"no scripted policy for {', '.join(unknown)}; known: "
                     + ", ".join(SCRIPTED + p for p in POLICIES))
    check_out(parser, args.out)
    args.task_names = None
    if args.tasks:
        args.task_names = [t.strip() for t in args.tasks.split(",") if t.strip()]
        bad = sorted(set(args.task_names) - set(TASK_NAMES))
        if bad or not args.task_names:
            parser.error(f"unknown task(s) {bad}; choose from {','.join(TASK_NAMES)}")
    try:
        common = shlex.split(args.harness_args)
        settings = parse_compare(args.compare) if args.compare else [("default", [])]
    except ValueError as e:
        parser.error(f"--harness-args/--compare: {e}")
    args.settings = [(name, common + extra) for name, extra in settings]
    return args


def check_out(parser, out):
    """--out names the JSON file: the HTML page goes beside it, so it needs a name to change; and
    both are checked as filedoor.py will write them, before the first run, not after the last."""
    from ..filedoor import check_writable
    try:
        if page_path(out) == Path(out):
            parser.error(f"--out {out!r}: name the JSON file; the HTML page is written beside "
                         "it with .html")
    except ValueError:                            # Path("").with_suffix(...): no file name at all
        parser.error(f"--out {out!r} is not a file name")
    try:
        check_writable(out)  # a NUL or a control character, a missing folder, a link on the way
    except OSError as e:
        parser.error(f"--out {out!r} cannot be written ({e.strerror or e})")
