"""Lesson lines per stage, measured against the course's budgets (COURSE.md, stage rule 4).

    python -m benchmarks.size [--root DIR]

For each stage: the lines (as `wc -l` counts them) of its lesson, armour and CLI files
(tinyharness/course/manifest.py says which file is which), the lesson lines it adds to the previous stage's
core (the eval aside), and its key functions - every function marked as an exercise and `run_agent` -
with their lengths (from `def` to the last line). A budget that is exceeded is marked OVER and the
command exits 1. `--root` measures another checkout (e.g. an older commit) with today's manifest.
`measure()` returns the numbers; tests/test_size.py fails when a budget is exceeded.
"""
import argparse
import ast
import re
import sys
from pathlib import Path

from tinyharness.course.manifest import BUDGETS, CLI, FILES, LESSON, ARMOUR, is_eval

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^[ \t]*# exercise\((m\d+)\): ")


def line_count(path):
    return len(path.read_text(encoding="utf-8").splitlines())


def stage_files(folder):
    """Every .py file of a stage folder, relative to it."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def key_functions(folder):
    """{"file:name": lines} for each function marked `# exercise(mK): ...` and each run_agent."""
    found = {}
    for rel in stage_files(folder):
        source = (folder / rel).read_text(encoding="utf-8")
        lines = source.splitlines()
        for name, node in named_functions(ast.parse(source)):
            above = node.lineno - 2  # the line above the def (0-based)
            while above >= 0 and lines[above].lstrip().startswith("#") and not MARKER.match(lines[above]):
                above -= 1
            if node.name == "run_agent" or (above >= 0 and MARKER.match(lines[above])):
                found[f"{rel}:{name}"] = node.end_lineno - node.lineno + 1
    return found


def named_functions(tree, prefix=""):
    """(qualified name, node) of every function and method, Class.method for methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from named_functions(node, prefix + node.name + ".")


def measure(root=ROOT):
    """One dict per stage: lines by role, core, eval, added, key functions, and the budgets exceeded."""
    rows, previous_core = [], 0
    for stage, roles in FILES.items():
        folder = Path(root) / stage
        if not folder.is_dir():
            continue
        present = stage_files(folder)
        sizes = {rel: line_count(folder / rel) for rel in present}
        by_role = {role: sum(n for rel, n in sizes.items() if roles.get(rel, LESSON) == role)
                   for role in (LESSON, ARMOUR, CLI)}  # a file the manifest does not know counts as lesson
        evals = sum(n for rel, n in sizes.items() if roles.get(rel, LESSON) == LESSON and is_eval(rel))
        core = by_role[LESSON] - evals
        row = {"stage": stage, **by_role, "core": core, "eval": evals, "added": core - previous_core,
               "functions": key_functions(folder), "unlisted": sorted(set(present) - set(roles)),
               "missing": sorted(set(roles) - set(present))}
        row["over"] = over_budget(row)
        rows.append(row)
        previous_core = core
    return rows


def over_budget(row):
    """The budgets a stage exceeds, in words."""
    over, stage = [], row["stage"]
    first = BUDGETS["first"].get(stage)
    if first is not None and row["core"] > first:
        over.append(f"lesson {row['core']} > {first}")
    if first is None and row["added"] > BUDGETS["added"]:
        over.append(f"adds {row['added']} lesson lines > {BUDGETS['added']}")
    if row["eval"] > BUDGETS["eval"]:
        over.append(f"eval {row['eval']} > {BUDGETS['eval']}")
    core = BUDGETS["core"].get(stage)
    if core is not None and row["core"] > core:
        over.append(f"lesson (eval aside) {row['core']} > {core}")
    over += [f"{name} has {n} lines > {BUDGETS['function']}" for name, n in row["functions"].items()
             if n > BUDGETS["function"]]
    return over


def budget_of(stage):
    if stage in BUDGETS["first"]:
        return f"lesson <= {BUDGETS['first'][stage]}"
    parts = [f"adds <= {BUDGETS['added']}"]
    if stage in BUDGETS["core"]:
        parts.append(f"lesson <= {BUDGETS['core'][stage]}")
    return ", ".join(parts)


def report(rows, say=print):
    say(f"{'stage':<11} {'lesson':>6} {'armour':>6} {'cli':>5} {'eval':>5} {'added':>6}  budget")
    for row in rows:
        verdict = "ok" if not row["over"] else "OVER: " + "; ".join(row["over"])
        say(f"{row['stage']:<11} {row['core']:>6} {row['armour']:>6} {row['cli']:>5} {row['eval'] or '':>5} "
            f"{row['added']:>6}  {budget_of(row['stage'])}, eval <= {BUDGETS['eval']}: {verdict}")
    say(f"\nKey functions (exercises and run_agent, <= {BUDGETS['function']} lines each):")
    for row in rows:
        shown = ", ".join(f"{name} {n}" for name, n in sorted(row["functions"].items(), key=lambda kv: kv[0]))
        say(f"  {row['stage']:<11} {shown or '-'}")
    for row in rows:
        if row["unlisted"] or row["missing"]:
            say(f"note: {row['stage']}: not in the manifest {row['unlisted']}, in the manifest but absent {row['missing']}")
    return not any(row["over"] for row in rows)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.size", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT), help="the checkout to measure (default: this one)")
    args = parser.parse_args(argv)
    rows = measure(Path(args.root))
    if not rows:
        print(f"error: no stage folders under {args.root}", file=sys.stderr)
        return 2
    return 0 if report(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
