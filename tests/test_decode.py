"""What the model reads when a command prints bytes that are not UTF-8 (m2's `safeio.py:decode`).

The lesson's claim, checked: never a crash; the locale's encoding is tried after UTF-8; nothing is
guessed, so on a UTF-8 system cp950 output arrives as replacement marks, not as the words it encodes.
"""
import ast
import importlib
import inspect
import locale
import os

import pytest

from tests.ladder import calls, copies, run_stage, stages_from, tool_call, tool_results
from tinyharness.testing import ScriptedServer

LADDER = stages_from("m2")
WORDS = "找不到檔案"                                    # "file not found", as a Chinese Windows prints it
CP950 = WORDS.encode("cp950")
PRINTF = "printf 'ok %s end'" % "".join(f"\\{byte:03o}" for byte in CP950)  # octal escapes: portable printf


def tools_module(stage):
    return importlib.import_module("tinyharness.tools" if stage == "tinyharness" else f"{stage}.tools")


@pytest.mark.skipif(os.name != "posix", reason="the shell tool needs a POSIX system")
@pytest.mark.parametrize("stage", LADDER)
def test_cp950_output_reaches_the_model_as_replacement_marks_on_a_utf8_system(stage, workspace):
    script = [calls(tool_call("shell", command=PRINTF)), "done"]
    with ScriptedServer(script=script) as server:
        result = run_stage(stage, workspace, "--base-url", server.base_url, "go", approve=True,
                           env={"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    text = tool_results(server.requests[1])["call_1"]
    assert text.startswith("exit status 0\nok ") and text.endswith(" end")
    assert "\ufffd" in text and WORDS not in text            # visible as not UTF-8; not guessed


@pytest.mark.parametrize("stage", copies("m2", "tools.py", "safeio.py"))   # once per distinct copy
def test_decode_uses_the_locale_encoding_after_utf8(stage, monkeypatch):
    tools = tools_module(stage)
    monkeypatch.setattr(locale, "getpreferredencoding", lambda do_setlocale=True: "cp950")
    assert tools.decode(CP950) == WORDS                       # a Big5 locale: the words come back
    assert tools.decode("é ok".encode()) == "é ok"            # UTF-8 is always tried first
    monkeypatch.setattr(locale, "getpreferredencoding", lambda do_setlocale=True: "no-such-codec")
    assert tools.decode(b"ok \xff") == "ok \ufffd"            # an unknown locale encoding is no crash


def test_decode_is_the_same_function_in_every_stage_and_the_package():
    sources = {stage: inspect.getsource(tools_module(stage).decode) for stage in LADDER}
    assert len(set(sources.values())) == 1, sorted(sources)
    assert ast.get_docstring(ast.parse(sources["tinyharness"]).body[0]).count("guessed") == 1
