"""The README's quick start is what CI runs: .ci/run runs exactly its two lines, each in a new shell,
then the deep tier in the same environment."""
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_quick_start():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)[1]
    return block.strip().splitlines()


def ci_commands():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [shlex.split(line)[2] for line in lines if line.startswith("bash -c ")]


def test_ci_runs_exactly_the_readme_quick_start():
    assert ci_commands()[:2] == readme_quick_start()
    assert ci_commands()[2:] == [". .venv/bin/activate && python -m pytest -q -m deep"]   # then the deep tier


def test_the_quick_start_makes_and_uses_a_virtual_environment_in_each_line():
    install, tests = readme_quick_start()
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert "python -m pip install -e" in install and install.endswith("tinyharness demo")
    assert tests == ". .venv/bin/activate && python -m pytest -q"  # works alone in a new shell


def test_ci_script_is_executable():
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


def test_ci_also_runs_the_suite_in_a_venv_of_the_system_python():
    """A stock Debian machine is where a reader starts: the suite once more in a venv of its Python."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert '"$system_python" -m venv .venv-system' in text
    assert "python -m pytest -q" in text.split("system_python=/usr/bin/python3", 1)[1]
