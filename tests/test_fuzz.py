"""The reply fuzzer, quick: forty odd replies (fixed seed) on every stage from m1 and the package.

`python -m benchmarks.fuzz --stage S --runs 1000` is the long version. A run counts as a crash (an
exit code outside 0/1/2/3, or a traceback), a hang, or poisoned (a later request breaks a rule a
real server enforces); the quick version must find none of them. The surface fuzzer
(`--surface S`, benchmarks/fuzz_surfaces.py) gets a short run of each surface too.
"""
import pytest

from benchmarks import fuzz_surfaces
from benchmarks.fuzz import BODY_KINDS, STREAM_KINDS, fuzz, run_once
from tests.ladder import STAGES, stages_from


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_forty_odd_replies_no_crash_no_hang_no_poison(stage):
    lines = []
    # a hang is a run that never ends: 30 s, not the fuzzer's default 10, so that a loaded 2-core machine
    # (one in-process run of the package took over 10 s there, at load 37) is not mistaken for one
    result = fuzz(stage, runs=40, seed=7, limit=30, say=lines.append)
    assert (result["crashes"], result["hangs"], result["poisoned"]) == (0, 0, 0), result["problems"][:3]
    assert lines[-1].startswith(f"fuzz {stage}: 40 runs, 0 crashes, 0 hangs, 0 poisoned")


def test_there_are_at_least_thirty_kinds_of_odd_reply():
    assert len(BODY_KINDS) >= 30 and len(STREAM_KINDS) >= 15


def test_the_fuzzer_counts_a_crash(tmp_path, monkeypatch):
    """The detector itself can fail: an exception escaping main() and an exit code outside the contract."""
    import benchmarks.fuzz as module

    def explode(argv):
        raise KeyError("boom")
    monkeypatch.setattr(module, "entry_and_flags", lambda stage: (explode, []))
    outcome, _, _, stderr = run_once("m1_loop", [], tmp_path, limit=5)
    assert outcome == "crash" and "KeyError" in stderr
    monkeypatch.setattr(module, "entry_and_flags", lambda stage: (lambda argv: 7, []))
    assert run_once("m1_loop", [], tmp_path, limit=5)[0] == "crash"
    monkeypatch.setattr(module, "entry_and_flags", lambda stage: (lambda argv: __import__("time").sleep(5), []))
    assert run_once("m1_loop", [], tmp_path, limit=0.2)[0] == "hang"


# --- The surface fuzzer (benchmarks/fuzz_surfaces.py): a short run of each -----------------------------

SHORT = {"terminal": 6, "sessions": 12, "viewer": 12}


@pytest.mark.parametrize("surface", sorted(SHORT))
def test_a_short_surface_run_finds_no_crash_hang_loss_or_injection(surface):
    lines = []
    result = fuzz_surfaces.fuzz_surface(surface, runs=SHORT[surface], seed=3, say=lines.append)
    assert (result["crashes"], result["hangs"], result["lost"], result["injected"]) == (0, 0, 0, 0), \
        result["problems"][:2]
    assert lines[-1] == f"surface {surface}: {SHORT[surface]} runs, 0 crashes, 0 hangs, 0 lost, 0 injected"


@pytest.mark.parametrize("surface", ["mcp", "ollama", "hooks"])
def test_a_short_run_of_the_surfaces_hardened_elsewhere(surface):
    result = fuzz_surfaces.fuzz_surface(surface, runs=2, seed=3, limit=15, say=lambda line: None)
    assert (result["crashes"], result["hangs"], result["lost"], result["injected"]) == (0, 0, 0, 0), \
        result["problems"][:2]


def test_the_surface_fuzzer_counts_what_it_is_shown(monkeypatch):
    """The detectors themselves: a raw ESC is an injection, a traceback a crash, a page with a script too."""
    assert fuzz_surfaces.is_injected(b"fine\r\n\\x1b]0;shown\\x07\n") is False
    assert fuzz_surfaces.is_injected(b"ok \x1b]0;title\x07") and fuzz_surfaces.is_injected("\u202e".encode())
    assert fuzz_surfaces.is_injected("\u009b2J".encode())
    outcomes = iter([("k", "crash", 1, b"Traceback", None, False), ("k", "ok", 0, b"", "no session file", True),
                     ("k", "hang", None, b"", None, False)])
    monkeypatch.setitem(fuzz_surfaces.RUNNERS, "viewer", lambda *args: next(outcomes))
    result = fuzz_surfaces.fuzz_surface("viewer", runs=3, say=lambda line: None)
    assert (result["crashes"], result["hangs"], result["lost"], result["injected"]) == (1, 1, 1, 1)
    check = fuzz_surfaces.PageCheck()
    check.feed('<div><script>x</script><img src="http://x/a.png"><span onclick="x">a</span></div>')
    assert check.problems == ["<script>", "img src='http://x/a.png'", "span onclick='x'"]


# The first stage and the last in the README's command; every stage in the deep tier (-m deep).
@pytest.mark.parametrize("stage", [s if s in (STAGES[0], STAGES[-1]) else pytest.param(s, marks=pytest.mark.deep)
                                   for s in STAGES])
def test_a_short_terminal_run_on_each_stage_injects_nothing(stage):
    """Every stage prints a server's error text and the model's words through its armour's printable()."""
    result = fuzz_surfaces.fuzz_surface("terminal", runs=2, seed=5, stage=stage, say=lambda line: None)
    assert (result["crashes"], result["hangs"], result["lost"], result["injected"]) == (0, 0, 0, 0), \
        result["problems"][:2]
