"""Chat: one conversation, many tasks, in the current folder; the same loop as `run` underneath.

The problem. `tinyharness run` is single-shot: one task, one loop, and the messages vanish when it
ends. Real work is a conversation: a task, a correction, "now also do X", a question about what was
done. And an interactive tool must survive its user: Ctrl-C to stop a model that went the wrong way
or a command that hangs, without losing the hour of context before it.

The mechanism. A `Conversation` holds the message list and hands it to `run_agent` for each user
message (`messages=`, kept up to date in place), so every message gets the same tools, hooks,
guards, context policy and verification as `run`, and its own budgets (`--max-turns` and
`--max-seconds` count per message). Its `ChatSettings` are the run's settings (built from the
command line in one place, flags.settings_from_args) and the chat's own two (`--compact-at`,
`--keep-turns`); each message's settings are derived from them with `dataclasses.replace`. Each
message added is appended to the session file at once (`on_update`, sessions/__init__.py). Before a
message is sent, the prompt's size is checked and the history compacted past the threshold
(chat/compact.py).

Ctrl-C raises KeyboardInterrupt wherever the main thread is: in the model call (the HTTP read is
abandoned), or waiting for a shell command. The shell tool starts each command in a process group of
its own (so its timeout can kill all of it), which also means the terminal's Ctrl-C never reaches
it; the shell tool kills that group itself, and the chat asks the tools to reap and count what was
stopped (tools.stop_commands). Then it repairs the history: every call of the interrupted
turn that has no result gets one saying it was interrupted, because servers reject a call without
its result. The session goes on at the prompt; Ctrl-D (end of input) or /quit ends it. SIGTERM and
SIGHUP (`timeout`, systemd, a closed terminal) arrive as `Terminated`, a KeyboardInterrupt
(run_end.py): the same clean-up, but the chat ends, at the prompt too, its session's end written,
exit 143 or 129.

Input. On a terminal, `readline` (where Python has it) gives line editing and a history kept in the
data folder. A line ending with a backslash continues on the next line; a line that is just \"\"\"
starts a block that runs until the next such line. With standard input not a terminal (a pipe, a
script, a test) each line is one message, the same continuations apply, and the session ends at
/quit or end of input; answers are printed as `run` prints them.

What it cannot do. A turn stopped halfway may have written
half its files: the interruption stops the harness, it does not undo anything. Permission prompts
are answered at the terminal (asking.py), never by a piped line: with messages piped in and no
terminal, every write and command is denied (use --yes, or --allow what may run).
"""
import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..console import StreamPrinter, printable, warn
from ..extensions import of as extensions_of
from ..filedoor import write_text
from ..flags import UsageError, approver, from_command_line
from ..hooks import ask_user
from ..loop import RunSettings, Stats, run_agent, system_prompt
from ..overflow import learn_window, window_in_force
from ..sessions import TranscriptWriter, UsageTap
from . import compact as compaction
from . import json_mode
from .input import Input
from .turns import Chat

INTERRUPTED_CALL = ("ERROR: interrupted by the user (Ctrl-C) before this call finished; it did not "
                    "complete, and it may have done part of its work.")



@dataclass(frozen=True)
class ChatSettings:
    """A chat's settings: the run's (each message's are derived from them), and when and how much to
    compact."""
    run: RunSettings = field(default_factory=RunSettings)
    # --compact-at: the share of the window that starts a compaction
    compact_at: float = compaction.COMPACT_AT
    keep_turns: int = compaction.KEEP_TURNS    # --keep-turns: the last turns kept whole


class Conversation:
    """The message list of one chat, and what happens to it: messages, compaction, /clear."""

    def __init__(self, client, workspace, settings, writer=None, messages=None):
        self.tap = UsageTap(client, writer)
        self.workspace, self.settings, self.writer = workspace, settings, writer
        self.warn = settings.run.warn  # the one channel to the user: stderr, made printable
        self.messages = messages or [{"role": "system",
                                      "content": system_prompt(workspace, settings.run)}]
        self.transcript = TranscriptWriter(settings.run.transcript, sys.stderr)
        # the printer's: a streamed answer's open line ends before [stats]
        self.end_line = lambda: None
        self.all_stats = []  # each message's, for chat --json's result line
        self.opened = False  # the first message opens the session: its session_start hooks run then
        # what the next opening tells them: True (startup or resume), "compact"
        self.source: bool | str = True

    def sync(self, messages=None):
        if self.writer:
            self.writer.sync(self.messages)
        # --transcript: a failed write warns once, the chat goes on
        self.transcript.sync(self.messages)

    def keep_subagent(self, messages):
        if self.writer:
            self.writer.event("subagent", messages=messages)

    def notice(self, text):
        self.warn(text)
        if self.writer:
            self.writer.notice(text)

    def send(self, text, echo, image=None):
        """Run the agent on one user message; return its answer. Raises what run_agent raises
        (Stopped, LLMError, KeyboardInterrupt) after making the history whole again."""
        stats = Stats()
        self.all_stats.append(stats)
        self.compact_if_full(stats)
        try:
            return (run_agent(text, self.tap, self.workspace, self.run_settings(echo, image), stats,
                              self.messages))
        except BaseException:
            close_open_calls(self.messages)
            raise
        finally:
            self.sync()
            # [stats] on a line of its own, not after the streamed answer's last word
            self.end_line()
            self.warn(stats.line())

    def compact_if_full(self, stats):
        """Before a message is sent: compact the history when it is past --compact-at of the
        window."""
        window, at = self.window(), self.settings.compact_at
        if compaction.needs_compaction(self.tap.last_usage, self.messages, window, at):
            tokens, how = compaction.prompt_size(self.tap.last_usage, self.messages)
            threshold = compaction.threshold(window, at)
            share = f"{at:.0%}" if threshold >= at * window else \
                f"{threshold / window:.0%} (room left for the summary request)"
            self.compact(f"the history is about {tokens} tokens ({how}), past {share} of the "
                         f"{window}-token window",
                         stats, automatic=True)

    def run_settings(self, echo, image=None):
        """The loop's settings for one message: the chat's, derived with this message's picture and
        echo, the session's callbacks (the chat writes --transcript itself), and session_start for
        the first only, and for the first after a compaction (its source "compact")."""
        opens, self.opened, self.source = (not self.opened) and self.source, True, True
        return replace(self.settings.run, echo=echo, image=image, transcript=None,
                       opens_session=opens, on_update=self.sync, on_subagent=self.keep_subagent)

    def window(self):
        """The window in force: --context-window (or the model's), or the server's own once an
        overflow error named it (learned for the rest of the chat, see overflow.learn_window)."""
        return window_in_force(self.tap, self.settings.run.context_window)

    def compact(self, reason, stats=None, automatic=False):
        """Summarise the past; on failure keep the history and say so. Returns True when it
        compacted. The summary call is counted in `stats` (a model call like any other) when
        given."""
        self.notice(f"[compact] {reason}: asking the model for a summary...")
        run = self.settings.run
        hands = extensions_of(run)
        # the workspace's command hooks, if any
        verdict = hands.hook("pre_compact") if hands.hooks else None
        if verdict and not verdict.allowed:
            self.notice("[compact] a pre_compact hook blocked it, so the history is kept as it "
                        f"was: {verdict.reason}")
            return False
        try:
            done = compaction.compact(self.messages, self.tap, self.workspace,
                                      self.settings.keep_turns,
                                      extra=[verdict.output] if verdict and verdict.output else (),
                                      fewer_turns=automatic, tools=hands.tools(),
                                      rules=hands.rules,
                                      on_overflow=lambda overflow:
                                      learn_window(self.tap, overflow, run.context_window,
                                                   run.warn))
        except compaction.CompactionFailed as e:
            self.notice(f"[compact] {e}")
            return False
        if stats:
            stats.count_turn(done.usage)
        for note in done.notes:
            self.notice(f"[compact] {note}")
        before = compaction.estimate_tokens(self.messages)
        self.messages[:] = done.messages
        if self.writer:
            self.writer.compaction(done.summary, done.replaced, self.messages)
        self.opened, self.source = False, "compact"  # the next message opens it again, as Claude
        self.tap.last_usage = {}  # the next size check must measure the new, shorter history
        self.notice(f"[compact] replaced {len(done.replaced)} messages with a summary: the history "
                    f"went from about {before} to {compaction.estimate_tokens(self.messages)} "
                    "tokens (estimated); the last "
                    f"{sum(map(compaction.is_user_turn, self.messages[2:]))} turns are kept whole")
        return True

    def clear(self):
        self.messages[:] = self.messages[:1]
        self.tap.last_usage = {}
        if self.writer:
            self.writer.clear(self.messages)

    def save(self, path):
        text = json.dumps(self.messages, indent=2, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from the model: ASCII escapes, the same JSON
            text = json.dumps(self.messages, indent=2)
        # filedoor.py: never through a link the model planted
        write_text(path, text, self.workspace)


def close_open_calls(messages):
    """After an interruption: give every call of the last assistant message that has no result one.
    A server answers 400 to a history where a tool call is not followed by its result."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last is None:
        return
    answered = {m.get("tool_call_id") for m in messages[last + 1:] if m.get("role") == "tool"}
    for call in messages[last].get("tool_calls") or []:
        if call.get("id") not in answered:
            messages.append({"role": "tool", "tool_call_id": call.get("id"),
                             "content": INTERRUPTED_CALL})


# --- `tinyharness chat` ---------------------------------------------------------------------------

def check_flags(args, parser):
    """The chat's own usage errors, found before the first model call (exit 2); the flags it shares
    with run are checked on the one way to a run (flags.from_command_line)."""
    if not 0 < args.compact_at <= 1:
        parser.error("--compact-at must be more than 0 and at most 1 (a fraction of the context "
                     "window)")
    if args.keep_turns < 0:
        parser.error("--keep-turns must be 0 or more")
    if args.continue_session and args.resume:
        parser.error("give --continue or --resume ID, not both")
    if args.image is not None and not args.task:
        parser.error("--image needs a first MESSAGE to attach it to")


def open_session(args, workspace, model, err, approve):
    """(writer, messages) for a new, continued or resumed session; (None, None) with --no-session.
    `approve`: the permission prompt, which answers whether to resume another folder's session here.
    Raises SessionError when the session asked for cannot be used."""
    from .. import sessions
    if args.no_session:
        return None, None
    if not (args.continue_session or args.resume):
        return sessions.start_or_warn(workspace, model, err), None
    if args.resume:
        path = sessions.find(args.resume)
    else:
        path = sessions.latest_for(workspace)
        if path is None:
            raise sessions.SessionError(f"no session was started in {workspace} yet (`tinyharness "
                                        "sessions` lists them); start one with `tinyharness chat`")
    session, writer = sessions.resume(path, err)  # locked before it is read: one writer per session
    if session.warning:
        warn(session.warning)
    folder = session.header.get("folder")
    try:
        if folder != str(Path(workspace).resolve()) and not approve(
                f"Session {session.id} was started in {folder}; resume it here, in {workspace}? "
                "[y/N] "):
            raise sessions.SessionError(f"not resumed: session {session.id} belongs to {folder}; "
                                        "run `tinyharness chat --resume ID` from that folder")
    except BaseException:
        writer.close()
        raise
    messages = session.messages()
    writer.notice(f"resumed in {workspace}")
    warn(f"Resumed session {session.id}: {len(messages)} messages, {len(session.user_tasks())} "
         "turns.")
    return writer, messages or None


def chat_command(args, parser):
    """`tinyharness chat`: its own checks, then what it needs from its command line
    (flags.from_command_line, the one way `run` and `chat` share: the checks, the sandbox, the
    workspace's hooks and MCP servers, the client, the settings; the session opened on the way);
    then the conversation, until the user ends it (or the piped messages run out)."""
    from ..sessions import SessionError
    check_flags(args, parser)
    workspace, interactive = os.getcwd(), sys.stdin.isatty()
    stream = sys.stdout.isatty() if args.stream is None else args.stream
    printer = StreamPrinter(sys.stdout)
    ask = user_prompt(printer)  # trusting hooks and MCP servers is always the user's (never --yes)
    approve = approver(args, ask)
    try:
        ready = from_command_line(args, parser, ask, printer, stream, approve=approve,
                                  transcript=args.transcript,  # the chat writes it itself
                                  opening=lambda: open_session(args, workspace, args.model,
                                                               sys.stderr, approve))
    except SessionError as e:
        warn(f"error: {e}")  # made printable: a folder or id from the file can be in it
        return 1
    except UsageError as e:
        args.ending.usage_error = str(e)  # for the --json result line
        warn(f"error: {e}")
        return 2
    (writer, messages), hands = ready.opened, ready.settings.extensions
    if writer and hands.hooks:  # a hook can tell one chat's events from another's, and read them
        hands.hooks.session_id, hands.hooks.transcript_path = writer.id, str(writer.path)
    settings = chat_settings(args, ready.settings)
    lines = json_mode.open_lines(args.json_out, writer, args.model) if args.json else None
    conversation = Conversation(ready.client, workspace, settings,
                                json_mode.Tee(writer, lines) if lines else writer, messages)
    chat = Chat(conversation, ready.client, printer, stream, interactive)
    status = converse(chat, Input(interactive), args.task, ready.settings.image, hands, writer,
                      workspace)
    # the last line, on this way out; main writes one on the others (a usage error, a crash)
    if lines:
        json_mode.end_lines(lines, chat, conversation, writer, args.model, status, args.started,
                            args.ending)
    return status


def user_prompt(printer):
    """A [y/N] question to the user, on a fresh line (a streamed line still open would run into
    it)."""
    def ask(prompt):
        printer.end_line()
        return ask_user(prompt)  # at the terminal, never a piped line; made printable there
    return ask


def chat_settings(args, run):
    """The chat's settings: the run's from the command line (flags.from_command_line, with
    --transcript, which the chat writes itself), and --compact-at and --keep-turns."""
    return ChatSettings(run, args.compact_at, args.keep_turns)


def converse(chat, reader, task, image, hands, writer, workspace):
    """Run the chat; on every way out (the end, Ctrl-C, a crash) end the MCP servers and the session
    file."""
    if reader.interactive:
        print(printable("tinyharness chat in " + workspace
                        + ". /help for help, Ctrl-D or /quit to end."), flush=True)
    status, reason = 1, "crash"
    try:
        status, reason = chat.run(reader, task, image)
    finally:
        hands.close()  # MCP servers end on every path, Ctrl-C included
        reader.close()
        if writer:
            writer.end(reason)
            writer.close()
            saved = "not saved whole: see the warning above" if writer.failed else "saved"
            warn(f"Session {writer.id} {saved} (tinyharness chat --resume {writer.id}).")
    return status if not reader.interactive or reason.startswith("terminated") else 0
