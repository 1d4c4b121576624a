"""--trust: a workspace's hooks and MCP files trusted without the question, for CI (issue 39: piped
input never answers a trust question any more). It covers the files as they are when the run starts,
names each on stderr, is not remembered, and never covers what the model makes of them afterwards.
Each case runs `python -m tinyharness run` against the scripted server with no terminal."""
import subprocess
import sys

from tests.test_trust_at_start import PY, appends, call, ours, place  # noqa: F401 (a fixture)
from tinyharness.testing import ScriptedServer


def run(place, turns, *flags, env=None):
    with ScriptedServer(script=[*turns, "done"]) as server:
        return subprocess.run([PY, "-m", "tinyharness", "run", "--yes", "--no-session", *flags,
                               "--base-url", server.base_url, "task"], cwd=place.ws,
                              env={**place.env, **(env or {})}, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120, start_new_session=True)


def test_trust_runs_the_hook_names_the_file_and_remembers_nothing(place):
    (place.ws / "scripts" / "check.sh").write_text(appends(place.canary, "checked;"))
    hooks = ours(place, "sh scripts/check.sh")
    first = run(place, [call(1, "list_dir", path=".")], "--trust")
    assert first.returncode == 0, first.stderr
    assert place.canary.read_text() == "checked;"
    assert f"[trust] --trust: {hooks}" in first.stderr and "scripts/check.sh" in first.stderr
    # not remembered: the next run without --trust and without a terminal is refused
    second = run(place, [call(1, "list_dir", path=".")])
    assert second.returncode == 2 and "not trusted" in second.stderr, second.stderr
    assert place.canary.read_text() == "checked;"


def test_the_environment_variable_trusts_too(place):
    (place.ws / "scripts" / "check.sh").write_text(appends(place.canary, "checked;"))
    ours(place, "sh scripts/check.sh")
    result = run(place, [call(1, "list_dir", path=".")], env={"TINYHARNESS_TRUST": "1"})
    assert result.returncode == 0 and place.canary.read_text() == "checked;", result.stderr


def test_trust_never_covers_what_the_model_rewrote_during_the_run(place):
    (place.ws / "scripts" / "check.sh").write_text(appends(place.canary, "checked;"))
    ours(place, "sh scripts/check.sh")
    rewrite = call(1, "write_file", path="scripts/check.sh", content=appends(place.canary, "MODEL;"))
    result = run(place, [rewrite, call(2, "list_dir", path=".")], "--trust")
    assert "MODEL" not in place.canary.read_text(), "--trust ran the script the model rewrote"
    assert "scripts/check.sh" in result.stderr


def test_without_trust_piped_yes_trusts_nothing(place):
    (place.ws / "scripts" / "check.sh").write_text(appends(place.canary, "checked;"))
    ours(place, "sh scripts/check.sh")
    with ScriptedServer(script=["done"]) as server:
        result = subprocess.run([sys.executable, "-m", "tinyharness", "run", "--no-session", "--base-url",
                                 server.base_url, "task"], cwd=place.ws, env=place.env, input="y\ny\n",
                                capture_output=True, text=True, timeout=120, start_new_session=True)
    assert result.returncode == 2 and place.canary.read_text() == "", result.stderr
