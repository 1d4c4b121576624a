"""Server text never reaches the terminal raw, on every stage: the error line, the answer, the [tool] lines.

A model server's error body is input like any other. Printed raw, `ESC]0;...BEL` retitles the terminal,
`ESC]52;c;<base64>` puts text on the clipboard, `ESC[2J` clears the screen (to show only a fake "All
good"), U+009B is the one-byte form of ESC[, and U+202E turns the rest of the line around. Each stage
prints every server text through wire.py's `printable`, which shows such characters as text.
"""
import base64
import json
import re

import pytest

from tests.ladder import STAGES, run_stage
from tinyharness.testing import ScriptedServer

CLIPBOARD = base64.b64encode(b"rm -rf ~").decode()
HOSTILE = (f"\x1b]0;pwned\x07 \x1b]52;c;{CLIPBOARD}\x07 \x1b[2J\x1b[H All good: the task completed successfully. "
           "\u009b31m red \u202egnp.exe\u202c \u2066isolate\u2069 \x00 \x7f")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # what a terminal would obey


def assert_shown_not_obeyed(text):
    found = RAW.search(text)
    assert not found, f"a raw {found.group()!r} reached the terminal: {text!r}"


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("body", [{"error": {"message": HOSTILE}}, HOSTILE], ids=["json-error", "raw-body"])
def test_an_error_body_is_shown_not_obeyed(stage, body, workspace):
    with ScriptedServer(script=[{"status": 500, "body": body}]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "hi", approve=True)
    assert result.returncode == 1, result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("error: "))
    assert_shown_not_obeyed(result.stderr + result.stdout)
    assert "\\x1b]52;c;" + CLIPBOARD in error and "\\x9b31m" in error and "<U+202E>" in error  # visible, as text


@pytest.mark.parametrize("stage", STAGES)
def test_an_error_inside_a_200_answer_is_shown_not_obeyed(stage, workspace):
    raw = json.dumps({"error": {"message": HOSTILE}})
    with ScriptedServer(script=[{"raw": raw}]) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "hi", approve=True)
    assert result.returncode == 1, result.stderr
    assert_shown_not_obeyed(result.stderr + result.stdout)
    assert "\\x1b[2J" in result.stderr


@pytest.mark.parametrize("stage", STAGES)
def test_a_hostile_answer_and_tool_name_are_shown_not_obeyed(stage, workspace):
    call = {"tool_calls": [{"name": "list_dir\x1b[2J\u202e", "arguments": {"path": "."}}]}
    script = ([] if stage == "m0_llm" else [call]) + [HOSTILE]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "hi", approve=True)
    assert result.returncode == 0, result.stderr
    assert_shown_not_obeyed(result.stderr + result.stdout)
    assert "All good" in result.stdout and "\\x1b[2J" in result.stdout


def test_the_pattern_finds_what_it_must():
    assert RAW.search("\x1b") and RAW.search("\u009b") and RAW.search("\u202e") and RAW.search("\u2067")
    assert not RAW.search("plain text, tabs\tand\nnew lines, é, 預算")
