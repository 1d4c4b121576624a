"""`chat --json`: a scripted chat that a program reads, one JSON object per line.

The problem. A script that drives `tinyharness chat` through a pipe gets what a person would read:
answers, `[tool]` lines, `[stats]` lines, prompts, mixed on two streams, with nothing to tell where
one message's work ends or how the chat ended. `run --json` solved it for one task; a conversation
needs the same contract.

The mechanism. Standard output carries only JSON lines: a `start` line, then every event the session
file gets, as it gets it (the same shapes: `user`, `assistant` with its usage, `tool`, `notice`,
`compaction`, `clear`, `subagent`), and last, on every exit, one `result` line: the exit status of
the last message (or 143/129, 130, 2...), `is_error`, the last `answer` (null unless 0), `messages`
(how many the user sent), `session_id`, `model`, `num_turns` and `usage` summed over the whole chat,
`duration_ms`. The answers, tool lines, questions and warnings go to standard error, as under `run
--json`. `Tee` gives the conversation the session file and the JSON lines as one writer.

What it cannot do. A permission question still reads standard input, the same pipe the messages come
from: give `--yes` or allow rules in a script. The lines are written as the events happen; a reader
that stops reading makes the chat stop when the pipe is full.
"""
import os
import time

from ..counts import summed
from ..run_end import result_line


class Tee:
    """The session file (may be None) and the --json lines as one writer: every call goes to both,
    and the session's id and usage note are the session's."""

    def __init__(self, session, lines):
        object.__setattr__(self, "writers", [w for w in (session, lines) if w])
        object.__setattr__(self, "session", session)

    @property
    def id(self):
        return self.session.id if self.session else time.strftime("%Y%m%d-%H%M%S")

    # UsageTap sets `usage`: the next assistant event carries it
    def __setattr__(self, name, value):
        for writer in self.writers:
            setattr(writer, name, value)

    def __getattr__(self, name):
        def every(*args, **kwargs):
            for writer in self.writers:
                getattr(writer, name)(*args, **kwargs)
        return every


def open_lines(out, session, model):
    """The JSON lines on OUT (the real standard output), their `start` line written."""
    from .. import __version__
    from ..sessions.writer import StreamWriter, now
    lines = StreamWriter(out)
    lines.write({"type": "start", "time": now(), "session": session.id if session else None,
                 "folder": os.getcwd(), "model": model, "version": f"tinyharness {__version__}",
                 "mode": "chat"})
    return lines


def end_lines(lines, chat, conversation, session, model, status, started, ending):
    """The last line: how the chat ended, with the whole chat's counts."""
    total = summed(conversation.all_stats, started)  # counts.py: the one sum
    result = {"exit_code": status, "answer": chat.last_answer if status == 0 else None,
              "messages": len(conversation.all_stats)}
    ending.written = True  # before writing: a closed output must not get a second try from main
    lines.write(result_line(result, total, session.id if session else None, model, started))
