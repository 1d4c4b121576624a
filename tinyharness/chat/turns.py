"""The chat's prompt loop: commands, messages, Ctrl-C and the end of input.

The problem. A conversation (chat/__init__.py's Conversation) answers one message at a time;
around it a person types, pastes, presses Ctrl-C in the middle of a turn or at the prompt, and a
pipe simply ends. Each of these must leave the session whole and the terminal usable: a turn cut
by Ctrl-C must not leave a tool call without its result, nor its commands running.

The mechanism. `Chat.run` reads a line at a time: a /command goes to `command`, text to `message`.
Ctrl-C during a turn stops it (the shell tool kills its command's group; `tools.stop_commands`
asks the sandbox that started them to reap and count what the interruption stopped, nothing else:
not the MCP servers, which serve the whole chat), gives the unanswered calls a result and keeps
the conversation; at the prompt it only clears the line. SIGTERM and SIGHUP (Terminated) end the
chat with the session saved; so does the end of input.

What it cannot do. It stops the commands it started, not what they handed off to other sessions
(a daemon the system runs).
"""
import sys
import time

from ..checkpoints.commands import chat_command
from ..console import printable
from ..defaults import Sourced
from ..guards import Stopped
from ..llm import LLMError
from ..model_list import chat_lines
from ..run_end import Terminated
from ..tools import stop_commands
from . import slash
from .input import BLOCK

HELP = f"""Type a message and press Enter. A line ending with \\ continues on the next line;
a line holding only {BLOCK} starts a block that ends at the next {BLOCK} line.
  /help          this help
  /compact       summarise the conversation so far and go on from the summary
  /clear         forget the conversation (the session file keeps it)
  /model [NAME]  list the server's models (the current one marked *); with NAME, talk to it
                 from the next message on
  /cost          tokens, model calls and tool calls so far
  /status        the model, endpoint, API, session, workspace, sandbox and how full the window is
  /permissions   the permission rules in force, with where each came from
  /mcp           the MCP servers, their state and their tools
  /save [PATH]   write the conversation as a JSON transcript (default: chat-<session id>.json)
  /undo          put the workspace back as it was before the last change the model made
  /rewind [N]    list the changes; with N, put the workspace back as it was before change N
  /quit          end the session (so does Ctrl-D)
Ctrl-C stops the current turn (the model call or the running command) and returns to the prompt."""


class Chat:
    """The prompt loop: commands, messages, Ctrl-C and the end of input."""

    def __init__(self, conversation, client, printer, stream, interactive, out=None):
        self.conversation, self.client = conversation, client
        self.printer, self.stream = printer, stream
        self.interactive, self.out = interactive, out or sys.stdout
        conversation.end_line = printer.end_line
        # what the last message ended with, for a pipe's exit status
        self.status, self.last_answer = 0, None

    def say(self, text):
        print(printable(text), file=self.out, flush=True)

    def command(self, text):
        """Run a /command; return False when the session should end."""
        name, _, rest = text.strip().partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.say(HELP)
        elif name == "/compact":
            self.conversation.compact("asked for with /compact")
        elif name == "/clear":
            self.conversation.clear()
            self.say("The conversation is cleared; the session file keeps what was said.")
        elif name == "/model":
            if not rest:
                chat_lines(self.client, self.say)
            else:
                self.client.model = Sourced(rest, "/model")
                self.conversation.notice(f"[model] from the next message on: {rest}")
        elif name == "/save":
            writer = self.conversation.writer
            path = rest or f"chat-{writer.id if writer else time.strftime('%Y%m%d-%H%M%S')}.json"
            try:
                self.conversation.save(path)
                self.say(f"Saved the conversation to {path}")
            except OSError as e:
                self.say(f"Cannot save to {path}: {e.strerror or e}")
        elif name in ("/undo", "/rewind"):  # files you changed since are kept, and named
            chat_command(name, rest, self.conversation.settings.run.checkpoints, self.say)
        elif name in slash.COMMANDS:  # /cost, /status, /permissions, /mcp
            slash.COMMANDS[name](self)
        else:
            self.say(f"Unknown command {name}; /help lists the commands.")
        return True

    def message(self, text, image=None):
        """Send one message and print its answer (or why it stopped), the way `run` prints them."""
        self.printer.since_tool = ""
        try:
            answer = self.last_answer = self.conversation.send(text, self.printer.echo, image=image)
            self.printer.end_line()
            if not self.stream or answer.strip() != self.printer.since_tool.strip():
                self.say(answer)
            self.status = 0
        except LLMError as e:
            self.printer.end_line()
            self.conversation.notice(f"error: {e}")
            if "context" in str(e).lower():  # an overflow: the door's message says so
                self.conversation.notice("(/compact replaces the older messages with a summary; "
                                         "/clear starts afresh)")
            self.status = 1
        except Stopped as e:
            self.printer.end_line()
            self.say(f"Stopped: {e}. The task is NOT confirmed complete.")
            self.say(e.done)
            self.status = 3
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM/SIGHUP (Terminated), which end the chat
            self.printer.end_line()
            killed = stop_commands(self.conversation.settings.run.sandbox)
            ends = isinstance(e, Terminated) or not self.interactive
            self.status = e.code if isinstance(e, Terminated) else 130
            stopped = f"Terminated ({e.name})" if isinstance(e, Terminated) else "Interrupted"
            killed_note = f" and {killed} running command(s) killed" if killed else ""
            after = (f"; the session ends (exit {self.status})." if ends else
                     "; the conversation is kept. Type your next message.")
            self.conversation.notice(f"{stopped}: the turn was stopped{killed_note}{after}")
            if ends:
                raise

    def run(self, reader, first=None, image=None):
        """Read and answer messages until /quit or the end of input. Returns (exit status, end
        reason)."""
        try:
            if first:
                self.message(first, image)
        except Terminated as e:
            return e.code, f"terminated by {e.name}"
        while True:
            try:
                text = reader.message()
            except EOFError:
                if self.interactive:
                    print(file=self.out)
                return self.status, "end of input"
            except Terminated as e:  # SIGTERM, SIGHUP at the prompt: the chat ends, saved
                self.conversation.warn(f"Terminated ({e.name}).")
                return e.code, f"terminated by {e.name}"
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh line, like a shell
                print("^C", file=self.out, flush=True)
                continue
            if not text.strip():
                continue
            if text.strip().startswith("/"):
                try:
                    if not self.command(text):
                        return self.status, "quit"
                except Terminated as e:
                    return e.code, f"terminated by {e.name}"
                # e.g. during /compact's summary: nothing was replaced yet
                except KeyboardInterrupt:
                    self.conversation.notice("Interrupted: the command was stopped; the "
                                             "conversation is unchanged.")
                continue
            try:
                self.message(text)
            except Terminated as e:
                return e.code, f"terminated by {e.name}"
            except KeyboardInterrupt:
                return 130, "interrupted"
