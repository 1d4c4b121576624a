"""One record per tool (tinyharness/toolrecord.py): every question the harness asks about a tool -
is it offered, does it only read, which arguments are paths, does it ask, may its stub invite a
re-read, what Claude Code calls it - is answered from the tool's record, so adding a tool is its
function plus its record.

Checked two ways: no module keeps a hand-written table of tool names (a name added to one by hand,
or a table kept beside the records, fails here), and a dummy tool added by a test as a function
and a record alone is offered to the model, runs, runs beside other reads, is stopped by the path
guard, and is known to permission rules and command hooks by its Claude name."""
import ast
import re
import threading

import pytest

from tests.ladder import ROOT, calls, tool_call, tool_results
from tinyharness.testing import ScriptedServer

PACKAGE = ROOT / "tinyharness"
# the model's side, not the harness's: scripted replies and eval policies name tools as a model does
MODEL_SIDE = (PACKAGE / "testing", PACKAGE / "eval" / "evals")


def known_tools():
    """Every tool the package can offer the model (the task tool with --subagents)."""
    from tinyharness.extensions import Extensions
    return {s["function"]["name"] for s in Extensions(subagents=True).tools()}


def strings(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for element in node.elts for s in strings(element)]
    return []


def literal_groups(node):
    """The strings of a literal collection written at an assignment or an `in` test: a tuple, list
    or set as one group; a dict's keys as one and its values (strings or tuples of them) as
    another."""
    values = ([node.value] if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value
              else node.comparators if isinstance(node, ast.Compare) else [])
    for value in values:
        if isinstance(value, ast.Dict):
            yield value, [k.value for k in value.keys
                          if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            yield value, [s for v in value.values for s in strings(v)]
        else:
            yield value, strings(value)


def tool_tables(known):
    """(module, line, names) of every hand-written collection in the package that names two or more
    tools: a table of tools."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path.is_relative_to(side) for side in MODEL_SIDE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for value, names in literal_groups(node):
                if len({n for n in names if n in known}) >= 2:
                    found.append((str(path.relative_to(ROOT)), value.lineno, names))
    return found


def test_every_table_of_tool_names_names_only_known_tools():
    known = known_tools()
    for module, line, names in tool_tables(known):
        strangers = [n for n in names if re.fullmatch(r"[a-z][a-z0-9_]*", n) and n not in known]
        assert not strangers, f"{module}:{line} names tools the package does not have: {strangers}"


def test_no_module_keeps_a_table_of_tool_names_beside_the_records():
    tables = tool_tables(known_tools())
    assert not tables, (f"{len(tables)} hand-written tables of tool names in "
                        f"{len({m for m, _, _ in tables})} modules; ask the records "
                        f"(tools.record) instead: {[(m, line) for m, line, _ in tables]}")


def test_every_record_answers_for_one_offered_tool():
    from tinyharness import tools
    names = [tool.name for tool in tools.BUILT_IN]
    assert len(set(names)) == len(names)
    assert [s["function"]["name"] for s in tools.schemas()] == names
    for tool in (*tools.BUILT_IN, tools.TASK):
        assert tool.schema["function"]["name"] == tool.name and tools.record(tool.name) is tool
        assert set(tool.paths) <= set(tool.schema["function"]["parameters"]["required"]), tool.name
        assert not tool.verb or tool.paths, f"{tool.name}: a verb names a path in its errors"


# --- a dummy tool: its function and its record, nothing else -------------------------------------

def dummy_tool(met):
    """`peek`, a read-only path tool. Two calls of it in one reply each wait for the other (a
    barrier): they finish only if they run at the same time."""
    from tinyharness.toolrecord import Tool
    from tinyharness.toolrecord import schema

    def peek(workspace, path):
        met.wait()
        return f"OK: peeked at {path}"

    return Tool("peek", peek, schema("peek", "Peek at a file of the workspace.",
                                     path="file path relative to the workspace"),
                reads_only=True, paths=("path",), rereadable=True, claude=("Peek",))


@pytest.fixture
def with_peek(monkeypatch):
    from tinyharness import tools
    met = threading.Barrier(2, timeout=60)  # generous: a failure waits, a pass never does
    tool = dummy_tool(met)
    monkeypatch.setattr(tools, "BUILT_IN", (*tools.BUILT_IN, tool))
    return tool


def test_a_dummy_tool_is_offered_runs_beside_reads_and_is_guarded(with_peek, tmp_path):
    from tinyharness.llm import Client
    from tinyharness.loop import run_agent
    from tinyharness.settings import RunSettings
    workspace, canary = tmp_path / "ws", tmp_path / "canary.txt"
    workspace.mkdir()
    canary.write_text("secret")
    script = [calls(tool_call("peek", path="a.txt"), tool_call("peek", path="b.txt"),
                    tool_call("peek", path="../canary.txt")), "Peeked."]
    asked = []
    settings = RunSettings(approve=lambda prompt: asked.append(prompt) or False,
                           echo=lambda line: None, warn=lambda text: None, sandbox=None)
    with ScriptedServer(script=script) as server:
        answer = run_agent("peek", Client(server.base_url, "m"), str(workspace), settings)
    assert answer == "Peeked."
    assert with_peek.schema in server.requests[0]["tools"]           # offered, in the exact request
    results = list(tool_results(server.requests[1]).values())
    # the two reads ran at the same time (each waited for the other), in the calls' order
    assert results[:2] == ["OK: peeked at a.txt", "OK: peeked at b.txt"]
    assert results[2].startswith("BLOCKED: ") and "outside the workspace" in results[2]
    assert asked == []                                               # a read asks nobody


def test_a_dummy_tools_claude_name_reaches_permission_rules_and_command_hooks(with_peek, tmp_path):
    from tinyharness import context, permissions
    from tinyharness.hooks import commands
    rules, notes = permissions.Rules(tmp_path), []
    rules.add(["Peek(secret.txt)"], "deny", "--deny", notes)
    rules.add(["peek"], "ask", "--ask", notes)
    assert notes == []
    assert rules.decide("peek", {"path": "secret.txt"}).kind == "deny"
    assert rules.decide("peek", {"path": "other.txt"}).kind == "ask"
    assert commands.matches(re.compile("Peek"), "peek") and commands.claude_name("peek") == "Peek"
    shown = commands.claude_input("peek", {"path": "a.txt"}, str(tmp_path))
    assert shown["file_path"] == str(tmp_path / "a.txt")
    assert context.how_to_get_back('peek("a.txt")') == "call it again if you need them"
