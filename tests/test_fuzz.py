"""The reply fuzzer, quick: forty odd replies (fixed seed) on every stage from m1 and the package.

`python -m benchmarks.fuzz --stage S --runs 1000` is the long version. A run counts as a crash (an
exit code outside 0/1/2/3, or a traceback), a hang, or poisoned (a later request breaks a rule a
real server enforces); the quick version must find none of them.
"""
import pytest

from benchmarks.fuzz import BODY_KINDS, STREAM_KINDS, fuzz, run_once
from tests.ladder import stages_from


@pytest.mark.parametrize("stage", stages_from("m1"))
def test_forty_odd_replies_no_crash_no_hang_no_poison(stage):
    lines = []
    result = fuzz(stage, runs=40, seed=7, say=lines.append)
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
