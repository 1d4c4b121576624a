"""Run every "Try it" block of the stage READMEs as a learner would, and check what they quote.

    python -m benchmarks.tryit            # each block: ok, or what went wrong
    python -m benchmarks.tryit m5         # only m5's blocks
    python -m benchmarks.tryit --fix      # rewrite quoted `key=N` figures that the output now says differently

A lesson's commands are only as good as their first literal run. A block marked with the line
`<!-- try-it -->` just before its fence is run whole by bash, in a fresh home folder, from a folder
that is neither the repository nor a workspace (the learner may be anywhere), with `tinyharness`
and `python` on PATH. The paragraph right after the block says what to look for: every `code span`
in it must appear in the block's output. So a README that quotes `prompt_tokens=4472` beside a
block fails the check the day the run prints 4473, and a block that only works from the
repository's folder fails the day it is written.

Blocks that need a real model are simply not marked. Blocks start the scripted server themselves
(`tinyharness fake-server ... --port P &`); the runner kills the block's whole process group at the
end, so a server a block forgot to stop does not outlive it.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- try-it -->"
FENCE = re.compile(r"^```(\w*)\s*$")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FAILURE_SIGNS = ("Traceback (most recent call last)", "command not found", "No module named",
                 "can't open file", "Errno 98", "Address already in use")
# A block's limit. m7's runs thirty scripted evals: 120 s was too little on a loaded CI machine (25 of
# 30 had run), so a block has 600 s; a block that hangs still fails, with the output it printed.
TIMEOUT = 600


@dataclass
class Block:
    readme: Path
    line: int            # 1-based line of the opening fence
    code: str
    expected: list       # code spans of the paragraph after the block
    paragraph: tuple     # (start, end) line indexes of that paragraph, for --fix

    @property
    def name(self):
        return f"{self.readme.parent.name}:{self.line}"


def readmes(root=ROOT):
    return sorted(root.glob("m[0-9]_*/README.md"))


def blocks(readme: Path) -> list[Block]:
    """The marked blocks of one README, each with the code spans of the paragraph after it."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        if i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
            raise ValueError(f"{readme}:{i + 1}: {MARK} must be followed by a fenced code block")
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        start = end + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        stop = start
        while stop < len(lines) and lines[stop].strip() and not lines[stop].startswith(("```", "#", MARK)):
            stop += 1
        paragraph = "\n".join(lines[start:stop])
        found.append(Block(readme, i + 2, "\n".join(lines[i + 2:end]) + "\n",
                           CODE_SPAN.findall(paragraph), (start, stop)))
    return found


def all_blocks(root=ROOT, only=None):
    return [b for r in readmes(root) for b in blocks(r)
            if not only or r.parent.name.split("_")[0] in only or r.parent.name in only]


def learner_bin(folder: Path) -> Path:
    """A bin folder with what `pip install -e .` gives a learner: `tinyharness`, and `python` /
    `python3` meaning the Python the package is installed in.

    Small scripts that exec the interpreter by its own path, not symlinks to it: a venv's `python`
    is itself a symlink, and Python finds its venv (and so `requests`) only from the path it was
    started by. A second symlink in another folder starts the base interpreter outside the venv,
    which has `requests` on some machines (pyenv) and not on others (Debian's /usr/bin/python3)."""
    folder.mkdir(parents=True, exist_ok=True)
    with STARTING:  # no fork of another thread's block may hold one of these open for writing
        return write_bin(folder)


def write_bin(folder):
    commands = {"tinyharness": f'exec "{sys.executable}" -m tinyharness "$@"',
                "python": f'exec "{sys.executable}" "$@"', "python3": f'exec "{sys.executable}" "$@"'}
    for name, line in commands.items():
        script = folder / name
        if not script.exists():
            script.write_text(f"#!/bin/sh\n{line}\n")
            script.chmod(0o755)
    return folder


STARTING = threading.Lock()  # writing a learner's bin scripts, starting a block: one at a time
README_PORTS = (18765, 18766)  # the ports the blocks' scripted servers listen on


def free_ports(count):
    """Ports nothing listens on now (the kernel picks them), so blocks can run side by side."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_block(block: Block, home: Path, own_ports=False) -> subprocess.CompletedProcess:
    """Run the block with bash in a fresh HOME, from a folder of its own; stdout and stderr merged.
    own_ports=True moves the README's fixed ports to free ones, so several blocks can run at once
    (the only change made to the block's text)."""
    start = home / "elsewhere"
    start.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINYHARNESS_", "PYTHON"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local/share"), PYTHONIOENCODING="utf-8",
               PATH=f"{learner_bin(home / 'bin')}{os.pathsep}{env.get('PATH', '')}",
               TINYHARNESS_PROGRESS=str(home / "progress.json"),
               PYTHONPATH=str(ROOT))       # what the editable install puts on the path
    script = home / "block.sh"
    code = block.code
    if own_ports:
        for fixed, free in zip(README_PORTS, free_ports(len(README_PORTS))):
            code = code.replace(str(fixed), str(free))
    script.write_text(code, encoding="utf-8")
    # Blocks run four at a time, on threads: a script another thread is writing when this fork
    # happens stays open for writing in the child until it execs, and an exec of that script
    # meanwhile fails with "Text file busy". Writing the scripts and forking take turns.
    with STARTING:
        process = subprocess.Popen(["bash", str(script)], cwd=start, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   encoding="utf-8", errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n[timed out after {TIMEOUT} s]"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)   # a server the block started and did not stop
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(process.args, process.returncode, output)


def problems(block: Block, output: str) -> list[str]:
    """What is wrong with a block's output: a failure sign, or a quoted span it does not contain."""
    found = [f"the output shows {sign!r}" for sign in FAILURE_SIGNS if sign in output]
    found += [f"a cd failed: {m.group(0)!r}" for m in re.finditer(r"line \d+: cd: .*", output)]
    found += [f"the README quotes `{span}`, the output does not have it" for span in block.expected
              if span not in output]
    if not block.expected:
        found.append("the paragraph after the block quotes nothing to check")
    return found


KEY_VALUE = re.compile(r"\b([a-z_]+)=(\d+)\b")


def fixed_paragraph(text: str, output: str) -> str:
    """text with its quoted figures set to what the output says: each `key=N` in a code span takes
    the output's value for that key (the k-th span quoting a key takes the k-th distinct value, so a
    block with two runs quotes them in order; when the counts differ the span is left alone), and a
    span quoting a table row, `| name | ... |`, takes the output's row of that name, cut to as many
    cells as it quotes."""
    distinct = {}
    for key, value in KEY_VALUE.findall(output):
        if value not in distinct.setdefault(key, []):
            distinct[key].append(value)
    spans = CODE_SPAN.findall(text)
    quoted = {key: sum(1 for span in spans if re.search(rf"\b{key}=\d", span)) for key in distinct}
    seen = {}

    def value_for(match):
        key = match.group(1)
        values = distinct.get(key, [])
        index = seen.get(key, 0)
        if len(values) == 1:
            return f"{key}={values[0]}"
        if values and quoted.get(key) == len(values):
            return f"{key}={values[index]}"
        return match.group(0)

    def row_for(inner):
        cells = inner.strip().strip("|").split("|")
        for line in output.splitlines():
            if line.startswith(f"| {cells[0].strip()} |"):
                mine = line.strip().strip("|").split("|")
                if len(mine) >= len(cells):
                    return "|" + "|".join(mine[:len(cells)]) + "|"
        return inner

    def span(match):
        inner = match.group(1)
        if inner.startswith("| ") and inner.endswith(" |"):
            return f"`{row_for(inner)}`"
        inner = KEY_VALUE.sub(value_for, inner)
        for key in {m.group(1) for m in KEY_VALUE.finditer(match.group(1))}:
            seen[key] = seen.get(key, 0) + 1
        return f"`{inner}`"
    return CODE_SPAN.sub(span, text)


def fix_readme(readme: Path, outputs: dict) -> bool:
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    changed = False
    for block in blocks(readme):
        output = outputs.get(block.name)
        if output is None:
            continue
        start, stop = block.paragraph
        before = "".join(lines[start:stop])
        after = fixed_paragraph(before, output)
        if after != before:
            lines[start:stop] = after.splitlines(keepends=True)
            changed = True
    if changed:
        readme.write_text("".join(lines), encoding="utf-8")
    return changed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tryit", description=__doc__.split("\n\n")[0])
    parser.add_argument("stages", nargs="*", help="only these stages (m5 or m5_context)")
    parser.add_argument("--fix", action="store_true", help="rewrite quoted key=N figures from the output")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each block's output")
    args = parser.parse_args(argv)
    failed, outputs = 0, {}
    for block in all_blocks(only=args.stages):
        with tempfile.TemporaryDirectory() as home:
            output = run_block(block, Path(home)).stdout
        outputs[block.name] = output
        wrong = problems(block, output)
        failed += bool(wrong)
        print(f"{block.name}: {'ok' if not wrong else 'FAILED'}")
        for problem in wrong:
            print(f"  {problem}")
        if args.verbose or wrong:
            print("  | " + output.rstrip().replace("\n", "\n  | "))
    if args.fix:
        for readme in readmes():
            if fix_readme(readme, outputs):
                print(f"rewrote {readme.relative_to(ROOT)}")
        return 0
    print(f"\n{len(outputs) - failed} of {len(outputs)} try-it blocks ok.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
