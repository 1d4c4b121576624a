"""The command line is layered: cli on top, then the parsers (which ask chat for its own flags),
the commands (chat, doctor, eval), and the shared pieces (flags, console) below them. Nothing
below imports what is above it, at any depth: an import inside a function counts, for it is a
circle all the same, only broken later."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tinyharness"
LAYERS = [["cli"], ["parsers"], ["chat", "doctor", "eval"], ["flags"], ["console"]]


def imports(module):
    """The tinyharness modules MODULE imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [alias.name for alias in node.names]
            found.update(name.split(".")[0] for name in names)
    return found


def reachable(module):
    seen, todo = set(), [module]
    while todo:
        for name in imports(todo.pop()) - seen:
            if (PACKAGE / f"{name}.py").is_file():
                seen.add(name)
                todo.append(name)
    return seen


def test_no_module_of_the_command_line_imports_one_above_it():
    above = set()
    problems = []
    for layer in LAYERS:
        for module in layer:
            if bad := reachable(module) & (above | set(layer)):  # the module itself too: a circle
                problems.append(f"{module} reaches {sorted(bad)}")
        above |= set(layer)
    assert problems == []


def test_imports_inside_functions_are_counted():
    assert {"chat", "doctor", "eval", "sandbox"} <= reachable("cli")  # cli imports these only when a command runs
    assert "console" in reachable("flags")
