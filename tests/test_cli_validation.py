"""The command line is checked before the first model call: a bad flag, URL or path is a usage error
(exit 2) that prints the command's own usage line and says what would work, never a traceback and
never after the model's work is spent. Ctrl-C exits 130. Run on m1, every later stage and `tinyharness run`.

Most checks call the stage's `main` in-process (a usage error ends in argparse before anything runs);
the Ctrl-C test runs the real CLI, since a signal is the thing tested.
"""
import importlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.ladder import FINAL, command, ctrl_c_as_on_a_terminal, level, stages_from, wait_for_the_first_request
from tests.ladder import ROOT
from tinyharness.demo import TASK
from tinyharness.testing import ScriptedServer

LADDER = stages_from("m1")
EXAMPLE_URL = "--base-url http://localhost:11434/v1"


def usage_line(stage):
    return "usage: tinyharness run " if stage == FINAL else f"usage: python -m {stage} "


def call_main(stage, *args):
    """The stage's own `main`, in-process: `python -m mK_x ARGS` or `tinyharness run ARGS`."""
    if stage == FINAL:
        return importlib.import_module("tinyharness.cli").main(["run", *args])
    return importlib.import_module(f"{stage}.__main__").main(list(args))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path, tmp_path_factory):
    """No TINYHARNESS_* from the caller's shell, the workspace is a fresh folder, sessions stay in the test's
    (beside the workspace: the package refuses a workspace that holds its data folder)."""
    for name in [n for n in os.environ if n.startswith("TINYHARNESS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
    monkeypatch.chdir(tmp_path)


def usage_error(stage, capsys, *args):
    """Run with ARGS, expect exit 2 from argparse; return stderr."""
    with pytest.raises(SystemExit) as stop:
        result = call_main(stage, *args)
        pytest.fail(f"no usage error: exit {result}")
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert usage_line(stage) in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("url", ["notaurl", "http://", "ftp://x", "http://[::1", "http://localhost:99999/v1",
                                 "http://localhost:0/v1", "localhost:11434"])
def test_a_malformed_base_url_is_a_usage_error_with_an_example(stage, url, capsys):
    err = usage_error(stage, capsys, "--base-url", url, "hi")
    assert f"--base-url {url!r} is not an http(s) URL" in err and EXAMPLE_URL in err


@pytest.mark.parametrize("stage", LADDER)
def test_the_base_url_from_the_environment_is_checked_too(stage, capsys, monkeypatch):
    monkeypatch.setenv("TINYHARNESS_BASE_URL", "localhost:11434/v1")
    assert EXAMPLE_URL in usage_error(stage, capsys, "hi")


@pytest.mark.parametrize("stage", LADDER)
@pytest.mark.parametrize("case", ["empty", "missing-folder", "a-folder", "parent-is-a-file", "not-writable"])
def test_a_transcript_path_that_cannot_be_written_is_refused_before_the_first_model_call(stage, case, capsys, tmp_path):
    (tmp_path / "file.txt").write_text("x")
    path = {"empty": "", "missing-folder": "no/such/folder/run.json", "a-folder": ".",
            "parent-is-a-file": "file.txt/run.json", "not-writable": unwritable_path(tmp_path)}[case]
    with ScriptedServer(script=["done"]) as server:
        err = usage_error(stage, capsys, "--base-url", server.base_url, "--transcript", path, "hi")
    assert f"--transcript {path!r}" in err
    assert server.requests == [], "the model was called before the usage error"


def unwritable_path(tmp_path):
    """A path in a folder this user cannot write to (root can write almost anywhere: then /sys)."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return str(folder / "run.json")
    if not Path("/sys").is_dir():
        pytest.skip("running as root without /sys: no folder here refuses a new file")
    return "/sys/tinyharness-transcript-test.json"


@pytest.mark.parametrize("stage", LADDER)
def test_checking_the_transcript_path_leaves_no_file_and_empties_none(stage, capsys, tmp_path):
    (tmp_path / "old.json").write_text("kept")
    usage_error(stage, capsys, "--transcript", "new.json", "--max-turns", "0", "hi")   # a later check fails
    usage_error(stage, capsys, "--transcript", "old.json", "--max-turns", "0", "hi")
    assert not (tmp_path / "new.json").exists() and (tmp_path / "old.json").read_text() == "kept"


@pytest.mark.parametrize("stage", LADDER)
def test_a_good_transcript_path_is_written(stage, tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    with ScriptedServer(script=["done"]) as server:
        assert call_main(stage, "--base-url", server.base_url, "--transcript", "runs/t.json", "hi") == 0
    assert '"done"' in (tmp_path / "runs" / "t.json").read_text()


@pytest.mark.parametrize("stage", LADDER)
def test_an_unquoted_task_gets_a_hint_to_quote_it(stage, capsys):
    err = usage_error(stage, capsys, "find", "the", "budget")
    assert 'put the task in quotes: "find the budget"' in err


@pytest.mark.parametrize("stage", LADDER)
def test_numbers_that_must_be_positive(stage, capsys):
    flags = [("--max-turns", "0")] + [(flag, value) for flag, first in [("--shell-timeout", 2), ("--max-seconds", 4)]
                                      if level(stage) >= first for value in ("0", "-1", "nan")]
    for flag, value in flags:
        assert flag in usage_error(stage, capsys, flag, value, "hi")


@pytest.mark.parametrize("stage", [s for s in LADDER if level(s) >= 8])
def test_an_empty_image_is_a_usage_error(stage, capsys):
    assert "--image" in usage_error(stage, capsys, "--image", "", "hi")


@pytest.mark.parametrize("stage", LADDER)
def test_help_lists_every_exit_code(stage, capsys):
    with pytest.raises(SystemExit) as stop:
        call_main(stage, "--help")
    out = " ".join(capsys.readouterr().out.split())
    assert stop.value.code == 0
    assert "exit codes: 0 the model finished, 1 a runtime failure" in out and "130 interrupted (Ctrl-C)" in out


def test_readme_lists_exit_code_130():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "3 stopped by a limit (not confirmed complete); 130 interrupted by Ctrl-C" in readme


# --- Ctrl-C: the real CLI, a real signal ----------------------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_ctrl_c_while_waiting_for_the_model_exits_130_without_a_traceback(stage, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8", XDG_DATA_HOME=os.environ["XDG_DATA_HOME"])
    with ScriptedServer(script=[{"content": "too late", "delay": 300}]) as server:
        proc = subprocess.Popen(command(stage, "--base-url", server.base_url, "hi"), cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=ctrl_c_as_on_a_terminal)
        try:
            wait_for_the_first_request(server, proc)
            proc.send_signal(signal.SIGINT)  # what Ctrl-C does
            out, err = proc.communicate(timeout=120)  # a loaded machine is slow to unwind
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # tinyharness with no terminal and no --yes also says at the start that writes and commands will be denied
    assert [line for line in err.splitlines() if not line.startswith(("[stats]", "[permissions]"))] == ["Interrupted."]


# --- `... | head`: the reader closed standard output -------------------------------------------

@pytest.mark.parametrize("stage", LADDER)
def test_a_closed_stdout_stops_the_run_with_exit_1_and_no_traceback(stage, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8", XDG_DATA_HOME=os.environ["XDG_DATA_HOME"])
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}, "never asked"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited: the first line printed finds no reader
    with ScriptedServer(script=script) as server:
        try:
            result = subprocess.run(command(stage, "--base-url", server.base_url, "hi"), cwd=tmp_path, env=env,
                                    stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
        finally:
            os.close(write_end)
    assert result.returncode == 1, result.stderr     # not 0: the model did not finish
    assert "Traceback" not in result.stderr and "the output was closed" in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1].startswith("[stats] turns=1 ")
    assert len(server.requests) == 1


# --- The tinyharness command's other subcommands -------------------------------------------------

def tinyharness_main(*args):
    return importlib.import_module("tinyharness.cli").main(list(args))


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_fake_server_port_out_of_range_is_a_usage_error(port, capsys):
    with pytest.raises(SystemExit) as stop:
        tinyharness_main("fake-server", "--vision", "--port", port)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "usage: tinyharness fake-server" in err
    assert "is not a port number from 1 to 65535" in err


@pytest.mark.parametrize("source", [["--vision"], ["--eval-models"]])
def test_fake_server_port_in_use_says_so_and_exits_1(source, capsys):
    with ScriptedServer(script=[]) as taken:
        assert tinyharness_main("fake-server", *source, "--port", str(taken.port)) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{taken.port}" in err and "Choose another --port" in err
    assert "Traceback" not in err


def test_a_stray_word_after_a_subcommand_shows_that_subcommands_usage(capsys):
    with pytest.raises(SystemExit) as stop:
        tinyharness_main("demo", "now")
    assert stop.value.code == 2 and "usage: tinyharness demo" in capsys.readouterr().err


def test_ctrl_c_in_any_subcommand_exits_130(monkeypatch, capsys):
    def interrupted(**kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(importlib.import_module("tinyharness.demo"), "run_demo", interrupted)
    try:
        code = tinyharness_main("demo")
    except KeyboardInterrupt:  # caught here, or pytest would take it for the user's own Ctrl-C and stop
        pytest.fail("Ctrl-C escaped main(): the user sees a traceback")
    assert code == 130
    assert capsys.readouterr().err == "Interrupted.\n"


def demo_folders(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("tinyharness-demo-"))


def test_the_demo_removes_its_folder(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    said = []
    assert importlib.import_module("tinyharness.demo").run_demo(say=said.append) == 0
    assert demo_folders(tmp_path) == []
    assert any("  | 300 KM" in line for line in said), "the demo still shows the file it wrote"
    assert "is gone (`tinyharness demo --keep` keeps it)" in "\n".join(said)
    # What to run next works from any folder, with the package installed and no clone: no examples/ path
    assert said[-1].endswith(f'tinyharness course workspace notes ~/notes && cd ~/notes && tinyharness run "{TASK}"')


def test_the_demo_keeps_its_folder_when_asked_and_says_where(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    said = []
    assert importlib.import_module("tinyharness.demo").run_demo(say=said.append, keep=True) == 0
    [name] = demo_folders(tmp_path)
    assert "300 KM" in (tmp_path / name / "notes" / "budget.md").read_text(encoding="utf-8")
    text = "\n".join(said)
    assert f"The workspace is kept in {tmp_path / name}; delete that folder when you are done" in text


@pytest.mark.parametrize("args", [["--base-url", "notaurl"], ["--transcript", "no/such/folder/t.json"], ["hello", "there"],
                                  ["--bogus"], ["--bogus", "hello"]])  # chat's message is optional: no task to quote
def test_chat_checks_its_command_line_like_run(args, capsys):
    with pytest.raises(SystemExit) as stop:
        tinyharness_main("chat", *args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "usage: tinyharness chat" in err and "Traceback" not in err, err
