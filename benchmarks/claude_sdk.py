"""Check `run --output-format stream-json` against the Claude Agent SDK's own message parser: install
`claude-agent-sdk` into a cache folder's virtual environment (not the project's: its wheel is about
180 MB, most of it the Claude Code binary, which this check never runs), then run the SDK test of
tests/test_claude_output.py with that interpreter reading the lines (tests/claude_sdk_check.py).

    python -m benchmarks.claude_sdk [--cache DIR]

Needs the package registry (PyPI). What it printed when we ran it is in NOTES.md.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.claude_sdk",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "tinyharness-claude-sdk"))
    args = parser.parse_args(argv)
    venv = Path(args.cache) / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "claude-agent-sdk"], check=True)
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                              "print(m.version('claude-agent-sdk'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    print(f"Claude Agent SDK {version} in {venv}")
    env = {**os.environ, "CLAUDE_SDK_PYTHON": str(python)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-m", "deep or not deep",
                           "-k", "claude_agent_sdk", "-rs", "tests/test_claude_output.py"],
                          cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
