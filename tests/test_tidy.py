"""No dead code in the stages, the package and the tests: every import is used, every local name is read.

A learner reads every line of a stage; an import nothing uses, or a value computed and never read,
sends them looking for a purpose that is not there. pyflakes finds these, but it is not a dependency,
so this is a small version of its two checks, on the syntax tree, that always runs.
"""
import ast

import pytest

from tests.ladder import ROOT, STAGES

FOLDERS = [*STAGES, "tinyharness", "benchmarks", "tests", "quizzes"]


def python_files(folder):
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def names_read(tree):
    """Every name the module reads, anywhere, and the names listed in __all__."""
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            read |= {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return read


def unused_imports(source):
    """(line, name) of each imported name the module never reads (`# noqa` on the line allows it)."""
    tree, lines = ast.parse(source), source.splitlines()
    read = names_read(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__":
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if name != "*" and name not in read and "noqa" not in lines[node.lineno - 1]:
                    found.append((node.lineno, name))
    return found


def bound_here(function):
    """(line, name) of the simple names a function binds: `x = ...`, `with ... as x`, `except ... as x`
    (tuple targets aside, as pyflakes does), not looking into nested functions and classes."""
    found, todo = [], list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [(t.lineno, t.id) for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            found.append((node.optional_vars.lineno, node.optional_vars.id))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.append((node.lineno, node.name))
        todo.extend(ast.iter_child_nodes(node))
    return found


def unused_locals(source):
    """(line, name) of each local name a function binds and never reads (nested functions count as readers)."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        declared = {n for node in ast.walk(function) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
        read = {node.id for node in ast.walk(function) if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store)}
        found += [(line, name) for line, name in bound_here(function)
                  if name not in read and name not in declared and name != "_" and name != "__tracebackhide__"]
    return found


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_unused_imports_or_locals(folder):
    problems = [f"{path.relative_to(ROOT)}:{line}: {kind} {name!r}"
                for path in python_files(folder)
                for kind, check in (("unused import", unused_imports), ("local never read", unused_locals))
                for line, name in check(path.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_the_checks_can_fail():
    source = ("import os\nimport sys, json as j\nfrom x import (a, b)\nprint(sys, b)\n"
              "def f():\n    kept = 1\n    lost = 2\n    try:\n        pass\n    except E as e:\n        pass\n"
              "    with open(p) as h:\n        pass\n    return kept\n")
    assert unused_imports(source) == [(1, "os"), (2, "j"), (3, "a")]
    assert sorted(unused_locals(source)) == [(7, "lost"), (10, "e"), (12, "h")]


def test_no_committed_wheels():
    assert not list(ROOT.glob("*.whl")), "a wheel is a build artefact; *.whl is in .gitignore"
    assert "*.whl" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()
