"""The package reads like a stage: imports go one way, each module keeps to one job, the loop is short.

benchmarks/layout.py builds the import graph of tinyharness/ from every import statement at any depth:
an import tucked inside a function to dodge a circle still closes one (it only breaks later). The
README's Layout table is printed by `python -m benchmarks.layout --table` and checked here."""
import ast

from benchmarks import design
from benchmarks.layout import (LONG_FUNCTIONS_ALLOWED, MAX_FUNCTION_LINES, MAX_LINES, circles, function_gate,
                               import_graph, line_counts, long_functions, table, tree_graph)
from tests.ladder import ROOT, STAGES

PACKAGE = ROOT / "tinyharness"


def reachable(graph, start):
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def test_the_package_has_no_import_circle():
    assert circles(import_graph()) == []


def test_an_import_inside_a_function_closes_a_circle_too(tmp_path):
    package = tmp_path / "tinyharness"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text("from ..a import x\n")
    (package / "a.py").write_text("from .b import helper\nx = 1\n")
    (package / "b.py").write_text("def helper():\n    from . import a  # here, not at the top\n    return a\n")
    (package / "c.py").write_text("import tinyharness.a\nfrom tinyharness.sub import leaf\n")
    graph = import_graph(tmp_path)
    assert graph == {"__init__": set(), "a": {"b"}, "b": {"a"}, "c": {"a", "sub.leaf"}, "sub": {"sub.leaf"},
                     "sub.leaf": {"a"}}
    assert circles(graph) == [["a", "b"]]


def test_the_whole_tree_has_no_import_circle():
    graph = tree_graph()
    assert {name.split(".")[0] for name in graph} >= {"tinyharness", "benchmarks", "tests", *STAGES}
    assert {"m4_guards.edges", "m1_loop.tools"} <= graph["m4_guards.loop"] | graph["m1_loop.loop"]
    assert "benchmarks.fuzz_common" in graph["benchmarks.fuzz_surfaces"]        # a top-level import
    assert "tinyharness.cli" in graph["benchmarks.fuzz_surfaces"]               # one inside a function
    assert circles(graph) == []


def test_the_tree_graph_follows_every_kind_of_import(tmp_path):
    for folder in ("m0_a", "bench", "bench/deep"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "m0_a" / "llm.py").write_text("from .wire import x\n")
    (tmp_path / "m0_a" / "wire.py").write_text("x = 1\n")
    (tmp_path / "bench" / "one.py").write_text("import os\ndef f():\n    from bench.deep import two\n")
    (tmp_path / "bench" / "deep" / "two.py").write_text("from .. import one\nimport m0_a.llm\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "skip.py").write_text("import bench.one\n")
    graph = tree_graph(tmp_path)
    assert graph == {"m0_a": set(), "m0_a.llm": {"m0_a.wire"}, "m0_a.wire": set(), "bench": set(),
                     "bench.one": {"bench.deep.two"}, "bench.deep": set(),
                     "bench.deep.two": {"bench.one", "m0_a.llm"}}
    assert circles(graph) == [["bench.deep.two", "bench.one"]]


def test_the_subagent_gets_the_loop_handed_over_not_imported():
    graph = import_graph()
    assert "loop" not in reachable(graph, "subagents") | reachable(graph, "extensions")
    assert "loop" not in reachable(graph, "edges") | reachable(graph, "settings") | reachable(graph, "overflow")


def test_the_commands_borrow_nothing_from_the_command_line_above_them():
    graph = import_graph()
    for command in ("chat", "doctor", "eval", "flags", "parsers", "console"):
        assert "cli" not in reachable(graph, command), command
    assert {"chat", "doctor", "eval", "sandbox"} <= reachable(graph, "cli")  # imported only when a command runs


def test_the_scripted_servers_share_a_base_rather_than_each_other():
    graph = import_graph()
    assert "testing.fake_ollama" not in reachable(graph, "testing.server") | reachable(graph, "testing")
    assert "testing.server" in graph["testing.fake_ollama"] and "testing.server" in graph["testing"]


def test_the_shared_helpers_are_said_once():
    """The serve-until-Ctrl-C loop (testing.server.serve_until_ctrl_c), the stream's stop in words
    (llm.stream_stopped) and the calls made canonical with their problems (llm.reply.with_calls) each
    have one home that the scripted servers and both dialects use."""
    source = {path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}
    for text, home in [("time.sleep(3600)", "testing/server.py"),
                       ("stopped sending its streamed answer", "llm/__init__.py"),
                       ('problems[call["id"]] = problem', "llm/reply.py")]:
        assert [name for name, code in source.items() if text in code] == [home], text


def test_no_module_is_over_the_line_limit():
    assert {name: n for name, n in line_counts().items() if n > MAX_LINES} == {}


def test_no_function_is_over_forty_lines_but_the_named_few():
    over, no_longer_over = function_gate()
    assert MAX_FUNCTION_LINES == 40
    assert over == [], "cut these under 40 lines (or name one in LONG_FUNCTIONS_ALLOWED, with its reason)"
    assert no_longer_over == [], "these are short now: take them out of LONG_FUNCTIONS_ALLOWED"
    assert all(isinstance(why, str) and len(why.split()) >= 4 for why in LONG_FUNCTIONS_ALLOWED.values())


def test_the_function_gate_can_fail(tmp_path):
    package = tmp_path / "tinyharness"
    package.mkdir()
    (package / "__init__.py").write_text("")
    body = "".join(f"    x{n} = {n}\n" for n in range(40))
    (package / "a.py").write_text(f"def long():\n{body}\n\ndef short():\n    return 1\n")
    assert long_functions(tmp_path) == ["a:long (41 lines)"]
    assert function_gate(tmp_path, allowed={}) == (["a:long (41 lines)"], [])
    assert function_gate(tmp_path, allowed={"a:long": "why", "a:short": "why"}) == ([], ["a:short"])


def test_run_agent_takes_one_settings_object_is_short_and_nests_no_function():
    tree = ast.parse((PACKAGE / "loop.py").read_text(encoding="utf-8"))
    run_agent = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_agent")
    arguments = [a.arg for a in run_agent.args.posonlyargs + run_agent.args.args + run_agent.args.kwonlyargs]
    assert arguments == ["task", "client", "workspace", "settings", "stats", "messages"]
    assert not run_agent.args.vararg and not run_agent.args.kwarg
    assert run_agent.end_lineno - run_agent.lineno + 1 <= MAX_FUNCTION_LINES
    nested = [n for n in ast.walk(run_agent) if n is not run_agent
              and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    assert nested == []


def test_every_module_opens_with_a_docstring():
    missing = [path.relative_to(ROOT).as_posix() for path in sorted(PACKAGE.rglob("*.py"))
               if "__pycache__" not in path.parts and path.name not in ("__init__.py", "__main__.py")
               and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))]
    assert missing == []


def test_the_readme_layout_table_is_the_graph():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    modules = section[section.index("| layer | module |"):]   # the parts table comes before it
    shown = "\n".join(line for line in modules.splitlines() if line.startswith("|"))
    assert shown == table(import_graph()), "the imports changed: paste `python -m benchmarks.layout --table` into README.md"


def line_length(pyproject):
    """`line-length` under [tool.ruff] in a pyproject.toml (Python 3.10 has no tomllib: the few
    lines this needs are read by hand)."""
    section = None
    for line in pyproject.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            section = line.strip("[] ")
        elif section == "tool.ruff" and line.partition("=")[0].strip() == "line-length":
            return int(line.partition("=")[2])
    raise AssertionError(f"{pyproject} sets no line-length under [tool.ruff]")


def lines_over(limit, folder=PACKAGE):
    """'file:line: length' for every line of the folder's Python files longer than limit."""
    return [f"{path.relative_to(ROOT)}:{number}: {len(line)}"
            for path in sorted(folder.rglob("*.py")) if "__pycache__" not in path.parts
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > limit]


def test_every_package_line_keeps_to_the_line_length_pyproject_sets():
    """pyproject.toml's [tool.ruff] line-length holds for every line of the package (sub-packages
    too): ruff's formatter, given the same number, keeps new code within it."""
    long = lines_over(line_length(ROOT / "pyproject.toml"))
    assert not long, f"{len(long)} lines over the line length:\n" + "\n".join(long)


def test_the_line_length_is_read_from_pyproject_so_the_check_can_fail(tmp_path):
    """The limit is the file's number, not one written here: a smaller one finds lines over it."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.black]\nline-length = 120\n\n[tool.ruff]\nline-length = 60  # short\n'
                         '\n[tool.ruff.format]\nquote-style = "preserve"\n', encoding="utf-8")
    assert line_length(pyproject) == 60
    assert lines_over(60) and all(int(found.rsplit(": ", 1)[1]) > 60 for found in lines_over(60))


# --- The design as a test: docs/architecture.json held against every import of the tree ---------

def test_no_never_rule_of_the_design_is_broken():
    broken = [f"{a} -> {b} ({why}): {pairs}" for a, b, why, pairs in design.broken_nevers()]
    assert broken == [], "an import breaks docs/architecture.json's never rules:\n" + "\n".join(broken)


def test_every_import_between_two_parts_follows_an_arrow():
    loose = design.undeclared_arrows()
    assert loose == {}, ("imports between parts that no arrow of docs/architecture.json allows: add the "
                         f"arrow with its reason, or import from a part you may: {loose}")


def test_every_module_of_the_package_belongs_to_a_part():
    assert design.unplaced() == [], "name the module's part in docs/architecture.json"


def test_the_design_check_finds_a_broken_rule_and_a_missing_arrow(tmp_path):
    for folder in ("pkg", "pkg/low", "face"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core.py").write_text("def f():\n    from face import cli  # tucked in a function\n")
    (tmp_path / "pkg" / "low" / "door.py").write_text("from pkg import core\n")
    (tmp_path / "face" / "cli.py").write_text("import pkg.core\n")
    parts = {"Core": {"is": ["pkg/"]}, "Door": {"is": ["pkg/low/"]}, "Face": {"is": ["face/"]}}
    plan = {"parts": parts, "arrows": [["Face", "Core"]], "never": [["Core", "Face", "the core knows no face"]]}
    assert design.broken_nevers(tmp_path, plan) == [("Core", "Face", "the core knows no face",
                                                     [("pkg.core", "face.cli")])]
    assert design.undeclared_arrows(tmp_path, plan) == {("Core", "Face"): [("pkg.core", "face.cli")],
                                                        ("Door", "Core"): [("pkg.low.door", "pkg.core")]}
    assert design.part_of("pkg/low/door.py", parts) == "Door"            # the deeper folder wins
    assert design.part_of("pkg/low/door.py", {**parts, "One": {"is": ["pkg/low/door.py"]}}) == "One"


def test_the_readme_parts_table_is_the_design():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    assert design.parts_table(design.load()) in section, \
        "the design changed: paste `python -m benchmarks.design --parts` into README.md's Layout section"


def test_the_package_keeps_no_state_behind_a_global_statement():
    """Process-wide state set from inside functions (`global x`) is state no caller can see or hand
    over; the package keeps what it remembers in objects it passes."""
    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Global)]
    assert found == []


def test_no_module_imports_a_name_only_to_hand_it_on():
    """A name is imported from the module that defines it (README, Layout): an import kept only so
    that others can import it from here is one ruff calls unused, so it would need `noqa: F401`."""
    found = [f"{path.relative_to(ROOT)}:{number}" for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "noqa: F401" in line]
    assert found == []
