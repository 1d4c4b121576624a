"""Claude Code's scripting habits on `tinyharness run` (claude_output.py): -p/--print, -c/--continue,
-r/--resume ID and --output-format text|json|stream-json, with Claude's field names and shapes - the
system/init line first, assistant and user messages of content blocks, the result object last (success,
error_max_turns, error_during_execution) - on a finished run, a --max-turns stop, a server failure, a
denied write and a usage error. The lines are also read by the Claude Agent SDK's own message parser
when it is installed (CLAUDE_SDK_PYTHON, or this interpreter; `python -m benchmarks.claude_sdk`
installs it into a cache folder): skipped, with the reason, when it is not."""
import json
import os
import subprocess
import sys

import pytest

from tests.ladder import FINAL, ROOT, calls, run_in_process, run_stage, sessions_home, tool_call
from tinyharness.testing import ScriptedServer, load_script

NOTES = ROOT / "examples" / "notes.script.json"
ANSWER = "The testing budget is 300 KM, according to meeting-2026-11-02.md. I saved it to budget.md."
RESULT_TYPES = {"subtype": str, "is_error": bool, "duration_ms": int, "duration_api_ms": int, "num_turns": int,
                "total_cost_usd": int, "permission_denials": list, "usage": dict}
SDK_CHECK = str(ROOT / "tests" / "claude_sdk_check.py")


def lines_of(done):
    """Every line of standard output, each one JSON object (json.loads raises on anything else)."""
    return [json.loads(line) for line in done.stdout.splitlines()]


def check_result(line, subtype, session_id):
    """The last line: Claude's result object, with its fields and their types."""
    assert line["type"] == "result" and line["subtype"] == subtype, line
    assert all(isinstance(line[key], kind) for key, kind in RESULT_TYPES.items()), line
    assert line["is_error"] is (subtype != "success") and line["total_cost_usd"] == 0
    assert line["session_id"] == session_id and line["duration_api_ms"] <= line["duration_ms"]
    assert set(line["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}
    return line


def check_init(line, workspace, model="qwen3:8b"):
    assert line["type"] == "system" and line["subtype"] == "init", line
    assert line["cwd"] == str(workspace) and line["model"] == model and isinstance(line["session_id"], str)
    assert {"list_dir", "read_file", "write_file", "shell"} <= set(line["tools"])
    assert line["mcp_servers"] == [] and line["permissionMode"] in ("default", "bypassPermissions")
    return line


def tinyharness(workspace, *argv, stdin=""):
    """`tinyharness ARGV` (the top-level command line, not `run`'s) in this process."""
    from tinyharness.cli import main
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(XDG_DATA_HOME=sessions_home(), PYTHONIOENCODING="utf-8")
    return run_in_process(FINAL, workspace, list(argv), stdin, 60, env, main=main,
                          shown_as=["tinyharness", *argv])


def notes_run(workspace, *flags, script=None):
    with ScriptedServer(script or load_script(NOTES)) as server:
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, "--yes", *flags, "go")
    assert "Traceback" not in done.stderr, done.stderr
    return done, server


def test_stream_json_of_the_notes_task_is_claudes_stream(notes_workspace):
    done, _ = notes_run(notes_workspace, "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    lines = lines_of(done)
    init = check_init(lines[0], notes_workspace)
    assert [line["type"] for line in lines] == ["system"] + ["assistant", "user"] * 4 + ["assistant", "result"]
    uses = [block for line in lines if line["type"] == "assistant" for block in line["message"]["content"]
            if block["type"] == "tool_use"]
    assert [(use["name"], use["input"]) for use in uses][:2] == [("list_dir", {"path": "."}),
                                                                 ("read_file", {"path": "ideas.md"})]
    results = [line["message"]["content"][0] for line in lines if line["type"] == "user"]
    assert [r["tool_use_id"] for r in results] == [use["id"] for use in uses] and all(use["id"] for use in uses)
    assert results[-1]["content"] == "OK: wrote 98 characters to budget.md" and results[-1]["is_error"] is False
    assert lines[-2]["message"]["content"] == [{"type": "text", "text": ANSWER}]
    assert all(line["session_id"] == init["session_id"] and line["uuid"] for line in lines)
    result = check_result(lines[-1], "success", init["session_id"])
    assert result["result"] == ANSWER and result["num_turns"] == 5 and result["permission_denials"] == []
    assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    assert (notes_workspace / "budget.md").read_text().startswith("# Testing budget")
    assert "[tool] list_dir" in done.stderr  # the tool lines: on standard error


def test_json_is_the_result_object_alone(notes_workspace):
    done, _ = notes_run(notes_workspace, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    [result] = lines_of(done)
    assert check_result(result, "success", result["session_id"])["result"] == ANSWER and result["session_id"]


@pytest.mark.parametrize("fmt", ["stream-json", pytest.param("json", marks=pytest.mark.deep)])
def test_a_max_turns_stop_is_error_max_turns(workspace, fmt):
    done, _ = notes_run(workspace, "--output-format", fmt, "--max-turns", "1",
                        script=[calls(tool_call("list_dir", path="."))])
    assert done.returncode == 3, done.stderr
    lines = lines_of(done)
    result = check_result(lines[-1], "error_max_turns", lines[0]["session_id"])
    assert "--max-turns 1" in result["errors"][0] and "result" not in result and result["num_turns"] == 1
    assert len(lines) == (1 if fmt == "json" else 4)  # init, the call, its result, the result object


@pytest.mark.parametrize("fmt", ["stream-json", "json"])
def test_a_server_failure_is_an_error_result(workspace, fmt):
    done = run_stage(FINAL, workspace, "--base-url", "http://127.0.0.1:9/v1", "--output-format", fmt, "go")
    assert done.returncode == 1
    lines = lines_of(done)
    result = check_result(lines[-1], "error_during_execution", lines[0]["session_id"])
    assert result["is_error"] is True and "127.0.0.1:9" in result["errors"][0] and result["num_turns"] == 0
    assert result["usage"]["input_tokens"] is None  # never reported: null, not 0
    assert [line["type"] for line in lines] == (["result"] if fmt == "json" else ["system", "result"])


def test_a_denied_write_is_a_permission_denial(workspace):
    script = [calls(tool_call("write_file", path="a.txt", content="x")), "I could not write it."]
    with ScriptedServer(script) as server:  # no --yes and no terminal: the write is DENIED
        done = run_stage(FINAL, workspace, "--base-url", server.base_url, "--output-format", "stream-json", "go")
    assert done.returncode == 3 and not (workspace / "a.txt").exists()
    lines = lines_of(done)
    use = lines[1]["message"]["content"][0]
    assert lines[2]["message"]["content"][0]["is_error"] is True
    result = check_result(lines[-1], "error_during_execution", lines[0]["session_id"])
    assert result["permission_denials"] == [{"tool_name": "write_file", "tool_use_id": use["id"],
                                             "tool_input": {"path": "a.txt", "content": "x"}}]
    assert result["result"] == "I could not write it." and "nothing was allowed" in result["errors"][0]


def test_print_mode_writes_the_answer_alone(notes_workspace):
    with ScriptedServer(load_script(NOTES)) as server:
        done = tinyharness(notes_workspace, "-p", "go", "--base-url", server.base_url, "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER + "\n" and "[tool] write_file" in done.stderr
    with ScriptedServer(["Stopped early?"] * 2) as server:  # the same: `run -p`, `--output-format text`
        for argv in (["run", "-p"], ["run", "--output-format", "text"]):
            again = tinyharness(notes_workspace, *argv, "go", "--base-url", server.base_url, "--no-session")
            assert again.returncode == 0 and again.stdout == "Stopped early?\n", again.stderr


def test_c_and_r_go_on_with_a_session(workspace):
    with ScriptedServer(["First.", "Second.", "Third."]) as server:
        first = tinyharness(workspace, "-p", "--output-format", "json", "one", "--base-url", server.base_url)
        session_id = json.loads(first.stdout)["session_id"]
        second = tinyharness(workspace, "-c", "-p", "two", "--base-url", server.base_url)
        third = tinyharness(workspace, "-p", "-r", session_id, "three", "--base-url", server.base_url,
                            "--output-format", "stream-json")
    assert (first.returncode, second.returncode, third.returncode) == (0, 0, 0), third.stderr
    assert second.stdout == "Second.\n" and lines_of(third)[0]["session_id"] == session_id
    asked = [[m["content"] for m in request["messages"] if m["role"] == "user"] for request in server.requests]
    assert asked[1] == ["one", "two"] and asked[2] == ["one", "two", "three"]
    assert [line["type"] for line in lines_of(third)] == ["system", "assistant", "result"]  # not the history


@pytest.mark.parametrize("argv, said", [
    (("--output-format", "json", "--max-turns", "0", "go"), "--max-turns must be 1 or more"),
    (("--output-format=stream-json", "--json", "go"), "not both"),
    (("--output-format", "json", "go", "stray"), "unrecognized arguments: stray"),
])
def test_a_usage_error_ends_with_a_result_object(workspace, argv, said):
    done = tinyharness(workspace, "-p", *argv)
    assert done.returncode == 2
    [result] = lines_of(done)
    assert check_result(result, "error_during_execution", None)["num_turns"] == 0 and said in result["errors"][0]


def test_control_and_bidi_characters_arrive_escaped(workspace):
    answer = "red \x1b[31m csi \x9b2J rlo \u202e del \x7f done"
    done, _ = notes_run(workspace, "--output-format", "stream-json", script=[answer])
    assert done.returncode == 0, done.stderr
    assert not any(ch in done.stdout for ch in "\x1b\x9b\u202e\x7f") and done.stdout.isascii()
    assert lines_of(done)[-1]["result"] == answer  # the same text, read back


def test_the_top_level_line_knows_every_command_name():
    from tinyharness.parsers import COMMAND_NAMES, build_parser, print_mode
    sub = next(action for action in build_parser()._actions if action.dest == "command")
    assert set(COMMAND_NAMES) == set(sub.choices)
    assert print_mode(["-p", "go"]) == ["run", "-p", "go"] and print_mode(["go", "--print"])[0] == "run"
    assert print_mode(["chat", "-p"]) == ["chat", "-p"] and print_mode(["run", "--", "-p"]) == ["run", "--", "-p"]


def sdk_python():
    """An interpreter that has the Claude Agent SDK: CLAUDE_SDK_PYTHON, or this one if it can import it."""
    candidate = os.environ.get("CLAUDE_SDK_PYTHON") or sys.executable
    found = subprocess.run([candidate, "-c", "import claude_agent_sdk._internal.message_parser"],
                           capture_output=True).returncode == 0
    if not found:
        pytest.skip("the Claude Agent SDK is not installed (pip install claude-agent-sdk: a 180 MB wheel "
                    "that bundles the Claude Code binary); `python -m benchmarks.claude_sdk` installs it "
                    "into a cache folder and runs this check, or set CLAUDE_SDK_PYTHON")
    return candidate


@pytest.mark.parametrize("case", ["notes", pytest.param("max-turns", marks=pytest.mark.deep)])
def test_the_claude_agent_sdks_parser_reads_every_line(notes_workspace, case):
    python = sdk_python()
    flags = ("--max-turns", "2") if case == "max-turns" else ()
    done, _ = notes_run(notes_workspace, "--output-format", "stream-json", *flags)
    read = subprocess.run([python, SDK_CHECK], input=done.stdout, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    parsed = [json.loads(line) for line in read.stdout.splitlines()]
    assert len(parsed) == len(done.stdout.splitlines()) and None not in [p["class"] for p in parsed]
    assert parsed[0] == {"class": "SystemMessage", "subtype": "init"}
    assert {"AssistantMessage", "UserMessage"} <= {p["class"] for p in parsed}
    assert any("ToolUseBlock" in p.get("blocks", []) for p in parsed)
    assert any("ToolResultBlock" in p.get("blocks", []) for p in parsed)
    last = parsed[-1]
    assert last["class"] == "ResultMessage"
    if case == "notes":
        assert (last["subtype"], last["is_error"], last["result"]) == ("success", False, ANSWER)
    else:
        assert (last["subtype"], last["is_error"], last["result"]) == ("error_max_turns", True, None)
