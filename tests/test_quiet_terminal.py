"""The harness's own colour obeys the user's terminal: none with NO_COLOR (no-color.org: any
non-empty value), none with TERM=dumb, none in a pipe; the reasoning of a streamed answer is then
marked in words, not dimmed. Run through the real command line on a pseudo-terminal."""
import pytest

from tests.test_terminal import run_on_pty
from tinyharness.testing import ScriptedServer

THINKING = [{"reasoning": "PLAN-ALOUD", "content": "The answer."}]


def stream_on_a_pty(tmp_path, env):
    (tmp_path / "ws").mkdir()
    with ScriptedServer(script=THINKING) as server:
        args = ["run", "--base-url", server.base_url, "--api", "openai", "--stream", "--no-session",
                "answer"]
        return run_on_pty(args, tmp_path / "ws", tmp_path / "data", env=env)


@pytest.mark.parametrize("env", [{"TERM": "xterm-256color", "NO_COLOR": "1"}, {"TERM": "dumb"}],
                         ids=["NO_COLOR", "TERM=dumb"])
def test_no_escape_sequence_reaches_a_terminal_that_wants_none(tmp_path, env):
    code, screen = stream_on_a_pty(tmp_path, env)
    assert code == 0, screen[-500:]
    assert b"\x1b" not in screen, screen[-500:]
    assert b"(thinking) PLAN-ALOUD" in screen and b"The answer." in screen


def test_a_colour_terminal_gets_the_reasoning_dimmed(tmp_path):
    code, screen = stream_on_a_pty(tmp_path, {"TERM": "xterm-256color"})
    assert code == 0, screen[-500:]
    # the control: colour where it is wanted (each streamed piece dimmed on its own)
    assert b"\x1b[2mPLA" in screen and b"(thinking)" not in screen
