"""The package's loop reads like a stage's: a short run_agent with one settings object, and no import
circle through the loop's modules (an import inside a function counts: it is a circle put off, not gone)."""
import ast

from tests.ladder import ROOT

PACKAGE = ROOT / "tinyharness"
# The loop and everything it stands on: none of them may sit on a circle.
LOOP_MODULES = {"loop", "edges", "overflow", "settings", "extensions", "subagents", "guards", "context", "tools",
                "hooks", "verify", "parallel", "arrival", "vision", "cmdhooks", "llm"}


def imports(path, modules):
    """The package modules one module imports, at any depth (at the top, or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinyharness."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("tinyharness.")}
    return found & modules - {path.stem}


def import_graph():
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    return {path.stem: imports(path, modules) for path in PACKAGE.glob("*.py")}


def reachable(graph, start):
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def test_no_module_of_the_loop_lies_on_an_import_circle():
    graph = import_graph()
    assert LOOP_MODULES <= set(graph), LOOP_MODULES - set(graph)
    circles = {module: sorted(m for m in reachable(graph, module) if module in reachable(graph, m))
               for module in LOOP_MODULES if module in reachable(graph, module)}
    assert circles == {}


def test_the_subagent_gets_the_loop_handed_over_not_imported():
    graph = import_graph()
    assert "loop" not in reachable(graph, "subagents") and "loop" not in reachable(graph, "extensions")
    assert "loop" not in graph["edges"] | graph["settings"] | graph["overflow"]


def test_run_agent_is_short_takes_one_settings_object_and_nests_no_function():
    tree = ast.parse((PACKAGE / "loop.py").read_text(encoding="utf-8"))
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    run_agent = functions["run_agent"]
    arguments = [a.arg for a in run_agent.args.posonlyargs + run_agent.args.args + run_agent.args.kwonlyargs]
    assert arguments == ["task", "client", "workspace", "settings", "stats", "messages"]
    assert run_agent.end_lineno - run_agent.lineno + 1 <= 60
    nested = [node for node in ast.walk(run_agent) if node is not run_agent
              and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    assert nested == []
    too_long = {name: node.end_lineno - node.lineno + 1 for name, node in functions.items()
                if node.end_lineno - node.lineno + 1 > 60}
    assert too_long == {}
