"""The folder-independent commands a lesson's "Try it" uses: `course workspace`, `fake-server
--script NAME` and `course check STAGE -k EXPR`."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from tests.ladder import ROOT
from tinyharness import cli, course

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_workspace_copies_a_fresh_example(tmp_path, capsys):
    target = tmp_path / "deep" / "notes-m1"
    assert course.course_workspace("notes", target) == 0
    assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in (ROOT / "examples/notes").iterdir())
    assert (target / "ideas.md").read_bytes() == (ROOT / "examples/notes/ideas.md").read_bytes()
    assert f"cd {target}" in capsys.readouterr().out


def test_workspace_refuses_to_nest_into_an_existing_folder(tmp_path, capsys):
    target = tmp_path / "notes"
    assert course.course_workspace("notes", target) == 0
    (target / "budget.md").write_text("an old run's answer")
    assert course.course_workspace("notes", target) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err
    assert not (target / "notes").exists()                 # what `cp -r` would have done
    assert (target / "budget.md").exists()                  # and nothing was touched


def test_workspace_force_replaces_the_folder(tmp_path):
    target = tmp_path / "notes"
    assert course.course_workspace("notes", target) == 0
    (target / "budget.md").write_text("an old run's answer")
    assert course.course_workspace("notes", target, force=True) == 0
    assert not (target / "budget.md").exists()
    assert (target / "ideas.md").is_file()


def test_workspace_unknown_name_and_inside_the_example_are_usage_errors(tmp_path, capsys):
    assert course.course_workspace("nope", tmp_path / "x") == 2
    assert "images, mistakes, notes, reports, empty" in capsys.readouterr().err
    assert course.course_workspace("notes", ROOT / "examples/notes/copy") == 2
    assert "inside the example" in capsys.readouterr().err
    assert not (ROOT / "examples/notes/copy").exists()


def test_workspace_through_the_command_line(tmp_path):
    target = tmp_path / "images"
    run = lambda: subprocess.run([sys.executable, "-m", "tinyharness", "course", "workspace", "images",
                                  str(target)], capture_output=True, text=True, cwd=tmp_path, env=ENV)
    first, second = run(), run()
    assert first.returncode == 0 and (target / "red-blue.png").is_file()
    assert second.returncode == 2 and "already exists" in second.stderr and "Traceback" not in second.stderr


@pytest.mark.parametrize("name", ["endless", "hello", "notes", "reads-errors", "repeat", "self-rescue", "verify"])
def test_a_bundled_script_is_found_by_name_from_any_folder(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = course.bundled_script(name)
    assert path == str(ROOT / "examples" / f"{name}.script.json")
    assert cli.script_path(name) == path


def test_a_script_path_still_wins_over_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").write_text("[]")
    assert course.bundled_script("notes") == "notes"


def test_an_unknown_script_name_is_a_usage_error(capsys):
    assert cli.main(["fake-server", "--script", "no-such-script"]) == 2
    err = capsys.readouterr().err
    assert "no-such-script" in err and "endless, hello, notebook, notes, reads-errors, repeat, reports, self-rescue, spellings, verify" in err


def test_fake_server_serves_a_bundled_script_by_name(tmp_path):
    server = subprocess.Popen([sys.executable, "-m", "tinyharness", "fake-server", "--script", "notes"],
                              cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[4]
        request = urllib.request.Request(url + "/chat/completions", method="POST",
                                         data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                                         headers={"Content-Type": "application/json"})
        reply = json.load(urllib.request.urlopen(request, timeout=10))
        expected = json.loads((ROOT / "examples/notes.script.json").read_text())[0]
        assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == expected["tool_calls"][0]["name"]
    finally:
        server.terminate()
        server.wait(10)


def test_check_passes_k_through_to_pytest(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(course.subprocess, "run",
                        lambda command, cwd, check: seen.update(command=command, cwd=cwd) or subprocess.CompletedProcess(command, 0))
    assert cli.main(["course", "check", "m3", "-k", "attacks"]) == 0
    assert seen["command"][-2:] == ["-k", "([m3_hooks] or [m3_hooks- or -m3_hooks]) and (attacks)"]
    assert seen["cwd"] == ROOT
    assert cli.main(["course", "check", "m3"]) == 0
    assert seen["command"][-2:] == ["-k", "[m3_hooks] or [m3_hooks- or -m3_hooks]"]


def test_the_stage_selection_takes_one_stage_only():
    """`-k m4_guards` alone also matched test_m4_guards.py's runs on m5..m8 and the package."""
    listed = subprocess.run([sys.executable, "-m", "pytest", "tests/test_m4_guards.py", "tests/test_m3_attacks.py",
                             "--collect-only", "-q", "-k", course.stage_selection("m4_guards", "test_m4")],
                            cwd=ROOT, capture_output=True, text=True).stdout
    ids = [line for line in listed.splitlines() if "::" in line]
    assert ids and all(line.startswith("tests/test_m4_guards.py::") and line.endswith("m4_guards]") for line in ids)


def test_an_empty_workspace_is_new_or_replaced(tmp_path):
    target = tmp_path / "m2"
    assert course.course_workspace("empty", target) == 0 and list(target.iterdir()) == []
    (target / "scratch").mkdir()
    assert course.course_workspace("empty", target) == 2 and (target / "scratch").is_dir()
    assert course.course_workspace("empty", target, force=True) == 0 and list(target.iterdir()) == []
