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
    assert ci_commands()[2:] == [". .venv/bin/activate && python -m pytest -q -m deep",   # then the deep tier
                                 LINT]                                                    # and the linters


LINT = '. .venv/bin/activate && python -m pip install -q -e ".[lint]" && ruff check tinyharness && mypy'


def test_the_linters_ci_runs_are_pinned_and_set_in_pyproject():
    """ruff's default rules and mypy --check-untyped-defs, at the versions the lint extra pins: a new
    release's new rule cannot turn CI red overnight."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    lint = text.split("lint = [", 1)[1].split("]", 1)[0]
    assert all(f'"{tool}==' in lint for tool in ("ruff", "mypy", "types-requests")), lint
    mypy = text.split("[tool.mypy]", 1)[1].split("\n[", 1)[0]
    assert "check_untyped_defs = true" in mypy and 'packages = ["tinyharness"]' in mypy
    assert "select" not in text.split("[tool.ruff]", 1)[1].split("[tool.ruff.format]", 1)[0]  # the defaults


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
