"""Reading what the user types in `tinyharness chat`: lines from a terminal (with readline and a
history kept in the data folder) or from a pipe, joined into messages by a trailing backslash or a
\"\"\" block (see chat/__init__.py's docstring, "Input")."""
import os
import sys

from ..filedoor import data_dir, private_folder

PROMPT, MORE = "you> ", "...> "
BLOCK = '"""'


class Input:
    """Lines from the terminal (with readline) or from a pipe, joined into messages."""

    def __init__(self, interactive):
        self.interactive = interactive
        if interactive:
            self.history = setup_readline()

    def line(self, prompt):
        if self.interactive:
            return input(prompt)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n").rstrip("\r")

    def message(self):
        """One message: a line, lines joined by a trailing backslash, or a \"\"\" block. EOFError at
        the end."""
        first = self.line(PROMPT)
        if first.strip() == BLOCK:
            lines: list = []
            while True:
                line = self.line(MORE)
                if line.strip() == BLOCK:
                    return "\n".join(lines)
                lines.append(line)
        lines = [first]
        while lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1]
            lines.append(self.line(MORE))
        return "\n".join(lines)

    def close(self):
        if self.interactive and self.history:
            try:
                import readline
                readline.write_history_file(self.history)
            except (ImportError, OSError):
                pass


def setup_readline():
    """Line editing and a history of what was typed, when Python was built with readline."""
    try:
        import readline
    except ImportError:
        return None
    path = data_dir() / "chat_history"
    try:
        private_folder(path.parent)
        # what was typed is the conversation: 0600 before readline writes in it
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600))
        if path.is_file():
            os.chmod(path, 0o600)
            readline.read_history_file(path)
        readline.set_history_length(1000)
    except OSError:
        return None
    return path
