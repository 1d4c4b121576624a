"""The `tinyharness` command: one word picks what runs (run, chat, mcp, sessions, view, demo,
fake-server, eval, doctor, course), and the rest of the line is that command's.

The problem. A command people type, and scripts call in loops, must answer `--help` and `--version`
at once, and must refuse a bad line (a stray word, a URL with no host, a budget of 0) before any
model call is paid for, with exit code 2 and the usage line of the command that was asked for. Yet
the commands need heavy parts: `requests`, the loop, the sandbox, the MCP client.

The mechanism. Only the console, the flags and the parsers (none of them loads the model client) are
imported at the top. `build_parser` (parsers.py) adds one subcommand per small function, and the
flags of run and chat only when that command was asked for. `dispatch` checks the line, then looks
the command up in `COMMANDS`; each entry imports what it needs when it runs (eval and doctor parse
their own flags and get the line whole). `run_command` sets up the workspace's hooks, MCP servers,
sandbox and client, and `start_run` runs the loop once, with the session file and --json (or
Claude Code's output: -p, --output-format, claude_output.py) around it, and turns how it ended into
an exit code.

What it cannot do. The checks here see only the command line and the files it names: a server that
is down or a model that cannot call tools is found by the run itself, or by `tinyharness doctor`.
"""
import contextlib
import io
import os
import sys
import time

from .claude_output import choose, missing_result
from .console import StreamPrinter, printable, warn
from .defaults import apply as apply_defaults
from .defaults import refusal
from .flags import UsageError, approver, from_command_line, usage_problem
from .parsers import UsageExit, build_parser, print_mode, version
from .run_end import Ending, Terminated, ending_signals, result_line, write_missing_result

# Only the console, the flags and the parsers are imported here (the standard library below them):
# `tinyharness --help` and `--version` must not pay for requests, the sandbox and the loop (a fifth
# of a second). Each command imports what it needs when it runs.


def main(argv=None):
    """The command's exit code. With `run --json`, whatever the exit (a usage error, a signal), the
    last line on standard output is the result (run_end.py)."""
    argv = print_mode(sys.argv[1:] if argv is None else list(argv))  # `tinyharness -p TASK`: run
    started, code = time.monotonic(), 1
    ending = Ending()
    try:
        # SIGTERM and SIGHUP end a run or a chat as Ctrl-C does (run_end.py); eval and the rest keep
        # the default
        with ending_signals() if argv[:1] in (["run"], ["chat"]) else contextlib.nullcontext():
            code = guarded(argv, ending)
    except SystemExit as e:  # argparse's usage errors (2) and --help (0)
        if isinstance(e, UsageExit):
            ending.usage_error = e.message
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        raise
    except Terminated as e:  # before a run could catch it: in set-up, at a trust question
        warn(f"Terminated ({e.name}).")
        code = e.code
    finally:
        if code != 0:  # a finished run wrote its own; --help and --version are no run
            missing_result(argv, code, started, ending)  # --output-format json, stream-json
            write_missing_result(argv, code, started, ending)
    return code


def guarded(argv, ending):
    try:
        return dispatch(argv, ending)
    except Terminated:
        raise
    except KeyboardInterrupt:  # Ctrl-C anywhere (a run catches its own first, to print its stats)
        warn("Interrupted.")
        return 130
    except BrokenPipeError:  # `tinyharness course diff m0 m1 | head` closed the pipe: not an error
        # so the exit flush stays quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit:  # argparse's --help and usage errors: what they say is the answer
        raise
    # RestoreFailed is a BaseException, so no tool's `except Exception` hides it
    except BaseException as e:
        from .sandbox import RestoreFailed  # here, not at the top: --help must not load the sandbox
        if not isinstance(e, RestoreFailed):
            raise
        warn(f"error: {e}")  # .git may be left changed: the user is told, never the model
        return 1


def dispatch(argv, ending):
    """Parse ARGV and run the command it names (ENDING handed to it as args.ending); its exit
    code."""
    # the eval has its own flags and --help: hand it everything
    if argv[:1] == ["eval"]:
        from .eval import main as eval_main
        return eval_main(argv[1:], prog="tinyharness eval")
    if argv[:1] == ["doctor"]:                # so does the doctor
        from .doctor import main as doctor_main
        return doctor_main(argv[1:])
    # the command's flags only
    parser = build_parser(command := next((a for a in argv if not a.startswith("-")), ""))
    # the defaults file's values (defaults.py), below the flags and the variables
    problem = (apply_defaults(parser, os.getcwd(), warn) if command in ("run", "chat", "models")
               else None)
    args, extra = parser.parse_known_args(argv)
    args.ending = ending
    usage = getattr(args, "usage", parser)  # the subcommand's own parser, where it set one
    if refused := refusal(problem, args):
        usage.error(refused)
    if args.command in ("run", "chat") and (problem := usage_problem(args, extra)):
        usage.error(problem)
    if extra:
        usage.error(f"unrecognized arguments: {' '.join(extra)}")
    # a terminal that cannot show a character gets '?', not a crash
    if isinstance(sys.stdout, io.TextIOWrapper):  # not a test's stand-in
        sys.stdout.reconfigure(errors="replace")
    if args.command not in COMMANDS:  # `tinyharness` alone
        parser.print_help()
        return 2
    return COMMANDS[args.command](args, usage)


def run_command(args, parser):
    """`tinyharness run`; with --json, standard output is the JSON lines' alone: everything else the
    run prints there (a trust question, a permission prompt) goes to standard error. So with -p and
    --output-format (claude_output.py): standard output is the answer's, or Claude's lines'."""
    args.output_format = choose(args, parser)
    if not args.json:
        return prepare_run(args, parser)
    args.json_out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return prepare_run(args, parser)


def prepare_run(args, parser):
    """The task and the run's own checks, then what the run needs from its command line
    (flags.from_command_line, the one way `run` and `chat` share: the checks, the sandbox, the
    workspace's hooks and MCP servers, the client, the settings); then the run. A usage error is
    said here in one line, exit 2."""
    from .hooks import ask_user
    from .sessions import SessionError
    from_stdin = checked_task(args, parser)
    # stdout is for the JSON lines alone: the tool lines and a streamed answer go to stderr
    if args.json:
        stream, printer = bool(args.stream), StreamPrinter(sys.stderr)
    else:
        stream, printer = (sys.stdout.isatty() if args.stream is None
                           else args.stream, StreamPrinter(sys.stdout))
    prompt = Prompt(printer)
    # the workspace's hooks and MCP servers: trusted by the user (never by --yes) before anything
    # runs
    try:
        ready = from_command_line(args, parser, lambda q: ask_user(printable(q)), printer, stream,
                                  opening=lambda: run_opening(args, from_stdin),
                                  approve=approver(args, prompt))
    except (UsageError, SessionError) as e:
        return usage_failure(args, str(e))
    return start_run(args, ready.client, ready.settings, printer, stream, prompt, ready.opened)


def checked_task(args, parser):
    """Whether the task came on standard input; the task read, the run's own usage errors found
    (exit 2) before anything starts."""
    from_stdin = args.task == "-"  # `echo "fix the tests" | tinyharness run -`
    args.task = sys.stdin.read() if from_stdin else args.task
    if not args.task.strip():
        parser.error("the task is empty")
    if args.continue_session and args.resume:
        parser.error("give --continue or --resume ID, not both")
    if (args.continue_session or args.resume) and args.no_session:
        parser.error("--continue and --resume go on with a session: they cannot be used with "
                     "--no-session")
    return from_stdin


def run_opening(args, from_stdin):
    """The run's own step once the command line is found usable: what was piped goes with the task,
    and the session --continue or --resume names is opened (resumed_session)."""
    from . import piped
    if not from_stdin:  # `cat log | tinyharness run "explain this"`: the log goes with the task
        args.task = piped.with_task(args.task)
    return resumed_session(args)


class Prompt:
    """A run's permission prompt: the question on a fresh line, and a count of how often it asked
    and found nobody there to answer (nothing_allowed reads them)."""

    def __init__(self, printer):
        self.printer, self.calls, self.unanswered = printer, 0, 0

    def __call__(self, question):
        from .hooks import ask_user
        self.printer.end_line()  # a streamed line still open would run into the question
        self.calls += 1
        return ask_user(question, on_eof=self.nobody)  # made printable there, its offer kept

    def nobody(self):
        self.unanswered += 1


def resumed_session(args):
    """(writer, messages) of the session --continue or --resume names (started in this folder), or
    (None, None). Raises SessionError."""
    from . import sessions
    if not (args.continue_session or args.resume):
        return None, None
    path = sessions.find(args.resume) if args.resume else sessions.latest_for(os.getcwd())
    if path is None:
        raise sessions.SessionError(f"no session was started in {os.getcwd()} yet (`tinyharness "
                                    "sessions` lists them)")
    session, writer = sessions.resume(path, sys.stderr)  # locked: one writer per session
    folder = session.header.get("folder")
    if folder != os.path.realpath(os.getcwd()):
        writer.close()
        raise sessions.SessionError(f"session {session.id} was started in {folder}: run it from "
                                    "there")
    writer.notice(f"resumed in {folder}")
    return writer, session.messages()


def usage_failure(args, problem):
    """Exit code 2, said on stderr (and in the --json result line)."""
    args.ending.usage_error = problem
    warn(f"error: {problem}")
    return 2


def start_run(args, client, settings, printer, stream, prompt, resumed):
    """Run the loop once, with the session file and --json around it; what the user is shown at the
    end. `settings`: the command line's (settings_from_args), given the session's callbacks here."""
    from dataclasses import replace

    from .llm import LLMError
    from .loop import Stats, Stopped, run_agent
    from .sessions import TranscriptWriter, keeper
    stats, hands = Stats(), settings.extensions
    client, session, lines = open_records(args, client, hands, resumed)
    result = {"exit_code": 1, "answer": None}
    try:
        # the session, --json, --transcript
        on_update = keeper(session, lines, TranscriptWriter(args.transcript))
        settings = (replace(settings, on_update=on_update,
                            on_subagent=session_keeper(session, lines)))
        answer = run_agent(args.task, client, os.getcwd(), settings, stats,
                           messages=resumed[1] or None)  # --continue
        printer.end_line()
        result.update(exit_code=0, answer=answer)
        # streamed: not twice
        if not args.json and (not stream or answer.strip() != printer.since_tool.strip()):
            print(printable(answer))
        return nothing_allowed(args, hands, prompt, result)
    except (LLMError, Stopped, KeyboardInterrupt) as e:
        printer.end_line()
        return run_failed(e, args, result, settings.warn)
    # `... | head` closed the output: the run cannot show its work, so it stops
    except BrokenPipeError:
        lines = None  # nor its --json result
        return output_closed()
    finally:
        hands.close()  # MCP servers end on every path, Ctrl-C included
        settings.warn(stats.line())
        if lines:
            lines.result(result, stats)
        if session:
            session.end("run")
            session.close()


def nothing_allowed(args, hands, prompt, result):
    """0, or 3 for a run with nobody to approve (no terminal, no --yes, no allow rule) whose every
    write and command was DENIED, each question met by the end of input: the model's answer cannot
    be about work it was never allowed to do, so the run is "not confirmed complete", as a limit
    would leave it (a script must not read exit 0 as done). A "n" typed at the terminal is
    somebody's answer: that run ends as usual."""
    if args.yes or (hands.rules and hands.rules.allows_any()) or not prompt.calls or \
            prompt.unanswered < prompt.calls:
        return 0
    why = (f"nothing was allowed: the {prompt.calls} call(s) that needed approval (a write, a "
           "command, a URL) were DENIED, as nobody answered at a terminal (there was none, or its "
           "input ended) and neither --yes nor an allow rule was given")
    result.update(exit_code=3, stopped=why)
    if not args.json:
        print(f"Stopped: {why}. The task is NOT confirmed complete.")
    return 3


def open_records(args, client, hands, resumed):
    """(client, session, lines): the session file a run is appended to (none with --no-session;
    `resumed`: the (writer, messages) of --continue or --resume) and the --json lines; the client
    wrapped so that each call's usage is noted beside its answer."""
    from .sessions import UsageTap, start_or_warn
    resumed, history = resumed
    session = (resumed
               or (None if args.no_session else start_or_warn(os.getcwd(), args.model, sys.stderr)))
    if session and hands.hooks:
        hands.hooks.session_id = session.id  # a hook can tell one run's events from another's
        hands.hooks.transcript_path = str(session.path)
    if session or args.json:
        client = UsageTap(client, session)  # the session notes each call's usage beside its answer
    if getattr(args, "output_format", None):  # Claude Code's shape, not --json's (claude_output.py)
        from .claude_output import ClaudeLines
        lines = ClaudeLines.for_run(args.output_format, args, client, session, hands)
    else:
        lines = (JsonLines(args.json_out, client, session, args.model, args.ending) if args.json
                 else None)
    if lines and history:
        lines.events.written = len(history)  # the events of this run, not the history again
    return client, session, lines


def output_closed():
    """Exit code 1, said on stderr, for a run whose standard output was closed."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # or the exit flush fails again
    warn("error: the output was closed (e.g. by `| head`), so the run stopped.")
    return 1


def run_failed(e, args, result, warn=warn):
    """The exit code of a run that did not finish, and what it says: a server's error (1), a limit
    that stopped it (3), Ctrl-C (130)."""
    from .llm import LLMError
    if isinstance(e, LLMError):
        result.update(error=str(e))
        warn(f"error: {e}")  # made printable: the server's own words can be in it
        return 1
    # SIGTERM, SIGHUP: cleaned up as after Ctrl-C, exit 128 + the signal
    if isinstance(e, Terminated):
        result.update(exit_code=e.code, error=f"terminated by {e.name}")
        warn(f"Terminated ({e.name}).")
        return e.code
    if isinstance(e, KeyboardInterrupt):
        result.update(exit_code=130, error="interrupted")
        warn("Interrupted.")
        return 130
    # Stopped: a limit, or a hook that refused the task
    result.update(exit_code=3, stopped=str(e), done=e.done)
    if not args.json:
        # the reason can quote the model
        print(printable(f"Stopped: {e}. The task is NOT confirmed complete."))
        print(printable(e.done))  # what was done so far, so the user knows where to pick up
    return 3


class JsonLines:
    """run --json: the events a session file gets, one JSON object per line on standard output, then
    a result object. Same shapes as the session file (sessions/__init__.py), so one reader serves
    both."""

    def __init__(self, out, tap, session, model, ending):
        from .sessions.writer import StreamWriter, now
        self.tap, self.events, self.ending = tap, StreamWriter(out), ending
        self.session_id, self.model = session.id if session else None, model
        self.events.write({"type": "start", "time": now(),
                           "session": session.id if session else None,
                           "folder": os.getcwd(), "model": model, "version": version()})

    def sync(self, messages):
        # the latest call's usage, beside the answer it paid for
        self.events.usage = self.tap.last_usage
        self.events.sync(messages)

    def event(self, kind, **fields):
        self.events.event(kind, **fields)

    def result(self, result, stats):
        # before writing: a closed output must not get a second try from main
        self.ending.written = True
        self.events.write(result_line(result, stats, self.session_id, self.model, stats.started))


def session_keeper(*writers):
    """Where a subagent's messages go when it ends: the session file (and --json), whole, as one
    event."""
    kept = [w for w in writers if w]
    return ((lambda messages: [w.event("subagent", messages=messages) for w in kept]) if kept
            else None)


def open_chat(args, usage):
    """`tinyharness chat`; with --json, standard output is the JSON lines' alone
    (chat/json_mode.py)."""
    from .chat import chat_command
    args.started = time.monotonic()
    if not args.json:
        return chat_command(args, usage)
    args.json_out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return chat_command(args, usage)


def list_mcp(args, usage):
    from .mcp.scopes import list_servers
    return list_servers(os.getcwd(), args.mcp, out=lambda text: print(printable(text), flush=True))


def list_hooks(args, usage):
    from .extensions import list_hooks as listing
    return listing(os.getcwd(), out=lambda text: print(printable(text), flush=True))


def list_sessions(args, usage):
    from .sessions import sessions_command
    return sessions_command(show_all=args.all, here=args.here, as_json=args.json)


def view_session(args, usage):
    from .view import view_command
    return view_command(args.file, args.output, args.open)


def replay_demo(args, usage):
    from .demo import run_demo
    return run_demo(keep=args.keep)


def fake_server(args):
    try:
        if args.ollama:
            from .testing.fake_ollama import serve as serve_ollama
            return serve_ollama(args.ollama, args.port)
        if args.eval_models:
            from .eval.evals.policies import serve as serve_eval_models
            return serve_eval_models(args.port)
        from .testing import main as fake_server_main
        source = ["--vision"] if args.vision else ["--script", script_path(args.script)]
        if source[-1] is None:
            return 2
        window = ["--context-window", str(args.context_window)] if args.context_window else []
        return (fake_server_main([*source, "--port", str(args.port), *window]
                                 + ["--drop-images"] * args.drop_images
                                 + ["--truncate"] * args.truncate + ["--guess"] * args.guess))
    except OSError as e:  # the port is taken, or below 1024 without the right to it
        warn(f"error: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}. Choose another "
             "--port, or leave it out to take any free port.")
        return 1


def course_command(args):
    from . import course
    if args.course_command == "list":
        return course.course_list()
    if args.course_command == "diff":
        return course.course_diff(args.a, args.b, include_docs=args.docs,
                                  solutions=args.solutions)
    if args.course_command == "files":
        return course.course_files(args.stage, args.role)
    if args.course_command == "quiz":
        return course.course_quiz(args.stage, before=args.before)
    if args.course_command == "start":
        return course.course_start(args.stage, args.dir, args.force)
    if args.course_command == "hint":
        return course.course_hint(args.stage, args.step)
    if args.course_command == "workspace":
        return course.course_workspace(args.name, args.dir, force=args.force)
    return course.course_check(args.stage, mine=args.mine, keyword=args.keyword)


def script_path(name_or_path):
    """The script file for --script: a path, or the name of a bundled example script."""
    from .course import bundled_script, bundled_script_names
    path = bundled_script(name_or_path)
    if os.path.exists(path):
        return path
    warn(f"error: no script file {name_or_path!r}, and no bundled script of that name "
         f"(bundled: {', '.join(bundled_script_names())})")
    return None


def list_models(args, usage):
    from .model_list import models_command
    return models_command(args)


def completion_script(args, usage):
    from .completion import script
    print(script(args.shell), end="")
    return 0


def checkpoints_command(args, usage):
    """`checkpoints` and `undo` (checkpoints/commands.py)."""
    from .checkpoints import commands
    return (commands.undo_command if args.command == "undo" else commands.list_command)(args, usage)


# Each command's function, given its arguments and its own parser (for usage errors); each imports
# what it needs.
COMMANDS = {"run": run_command, "chat": open_chat, "mcp": list_mcp, "hooks": list_hooks,
            "sessions": list_sessions, "view": view_session,
            "demo": replay_demo, "fake-server": lambda args, usage: fake_server(args),
            "course": lambda args, usage: course_command(args),
            "checkpoints": checkpoints_command, "undo": checkpoints_command,
            "models": list_models, "completion": completion_script}
