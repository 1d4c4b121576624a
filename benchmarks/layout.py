"""The package's layout, measured: which module imports which, how long each is, where a circle is.

    python -m benchmarks.layout [--root DIR] [--table]

A module of `tinyharness/` may import another only "downwards": if a imports b (at the top or inside
a function, which only delays the import), b must not import a, directly or through others. An
import tucked inside a function to dodge such a circle still makes one, so every import counts here.
The report lists each module with its lines and the package modules it imports, then the circles
(strongly connected parts of the graph), those of the whole repository's graph (stages, benchmarks
and tests too, each import by its full name), the modules over MAX_LINES, and the functions over
MAX_FUNCTION_LINES (the manifest's bound for a key function) that LONG_FUNCTIONS_ALLOWED does not
name with a reason; it exits 1 when any of those lists is not empty, or an allowed one is short now.
`--table` prints the Markdown table that README.md's Layout section holds (tests/test_layout.py
checks that the two agree).
"""
import argparse
import ast
import os
import sys
from pathlib import Path

from tinyharness.course.manifest import BUDGETS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tinyharness"
MAX_LINES = 500                                # issue 22: one job per module, none over 500 lines
MAX_FUNCTION_LINES = BUDGETS["function"]       # 40: run_agent's and every key function's bound, the package's too
# The functions allowed over MAX_FUNCTION_LINES for now, each with its reason ("module:function").
# Empty is the aim: an entry is a debt, and one whose function has come down under the bound fails
# tests/test_layout.py until it is taken out.
LONG_FUNCTIONS_ALLOWED = {}  # "module:function": why it may be longer for now; empty, as it should be


def modules(root=ROOT):
    """{dotted name relative to the package ("loop", "evals.claims"): path}."""
    base = root / PACKAGE
    found = {}
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported(module, node, known):
    """The package modules one import statement of `module` names (dotted, relative to the package)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name == PACKAGE or a.name.startswith(PACKAGE + ".")]
        return {n.split(".", 1)[1] if "." in n else "__init__" for n in names} & set(known)
    if node.level:  # relative: from . import x, from .x import y, from ..x import y
        here = module.split(".") if module in known and known[module].name == "__init__.py" else module.split(".")[:-1]
        anchor = here[: len(here) - (node.level - 1)] if node.level > 1 else here
        stem = ".".join(anchor + ([node.module] if node.module else []))
    elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
        stem = node.module.split(".", 1)[1] if "." in node.module else ""
    else:
        return set()
    found = set()
    for alias in node.names:  # `from .evals import claims` imports the module evals.claims
        sub = f"{stem}.{alias.name}" if stem else alias.name
        if sub in known:
            found.add(sub)
        elif stem in known:
            found.add(stem)
        elif not stem:
            found.add("__init__")
    return found


def import_graph(root=ROOT):
    """{module: set of package modules it imports, at any depth of its code}."""
    known = modules(root)
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets |= imported(name, node, known)
        targets.discard(name)
        targets.discard("__init__")  # the package's own __init__ holds only its version
        graph[name] = targets
    return graph


def tree_modules(root=ROOT):
    """{full dotted name ("tinyharness.loop", "m4_guards.edges", "tests.test_cli"): path} of every
    Python file of the repository (hidden folders, such as a virtual environment, left out)."""
    found = {}
    for path in sorted(Path(root).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "__pycache__" in parts or any(p.startswith(".") for p in parts):
            continue
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def tree_imported(module, node, known):
    """The repository's modules one import statement of `module` names, by their full dotted names.
    `import a.b.c` names the longest of a.b.c, a.b, a that is a module of the tree; `from x import y`
    names x.y when that is a module, else x."""
    def longest(name):
        parts = name.split(".")
        return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in known), None)
    if isinstance(node, ast.Import):
        return {m for m in map(longest, (a.name for a in node.names)) if m}
    stem = node.module or ""
    if node.level:                  # relative: anchored at the module's package
        here = module.split(".") if known[module].name == "__init__.py" else module.split(".")[:-1]
        anchor = here[: len(here) - (node.level - 1)]
        stem = ".".join(anchor + ([node.module] if node.module else []))
    found = {f"{stem}.{a.name}" if stem else a.name for a in node.names}
    return {f if f in known else longest(stem) for f in found} - {None}


def tree_graph(root=ROOT):
    """{module: the repository's modules it imports}, for the whole tree (the package, the stages, the
    benchmarks, the tests), every import statement at any depth counted."""
    known = tree_modules(root)
    graph = {}
    for name, path in known.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets |= tree_imported(name, node, known)
        graph[name] = targets - {name}
    return graph


def circles(graph):
    """The strongly connected parts of more than one module (Tarjan's algorithm), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def line_counts(root=ROOT):
    return {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules(root).items()}


def long_functions(root=ROOT, limit=MAX_FUNCTION_LINES):
    """["module:function (N lines)"] for each function (methods too) longer than `limit`, from def to its end."""
    found = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{name}:{node.name} ({length} lines)")
    return sorted(found)


def function_gate(root=ROOT, limit=MAX_FUNCTION_LINES, allowed=None):
    """(the functions over `limit` that the allow-list does not name, the allow-list's entries whose
    function is no longer over it, or no longer exists): both empty when the gate passes."""
    allowed = LONG_FUNCTIONS_ALLOWED if allowed is None else allowed
    found = long_functions(root, limit)
    names = {f.split(" (")[0] for f in found}
    return [f for f in found if f.split(" (")[0] not in allowed], sorted(set(allowed) - names)


def layers(graph):
    """{module: layer}: 0 for a module that imports nothing of the package, else one more than the
    highest layer it imports. Defined only for a graph without circles."""
    layer = {}

    def depth(node, seen=()):
        if node not in layer:
            if node in seen:
                raise ValueError(f"a circle through {node}")
            layer[node] = 1 + max((depth(n, seen + (node,)) for n in graph[node]), default=-1)
        return layer[node]

    for node in graph:
        depth(node)
    return layer


def table(graph):
    """README's Layout table: one row per module, lowest layer first."""
    rows = ["| layer | module | imports from the package |", "|---|---|---|"]
    layer = layers(graph)
    for name in sorted(graph, key=lambda n: (layer[n], n)):
        deps = ", ".join(sorted(graph[name])) or "-"
        rows.append(f"| {layer[name]} | `{name}` | {deps} |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.layout", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--table", action="store_true", help="print only the README's Layout table")
    args = parser.parse_args(argv)
    graph = import_graph(args.root)
    found = circles(graph)
    if args.table:
        if found:
            sys.exit(f"error: no table while the imports go round in circles: {found}")
        print(table(graph))
        return 0
    counts = line_counts(args.root)
    for name in sorted(graph):
        print(f"{name:<16} {counts[name]:>5} lines  imports: {', '.join(sorted(graph[name])) or '-'}")
    big = [f"{n} ({counts[n]} lines)" for n in sorted(counts) if counts[n] > MAX_LINES]
    long, stale = function_gate(args.root)
    allowed = [f for f in long_functions(args.root) if f not in long]
    print(f"\nmodules: {len(graph)}, lines: {sum(counts.values())}")
    print(f"circles: {len(found)}" + "".join(f"\n  {' <-> '.join(c)}" for c in found))
    tree = circles(tree_graph(args.root))
    print(f"circles in the whole tree (package, stages, benchmarks, tests): {len(tree)}"
          + "".join(f"\n  {' <-> '.join(c)}" for c in tree))
    print(f"modules over {MAX_LINES} lines: {len(big)}" + "".join(f"\n  {b}" for b in big))
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(long)}" + "".join(f"\n  {f}" for f in long))
    print(f"allowed over {MAX_FUNCTION_LINES} lines for now: {len(allowed)}" + "".join(
        f"\n  {f}: {LONG_FUNCTIONS_ALLOWED[f.split(' (')[0]]}" for f in allowed))
    if stale:
        print(f"allowed but no longer over {MAX_FUNCTION_LINES} lines (take them out): {', '.join(stale)}")
    return 1 if found or tree or big or long or stale else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `python -m benchmarks.layout | head` closed the pipe: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush stays quiet
        sys.exit(0)
