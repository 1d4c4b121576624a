"""Flags: the command-line pieces that `run`, `chat`, `doctor` and `eval` share, and their checks.

The problem. Four commands take a model, a base URL, budgets and a sandbox, and each must refuse a
bad value the same way: before the first model call, as a usage error (exit 2) that says what to
type instead, never as a traceback or a "Could not connect" twenty seconds later. When these pieces
lived in the `tinyharness` command's own module, the commands borrowed them back from the module
that starts them: an import circle, kept from breaking only by imports tucked inside functions.

The mechanism. This module sits below every command: it imports the console and the standard library
at the top, nothing that imports it back. `add_agent_flags` and `add_dialect_flags` add the shared
flags (their defaults come from the modules that use them: the client, the guards, the context, the
sandbox); `usage_problem`, `base_url_problem` and `check_agent_flags` find what makes a command line
unusable; `irregular_config` refuses a hooks or MCP file that is not a regular file;
`image_from_flag` reads --image through filedoor.py; `sandbox_from_args` builds the Sandbox the
flags ask for, with its warnings (and refuses a start folder the commands must not hold or be
inside): the one place a Sandbox is made. `from_command_line` is the one way `run` and `chat` get
what a run needs: the checks, the image, the sandbox, the hooks made with it and the MCP servers,
the client and the settings with the sandbox in them; what cannot start is a `UsageError` the
command says in its own way. `settings_from_args` is the one place a command line becomes a run's
settings (settings.RunSettings): each field is read from the flag of its name, so a new run knob is
two edits, its flag and its field; `approver` is the permission prompt the flags ask for, and
`client_from_args` returns the client and the context window its dialect chose (nothing is written
back onto the arguments). The modules the flags' defaults come from are imported inside the
functions, so that `tinyharness --help` does not pay for `requests`, the loop and the sandbox: that
is for speed, none of them imports this module.

What it cannot do. A check here sees only the command line and the files it names: a server that is
down, a model that was never pulled or cannot call tools is found by the run, or before it by
`tinyharness doctor`.
"""
import argparse
import os
import stat
import sys
from dataclasses import dataclass, fields
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from .console import warn

LONGEST = 10 ** 7  # seconds (about four months): a time limit's largest, past it clocks overflow


def usage_problem(args, extra):
    """What makes the command line unusable, found before the first model call (exit 2) rather than
    after the model's work is spent: stray words, a URL requests cannot use, a transcript path that
    cannot be written."""
    if extra:  # `... find the budget` without quotes: only "find" became the task
        # chat's message is optional: task may be None
        task = " ".join([args.task or "", *extra]).strip()
        quote = ("" if any(e.startswith("-") for e in extra)
                 else f'; put the task in quotes: "{task}"')
        return f"unrecognized arguments: {' '.join(extra)}{quote}"
    if problem := base_url_problem(args.base_url, getattr(args, "base_url_source", "--base-url")):
        return problem
    path = args.transcript
    # as filedoor.py will write it: no link on its way, a folder it may write in
    if path is not None:
        from .filedoor import check_writable
        try:
            check_writable(path)
        # '' or a folder, a missing folder, no permission, a symbolic link on the way
        except OSError as e:
            return (f"--transcript {path!r} cannot be written ({e.strerror}); for example "
                    "--transcript run.json")
    return None


def base_url_problem(base_url, source="--base-url"):
    """Why requests cannot use BASE_URL (a usage error, shared by run, chat, doctor and eval), or
    None. SOURCE: where it came from (the flag, or "env OLLAMA_HOST"...), named in the message."""
    from .llm import DEFAULT_BASE_URL
    # urlsplit and .port raise ValueError for 'http://[::1' or a port that is not a number up to
    # 65535
    try:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname or url.port == 0:
            raise ValueError
    except ValueError:
        where = ("--base-url" if source in ("--base-url", "default")
                 else f"--base-url (from {source})")
        return (f"{where} {base_url!r} is not an http(s) URL with a host (and a port from 1 to "
                f"65535); for example --base-url {DEFAULT_BASE_URL}")
    return None


def irregular_config(workspace):
    """A hooks or MCP file that is there but is not a regular file (a FIFO would block the read that
    loads it forever): the usage error that says so, or None."""
    from .hooks.commands import HOOK_FILES
    from .mcp.config import config_files
    for path in [*(os.path.join(workspace, name) for name in HOOK_FILES),
                 *map(str, config_files(workspace))]:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing (or unreadable: loading it says so)
        if not stat.S_ISREG(mode):
            return (f"{path} is not a regular file (a FIFO, a device or a folder), so it was not "
                    "read; remove it")
    return None


def add_dialect_flags(parser):
    """--api and --think, and the window from the model (tinyharness/llm/ollama.py explains the
    native dialect and the auto rule)."""
    from .llm.ollama import API_CHOICES
    parser.add_argument("--api", choices=API_CHOICES,
                        default=os.environ.get("TINYHARNESS_API", "auto"),
                        help="the server's dialect: openai (/v1/chat/completions), ollama "
                             "(Ollama's native /api/chat, which can set the context length), or "
                             "auto: Ollama's native API when the host answers /api/version and the "
                             "base URL is a bare host or ends in /v1 (env TINYHARNESS_API, default "
                             "%(default)s)")
    parser.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                        help="switch the model's thinking on or off (Ollama's native API; default: "
                             "the model's own)")
    # None: the model's own length with Ollama's native API (choose_dialect)
    parser.set_defaults(context_window=None)


def add_agent_flags(parser):
    """The flags `run` and `chat` share: the model, the budgets, the tools' permissions, the context
    (in this order in --help)."""
    from . import extensions
    add_model_flags(parser)
    add_record_flags(parser)
    add_tool_flags(parser)
    add_sandbox_flags(parser)
    add_checkpoint_flag(parser)
    add_window_flag(parser)
    extensions.add_flags(parser)


def add_model_flags(parser):
    """Which model, where, and how much of it one run may use."""
    from .endpoint import add_base_url_flag
    from .guards import MAX_SECONDS, MAX_TURNS
    from .llm import DEFAULT_MODEL, MAX_REPLY_TOKENS
    parser.add_argument("--model", default=os.environ.get("TINYHARNESS_MODEL", DEFAULT_MODEL),
                        help="model name (env TINYHARNESS_MODEL, default %(default)s)")
    add_base_url_flag(parser)
    parser.add_argument("--max-turns", type=int, default=MAX_TURNS,
                        help="most model calls in one run (default %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS, metavar="SECONDS",
                        help="stop before the next model call once this long has passed; what is "
                             "left is also the longest one model reply, one shell command, a hook "
                             "or an MCP call may take (default %(default)s)")
    parser.add_argument("--max-tokens", type=int, metavar="N",
                        help="stop before the next model call once the run has used N tokens, "
                             "prompt plus completion, as the server counted them (default: no "
                             "limit)")
    parser.add_argument("--max-reply-tokens", type=int, default=MAX_REPLY_TOKENS, metavar="N",
                        help="the most tokens one model reply may have (sent as max_tokens); a "
                             "reply cut there is not an answer: the model is told once, the second "
                             "cut stops the run (default %(default)s)")


def add_record_flags(parser):
    """What is kept of a run and how its answer is shown."""
    parser.add_argument("--transcript", metavar="PATH",
                        help="write the whole conversation as JSON to PATH")
    parser.add_argument("--no-session", action="store_true",
                        help="do not write the session file (by default every run and chat is "
                             "appended, event by event, to $XDG_DATA_HOME/tinyharness/sessions/, "
                             "else ~/.local/share/...)")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                        help="print the answer as it arrives (default: on when the output is a "
                             "terminal)")


def add_tool_flags(parser):
    """What the tools may do without asking, and how old tool results are cut."""
    from .context import DEFAULT_POLICY, POLICIES
    from .tools import SHELL_TIMEOUT
    parser.add_argument("--shell-timeout", type=float, default=SHELL_TIMEOUT, metavar="SECONDS",
                        help="kill a shell command (and all it started) after this long (default "
                             "%(default)s)")
    parser.add_argument("--yes", action="store_true",
                        help="approve every write and command that the hooks allow, without asking")
    parser.add_argument("--image", metavar="PATH_OR_URL",
                        help="attach an image (PNG, JPEG or WebP; a file or an http(s) URL) to the "
                             "task")
    parser.add_argument("--allow-image-urls", action="store_true",
                        help="let view_image fetch http(s) URLs the model chooses without asking, "
                             "even under --yes (by default each one is asked: the request leaves "
                             "your machine, and a URL can carry data out)")
    cutting = parser.add_mutually_exclusive_group()
    cutting.add_argument("--context-policy", choices=list(POLICIES), default=DEFAULT_POLICY,
                         help="how old tool results are cut before each model call (default "
                              "%(default)s: cap each result when it is added, stub old ones in one "
                              "batch past 75%% of the window; kind to the server's prompt cache). "
                              "sliding: the m5 stage's scissors, every turn")
    cutting.add_argument("--no-scissors", dest="context_policy", action="store_const", const="none",
                         help="send every tool result whole, however old: --context-policy none "
                              "(for A/B runs)")


def add_sandbox_flags(parser):
    """How shell commands are confined (sandbox/__init__.py explains the mechanism)."""
    parser.add_argument("--sandbox", choices=["on", "off"], default="on",
                        help="on (default): every shell command runs confined by the kernel "
                             "(Landlock, seccomp, resource limits; Linux 6.12 or later): it may "
                             "write only in the workspace and a private TMPDIR, read the system "
                             "and the workspace but nothing else of yours (no home folder; /tmp "
                             "and /run empty where user namespaces work), open no network socket, "
                             "signal or change no process outside, leave no process behind; "
                             "changes to what git runs (.git's config, hooks, links) and to "
                             ".tinyharness/ are undone. It does not stop a command from changing "
                             "anything inside the workspace. off: commands run unconfined (a "
                             "warning says so on every run); where the sandbox cannot run, shell "
                             "refuses until you choose off")
    parser.add_argument("--sandbox-read", action="append", default=[], metavar="PATH",
                        help="let sandboxed commands read (and run) PATH too, e.g. a toolchain in "
                             "your home folder (repeatable)")
    parser.add_argument("--sandbox-env", action="append", default=[], metavar="NAME",
                        help="pass the environment variable NAME on to sandboxed commands too "
                             "(repeatable); by default they get only PATH, HOME, LANG, LC_*, TERM, "
                             "TMPDIR, USER, LOGNAME, SHELL, TZ and PWD (SSH_AUTH_SOCK, TMUX, STY "
                             "and DBUS_SESSION_BUS_ADDRESS never)")
    parser.add_argument("--trust", action="store_true",
                        default=os.environ.get("TINYHARNESS_TRUST") == "1",
                        help="trust the workspace's hooks and MCP server files as they are "
                             "when the run starts, without the question (for CI: piped input "
                             "never answers it; also TINYHARNESS_TRUST=1); each is named on "
                             "stderr and not remembered, and a file the model changes later is "
                             "asked about again (refused without a terminal)")
    parser.add_argument("--workspace-anyway", action="store_true",
                        help="start even in a folder that holds your home folder, your config or "
                             "data folder or tinyharness itself, or that lies inside a folder "
                             "other programs read as settings or run from (XDG config, data, state "
                             "and cache folders, ~/.local/bin, every folder on PATH, ~/.ssh, "
                             "~/.gnupg): the model's commands may then change what runs outside "
                             "the sandbox later. Refused (exit 2) without it")


def add_checkpoint_flag(parser):
    """Whether the run keeps checkpoints (checkpoints/__init__.py explains them)."""
    parser.add_argument("--no-checkpoints", dest="checkpoints", action="store_false",
                        help="keep no checkpoints: by default, before each write, command or hook "
                             "the workspace is recorded (its .git included) in a store outside it, "
                             "so that `tinyharness undo` (chat: /undo, /rewind N) can put it back; "
                             "`tinyharness checkpoints` lists the changes")


def add_window_flag(parser):
    """The model's context length, which the context policies cut to."""
    from .context import CONTEXT_WINDOW
    from .llm.ollama import OLLAMA_WINDOW_CAP
    parser.add_argument("--context-window", type=int, default=CONTEXT_WINDOW, metavar="TOKENS",
                        help="the model's context length: the policies cut to fit it, and a "
                             f"warning says when the prompt nears it (default {CONTEXT_WINDOW}; "
                             "for `run` with Ollama's native API, the model's own length, at most "
                             f"{OLLAMA_WINDOW_CAP}, sent as num_ctx)")


def check_agent_flags(args, parser):
    """Usage errors in the flags `run` and `chat` share, found before the first model call (exit
    2)."""
    from . import extensions
    from .llm.ollama import API_CHOICES
    if args.max_turns < 1:
        parser.error("--max-turns must be 1 or more")
    if not 0 < args.max_seconds <= LONGEST:  # nan and inf fail too; past LONGEST clocks overflow
        parser.error(f"--max-seconds must be more than 0 and at most {LONGEST:,}")
    if not 0 < args.shell_timeout <= LONGEST:
        parser.error(f"--shell-timeout must be more than 0 and at most {LONGEST:,}")
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be 1 or more")
    if args.max_reply_tokens < 1:
        parser.error("--max-reply-tokens must be 1 or more")
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error("--max-tokens must be 1 or more")
    if args.api not in API_CHOICES:  # from TINYHARNESS_API, which argparse does not check
        parser.error(f"--api (or TINYHARNESS_API) must be one of {', '.join(API_CHOICES)}, not "
                     f"{args.api!r}")
    extensions.check_flags(args, parser)


def image_from_flag(source, workspace):
    """--image: (mime, bytes) of a file anywhere the user can read (the user chose it; the workspace
    limit is for the paths the *model* asks for), or of an http(s) URL. The file is read through
    filedoor.py: a name in the workspace the model made a link leading out (`shot.png -> a private
    picture`) is refused, as is a FIFO or device anywhere, and at most the image limit is read.
    ImageError says why."""
    from .filedoor import read_bytes
    from .imageload import MAX_IMAGE_BYTES, ImageError, checked_type, is_url, load_image, too_big
    if not source or is_url(source) or "://" in source:
        return load_image(source, workspace)
    try:
        data, size = read_bytes(source, MAX_IMAGE_BYTES, workspace)
    except FileNotFoundError:
        raise ImageError(f"no such file: {source}.") from None
    except (OSError, ValueError) as e:  # a refusal of the door, a folder, a NUL byte in the name
        raise ImageError(f"cannot read {source}: {getattr(e, 'strerror', None) or e}") from None
    if size > MAX_IMAGE_BYTES:
        raise too_big(source, size, MAX_IMAGE_BYTES)
    return checked_type(data, source), data


def linked_out_of_workspace(path, workspace):
    """The real place a path written inside the workspace leads to, when a link takes it out; else
    None."""
    from .filedoor import inside
    real = os.path.realpath(path)
    if inside(os.path.abspath(path), workspace) is None or inside(real, workspace) is not None:
        return None
    return real


def sandbox_from_args(args, parser):
    """The Sandbox that --sandbox and --sandbox-read ask for (a usage error if a path is missing),
    with the warning that --sandbox off prints on every run: the one place a Sandbox is made.
    Raises UsageError for a start folder the commands must not hold or be inside."""
    from .sandbox import Sandbox, workspace_problem
    from .sandbox.env import env_refusal
    from .sandbox.links import hard_link_note
    from .sandbox.namespaces import NOT_ISOLATED
    missing = [p for p in args.sandbox_read if not os.path.exists(p)]
    if missing:
        parser.error(f"--sandbox-read: {missing[0]} does not exist")
    for path in args.sandbox_read:
        if out := linked_out_of_workspace(path, os.getcwd()):
            parser.error(f"--sandbox-read: {path} is in the workspace and leads out of it through "
                         f"a symbolic link (to {out}), which the model may have made; name {out} "
                         "itself if you mean it")
    if problem := workspace_problem(os.getcwd()):  # before the hooks and the MCP servers start
        if not args.workspace_anyway:
            raise UsageError(f"{problem} (or --workspace-anyway, if you mean it).")
        warn(f"warning: --workspace-anyway: {problem}.")
    for name in args.sandbox_env:
        if refusal := env_refusal(name):
            parser.error(f"--sandbox-env: {refusal}")
    if args.sandbox == "off":
        warn("warning: --sandbox off: shell commands run with all your rights; only the command "
             "regex and your approval stand between the model and your files, keys and network.")
    sandbox = (Sandbox(enabled=args.sandbox == "on", extra_read=args.sandbox_read,
                       extra_env=args.sandbox_env))
    if sandbox.enabled and not sandbox.problem() and not sandbox.isolated:
        warn(NOT_ISOLATED)
    if sandbox.enabled:  # walked before the first command, not on the way to the first request
        sandbox.before_first = lambda workspace: (note := hard_link_note(workspace)) and warn(note)
    return sandbox


def client_from_args(args, stream, printer):
    """(client, context window): the model client the flags ask for, in the dialect --api chooses
    (and --think), and the window to plan with (--context-window, else the model's own with Ollama's
    native API)."""
    from .context import CONTEXT_WINDOW
    from .endpoint import api_key
    from .llm import Client
    from .llm.ollama import choose_dialect
    # OPENAI_API_KEY only to an endpoint from --base-url or OPENAI_BASE_URL (endpoint.py)
    client = Client(args.base_url, args.model,
                    api_key=api_key(getattr(args, "base_url_source", "--base-url")),
                    stream=stream, on_text=printer.text, on_reasoning=printer.reasoning,
                    max_reply_tokens=args.max_reply_tokens, timeout=reply_wait(args.max_seconds))
    from .waiting import waiting_for
    client, window = choose_dialect(args, client, CONTEXT_WINDOW)  # --api, --think; the window
    # signs of life on a terminal until the first token; --json runs are read by programs
    return (client if getattr(args, "json", False) else waiting_for(client, sys.stderr)), window


def approver(args, ask):
    """The permission prompt the flags ask for: `ask` (the user), or with --yes a yes to every call
    the hooks allowed - but a view_image URL, which still asks unless --allow-image-urls
    (hooks.approve_everything)."""
    from .hooks import approve_everything
    return partial(approve_everything, allow_urls=args.allow_image_urls) if args.yes else ask


class UsageError(Exception):
    """A command line that cannot start a run or a chat (exit 2), in one line: raised here, said
    by the command in its own way (flags print no error of their own)."""


@dataclass(frozen=True)
class Ready:
    """What a run or a chat needs from its command line: the model client, the settings (the
    sandbox, the hooks and MCP servers in them), and what the command's `opening` returned."""
    client: Any
    settings: Any
    opened: Any = None


def from_command_line(args, parser, ask, printer, stream, opening=None, **built):
    """The one way from a command line to a run (`run` and `chat` both come here): the shared
    flags checked and --image read (usage errors through `parser`, exit 2), the sandbox made, a
    hooks or MCP file that is not a regular file refused; then `opening()`, the command's own step
    (its session), the workspace's hooks (made with the sandbox they run in) and MCP servers,
    trusted with `ask` (the user, never --yes); the client and the settings. `built`: the settings
    the command makes itself (the permission prompt; chat's --transcript). Raises UsageError."""
    from . import extensions
    from .mcp.scopes import SetupError
    workspace = os.getcwd()
    check_agent_flags(args, parser)
    image = image_of(args, workspace, parser)
    sandbox = sandbox_from_args(args, parser)
    if problem := irregular_config(workspace):
        raise UsageError(problem)
    opened = opening() if opening else None
    try:
        hands = extensions.from_flags(args, workspace, ask, warn, sandbox=sandbox)
    except SetupError as e:
        raise UsageError(str(e)) from None
    hands.fence(sandbox, warn)  # a Read deny holds for commands too
    client, window = client_from_args(args, stream, printer)
    settings = settings_from_args(args, window, sandbox=sandbox, extensions=hands, image=image,
                                  echo=printer.echo, **built)
    return Ready(client, settings, opened)


def image_of(args, workspace, parser):
    """--image's part, read and checked before anything starts (a bad one is a usage error, exit
    2), or None."""
    from .imageload import ImageError
    from .vision import image_part
    try:
        return (image_part(*image_from_flag(args.image, workspace)) if args.image is not None
                else None)
    except ImageError as e:
        parser.error(f"--image: {e}")


# Fields a command builds from its flags rather than copies as typed: the Sandbox, the image part,
# the window the dialect chose, and --transcript (written by the command's TranscriptWriter, not the
# loop).
BUILT = ("sandbox", "image", "context_window", "transcript")


def settings_from_args(args, window, **built):
    """The run's settings (settings.RunSettings) from a command line: the one place flags become
    settings. Each field is read from the flag of the same name (--max-turns fills max_turns), so a
    new run knob is two edits: its flag and its field. `window`: the context window client_from_args
    chose. `built`: what the command made itself (the sandbox, the permission prompt, the
    extensions, the callbacks)."""
    from .settings import RunSettings
    named = {f.name: getattr(args, f.name) for f in fields(RunSettings)
             if hasattr(args, f.name) and f.name not in BUILT}
    if "checkpoints" in named:  # the flag says whether; the run's recorder is made here
        from .checkpoints import recorder_for
        named["checkpoints"] = recorder_for(os.getcwd(), warn, named["checkpoints"])
    return RunSettings(**{**named, "context_window": window, "budget_name": flag_name, **built})


def flag_name(field):
    """A budget's settings field as the command line names it in the run's messages: the flag it is
    read from (max_turns: --max-turns)."""
    return "--" + field.replace("_", "-")


def reply_wait(max_seconds, floor=600):
    """How long one reply may keep the client waiting: the client's own 600 s, or longer when the
    run was given longer (--max-seconds 1800: a slow CPU reading a long prompt is allowed the time
    the user allowed the run; the run's clock still bounds it, see llm.reply_timeout)."""
    return max(floor, max_seconds)
