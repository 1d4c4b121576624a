"""The `tinyharness` command: run the agent, replay the demo, serve a scripted model, run the eval, the course."""
import argparse
import os
import sys

from .hooks import approve_everything, ask_user
from .llm import DEFAULT_BASE_URL, DEFAULT_MODEL, Client, LLMError
from .guards import MAX_SECONDS, MAX_TURNS
from .context import CONTEXT_WINDOW, DEFAULT_POLICY, POLICIES
from .ollama import API_CHOICES, OLLAMA_WINDOW_CAP, choose_dialect
from .loop import Stats, Stopped, run_agent
from .vision import ImageError, image_part, load_attachment


def printable(text):
    """Model text can hold a NUL, a lone surrogate or other control bytes; never let printing crash."""
    text = "" if text is None else str(text)
    text = text.encode("utf-8", errors="replace").decode("utf-8")  # lone surrogates become '?'
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


class StreamPrinter:
    """Shows a streamed answer as it arrives: text as it is, reasoning dimmed on a terminal and
    hidden in a pipe (it is the model thinking aloud, never the answer)."""

    def __init__(self, out):
        self.out, self.dim = out, out.isatty()
        self.open_line, self.kind, self.since_tool = False, None, ""

    def write(self, text, kind, style=""):
        if self.open_line and kind != self.kind:
            self.out.write("\n")                    # reasoning and answer each start a line
        self.out.write(style + text + ("\x1b[0m" if style else ""))
        self.out.flush()
        self.open_line, self.kind = not text.endswith("\n"), kind

    def text(self, piece):
        self.since_tool += piece
        self.write(printable(piece), "text")

    def reasoning(self, piece):
        if self.dim:
            self.write(printable(piece), "reasoning", style="\x1b[2m")   # ANSI dim

    def end_line(self):
        if self.open_line:
            self.out.write("\n")
            self.out.flush()
        self.open_line, self.kind = False, None

    def echo(self, line):
        self.end_line()
        print(printable(line), flush=True)
        self.since_tool = ""                         # the answer is what the model says after its last tool


def add_run_flags(parser):
    parser.add_argument("task", help="what the agent should do, in plain words")
    parser.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                        help="model name (env TINYHARNESS_MODEL, default %(default)s)")
    parser.add_argument("--base-url", default=os.environ.get("TINYHARNESS_BASE_URL", DEFAULT_BASE_URL),
                        help="OpenAI-compatible endpoint (env TINYHARNESS_BASE_URL, default %(default)s)")
    parser.add_argument("--max-turns", type=int, default=MAX_TURNS, help="most model calls in one run (default %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS, metavar="SECONDS",
                        help="stop before the next model call once this long has passed (default %(default)s)")
    parser.add_argument("--transcript", metavar="PATH", help="write the whole conversation as JSON to PATH")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                        help="print the answer as it arrives (default: on when the output is a terminal)")
    parser.add_argument("--shell-timeout", type=float, default=60, metavar="SECONDS",
                        help="kill a shell command (and all it started) after this long (default %(default)s)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every write and command that the hooks allow, without asking")
    parser.add_argument("--image", metavar="PATH_OR_URL",
                        help="attach an image (PNG, JPEG or WebP; a file or an http(s) URL) to the task")
    cutting = parser.add_mutually_exclusive_group()
    cutting.add_argument("--context-policy", choices=list(POLICIES), default=DEFAULT_POLICY,
                         help="how old tool results are cut before each model call (default %(default)s: cap each "
                              "result when it is added, stub old ones in one batch past 75%% of the window; kind to "
                              "the server's prompt cache). sliding: the m5 stage's scissors, every turn")
    cutting.add_argument("--no-scissors", dest="context_policy", action="store_const", const="none",
                         help="send every tool result whole, however old: --context-policy none (for A/B runs)")
    parser.add_argument("--context-window", type=int, default=None, metavar="TOKENS",
                        help="the model's context length: the policies cut to fit it, and a warning says when "
                             f"the prompt nears it (default: with Ollama's native API the model's own length, at most "
                             f"{OLLAMA_WINDOW_CAP}, sent as num_ctx; otherwise {CONTEXT_WINDOW})")
    add_dialect_flags(parser)


def add_dialect_flags(parser):
    """--api and --think (tinyharness/ollama.py explains the native dialect and the auto rule)."""
    parser.add_argument("--api", choices=API_CHOICES, default=os.environ.get("TINYHARNESS_API", "auto"),
                        help="the server's dialect: openai (/v1/chat/completions), ollama (Ollama's native /api/chat, "
                             "which can set the context length), or auto: Ollama's native API when the host answers "
                             "/api/version and the base URL is a bare host or ends in /v1 (env TINYHARNESS_API, "
                             "default %(default)s)")
    parser.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                        help="switch the model's thinking on or off (Ollama's native API; default: the model's own)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="tinyharness",
        description="A small agent harness for local models. The current folder is the agent's workspace.",
        epilog="Start with `tinyharness demo` (no model server needed), then `tinyharness run \"TASK\"` "
               "against Ollama (`ollama serve`, `ollama pull qwen3:8b`).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_run_flags(sub.add_parser("run", help="run the agent on a task in the current folder",
                                 description="Run the agent on TASK, using the current folder as its workspace."))
    sub.add_parser("demo", help="the notes task end to end, with the model's turns replayed (no server needed)",
                   description="Copy examples/notes to a temporary folder and run the real loop and tools on it, "
                               "against a scripted server that replays the model's five turns.")
    fake = sub.add_parser("fake-server", help="serve scripted model replies on 127.0.0.1 for your own tests",
                          description="An OpenAI-compatible server that answers from a JSON script of replies, "
                                      "plays the eval's scripted models, or plays a vision model.")
    replies = fake.add_mutually_exclusive_group(required=True)
    replies.add_argument("--script", metavar="FILE", help="JSON file: a list of replies")
    replies.add_argument("--eval-models", action="store_true",
                         help="play the eval's scripted models competent, liar and clumsy, chosen by the "
                              "request's model name (for `python -m m7_eval.eval --base-url URL`)")
    replies.add_argument("--vision", action="store_true",
                         help="play a vision model that names the colours of the halves of each PNG it is sent")
    replies.add_argument("--ollama", nargs="?", const="healthy", metavar="PERSONALITY",
                         choices=["healthy", "no-model", "no-tools", "no-usage"],
                         help="play Ollama (native /api/* and /v1) with a model that calls the first tool it is "
                              "offered; PERSONALITY: healthy (default), no-model, no-tools, no-usage")
    fake.add_argument("--drop-images", action="store_true",
                      help="never see images, like Ollama with gemma4 e2b/e4b (try the arrival warning)")
    fake.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    sub.add_parser("doctor", add_help=False, help="check the server and model before a run: reachable, pulled, "
                                                  "tools, context, a real tool call (`tinyharness doctor --help`)")
    sub.add_parser("eval", add_help=False, help="measure models or harness settings on five tasks, judged by "
                                                "the end state (`tinyharness eval --help`)")
    course = sub.add_parser("course", help="the learner's companion: list, diff, quiz, check",
                            description="Follow the course: see your progress, diff two stages, take a quiz, run a stage's tests.")
    course_sub = course.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    course_sub.add_parser("list", help="the stages, one line each, with your quiz progress")
    diff = course_sub.add_parser("diff", help="a unified diff of two stages' code")
    diff.add_argument("a", help="a stage, e.g. m0")
    diff.add_argument("b", help="a later stage, e.g. m1")
    diff.add_argument("--docs", action="store_true", help="include README.md and QUIZ.md")
    course_sub.add_parser("quiz", help="take a stage's three-question quiz").add_argument("stage")
    course_sub.add_parser("check", help="run the tests of one stage").add_argument("stage")
    return parser


def main(argv=None):
    try:
        return dispatch(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:  # `tinyharness course diff m0 m1 | head` closed the pipe: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush stays quiet
        return 0


def dispatch(argv):
    if argv[:1] == ["eval"]:                  # the eval has its own flags and --help: hand it everything
        from .eval import main as eval_main
        return eval_main(argv[1:], prog="tinyharness eval")
    if argv[:1] == ["doctor"]:                # so does the doctor
        from .doctor import main as doctor_main
        return doctor_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(errors="replace")  # a terminal that cannot show a character gets '?', not a crash
    if args.command == "run":
        return run_command(args, parser)
    if args.command == "demo":
        from .demo import run_demo
        return run_demo()
    if args.command == "fake-server" and args.ollama:
        from .fake_ollama import serve
        return serve(args.ollama, args.port)
    if args.command == "fake-server" and args.eval_models:
        from .evals.policies import serve
        return serve(args.port)
    if args.command == "fake-server":
        from .testing import main as fake_server_main
        source = ["--vision"] if args.vision else ["--script", args.script]
        return fake_server_main([*source, "--port", str(args.port)] + ["--drop-images"] * args.drop_images)
    if args.command == "course":
        return course_command(args)
    parser.print_help()
    return 2


def run_command(args, parser):
    if not args.task.strip():
        parser.error("the task is empty")
    if args.max_turns < 1:
        parser.error("--max-turns must be 1 or more")
    if not args.max_seconds > 0:
        parser.error("--max-seconds must be more than 0")
    if not args.shell_timeout > 0:
        parser.error("--shell-timeout must be more than 0")
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    try:  # a bad image is a usage error (exit 2), found before any model call
        image = image_part(*load_attachment(args.image, os.getcwd())) if args.image else None
    except ImageError as e:
        parser.error(f"--image: {e}")
    if args.api not in API_CHOICES:  # from TINYHARNESS_API, which argparse does not check
        parser.error(f"--api (or TINYHARNESS_API) must be one of {', '.join(API_CHOICES)}, not {args.api!r}")
    stream = sys.stdout.isatty() if args.stream is None else args.stream
    printer = StreamPrinter(sys.stdout)
    client = Client(args.base_url, args.model, api_key=os.environ.get("TINYHARNESS_API_KEY"),
                    stream=stream, on_text=printer.text, on_reasoning=printer.reasoning)
    stats = Stats()
    echo = printer.echo
    client, args.context_window = choose_dialect(args, client, CONTEXT_WINDOW)  # --api, --think; the window

    def ask(prompt):
        printer.end_line()  # a streamed line still open would run into the question
        return ask_user(printable(prompt))
    try:
        answer = run_agent(args.task, client, os.getcwd(), stats, args.max_turns, echo, args.transcript,
                           args.shell_timeout, approve_everything if args.yes else ask, args.max_seconds,
                           args.context_policy, args.context_window, image=image)
        printer.end_line()
        if not stream or answer.strip() != printer.since_tool.strip():   # streamed already: not twice
            print(printable(answer))
        return 0
    except LLMError as e:
        printer.end_line()
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Stopped as e:
        printer.end_line()
        print(printable(f"Stopped: {e}. The task is NOT confirmed complete."))  # the reason can quote the model
        print(printable(e.done))  # what was done so far, so the user knows where to pick up
        return 3
    except KeyboardInterrupt:
        printer.end_line()
        print("Interrupted.", file=sys.stderr)
        return 130
    finally:
        print(stats.line(), file=sys.stderr)


def course_command(args):
    from . import course
    if args.course_command == "list":
        return course.course_list()
    if args.course_command == "diff":
        return course.course_diff(args.a, args.b, include_docs=args.docs)
    if args.course_command == "quiz":
        return course.course_quiz(args.stage)
    return course.course_check(args.stage)
