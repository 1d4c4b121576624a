"""Every edge is a sentence (tinyharness only): what the model writes reaches a --json reader escaped, never as
a raw control or bidi character; a session file of any size is read with caps (a sparse 2 GiB file with no
newline, a line of 64 MiB), named in one line and skipped, with the memory of the process held small by
RLIMIT_AS; a name with a NUL byte or a control character is refused in one line and the chat goes on."""
import json
import os
import resource
import subprocess
import sys

import pytest

from tests.ladder import FINAL, ROOT, calls, run_in_process, run_stage, tool_call
from tinyharness.testing import ScriptedServer

# C1's CSI (ESC [ in one byte), NEL, a right-to-left override, the bidi isolates and marks, DEL, ESC, BEL,
# the line and paragraph separators (a reader that splits lines on them breaks a JSON line in two)
ODD = "\x9b31m red \x85 \u202egnp.exe\u202c \u2066x\u2069 \u061c\u200e\u200f \x7f \x1b]0;title\x07 \u2028\u2029 end"
RAW = set("\x9b\x85\u202e\u202c\u2066\u2069\u061c\u200e\u200f\x7f\x1b\x07\u2028\u2029")
MEMORY = 400 << 20  # bytes of address space a command gets here: a 2 GiB read could never fit


def raw_in(text):
    return sorted(f"U+{ord(c):04X}" for c in set(text) & RAW)


def cli(workspace, data, *args, stdin="", limit=None):
    """`python -m tinyharness ARGS` in a child, with at most LIMIT bytes of address space."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYHARNESS_")}
    env.update(PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8", XDG_DATA_HOME=str(data), TERM="dumb")
    cap = (lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))) if limit else None
    return subprocess.run([sys.executable, "-m", "tinyharness", *args], cwd=workspace, input=stdin, env=env,
                          capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=60,
                          preexec_fn=cap)


# --- --json: control and bidi characters escaped, the same text after parsing -------------------------------

def test_run_json_escapes_control_and_bidi_characters_and_reads_back_the_same(tmp_path):
    (tmp_path / "odd.txt").write_text(ODD)
    with ScriptedServer([calls(tool_call("read_file", path="odd.txt")), ODD]) as server:
        done = run_stage(FINAL, tmp_path, "--json", "--yes", "--base-url", server.base_url, "read odd.txt")
    assert done.returncode == 0, done.stderr
    assert raw_in(done.stdout) == []
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # str.splitlines splits at U+2028 too
    assert lines[-1]["answer"] == ODD
    assert [e["message"]["content"] for e in lines if e["type"] == "tool"] == [ODD]
    assert [e["message"]["content"] for e in lines if e["type"] == "assistant"][-1] == ODD


def test_chat_json_and_sessions_json_escape_them_too(workspace, tmp_path):
    with ScriptedServer([ODD]) as server:
        done = cli(workspace, tmp_path / "data", "chat", "--json", "--base-url", server.base_url, stdin=ODD + "\n")
    assert done.returncode == 0, done.stderr
    assert raw_in(done.stdout) == []
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[-1]["answer"] == ODD and [e["message"]["content"] for e in lines if e["type"] == "user"] == [ODD]
    listed = cli(workspace, tmp_path / "data", "sessions", "--json")
    assert listed.returncode == 0 and raw_in(listed.stdout) == [], listed.stderr
    assert [json.loads(line)["first_task"] for line in listed.stdout.splitlines()] == [" ".join(ODD.split())]


# --- sessions read with caps ------------------------------------------------------------------------------

def header(session_id, folder):
    return json.dumps({"format": "tinyharness-session", "version": 1, "id": session_id, "folder": str(folder),
                       "started": "2026-01-01T00:00:00+00:00", "model": "m"})


def user(text):
    return json.dumps({"type": "user", "time": "t", "message": {"role": "user", "content": text}})


@pytest.fixture
def huge(workspace, tmp_path):
    """A good session, and beside it: a sparse 2 GiB file with no newline (A), a session of this folder whose
    file grew to 2 GiB (B, the newest), a file that is one 64 MiB line (C), a session whose third line is
    64 MiB (D). Sparse: no disk is used."""
    data = tmp_path / "data"
    folder = data / "tinyharness" / "sessions"
    folder.mkdir(parents=True)
    real = workspace.resolve()
    good = folder / "20260101-000000-000000.jsonl"
    good.write_text("\n".join([header(good.stem, "/elsewhere"), user("the good one")]) + "\n")
    made = {}
    for name, start, size in [("a", b"", 2 << 30), ("b", (header("b", real) + "\n").encode(), 2 << 30),
                              ("c", b'{"format": "tinyharness-session", "version": 1, "id": "', 64 << 20),
                              ("d", ("\n".join([header("d", "/elsewhere"), user("before the long line"),
                                                '{"type": "user", "message": "']).encode()), 64 << 20)]:
        path = made[name] = folder / f"20990101-000000-{name * 6}.jsonl"
        path.write_bytes(start)
        os.truncate(path, size)
    return data, good, made


def one_line_each(err, names):
    lines = err.strip().splitlines()
    return "Traceback" not in err and "MemoryError" not in err and len(lines) == len(names) and all(
        any(name in line for line in lines) for name in names)


def test_sessions_names_a_huge_or_broken_file_in_one_line_and_lists_the_rest(workspace, huge):
    data, good, made = huge
    done = cli(workspace, data, "sessions", limit=MEMORY)
    assert done.returncode == 0 and one_line_each(done.stderr, [made[n].name for n in "abc"]), done.stderr
    assert good.stem in done.stdout and made["d"].stem in done.stdout and "before the long line" in done.stdout
    assert "2,147,483,648 bytes" in done.stderr and "more than 16 MiB" in done.stderr


@pytest.mark.parametrize("args, name, said", [
    (["chat", "--continue"], "b", "2,147,483,648 bytes"), (["run", "--continue", "go"], "b", "2,147,483,648 bytes"),
    (["chat", "--resume", "20990101-000000-aaaaaa"], "a", "2,147,483,648 bytes"),
    (["run", "--resume", "20990101-000000-cccccc", "go"], "c", "more than 16 MiB"),
    (["view", "20990101-000000-aaaaaa"], "a", "2,147,483,648 bytes"),
    (["view", "20990101-000000-cccccc"], "c", "more than 16 MiB")])
def test_continue_resume_and_view_say_it_in_one_line_with_little_memory(workspace, huge, args, name, said):
    """run takes a session it cannot use as a usage error (2, as in its --json result); chat and view exit 1."""
    data, _, made = huge
    with ScriptedServer(["Never asked."]) as server:
        base = ["--base-url", server.base_url] if args[0] != "view" else []
        # a chat's message comes on standard input; a run's would go to the model with its task
        done = cli(workspace, data, *args[:1], *base, *args[1:], stdin="hi\n" if args[0] == "chat" else "",
                   limit=MEMORY)
    assert done.returncode == (2 if args[0] == "run" else 1), done.stderr
    assert one_line_each(done.stderr, [made[name].stem]), done.stderr
    assert said in done.stderr and not server.requests


# --- names with a NUL byte or a control character ---------------------------------------------------------

@pytest.mark.parametrize("name", ["x\0y.json", "x\x1b]0;pwned\x07.json", "saved\u202enosj.exe"])
def test_save_refuses_an_odd_name_in_one_line_and_the_chat_goes_on(workspace, tmp_path, name):
    with ScriptedServer(["One.", "Two."]) as server:
        done = cli(workspace, tmp_path / "data", "chat", "--base-url", server.base_url,
                   stdin=f"first\n/save {name}\nsecond\n/save plain.json\n/quit\n")
    assert done.returncode == 0 and "Traceback" not in done.stderr + done.stdout, done.stderr
    refusals = [line for line in done.stdout.splitlines() if line.startswith("Cannot save")]
    assert len(refusals) == 1 and raw_in(refusals[0]) == [], refusals
    assert len(server.requests) == 2 and sorted(os.listdir(workspace)) == ["plain.json"]


@pytest.mark.parametrize("args, code", [
    (["run", "--transcript", "a\0b.json", "go"], 2), (["run", "--transcript", "a\x1bb.json", "go"], 2),
    (["run", "--image", "a\0b.png", "go"], 2), (["run", "--sandbox-read", "/tmp/a\0b", "go"], 2),
    (["chat", "--transcript", "a\0b.json"], 2), (["view", "a\0b.jsonl"], 1), (["view", "x.jsonl", "-o", "p\0.html"], 2)])
def test_a_nul_in_a_path_flag_is_one_line_never_a_traceback(workspace, args, code):
    """argv cannot carry a NUL from a shell; a program calling main() can, and a settings file can."""
    from tinyharness import cli as tinyharness_cli
    (workspace / "x.jsonl").write_text(header("x", workspace.resolve()) + "\n")
    base = ["--base-url", "http://127.0.0.1:9/v1"] if args[0] != "view" else []
    done = run_in_process(FINAL, workspace, [args[0], *base, *args[1:]], "", 30, dict(os.environ),
                          main=tinyharness_cli.main, shown_as="tinyharness")
    assert done.returncode == code and "Traceback" not in done.stderr, done.stderr
    assert len([line for line in done.stderr.splitlines() if "error" in line]) == 1, done.stderr


def test_eval_out_with_a_nul_or_a_missing_folder_is_a_usage_error_before_any_run(tmp_path, capsys):
    from tinyharness import eval as ev
    for out in ("a\0b.json", str(tmp_path / "no" / "such" / "r.json")):
        assert ev.main(["--models", "scripted:competent", "--out", out], runner=lambda job: 1 / 0) == 2
        err = capsys.readouterr().err
        assert "--out" in err and "Traceback" not in err, err


@pytest.mark.parametrize("flag", ["--image", "--sandbox-read"])
def test_a_flag_value_with_an_escape_sequence_is_shown_escaped_in_its_usage_error(workspace, flag):
    """argparse prints a usage error as it is given; a name that clears the screen must not."""
    from tinyharness import cli as tinyharness_cli
    name = "shot\x1b[2J\u202egnp.png"
    done = run_in_process(FINAL, workspace, ["run", "--base-url", "http://127.0.0.1:9/v1", flag, name,
                                             "task"], "", 30, dict(os.environ),
                          main=tinyharness_cli.main, shown_as="tinyharness")
    assert done.returncode == 2, done.stderr
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr, repr(done.stderr)
    assert "shot\\x1b[2J\\u202egnp.png" in done.stderr


@pytest.mark.parametrize("flag", ["--max-seconds", "--shell-timeout", "--subagent-max-seconds"])
@pytest.mark.parametrize("value", ["1e300", "inf", "nan"])
def test_a_time_limit_no_clock_can_hold_is_a_usage_error(workspace, flag, value):
    """A limit is added to the clock; past about 10**7 seconds the sum overflows (OverflowError from
    the socket's timeout, a traceback) - and nan compares false with everything."""
    from tinyharness import cli as tinyharness_cli
    done = run_in_process(FINAL, workspace, ["run", "--base-url", "http://127.0.0.1:9/v1", flag, value, "go"], "",
                          30, dict(os.environ), main=tinyharness_cli.main, shown_as="tinyharness")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{flag} must be more than 0 and at most 10,000,000" in done.stderr
