"""The design, held against the code: docs/architecture.json's parts, arrows and "never" rules.

    python -m benchmarks.design [--root DIR] [--parts]

The problem. A design drawn once and kept on a whiteboard drifts: an import added for a quick fix
("chat needs the version string: import the parsers") breaks a rule nobody reads again, and the
next reader learns the shape the code has, not the one it was meant to have.

The mechanism. docs/architecture.json names the repository's parts, each a list of paths (a folder
ends with "/"; a file named on its own wins over a folder that holds it), the arrows (a part may
import another) and the "never" rules, each with its reason. Every import statement of the tree, at
any depth (benchmarks/layout.py's tree_graph), is lifted to the parts of its two ends: an import
between two parts that a "never" rule forbids is a broken rule; one that no arrow allows is an
undeclared arrow; a module of the package that no part holds is unplaced. tests/test_layout.py fails
on any of the three, and README.md's part table is printed from the same file (`--parts`).

What it cannot do. It sees imports, not calls: a part handed a function of another at run time (the
subagent runner the loop hands to the Hands) is, by design, no arrow. Files outside every part
(tests, docs, examples) are not judged.
"""
import argparse
import json
import sys
from pathlib import Path

from benchmarks.layout import ROOT, tree_graph, tree_modules

DESIGN = Path("docs") / "architecture.json"


def load(root=ROOT):
    return json.loads((Path(root) / DESIGN).read_text(encoding="utf-8"))


def part_of(path, parts):
    """The part holding a file (its path relative to the root, with "/"), or None. A file named on
    its own wins over a folder that holds it; of two folders, the deeper one wins."""
    best, length = None, -1
    for name, part in parts.items():
        for held in part["is"]:
            if held == path:
                return name
            if held.endswith("/") and path.startswith(held) and len(held) > length:
                best, length = name, len(held)
    return best


def placed(root=ROOT, design=None):
    """{full dotted module name: its part} for every module of the tree that some part holds."""
    parts = (design or load(root))["parts"]
    found = {}
    for name, path in tree_modules(root).items():
        part = part_of(path.relative_to(root).as_posix(), parts)
        if part:
            found[name] = part
    return found


def crossings(root=ROOT, design=None):
    """{(from part, to part): [(module, imported module), ...]} for every import between two parts."""
    where = placed(root, design)
    found = {}
    for module, targets in tree_graph(root).items():
        for target in sorted(targets):
            ends = (where.get(module), where.get(target))
            if None not in ends and ends[0] != ends[1]:
                found.setdefault(ends, []).append((module, target))
    return found


def broken_nevers(root=ROOT, design=None):
    """[(from, to, reason, [(module, imported)])] for every "never" rule an import breaks."""
    design = design or load(root)
    seen = crossings(root, design)
    return [(a, b, why, seen[(a, b)]) for a, b, why in design["never"] if (a, b) in seen]


def undeclared_arrows(root=ROOT, design=None):
    """{(from, to): [(module, imported)]} for imports between parts that no arrow allows."""
    design = design or load(root)
    allowed = {(arrow[0], arrow[1]) for arrow in design["arrows"]}
    return {ends: pairs for ends, pairs in crossings(root, design).items() if ends not in allowed}


def unplaced(root=ROOT, design=None):
    """The package's modules no part holds (dotted names)."""
    where = placed(root, design)
    return sorted(m for m in tree_modules(root) if m.split(".")[0] == "tinyharness" and m not in where)


def parts_table(design):
    """README's parts table: each part, what it holds, what it says, which parts it may import."""
    rows = ["| part | holds | what it is | may import |", "|---|---|---|---|"]
    for name, part in design["parts"].items():
        arrows = sorted({b for a, b, *_ in design["arrows"] if a == name})
        held = ", ".join(f"`{p}`" for p in part["is"])
        rows.append(f"| {name} | {held} | {part['says']} | {', '.join(arrows) or '-'} |")
    return "\n".join(rows)


def report(root):
    design = load(root)
    broken, loose, lost = broken_nevers(root, design), undeclared_arrows(root, design), unplaced(root, design)
    for a, b, why, pairs in broken:
        print(f"never {a} -> {b} ({why}): " + ", ".join(f"{m} imports {t}" for m, t in pairs))
    for (a, b), pairs in sorted(loose.items()):
        print(f"no arrow {a} -> {b}: " + ", ".join(f"{m} imports {t}" for m, t in pairs))
    for module in lost:
        print(f"in no part: {module}")
    print(f"parts: {len(design['parts'])}, arrows: {len(design['arrows'])}, never rules: "
          f"{len(design['never'])}; broken: {len(broken)}, undeclared arrows: {len(loose)}, "
          f"unplaced modules: {len(lost)}")
    return 1 if broken or loose or lost else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.design", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to check (default: this one)")
    parser.add_argument("--parts", action="store_true", help="print only the README's parts table")
    args = parser.parse_args(argv)
    if args.parts:
        print(parts_table(load(args.root)))
        return 0
    return report(args.root)


if __name__ == "__main__":
    sys.exit(main())
