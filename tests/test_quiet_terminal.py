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


def run_slow_reply(tmp_path, env, *flags):
    (tmp_path / "ws").mkdir()
    script = [{"delay": 1.5, "content": "The answer."}]
    with ScriptedServer(script=script) as server:
        args = ["run", "--base-url", server.base_url, "--api", "openai", "--no-session", *flags,
                "answer"]
        return run_on_pty(args, tmp_path / "ws", tmp_path / "data", env=env)


@pytest.mark.parametrize("flags", [("--stream",), ("--no-stream",)])
def test_a_terminal_sees_signs_of_life_until_the_first_word(tmp_path, flags):
    code, screen = run_slow_reply(tmp_path, {"TERM": "xterm-256color"}, *flags)
    assert code == 0, screen[-500:]
    text = screen.decode()
    assert "waiting for qwen3:8b ... 0 s" in text and "waiting for qwen3:8b ... 1 s" in text
    spun, answer = text.rindex("waiting for"), text.index("The answer.")
    assert spun < answer, "the spinner wrote after the answer began"
    # the line is blanked (spaces, then a carriage return) before the answer: no escape sequence
    assert text[spun:answer].rstrip(" \r\n").endswith(" s") and "\r" in text[spun:answer]
    assert b"\x1b" not in screen.replace(b"\x1b[2m", b"").replace(b"\x1b[0m", b"")


def test_no_spinner_on_a_dumb_terminal_in_a_pipe_or_with_json(tmp_path):
    code, screen = run_slow_reply(tmp_path, {"TERM": "dumb"})
    assert code == 0 and b"waiting for" not in screen and b"The answer." in screen
    (tmp_path / "ws").rename(tmp_path / "ws-dumb")
    code, screen = run_slow_reply(tmp_path, {"TERM": "xterm-256color"}, "--json")
    assert code == 0 and b"waiting for" not in screen and b'"type"' in screen
    from tests.ladder import run_stage
    with ScriptedServer(script=[{"delay": 0.5, "content": "Piped."}]) as server:
        piped = run_stage("tinyharness", tmp_path / "ws", "--base-url", server.base_url, "--api",
                          "openai", "--no-session", "answer")
    assert piped.returncode == 0 and "waiting for" not in piped.stdout + piped.stderr
