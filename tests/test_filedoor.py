"""The harness's own files, attacked: links, FIFOs and huge files the model plants where the harness reads or writes.

The sandbox confines the model's commands, not the harness: what the harness itself writes (--transcript,
chat's /save, view's page) and reads into the prompt (INSTRUCTIONS.md, agent_notes.md, --image) goes
through tinyharness/filedoor.py. Each attack plants, in the workspace, what a model's command could
leave there - a symbolic link to a canary outside, a link in place of a folder, a FIFO - and checks the
canary afterwards, the message the user gets and the exit code. Runs are in-process (tests/ladder.py).
"""
import ast
import json
import os
from types import SimpleNamespace

import pytest

from tests.ladder import FINAL, ROOT, run_in_process, run_stage
from tinyharness import filedoor
from tinyharness.chat.compact import notes_text
from tinyharness.testing import ScriptedServer
from tinyharness.view import view_command

CANARY = "canary: the harness never writes here\n"
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- secret-of-the-user"
LIST = {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}, "id": "c0"}]}


@pytest.fixture
def place(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    canary, secret = outside / "canary.txt", outside / "id_rsa"
    canary.write_text(CANARY)
    secret.write_text(SECRET)
    return SimpleNamespace(ws=ws, outside=outside, canary=canary, secret=secret, env={"HOME": str(tmp_path / "home")})


def run(place, *flags, script=("done",), policy=None):
    with ScriptedServer(script=None if policy else list(script), policy=policy) as server:
        result = run_stage(FINAL, place.ws, "--yes", "--no-session", *flags, "--base-url", server.base_url, "task",
                           env=place.env, timeout=60)
    return result, server


def untouched(place):
    return place.canary.read_text() == CANARY and sorted(p.name for p in place.outside.iterdir()) == [
        "canary.txt", "id_rsa"]


# --- writes: the transcript, /save, view's page ---------------------------------------------------------------

def test_a_transcript_replaced_by_a_link_mid_run_is_not_written_through(place):
    """The model's command swaps t.json for a link to a file outside between two turns: the harness
    writes nothing through it, says so once, and the run ends normally."""
    def policy(body, index):
        if index == 1:
            (place.ws / "t.json").unlink()
            (place.ws / "t.json").symlink_to(place.canary)
        return [LIST, "done"][index]
    result, server = run(place, "--transcript", "t.json", policy=policy)
    assert result.returncode == 0 and len(server.requests) == 2, result.stderr
    assert untouched(place) and (place.ws / "t.json").is_symlink()
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert "t.json is a symbolic link, not a regular file" in warning and "the run goes on" in warning


def test_a_transcript_replaced_by_a_fifo_mid_run_never_hangs(place):
    def policy(body, index):
        if index == 1:
            (place.ws / "t.json").unlink()
            os.mkfifo(place.ws / "t.json")
        return [LIST, "done"][index]
    result, server = run(place, "--transcript", "t.json", policy=policy)
    assert result.returncode == 0 and len(server.requests) == 2, result.stderr
    assert "t.json is a named pipe (FIFO), not a regular file" in result.stderr


def test_a_transcript_folder_made_a_link_is_refused_before_the_first_model_call(place):
    (place.ws / "logs").symlink_to(place.outside)
    result, server = run(place, "--transcript", "logs/t.json")
    assert result.returncode == 2 and server.requests == [] and untouched(place)
    assert "--transcript 'logs/t.json' cannot be written (logs/t.json has a symbolic link" in result.stderr


def test_a_transcript_outside_the_workspace_named_by_the_user_is_written(place):
    result, _ = run(place, "--transcript", str(place.outside / "t.json"))
    assert result.returncode == 0 and json.loads((place.outside / "t.json").read_text())[-1]["content"] == "done"


def test_chat_save_through_a_planted_link_is_refused_and_the_chat_goes_on(place):
    (place.ws / "saved.json").symlink_to(place.canary)
    with ScriptedServer(["One."]) as server:
        result = run_in_process(FINAL, place.ws, ["--base-url", server.base_url, "--no-session"],
                                "m1\n/save saved.json\n/quit\n", 60, {**os.environ, **place.env},
                                main=lambda argv: __import__("tinyharness.cli").cli.main(["chat", *argv]))
    assert result.returncode == 0, result.stderr
    assert "Cannot save to saved.json: saved.json is a symbolic link" in result.stdout and untouched(place)


def test_view_writes_no_page_through_a_planted_link(place, monkeypatch, capsys):
    (place.ws / "t.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (place.ws / "t.html").symlink_to(place.canary)
    monkeypatch.chdir(place.ws)
    assert view_command("t.json") == 1 and untouched(place)
    assert "error: cannot write t.html: t.html is a symbolic link" in capsys.readouterr().err
    (place.ws / "t.html").unlink()
    assert view_command("t.json") == 0 and "<html" in (place.ws / "t.html").read_text().lower()


def test_view_reads_no_transcript_through_a_planted_link(place, monkeypatch, capsys):
    """t.json made a link to a secret JSON list outside: its page, in the workspace, would hand it to the model."""
    (place.outside / "tokens.json").write_text(json.dumps([{"role": "user", "content": SECRET}]))
    (place.ws / "t.json").symlink_to(place.outside / "tokens.json")
    monkeypatch.chdir(place.ws)
    assert view_command("t.json") == 1 and not (place.ws / "t.html").exists()
    assert "cannot read t.json: t.json leads out of the workspace" in capsys.readouterr().err


def test_eval_out_writes_neither_report_nor_page_through_planted_links(place, monkeypatch, capsys):
    """`tinyharness eval --out results.json` in a folder the model has worked in: results.json made a link
    outside, then results.html. The runner is a stand-in (the runs are not the point here)."""
    from tinyharness import eval as ev
    monkeypatch.chdir(place.ws)
    (place.ws / "results.json").symlink_to(place.canary)
    with ScriptedServer(script=[]) as server:
        argv = ["--base-url", server.base_url, "--models", "m", "--tasks", "fact", "--tier", "easy",
                "--out", "results.json"]
        runner = lambda job: ev.Output(0, "Done.\n", "[stats] turns=1 tool_calls=0 prompt_tokens=1 completion_tokens=1")
        assert ev.main(argv, runner=runner) == 1 and untouched(place)
        assert "could not write results.json: results.json is a symbolic link" in capsys.readouterr().err
        (place.ws / "results.json").unlink()
        (place.ws / "results.html").symlink_to(place.canary)
        assert ev.main(argv, runner=runner) == 1 and untouched(place)
        assert "could not write results.html: results.html is a symbolic link" in capsys.readouterr().err


def test_a_hard_linked_transcript_is_replaced_not_written_through(place):
    """A hard link shares the file: writing into it would change the file outside. The door renames a
    new file over the name, so the other name keeps its bytes."""
    os.link(place.canary, place.ws / "t.json")
    filedoor.write_text(str(place.ws / "t.json"), "[]", place.ws)
    assert untouched(place) and (place.ws / "t.json").read_text() == "[]"


# --- reads into the prompt: INSTRUCTIONS.md, agent_notes.md, --image -------------------------------------------

def test_instructions_linked_to_a_secret_never_reach_the_model(place):
    (place.ws / "INSTRUCTIONS.md").symlink_to(place.secret)
    result, server = run(place)
    assert result.returncode == 0 and SECRET not in json.dumps(server.requests)
    assert "warning: not read:" in result.stderr and "INSTRUCTIONS.md leads out of the workspace" in result.stderr


def test_instructions_are_capped_and_the_cut_is_said(place):
    (place.ws / "INSTRUCTIONS.md").write_text("Be brief. " * 20_000)  # 200 KB
    result, server = run(place)
    system = server.requests[0]["messages"][0]["content"]
    assert result.returncode == 0 and len(system) < filedoor.INSTRUCTIONS_CAP + 2000
    assert "INSTRUCTIONS.md is 200,000 bytes; only its first 64 KiB were read" in system


def test_a_fifo_as_instructions_is_skipped_not_waited_for(place):
    os.mkfifo(place.ws / "INSTRUCTIONS.md")
    result, _ = run(place)
    assert result.returncode == 0 and "INSTRUCTIONS.md is a named pipe (FIFO)" in result.stderr


def test_agent_notes_linked_to_a_secret_are_not_quoted_at_compaction(place):
    (place.ws / "agent_notes.md").symlink_to(place.secret)
    assert notes_text(str(place.ws)) == ""
    (place.ws / "agent_notes.md").unlink()
    (place.ws / "agent_notes.md").write_text("old\n" + "x" * 100_000 + "\nnewest note\n")
    assert notes_text(str(place.ws)).endswith("newest note\n")


def test_an_image_linked_out_of_the_workspace_is_not_sent(place):
    (place.outside / "private.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (place.ws / "shot.png").symlink_to(place.outside / "private.png")
    result, server = run(place, "--image", "shot.png")
    assert result.returncode == 2 and server.requests == []
    assert "--image: cannot read shot.png: shot.png leads out of the workspace" in result.stderr
    os.mkfifo(place.ws / "pipe.png")  # opened without blocking, and refused
    result, server = run(place, "--image", "pipe.png")
    assert result.returncode == 2 and "pipe.png is a named pipe (FIFO), not a regular file" in result.stderr


# --- one door: no other code of the package opens a file by a plain call without a reason ---------------------

# (module, function) -> why its plain open/read/write is not on a path in, or named from, the workspace
ELSEWHERE = {
    ("filedoor", "open_file"): "the door itself", ("filedoor", "replace"): "the door itself",
    ("tools", "read_file"): "the file tools: open_beneath", ("tools", "replace_in"): "the file tools: open_beneath",
    ("tools", "save_note"): "open_beneath with O_NOFOLLOW and a link count check",
    ("imageload", "read_workspace_file"): "view_image: the model's path, resolved then checked inside (m8's copy)",
    ("verify", "compile_error"): "the file write_file has just renamed into place",
    ("cmdhooks", "load_with_notes"): "a workspace config behind the trust question (irregular_config first)",
    ("trust", "config_bytes"): "through the door (filedoor.read_bytes)",
    ("trust", "preview"): "through the door (filedoor.read_bytes)",
    ("asking", "write_preview"): "through the door (filedoor.read_bytes)",
    ("always", "save"): "through the door (filedoor.read_config, filedoor.write_bytes)",
    ("trusted_files", "file_digest"): "through the door (filedoor.read_bytes)",
    ("trust", "_load"): "the harness's own store", ("trust", "remember"): "the harness's own store",
    ("sessions/__init__", "opened"): "the session store, regular files only, capped",
    ("sessions/__init__", "read_header"): "the session store", ("sessions/__init__", "repair"): "the session store",
    ("sandbox/git", "digest_of"): "git's files, snapshot: an O_NOFOLLOW, O_NONBLOCK descriptor", ("sandbox/git", "harmless_config"): "git's files",
    ("sandbox/git", "put_back"): "git's files, restored",
    ("sessions/writer", "lock_holder"): "/proc",
    ("sandbox/reaping", "parents"): "/proc", ("sandbox/reaping", "children_from_proc"): "/proc",
    ("sandbox/reaping", "stat_of"): "/proc", ("sandbox/rules", "tasks_now"): "/proc",
    ("sandbox/rules", "__init__"): "/proc", ("sandbox/spawner_main", "remove_ipc"): "/proc",
    ("sandbox/spawner", "start"): "the package's own file (the spawner's program)",
    ("sandbox/spawner", "run"): "a pipe's descriptor, no path",
    ("course/__init__", "stage_title"): "the course's files", ("course/__init__", "flatten_lesson"): "the course's files", ("course/__init__", "_lines"): "the course's files",
    ("course/hints", "load_hints"): "the course's files", ("course/exercises", "find_holes"): "the course's files",
    ("course/hints", "_progress"): "the progress store", ("course/hints", "record_step"): "the progress store",
    ("course/exercises", "write_exercise"): "the learner's copy of a stage", ("course/grading", "still_to_write"): "the same",
    ("course/grading", "run_tests"): "its own report file", ("course/grading", "load_scenarios"): "the course's files", ("course/exercises", "load_passed"): "the progress store",
    ("course/exercises", "record_pass"): "the progress store", ("testing/replies", "load_script"): "a script file",
    ("demo", "show_written_file"): "the demo's own temporary workspace",
    ("eval/__init__", "final_answer"): "eval's own run folder", ("eval/evals/common", "prepare"): "eval's own run folder",
    ("eval/evals/common", "read"): "eval's own run folder", ("eval/evals/hook", "link_shared_folder"): "the same",
    ("eval/evals/runs", "run_python_in_copy"): "the same", ("eval/evals/runs", "snapshot"): "the same",
}
PLAIN = {"write_text", "read_text", "read_bytes", "write_bytes"}


def plain_opens():
    """{(module, function)} of every open(...) and Path.read_text/write_text/read_bytes/write_bytes call."""
    found = set()
    for path in sorted((ROOT / "tinyharness").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        module = path.relative_to(ROOT / "tinyharness").with_suffix("").as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (isinstance(node.func, ast.Name) and node.func.id == "open" or
                                               isinstance(node.func, ast.Attribute) and node.func.attr in PLAIN):
                inner = max((f for f in functions if f.lineno <= node.lineno <= f.end_lineno),
                            key=lambda f: f.lineno, default=None)
                found.add((module, inner.name if inner else "<module>"))
    return found


def test_every_plain_open_in_the_package_has_a_reason_not_to_use_the_door():
    assert plain_opens() - set(ELSEWHERE) == set(), "open it through tinyharness/filedoor.py, or say why not here"
