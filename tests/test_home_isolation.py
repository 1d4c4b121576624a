"""The suite never writes into the user's real home: tests/conftest.py gives the run a home folder
of its own. Checked from outside: a nested pytest run of tests that start harnesses which save
sessions (the fuzzer's package runs), with HOME pointing at a stand-in for the real home and no
XDG variables, must leave that stand-in empty."""
import os
import subprocess
import sys

from tests.ladder import ROOT


def test_a_test_run_leaves_the_real_home_untouched(tmp_path):
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "TINYHARNESS_")) and k not in ("HOME", "PYTHONUSERBASE")}
    env.update(HOME=str(real_home), PYTHONIOENCODING="utf-8")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "tests/test_fuzz.py", "-k", "test_forty_odd_replies and tinyharness"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
    written = [str(p.relative_to(real_home)) for p in real_home.rglob("*")]
    assert written == [], f"the test run wrote into the home folder: {written[:10]}"
