"""Parsers: what the `tinyharness` command line looks like, one small function per subcommand.

The problem. Ten subcommands, each with its flags, help texts and usage line, make one argparse
parser of two hundred lines that no one can read, and whose cost every start pays: the flags of
`run` and `chat` take their defaults from the model client, the guards, the context and the sandbox,
and importing those for `tinyharness --help` would double its start-up time.

The mechanism. `build_parser` makes the top-level parser and asks each function of `SUBPARSERS`, in
the order --help lists them, to add its subcommand; each sets `usage` to its own parser, so a check
made later prints `usage: tinyharness run ...` rather than the top-level line. The flags of run and
chat (flags.py) are added only when COMMAND is that one (None: all of them). `eval` and `doctor` are
listed only: their own modules parse their whole command line.

What it cannot do. It only parses: whether a value is usable (a budget of 0, a URL with no host) is
checked by flags.py and the commands, after parsing.
"""
import argparse

from .console import printable
from .defaults import ORDER
from .flags import add_agent_flags, add_dialect_flags

# Only argparse and the flags module (standard library below it) are imported here: `tinyharness
# --help` and `--version` must not pay for requests, the sandbox and the loop (a fifth of a second).
# The flags of run and chat, whose defaults live in those modules, are added only when that command
# is asked for.

DEFAULTS = ORDER[0].upper() + ORDER[1:] + "."  # the defaults file (defaults.py)
EXIT_CODES = ("exit codes: 0 the model finished, 1 a runtime failure (e.g. no server), 2 a usage "
              "error, 3 stopped by a limit (not confirmed complete), 130 interrupted (Ctrl-C), 143 "
              "or 129 ended by SIGTERM or SIGHUP (cleaned up as after Ctrl-C)")


def add_run_flags(parser):
    parser.add_argument("task", help="what the agent should do, in plain words (-: read it from "
                                     "standard input)")
    parser.add_argument("--json", action="store_true",
                        help="for scripts, tinyharness's own (older) shape: write one JSON object "
                             "per line on standard output and "
                             "nothing else - each event as the session file has it, then, on every "
                             "exit (a usage error too), the last line: {\"type\": \"result\", "
                             "\"exit_code\", \"is_error\", \"answer\", \"session_id\", \"model\", "
                             "\"num_turns\", \"duration_ms\", \"usage\" (null: never reported), "
                             "\"stats\", ...}; the tool lines and warnings go to standard error. "
                             "Claude Code's shape: --output-format")
    add_claude_flags(parser)
    parser.add_argument("-c", "--continue", dest="continue_session", action="store_true",
                        help="go on with the latest session started in this folder: TASK is its "
                             "next message")
    parser.add_argument("-r", "--resume", metavar="ID",
                        help="go on with the session ID (`tinyharness sessions` lists them)")
    add_agent_flags(parser)
    add_dialect_flags(parser)


def add_claude_flags(parser):
    """The flags of Claude Code's scripts: -p, --output-format, --verbose (claude_output.py)."""
    parser.add_argument("-p", "--print", action="store_true",
                        help="Claude Code's print mode: the answer alone on standard output (as "
                             "--output-format text), everything else on standard error; "
                             "`tinyharness -p TASK` is `tinyharness run -p TASK`")
    parser.add_argument("--output-format", choices=["text", "json", "stream-json"],
                        help="Claude Code's output, as `claude -p` writes it: text (the answer "
                             "alone), json (one result object: \"type\": \"result\", \"subtype\" "
                             "(success, error_max_turns, error_during_execution), \"result\", "
                             "\"is_error\", \"num_turns\", \"duration_ms\", \"duration_api_ms\", "
                             "\"session_id\", \"usage\", \"total_cost_usd\" (0: a local model "
                             "has no price), \"permission_denials\", \"errors\"), stream-json "
                             "(one object per line: system/init, then the assistant and user "
                             "messages, then that result)")
    parser.add_argument("--verbose", action="store_true",
                        help="accepted for Claude Code's command lines (its stream-json needs it); "
                             "changes nothing here")


def print_mode(argv):
    """`tinyharness -p TASK` (Claude's `claude -p`): a line naming no command but holding -p or
    --print is run's."""
    before = argv[:argv.index("--")] if "--" in argv else argv
    if argv[:1] and argv[0] not in COMMAND_NAMES and ("-p" in before or "--print" in before):
        return ["run", *argv]
    return argv


def port_number(text):
    """--port: checked before any socket is opened, so a typo is a usage error, not a traceback."""
    port = int(text) if text.strip().isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number from 1 to 65535 (0 or "
                                         "none: any free port)")
    return port


def version():
    from . import __version__
    return f"tinyharness {__version__}"


class UsageExit(SystemExit):
    """argparse's usage error (exit 2), carrying its words to `main` for the --json result line."""

    def __init__(self, message, code=2):
        super().__init__(code)
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error carries its words (UsageExit); the subcommands' parsers
    are of the same class."""

    def error(self, message):
        try:
            super().error(printable(message))  # a flag's value can carry an escape sequence
        except SystemExit as e:
            raise UsageExit(message, e.code) from None


def build_parser(command=None):
    """The whole command line; the flags of run and chat only when COMMAND is that one (None:
    all)."""
    parser = Parser(
        prog="tinyharness",
        description="A small agent harness for local models. The current folder is the agent's "
                    "workspace.",
        epilog="Start with `tinyharness demo` (no model server needed), then `tinyharness run "
               "\"TASK\"` against Ollama (`ollama serve`, `ollama pull qwen3:8b`). For Claude "
               "Code's scripts: `tinyharness -p TASK --output-format json` (see `run --help`). "
               + EXIT_CODES + ".")
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_parser in SUBPARSERS:  # in the order --help lists them
        add_parser(sub, command)
    return parser


def add_run_parser(sub, command):
    run = sub.add_parser("run", help="run the agent on a task in the current folder",
                         epilog=f"{DEFAULTS} {EXIT_CODES}",
                         description="Run the agent on TASK, using the current folder as its "
                                     "workspace.")
    if command in (None, "run"):
        add_run_flags(run)
    # its own checks print `usage: tinyharness run ...`, not the top-level line
    run.set_defaults(usage=run)


def add_chat_parser(sub, command):
    chat = sub.add_parser("chat", help="a conversation with the agent in the current folder "
                                       "(sessions are kept)",
                          description="Talk with the agent in the current folder: each message "
                                      "runs the same loop, tools, hooks and guards as `run`, with "
                                      "its own --max-turns and --max-seconds. /help inside lists "
                                      "the commands. With standard input not a terminal, each line "
                                      "is one message.", epilog=f"{DEFAULTS} {EXIT_CODES}")
    if command in (None, "chat"):
        add_chat_flags(chat)
        add_agent_flags(chat)
    chat.set_defaults(usage=chat)


def add_mcp_parser(sub, command):
    mcp_parser = sub.add_parser("mcp", help="the MCP servers this folder would start: `mcp list` "
                                            "shows their tools",
                                description="List the configured MCP servers (.mcp.json, "
                                            ".vscode/mcp.json, .tinyharness/mcp.json, "
                                            "~/.config/tinyharness/mcp.json, --mcp), whether each "
                                            "is trusted, and the tools each offers (trusted "
                                            "servers are started to ask them).")
    mcp_parser.add_argument("mcp_command", choices=["list"], metavar="list",
                            help="list servers and their tools")
    mcp_parser.add_argument("--mcp", action="append", default=[], metavar="NAME=COMMAND",
                            help="one more server, as for run")
    mcp_parser.set_defaults(usage=mcp_parser)


def add_hooks_parser(sub, command):
    hooks = sub.add_parser("hooks", help="the command hooks this folder would run: `hooks list` "
                                         "shows them",
                           description="List the command hooks of your own files "
                                       "(~/.claude/settings.json, "
                                       "~/.config/tinyharness/hooks.json) and of this folder's "
                                       "(.claude/settings.json, .claude/settings.local.json, "
                                       ".tinyharness/hooks.json): the file each comes from, "
                                       "whether it is trusted, its event and matcher, where it "
                                       "starts and whether it runs in the sandbox. Nothing is run.")
    hooks.add_argument("hooks_command", choices=["list"], metavar="list", help="list the hooks")
    hooks.set_defaults(usage=hooks)


def add_sessions_parser(sub, command):
    sessions = sub.add_parser("sessions", help="list the saved sessions: id, turns, folder, first "
                                               "task",
                              description="List the sessions in "
                                          "$XDG_DATA_HOME/tinyharness/sessions/ (else "
                                          "~/.local/share/tinyharness/sessions/), newest first, "
                                          "the newest 50 unless --all; the id starts with the UTC "
                                          "time it was started. `chat --resume ID` and `view ID` "
                                          "take the id as listed.")
    sessions.add_argument("--all", action="store_true",
                          help="list every session, not only the newest 50")
    sessions.add_argument("--here", action="store_true",
                          help="only the sessions started in the current folder")
    sessions.add_argument("--json", action="store_true",
                          help="for scripts: one JSON object per session and line (id, turns, "
                               "folder, model, first_task), newest first; nothing else on standard "
                               "output")
    sessions.set_defaults(usage=sessions)


def add_view_parser(sub, command):
    view = sub.add_parser("view", help="turn a session or a --transcript file into one HTML page",
                          description="Write a self-contained HTML page (no network, no external "
                                      "files) showing FILE's turns, tool calls, results, cuts, "
                                      "summaries and tokens per turn; print its path.")
    view.add_argument("file", metavar="FILE", help="a session (.jsonl) or a --transcript (.json) "
                                                   "file, or a session id as `tinyharness "
                                                   "sessions` lists it")
    view.add_argument("-o", "--output", metavar="PATH",
                      help="where to write the page (default: FILE with .html)")
    view.add_argument("--open", action="store_true", help="open the page in the web browser")
    view.set_defaults(usage=view)


def add_demo_parser(sub, command):
    demo = sub.add_parser("demo", help="the notes task end to end, with the model's turns replayed "
                                       "(no server needed)",
                          description="Copy examples/notes to a temporary folder and run the real "
                                      "loop and tools on it, against a scripted server that "
                                      "replays the model's five turns. The folder is removed at "
                                      "the end unless --keep is given.")
    demo.add_argument("--keep", action="store_true",
                      help="keep the demo's workspace folder and say where it is")
    demo.set_defaults(usage=demo)


def add_fake_server_parser(sub, command):
    fake = sub.add_parser("fake-server", help="serve scripted model replies on 127.0.0.1 for your "
                                              "own tests",
                          description="An OpenAI-compatible server that answers from a JSON script "
                                      "of replies, plays the eval's scripted models, or plays a "
                                      "vision model.")
    replies = fake.add_mutually_exclusive_group(required=True)
    replies.add_argument("--script", metavar="FILE|NAME",
                         help="JSON file: a list of replies; or the name of a bundled one (notes, "
                              "self-rescue, verify: examples/NAME.script.json)")
    replies.add_argument("--eval-models", action="store_true",
                         help="play the eval's scripted models competent, liar and clumsy, chosen "
                              "by the request's model name (for `python -m m7_eval.eval --base-url "
                              "URL`)")
    replies.add_argument("--vision", action="store_true",
                         help="play a vision model that names the colours of the halves of each "
                              "PNG it is sent")
    replies.add_argument("--ollama", nargs="?", const="healthy", metavar="PERSONALITY",
                         choices=["healthy", "no-model", "no-tools", "no-usage"],
                         help="play Ollama (native /api/* and /v1) with a model that calls the "
                              "first tool it is offered; PERSONALITY: healthy (default), no-model, "
                              "no-tools, no-usage")
    fake.add_argument("--drop-images", action="store_true",
                      help="never see images, like Ollama with gemma4 e2b/e4b (try the arrival "
                           "warning)")
    fake.add_argument("--guess", action="store_true",
                      help="with --vision: given no picture, guess the colours from a file name in "
                           "the request, else red and blue, instead of saying it sees none")
    fake.add_argument("--context-window", type=int, metavar="TOKENS",
                      help="the server's window: past it, an HTTP 400 like llama-cpp-python, or "
                           "with --truncate a silent cut like Ollama's")
    fake.add_argument("--truncate", action="store_true",
                      help="with --context-window: drop the oldest messages and answer as if "
                           "nothing happened, as Ollama does (try m5's [context] watch)")
    fake.add_argument("--port", type=port_number, default=0,
                      help="port to listen on, 1 to 65535 (default: any free port)")
    fake.set_defaults(usage=fake)


def add_models_parser(sub, command):
    """`models`: the server's models (model_list.py), the current one marked."""
    models = sub.add_parser("models", help="list the server's models, the current one marked *",
                            description="List the models the server has, one a line, `* ` before "
                                        "the one a run would use: Ollama's /api/tags, else the "
                                        "OpenAI-compatible /v1/models. " + DEFAULTS)
    if command in (None, "models"):
        import os

        from .endpoint import add_base_url_flag
        from .llm import DEFAULT_MODEL
        from .llm.ollama import API_CHOICES
        models.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                            help="the model to mark as current (env TINYHARNESS_MODEL, default "
                                 "%(default)s)")
        add_base_url_flag(models)
        models.add_argument("--api", choices=API_CHOICES, help="the dialect, as for run (env "
                            "TINYHARNESS_API, default %(default)s)",
                            default=os.environ.get("TINYHARNESS_API", "auto"))
    models.set_defaults(usage=models)


def add_completion_parser(sub, command):
    """`completion`: a shell's completion script, made from this parser (completion.py)."""
    completion = sub.add_parser("completion", help="print a completion script for bash, zsh or "
                                                   "fish",
                                description="Print the script that completes tinyharness's "
                                            "commands, flags and their values in SHELL. bash: "
                                            "`source <(tinyharness completion bash)` (in "
                                            "~/.bashrc); zsh: `source <(tinyharness completion "
                                            "zsh)` (in ~/.zshrc); fish: `tinyharness completion "
                                            "fish > ~/.config/fish/completions/tinyharness.fish`.")
    completion.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell")
    completion.set_defaults(usage=completion)


def add_eval_and_doctor_parsers(sub, command):
    """Listed in --help only: `dispatch` hands their whole command line to their own parsers."""
    sub.add_parser("eval", add_help=False, help="measure models or harness settings on five tasks, "
                                                "judged by the end state (`tinyharness eval "
                                                "--help`)")
    sub.add_parser("doctor", add_help=False, help="check the server and model before a run: "
                                                  "reachable, pulled, tools, context, a real tool "
                                                  "call (`tinyharness doctor --help`)")


def add_course_parser(sub, command):
    course = sub.add_parser("course", help="the learner's companion: list, diff, files, quiz, "
                                           "start, hint, check, workspace",
                            description="Follow the course: see your progress, diff two stages, "
                                        "take a quiz, write a stage's key functions yourself, run "
                                        "a stage's tests, copy a fresh example workspace for a "
                                        "lesson's Try it.")
    course_sub = course.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    add_course_reading(course_sub)
    add_course_practice(course_sub)
    add_course_hint(course_sub)


def add_course_reading(course_sub):
    """list, diff, files, quiz: the actions that read the course."""
    course_sub.add_parser("list", help="the stages, one line each, with your quiz and exercise "
                                       "progress",
                          description="List the stages, one line each, with your best quiz score "
                                      "and whether your exercise passed; 'Next:' says what to do "
                                      "next.")
    diff = course_sub.add_parser("diff", help="a unified diff of two stages' code",
                                 description="Show what the later stage's lesson changed: a "
                                             "unified diff of the two stages' code (with --docs, "
                                             "their README and quiz too).")
    diff.add_argument("a", help="a stage, e.g. m0")
    diff.add_argument("b", help="a later stage, e.g. m1")
    diff.add_argument("--docs", action="store_true", help="include README.md and QUIZ.md")
    diff.add_argument("--solutions", action="store_true",
                      help="show the bodies of the exercise functions too (hidden until your copy "
                           "passes `course check STAGE --mine DIR`)")
    files = course_sub.add_parser("files", help="a stage's files by role: lesson, armour, cli",
                                  description="List a stage's files, lesson first: the lesson "
                                              "(what the README teaches), the armour (read after "
                                              "the lesson, when a real server surprises you) and "
                                              "the command line, with their lengths. With a role, "
                                              "only that role's paths, one a line.")
    files.add_argument("stage", help="a stage, e.g. m1")
    only = files.add_mutually_exclusive_group()
    for role in ("lesson", "armour", "cli"):
        only.add_argument(f"--{role}", dest="role", action="store_const", const=role,
                          help=f"only the {role} files")
    quiz = course_sub.add_parser("quiz", help="take a stage's three-question quiz",
                                 description="Take a stage's three-question quiz: type a letter "
                                             "and Enter per question (Ctrl-D stops). A finished "
                                             "attempt is recorded; `course list` shows your best "
                                             "score.")
    quiz.add_argument("stage", help="a stage, e.g. m1")
    quiz.add_argument("--before", action="store_true",
                      help="only the questions that predict what the stage's Try-it shows, to take "
                           "before you run it; the same command without --before asks the rest")


def add_course_hint(course_sub):
    """hint: the exercise's hints, one step at a time."""
    hint = course_sub.add_parser(
        "hint", help="a hint for a stage's exercise, in three steps",
        description="A hint for each function of a stage's exercise, one step at a time: 1 the "
                    "rule, in words; 2 the shape (names, inputs, outputs); 3 an outline, not the "
                    "code. Without N, the next step you have not seen.")
    hint.add_argument("stage", help="a stage, e.g. m3")
    hint.add_argument("step", metavar="N", nargs="?", type=int, help="the step: 1, 2 or 3")


def add_course_practice(course_sub):
    """start, check, workspace: the actions that write a copy, grade it, or give a fresh
    workspace."""
    start = course_sub.add_parser("start", help="copy a stage with its lesson's functions left for "
                                                "you to write",
                                  description="Write your copy of a stage into DIR/<stage folder>: "
                                              "the same code, except that the functions the lesson "
                                              "is about raise NotImplementedError for you to fill "
                                              "in (the stage README's 'Your turn' says what to "
                                              "write). Then: course check STAGE --mine DIR.")
    start.add_argument("stage", help="a stage, e.g. m3")
    start.add_argument("dir", metavar="DIR", nargs="?", default=".",
                       help="the parent folder of your copy (default: here)")
    start.add_argument("--force", action="store_true",
                       help="replace an existing copy (your changes are lost)")
    check = course_sub.add_parser("check", help="run the tests of one stage, or grade your copy "
                                                "with --mine",
                                  description="Run the tests of one stage. With --mine, run every "
                                              "test case of the stage against your copy of it: "
                                              "its own lesson's first (a verdict in seconds), "
                                              "then the rest; failures with one cause are grouped "
                                              "under it, each told as its scenario and what your "
                                              "code did; 'done' only when all pass (never with "
                                              "-k).")
    check.add_argument("stage", help="a stage, e.g. m3")
    check.add_argument("--mine", metavar="DIR",
                       help="your copy: the folder `course start` wrote (or its parent)")
    check.add_argument("-k", dest="keyword", metavar="EXPRESSION",
                       help="only the tests whose names match, as pytest's -k (e.g. attacks)")
    workspace = course_sub.add_parser(
        "workspace", help="copy a fresh example workspace (notes, images, empty) to a new folder",
        description="Copy examples/NAME to DIR for a lesson's Try it (`empty`: an empty folder). "
                    "DIR must not exist yet (a copy into an old run's folder would mix its files "
                    "with the example's).")
    workspace.add_argument("name", metavar="NAME", help="the example: notes, images, or empty")
    workspace.add_argument("dir", metavar="DIR", help="a new folder, e.g. /tmp/notes-m1")
    workspace.add_argument("--force", action="store_true", help="replace DIR if it exists")


def add_undo_parsers(sub, command):
    """`checkpoints` and `undo`: the changes the last run made here, and putting them back
    (checkpoints/commands.py)."""
    listing = sub.add_parser("checkpoints", help="the changes the last run made in the current "
                                                 "folder: time, the call, the paths it changed",
                             description="List the checkpoints of the last run in the current "
                                         "folder that made a change not yet undone, kept in "
                                         "$XDG_DATA_HOME/tinyharness/checkpoints/.")
    listing.set_defaults(usage=listing)
    undo = sub.add_parser("undo", help="put the current folder back as it was before the last "
                                       "run's last change (or change N)",
                          description="Put the current folder back as it was before the last "
                                      "change of the last run (files, modes, links, .git "
                                      "included): deleted and overwritten files come back, files "
                                      "it created go. A file you changed after the run is kept "
                                      "and named. Run it again to go one change further back.")
    undo.add_argument("--to", type=int, metavar="N",
                      help="back to before change N (`tinyharness checkpoints` numbers them)")
    undo.add_argument("--force", action="store_true",
                      help="also put back the files you changed after the run")
    undo.set_defaults(usage=undo)


# the words that name a command (build_parser's subcommands; tests/test_claude_output.py checks)
COMMAND_NAMES = ("run", "chat", "mcp", "hooks", "sessions", "view", "demo", "fake-server", "eval",
                 "doctor", "models", "course", "checkpoints", "undo", "completion")

SUBPARSERS = (add_run_parser, add_chat_parser, add_mcp_parser, add_hooks_parser,
              add_sessions_parser, add_view_parser, add_demo_parser,
              add_fake_server_parser, add_eval_and_doctor_parsers, add_models_parser,
              add_course_parser, add_undo_parsers, add_completion_parser)


def add_chat_flags(parser):
    """chat's own flags; the agent's flags are run's (flags.add_agent_flags), and so are --api and
    --think."""
    # here: chat's defaults, loaded only when chat's flags are
    from .chat.compact import COMPACT_AT, KEEP_TURNS
    add_dialect_flags(parser)
    parser.add_argument("task", nargs="?", metavar="MESSAGE", help="a first message (optional)")
    parser.add_argument("-c", "--continue", dest="continue_session", action="store_true",
                        help="go on with the latest session started in this folder")
    parser.add_argument("-r", "--resume", metavar="ID",
                        help="go on with the session ID (`tinyharness sessions` lists them)")
    parser.add_argument("--compact-at", type=float, default=COMPACT_AT, metavar="FRACTION",
                        help="summarise the history when the last prompt passes this fraction of "
                             "the context window (default %(default)s)")
    parser.add_argument("--keep-turns", type=int, default=KEEP_TURNS, metavar="N",
                        help="user turns kept whole after a summary (default %(default)s)")
    parser.add_argument("--json", action="store_true",
                        help="for scripts: one JSON object per line on standard output and nothing "
                             "else - a start line, each event as the session file has it, and "
                             "last, on every exit, a result line (as run --json's, with "
                             "\"messages\" and the whole chat's counts); answers, tool lines and "
                             "questions go to standard error")
