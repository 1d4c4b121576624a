"""The `tinyharness` command: run the agent, replay the demo, serve a scripted model, run the eval, the course."""
import argparse
import os
import sys
from urllib.parse import urlsplit

from .console import printable

# Only the console is imported here: `tinyharness --help` and `--version` must not pay for requests, the
# sandbox and the loop (a fifth of a second). Each command imports what it needs when it runs, and the
# flags of run and chat (whose defaults live in those modules) are added only when that command is asked for.


EXIT_CODES = ("exit codes: 0 the model finished, 1 a runtime failure (e.g. no server), 2 a usage error, "
              "3 stopped by a limit (not confirmed complete), 130 interrupted (Ctrl-C)")


def usage_problem(args, extra):
    """What makes the command line unusable, found before the first model call (exit 2) rather than
    after the model's work is spent: stray words, a URL requests cannot use, a transcript path that
    cannot be written."""
    if extra:  # `... find the budget` without quotes: only "find" became the task
        task = " ".join([args.task or "", *extra]).strip()  # chat's message is optional: task may be None
        quote = "" if any(e.startswith("-") for e in extra) else f'; put the task in quotes: "{task}"'
        return f"unrecognized arguments: {' '.join(extra)}{quote}"
    if problem := base_url_problem(args.base_url):
        return problem
    path = args.transcript
    if path is not None:  # open it as the transcript will be, without emptying it (O_NONBLOCK: a FIFO cannot hang us)
        existed = os.path.lexists(path)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK))
        except OSError as e:  # '' or a folder, a missing folder, no permission
            return f"--transcript {path!r} cannot be written ({e.strerror}); for example --transcript run.json"
        if not existed:
            os.remove(path)  # it was only a test: leave nothing behind
    return None


def irregular_config(workspace):
    """A hooks or MCP file that is there but is not a regular file (a FIFO would block the read that
    loads it forever): the usage error that says so, or None."""
    import stat
    from .cmdhooks import HOOKS_FILE
    from .mcp import config_files
    for path in [os.path.join(workspace, HOOKS_FILE), *map(str, config_files(workspace))]:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing (or unreadable: loading it says so)
        if not stat.S_ISREG(mode):
            return f"{path} is not a regular file (a FIFO, a device or a folder), so it was not read; remove it"
    return None


def base_url_problem(base_url):
    """Why requests cannot use BASE_URL (a usage error, shared by run, chat and doctor), or None."""
    from .llm import DEFAULT_BASE_URL
    try:  # urlsplit and .port raise ValueError for 'http://[::1' or a port that is not a number up to 65535
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname or url.port == 0:
            raise ValueError
    except ValueError:
        return (f"--base-url {base_url!r} is not an http(s) URL with a host (and a port from 1 to 65535); "
                f"for example --base-url {DEFAULT_BASE_URL}")
    return None


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
        print(printable(line), file=self.out, flush=True)
        self.since_tool = ""                         # the answer is what the model says after its last tool


def add_run_flags(parser):
    parser.add_argument("task", help="what the agent should do, in plain words (-: read it from standard input)")
    parser.add_argument("--json", action="store_true",
                        help="for scripts: write one JSON object per line on standard output and nothing else - "
                             "each event as the session file has it, then {\"type\": \"result\", \"exit_code\", "
                             "\"answer\", \"stats\", ...}; the tool lines and warnings go to standard error")
    add_agent_flags(parser)
    add_dialect_flags(parser)


def add_dialect_flags(parser):
    """--api and --think, and the window from the model (tinyharness/ollama.py explains the native
    dialect and the auto rule)."""
    from .ollama import API_CHOICES
    parser.add_argument("--api", choices=API_CHOICES, default=os.environ.get("TINYHARNESS_API", "auto"),
                        help="the server's dialect: openai (/v1/chat/completions), ollama (Ollama's native /api/chat, "
                             "which can set the context length), or auto: Ollama's native API when the host answers "
                             "/api/version and the base URL is a bare host or ends in /v1 (env TINYHARNESS_API, "
                             "default %(default)s)")
    parser.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                        help="switch the model's thinking on or off (Ollama's native API; default: the model's own)")
    parser.set_defaults(context_window=None)  # None: the model's own length with Ollama's native API (choose_dialect)


def add_agent_flags(parser):
    """The flags `run` and `chat` share: the model, the budgets, the tools' permissions, the context."""
    from . import extensions
    from .context import CONTEXT_WINDOW, DEFAULT_POLICY, POLICIES
    from .guards import MAX_SECONDS, MAX_TURNS
    from .llm import DEFAULT_BASE_URL, DEFAULT_MODEL, MAX_REPLY_TOKENS
    from .ollama import OLLAMA_WINDOW_CAP
    parser.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                        help="model name (env TINYHARNESS_MODEL, default %(default)s)")
    parser.add_argument("--base-url", default=os.environ.get("TINYHARNESS_BASE_URL", DEFAULT_BASE_URL),
                        help="OpenAI-compatible endpoint (env TINYHARNESS_BASE_URL, default %(default)s)")
    parser.add_argument("--max-turns", type=int, default=MAX_TURNS, help="most model calls in one run (default %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS, metavar="SECONDS",
                        help="stop before the next model call once this long has passed; what is left is also the "
                             "longest one model reply may take (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, metavar="N",
                        help="stop before the next model call once the run has used N tokens, prompt plus completion, "
                             "as the server counted them (default: no limit)")
    parser.add_argument("--max-reply-tokens", type=int, default=MAX_REPLY_TOKENS, metavar="N",
                        help="the most tokens one model reply may have (sent as max_tokens); a reply cut there is "
                             "not an answer: the model is told once, the second cut stops the run (default %(default)s)")
    parser.add_argument("--transcript", metavar="PATH", help="write the whole conversation as JSON to PATH")
    parser.add_argument("--no-session", action="store_true",
                        help="do not write the session file (by default every run and chat is appended, event by "
                             "event, to $XDG_DATA_HOME/tinyharness/sessions/, else ~/.local/share/...)")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                        help="print the answer as it arrives (default: on when the output is a terminal)")
    parser.add_argument("--shell-timeout", type=float, default=60, metavar="SECONDS",
                        help="kill a shell command (and all it started) after this long (default %(default)s)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every write and command that the hooks allow, without asking")
    parser.add_argument("--image", metavar="PATH_OR_URL",
                        help="attach an image (PNG, JPEG or WebP; a file or an http(s) URL) to the task")
    parser.add_argument("--allow-image-urls", action="store_true",
                        help="let view_image fetch http(s) URLs the model chooses without asking, even under --yes "
                             "(by default each one is asked: the request leaves your machine, and a URL can carry "
                             "data out)")
    cutting = parser.add_mutually_exclusive_group()
    cutting.add_argument("--context-policy", choices=list(POLICIES), default=DEFAULT_POLICY,
                         help="how old tool results are cut before each model call (default %(default)s: cap each "
                              "result when it is added, stub old ones in one batch past 75%% of the window; kind to "
                              "the server's prompt cache). sliding: the m5 stage's scissors, every turn")
    cutting.add_argument("--no-scissors", dest="context_policy", action="store_const", const="none",
                         help="send every tool result whole, however old: --context-policy none (for A/B runs)")
    parser.add_argument("--sandbox", choices=["on", "off"], default="on",
                        help="on (default): every shell command runs confined by the kernel (Landlock, seccomp, "
                             "resource limits; Linux 6.12 or later): it may write only in the workspace and a private "
                             "TMPDIR, read the system and the workspace but nothing else of yours (no home folder; "
                             "/tmp and /run empty where user namespaces work), open no network socket, signal or "
                             "change no process outside, leave no process behind; changes to what git runs (.git's "
                             "config, hooks, links) and to .tinyharness/ are undone. It does not stop a command from "
                             "changing anything inside the workspace. off: commands run unconfined (a warning says so "
                             "on every run); where the sandbox cannot run, shell refuses until you choose off")
    parser.add_argument("--sandbox-read", action="append", default=[], metavar="PATH",
                        help="let sandboxed commands read (and run) PATH too, e.g. a toolchain in your home folder "
                             "(repeatable)")
    parser.add_argument("--sandbox-env", action="append", default=[], metavar="NAME",
                        help="pass the environment variable NAME on to sandboxed commands too (repeatable); by "
                             "default they get only PATH, HOME, LANG, LC_*, TERM, TMPDIR, USER, LOGNAME, SHELL, TZ "
                             "and PWD (SSH_AUTH_SOCK, TMUX, STY and DBUS_SESSION_BUS_ADDRESS never)")
    parser.add_argument("--context-window", type=int, default=CONTEXT_WINDOW, metavar="TOKENS",
                        help="the model's context length: the policies cut to fit it, and a warning says when "
                             f"the prompt nears it (default {CONTEXT_WINDOW}; for `run` with Ollama's native API, the "
                             f"model's own length, at most {OLLAMA_WINDOW_CAP}, sent as num_ctx)")
    extensions.add_flags(parser)


def port_number(text):
    """--port: checked before any socket is opened, so a typo is a usage error, not a traceback."""
    port = int(text) if text.strip().isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number from 1 to 65535 (0 or none: any free port)")
    return port


def version():
    from . import __version__
    return f"tinyharness {__version__}"


def build_parser(command=None):
    """The whole command line; the flags of run and chat only when COMMAND is that one (None: all)."""
    parser = argparse.ArgumentParser(
        prog="tinyharness",
        description="A small agent harness for local models. The current folder is the agent's workspace.",
        epilog="Start with `tinyharness demo` (no model server needed), then `tinyharness run \"TASK\"` "
               "against Ollama (`ollama serve`, `ollama pull qwen3:8b`). " + EXIT_CODES + ".")
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run the agent on a task in the current folder", epilog=EXIT_CODES,
                         description="Run the agent on TASK, using the current folder as its workspace.")
    if command in (None, "run"):
        add_run_flags(run)
    run.set_defaults(usage=run)  # its own checks print `usage: tinyharness run ...`, not the top-level line
    chat = sub.add_parser("chat", help="a conversation with the agent in the current folder (sessions are kept)",
                          description="Talk with the agent in the current folder: each message runs the same loop, "
                                      "tools, hooks and guards as `run`, with its own --max-turns and --max-seconds. "
                                      "/help inside lists the commands. With standard input not a terminal, each "
                                      "line is one message.", epilog=EXIT_CODES)
    if command in (None, "chat"):
        from .chat import add_chat_flags
        add_chat_flags(chat)
        add_agent_flags(chat)
    chat.set_defaults(usage=chat)
    mcp_parser = sub.add_parser("mcp", help="the MCP servers this folder would start: `mcp list` shows their tools",
                                description="List the configured MCP servers (.tinyharness/mcp.json, "
                                            "~/.config/tinyharness/mcp.json, --mcp), whether each is trusted, and the "
                                            "tools each offers (trusted servers are started to ask them).")
    mcp_parser.add_argument("mcp_command", choices=["list"], metavar="list", help="list servers and their tools")
    mcp_parser.add_argument("--mcp", action="append", default=[], metavar="NAME=COMMAND",
                            help="one more server, as for run")
    mcp_parser.set_defaults(usage=mcp_parser)
    sessions = sub.add_parser("sessions", help="list the saved sessions: id, turns, folder, first task",
                              description="List the sessions in $XDG_DATA_HOME/tinyharness/sessions/ "
                                          "(else ~/.local/share/tinyharness/sessions/), newest first, the newest "
                                          "50 unless --all; the id starts with the UTC time it was started. "
                                          "`chat --resume ID` and `view ID` take the id as listed.")
    sessions.add_argument("--all", action="store_true", help="list every session, not only the newest 50")
    sessions.add_argument("--here", action="store_true", help="only the sessions started in the current folder")
    sessions.set_defaults(usage=sessions)
    view = sub.add_parser("view", help="turn a session or a --transcript file into one HTML page",
                          description="Write a self-contained HTML page (no network, no external files) showing "
                                      "FILE's turns, tool calls, results, cuts, summaries and tokens per turn; "
                                      "print its path.")
    view.add_argument("file", metavar="FILE", help="a session (.jsonl) or a --transcript (.json) file, or a "
                                                   "session id as `tinyharness sessions` lists it")
    view.add_argument("-o", "--output", metavar="PATH", help="where to write the page (default: FILE with .html)")
    view.add_argument("--open", action="store_true", help="open the page in the web browser")
    view.set_defaults(usage=view)
    demo = sub.add_parser("demo", help="the notes task end to end, with the model's turns replayed (no server needed)",
                          description="Copy examples/notes to a temporary folder and run the real loop and tools on "
                                      "it, against a scripted server that replays the model's five turns. The "
                                      "folder is removed at the end unless --keep is given.")
    demo.add_argument("--keep", action="store_true", help="keep the demo's workspace folder and say where it is")
    demo.set_defaults(usage=demo)
    fake = sub.add_parser("fake-server", help="serve scripted model replies on 127.0.0.1 for your own tests",
                          description="An OpenAI-compatible server that answers from a JSON script of replies, "
                                      "plays the eval's scripted models, or plays a vision model.")
    replies = fake.add_mutually_exclusive_group(required=True)
    replies.add_argument("--script", metavar="FILE|NAME",
                         help="JSON file: a list of replies; or the name of a bundled one (notes, self-rescue, "
                              "verify: examples/NAME.script.json)")
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
    fake.add_argument("--port", type=port_number, default=0, help="port to listen on, 1 to 65535 (default: any free port)")
    fake.set_defaults(usage=fake)
    sub.add_parser("eval", add_help=False, help="measure models or harness settings on five tasks, judged by "
                                                "the end state (`tinyharness eval --help`)")
    sub.add_parser("doctor", add_help=False, help="check the server and model before a run: reachable, pulled, "
                                                  "tools, context, a real tool call (`tinyharness doctor --help`)")
    course = sub.add_parser("course", help="the learner's companion: list, diff, files, quiz, start, check, workspace",
                            description="Follow the course: see your progress, diff two stages, take a quiz, "
                                        "write a stage's key functions yourself, run a stage's tests, copy a "
                                        "fresh example workspace for a lesson's Try it.")
    course_sub = course.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    course_sub.add_parser("list", help="the stages, one line each, with your quiz and exercise progress",
                          description="List the stages, one line each, with your best quiz score and whether "
                                      "your exercise passed; 'Next:' says what to do next.")
    diff = course_sub.add_parser("diff", help="a unified diff of two stages' code",
                                 description="Show what the later stage's lesson changed: a unified diff of the "
                                             "two stages' code (with --docs, their README and quiz too).")
    diff.add_argument("a", help="a stage, e.g. m0")
    diff.add_argument("b", help="a later stage, e.g. m1")
    diff.add_argument("--docs", action="store_true", help="include README.md and QUIZ.md")
    files = course_sub.add_parser("files", help="a stage's files by role: lesson, armour, cli",
                                  description="List a stage's files, lesson first: the lesson (what the README "
                                              "teaches), the armour (read after the lesson, when a real server "
                                              "surprises you) and the command line, with their lengths. With a "
                                              "role, only that role's paths, one a line.")
    files.add_argument("stage", help="a stage, e.g. m1")
    only = files.add_mutually_exclusive_group()
    for role in ("lesson", "armour", "cli"):
        only.add_argument(f"--{role}", dest="role", action="store_const", const=role, help=f"only the {role} files")
    course_sub.add_parser("quiz", help="take a stage's three-question quiz",
                          description="Take a stage's three-question quiz: type a letter and Enter per question "
                                      "(Ctrl-D stops). A finished attempt is recorded; `course list` shows your "
                                      "best score.").add_argument("stage", help="a stage, e.g. m1")
    start = course_sub.add_parser("start", help="copy a stage with its lesson's functions left for you to write",
                                  description="Write your copy of a stage into DIR/<stage folder>: the same code, "
                                              "except that the functions the lesson is about raise "
                                              "NotImplementedError for you to fill in (the stage README's "
                                              "'Your turn' says what to write). Then: course check STAGE --mine DIR.")
    start.add_argument("stage", help="a stage, e.g. m3")
    start.add_argument("dir", metavar="DIR", nargs="?", default=".", help="the parent folder of your copy (default: here)")
    start.add_argument("--force", action="store_true", help="replace an existing copy (your changes are lost)")
    check = course_sub.add_parser("check", help="run the tests of one stage, or grade your copy with --mine",
                                  description="Run the tests of one stage. With --mine, run every test case of "
                                              "the stage against your copy of it, and name each behaviour that "
                                              "fails, the most basic first, with a hint; 'done' only when all pass.")
    check.add_argument("stage", help="a stage, e.g. m3")
    check.add_argument("--mine", metavar="DIR", help="your copy: the folder `course start` wrote (or its parent)")
    check.add_argument("-k", dest="keyword", metavar="EXPRESSION",
                       help="only the tests whose names match, as pytest's -k (e.g. attacks)")
    workspace = course_sub.add_parser(
        "workspace", help="copy a fresh example workspace (notes, images, empty) to a new folder",
        description="Copy examples/NAME to DIR for a lesson's Try it (`empty`: an empty folder). DIR must not "
                    "exist yet (a copy into an old run's folder would mix its files with the example's).")
    workspace.add_argument("name", metavar="NAME", help="the example: notes, images, or empty")
    workspace.add_argument("dir", metavar="DIR", help="a new folder, e.g. /tmp/notes-m1")
    workspace.add_argument("--force", action="store_true", help="replace DIR if it exists")
    return parser


def main(argv=None):
    try:
        return dispatch(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:  # Ctrl-C anywhere (a run catches its own first, to print its stats)
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tinyharness course diff m0 m1 | head` closed the pipe: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush stays quiet
        return 0
    except SystemExit:  # argparse's --help and usage errors: what they say is the answer
        raise
    except BaseException as e:  # RestoreFailed is a BaseException, so no tool's `except Exception` hides it
        from .sandbox import RestoreFailed  # here, not at the top: --help must not load the sandbox
        if not isinstance(e, RestoreFailed):
            raise
        print(printable(f"error: {e}"), file=sys.stderr)  # .git may be left changed: the user is told, never the model
        return 1


def dispatch(argv):
    if argv[:1] == ["eval"]:                  # the eval has its own flags and --help: hand it everything
        from .eval import main as eval_main
        return eval_main(argv[1:], prog="tinyharness eval")
    if argv[:1] == ["doctor"]:                # so does the doctor
        from .doctor import main as doctor_main
        return doctor_main(argv[1:])
    parser = build_parser(next((a for a in argv if not a.startswith("-")), ""))  # the command's flags only
    args, extra = parser.parse_known_args(argv)
    usage = getattr(args, "usage", parser)  # the subcommand's own parser, where it set one
    if args.command in ("run", "chat") and (problem := usage_problem(args, extra)):
        usage.error(problem)
    if args.command in ("run", "chat"):
        from .hooks import allow_urls
        allow_urls(getattr(args, "allow_image_urls", False))  # every run sets it: a test may run several in one process
    if args.command == "run":
        return run_command(args, usage)
    if extra:
        usage.error(f"unrecognized arguments: {' '.join(extra)}")
    sys.stdout.reconfigure(errors="replace")  # a terminal that cannot show a character gets '?', not a crash
    if args.command == "chat":
        from .chat import chat_command
        return chat_command(args, usage)
    if args.command == "mcp":
        from .extensions import list_servers
        return list_servers(os.getcwd(), args.mcp, out=lambda text: print(printable(text), flush=True))
    if args.command == "sessions":
        from .sessions import sessions_command
        return sessions_command(show_all=args.all, here=args.here)
    if args.command == "view":
        from .view import view_command
        return view_command(args.file, args.output, args.open)
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(keep=args.keep)
    if args.command == "fake-server":
        return fake_server(args)
    if args.command == "course":
        return course_command(args)
    parser.print_help()
    return 2


def sandbox_from_args(args, parser):
    """The Sandbox that --sandbox and --sandbox-read ask for (a usage error if a path is missing),
    with the warning that --sandbox off prints on every run."""
    from .sandbox import NOT_ISOLATED, Sandbox, env_refusal, workspace_problem
    missing = [p for p in args.sandbox_read if not os.path.exists(p)]
    if missing:
        parser.error(f"--sandbox-read: {missing[0]} does not exist")
    if problem := workspace_problem(os.getcwd()):  # run and chat both come here first
        print(printable(f"error: {problem}."), file=sys.stderr)
        raise SystemExit(2)
    for name in args.sandbox_env:
        if refusal := env_refusal(name):
            parser.error(f"--sandbox-env: {refusal}")
    if args.sandbox == "off":
        print("warning: --sandbox off: shell commands run with all your rights; only the command regex and your "
              "approval stand between the model and your files, keys and network.", file=sys.stderr)
    sandbox = Sandbox(enabled=args.sandbox == "on", extra_read=args.sandbox_read, extra_env=args.sandbox_env)
    if sandbox.enabled and not sandbox.problem() and not sandbox.isolated:
        print(NOT_ISOLATED, file=sys.stderr)
    return sandbox


def fake_server(args):
    try:
        if args.ollama:
            from .fake_ollama import serve
            return serve(args.ollama, args.port)
        if args.eval_models:
            from .evals.policies import serve
            return serve(args.port)
        from .testing import main as fake_server_main
        source = ["--vision"] if args.vision else ["--script", script_path(args.script)]
        if source[-1] is None:
            return 2
        return fake_server_main([*source, "--port", str(args.port)] + ["--drop-images"] * args.drop_images)
    except OSError as e:  # the port is taken, or below 1024 without the right to it
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}. Choose another --port, "
              "or leave it out to take any free port.", file=sys.stderr)
        return 1


def check_agent_flags(args, parser):
    """Usage errors in the flags `run` and `chat` share, found before the first model call (exit 2)."""
    from . import extensions
    from .ollama import API_CHOICES
    if args.max_turns < 1:
        parser.error("--max-turns must be 1 or more")
    if not args.max_seconds > 0:
        parser.error("--max-seconds must be more than 0")
    if not args.shell_timeout > 0:
        parser.error("--shell-timeout must be more than 0")
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    if args.max_reply_tokens < 1:
        parser.error("--max-reply-tokens must be 1 or more")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error("--max-tokens must be 1 or more")
    if args.api not in API_CHOICES:  # from TINYHARNESS_API, which argparse does not check
        parser.error(f"--api (or TINYHARNESS_API) must be one of {', '.join(API_CHOICES)}, not {args.api!r}")
    extensions.check_flags(args, parser)


def run_command(args, parser):
    from . import extensions
    from .context import CONTEXT_WINDOW
    from .hooks import approve_everything, ask_user
    from .llm import Client, LLMError
    from .loop import RunSettings, Stats, Stopped, run_agent
    from .ollama import choose_dialect
    from .sessions import TranscriptWriter, UsageTap, keeper, start_or_warn
    from .imageload import ImageError, load_attachment
    from .vision import image_part
    sys.stdout.reconfigure(errors="replace")  # a terminal that cannot show a character gets '?', not a crash
    if args.task == "-":  # `echo "fix the tests" | tinyharness run -`
        args.task = sys.stdin.read()
    if not args.task.strip():
        parser.error("the task is empty")
    check_agent_flags(args, parser)
    sandbox = sandbox_from_args(args, parser)
    try:  # a bad image is a usage error (exit 2), found before any model call
        image = image_part(*load_attachment(args.image, os.getcwd())) if args.image is not None else None
    except ImageError as e:
        parser.error(f"--image: {e}")
    if args.json:  # stdout is for the JSON lines alone: the tool lines and a streamed answer go to stderr
        stream, printer = bool(args.stream), StreamPrinter(sys.stderr)
    else:
        stream, printer = sys.stdout.isatty() if args.stream is None else args.stream, StreamPrinter(sys.stdout)
    if problem := irregular_config(os.getcwd()):
        print(printable(f"error: {problem}"), file=sys.stderr)
        return 2
    try:  # the workspace's hooks and MCP servers: trusted by the user (never by --yes) before anything runs
        hands = extensions.from_flags(args, os.getcwd(), lambda q: ask_user(printable(q)), report_line)
    except extensions.SetupError as e:
        print(printable(f"error: {e}"), file=sys.stderr)
        return 2
    client = Client(args.base_url, args.model, api_key=os.environ.get("TINYHARNESS_API_KEY"),
                    stream=stream, on_text=printer.text, on_reasoning=printer.reasoning,
                    max_reply_tokens=args.max_reply_tokens)
    stats = Stats()
    echo = printer.echo
    client, args.context_window = choose_dialect(args, client, CONTEXT_WINDOW)  # --api, --think; the window
    session = None if args.no_session else start_or_warn(os.getcwd(), args.model, sys.stderr)
    if session and hands.hooks:
        hands.hooks.session_id = session.id  # a hook can tell one run's events from another's
        hands.hooks.transcript_path = str(session.path)
    if session or args.json:
        client = UsageTap(client, session)  # the session notes each call's usage beside its answer
    lines = JsonLines(sys.stdout, client, session, args.model) if args.json else None
    result = {"exit_code": 1, "answer": None}

    def ask(prompt):
        printer.end_line()  # a streamed line still open would run into the question
        return ask_user(printable(prompt))
    try:
        settings = RunSettings(max_turns=args.max_turns, max_seconds=args.max_seconds, max_tokens=args.max_tokens,
                               shell_timeout=args.shell_timeout, context_policy=args.context_policy,
                               context_window=args.context_window, sandbox=sandbox,
                               approve=approve_everything if args.yes else ask, extensions=hands, echo=echo,
                               on_update=keeper(session, lines, TranscriptWriter(args.transcript)),  # --transcript too
                               on_subagent=session_keeper(session, lines), image=image)
        answer = run_agent(args.task, client, os.getcwd(), settings, stats)
        printer.end_line()
        result.update(exit_code=0, answer=answer)
        if not args.json and (not stream or answer.strip() != printer.since_tool.strip()):  # streamed: not twice
            print(printable(answer))
        return 0
    except LLMError as e:
        printer.end_line()
        result.update(error=str(e))
        print(printable(f"error: {e}"), file=sys.stderr)  # the server's own words can be in it
        return 1
    except Stopped as e:
        printer.end_line()
        result.update(exit_code=3, stopped=str(e), done=e.done)
        if not args.json:
            print(printable(f"Stopped: {e}. The task is NOT confirmed complete."))  # the reason can quote the model
            print(printable(e.done))  # what was done so far, so the user knows where to pick up
        return 3
    except KeyboardInterrupt:
        printer.end_line()
        result.update(exit_code=130, error="interrupted")
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head` closed the output: the run cannot show its work, so it stops
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # or the exit flush fails again
        print("error: the output was closed (e.g. by `| head`), so the run stopped.", file=sys.stderr)
        lines = None
        return 1
    finally:
        hands.close()  # MCP servers end on every path, Ctrl-C included
        print(stats.line(), file=sys.stderr)
        if lines:
            lines.result(result, stats)
        if session:
            session.end("run")
            session.close()


class JsonLines:
    """run --json: the events a session file gets, one JSON object per line on standard output, then a
    result object. Same shapes as the session file (sessions.py), so one reader serves both."""

    def __init__(self, out, tap, session, model):
        from .sessions import StreamWriter, now
        self.tap, self.events = tap, StreamWriter(out)
        self.events.write({"type": "start", "time": now(), "session": session.id if session else None,
                           "folder": os.getcwd(), "model": model, "version": version()})

    def sync(self, messages):
        self.events.usage = self.tap.last_usage  # the latest call's usage, beside the answer it paid for
        self.events.sync(messages)

    def event(self, kind, **fields):
        self.events.event(kind, **fields)

    def result(self, result, stats):
        import time
        counts = {"turns": stats.turns, "tool_calls": stats.tool_calls, "prompt_tokens": stats.prompt_tokens,
                  "completion_tokens": stats.completion_tokens, "cached_tokens": stats.cached_tokens,
                  "uncounted_turns": stats.uncounted, "seconds": round(time.monotonic() - stats.started, 2)}
        self.events.write({"type": "result", **result, "stats": counts})


def report_line(text):
    print(printable(text), file=sys.stderr, flush=True)


def session_keeper(*writers):
    """Where a subagent's messages go when it ends: the session file (and --json), whole, as one event."""
    writers = [w for w in writers if w]
    return (lambda messages: [w.event("subagent", messages=messages) for w in writers]) if writers else None


def course_command(args):
    from . import course
    if args.course_command == "list":
        return course.course_list()
    if args.course_command == "diff":
        return course.course_diff(args.a, args.b, include_docs=args.docs)
    if args.course_command == "files":
        return course.course_files(args.stage, args.role)
    if args.course_command == "quiz":
        return course.course_quiz(args.stage)
    if args.course_command == "start":
        return course.course_start(args.stage, args.dir, args.force)
    if args.course_command == "workspace":
        return course.course_workspace(args.name, args.dir, force=args.force)
    return course.course_check(args.stage, mine=args.mine, keyword=args.keyword)


def script_path(name_or_path):
    """The script file for --script: a path, or the name of a bundled example script."""
    from .course import bundled_script, bundled_script_names
    path = bundled_script(name_or_path)
    if os.path.exists(path):
        return path
    print(f"error: no script file {name_or_path!r}, and no bundled script of that name "
          f"(bundled: {', '.join(bundled_script_names())})", file=sys.stderr)
    return None
