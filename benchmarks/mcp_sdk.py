"""Check our MCP client against the official Python SDK: install `mcp` (2.x) into a cache folder's
virtual environment, then run tests/test_mcp_sdk.py with that interpreter serving the SDK's server,
over stdio and over Streamable HTTP (SSE answers, then JSON answers).

    python -m benchmarks.mcp_sdk [--cache DIR]

Needs the package registry (PyPI). What it printed when we ran it is in NOTES.md.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_sdk", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "tinyharness-mcp-sdk"))
    args = parser.parse_args(argv)
    venv = Path(args.cache) / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "mcp>=2"], check=True)
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    print(f"official MCP SDK {version} in {venv}")
    env = {**os.environ, "MCP_SDK_PYTHON": str(python)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "sdk", "tests/test_mcp_sdk.py"],
                          cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
