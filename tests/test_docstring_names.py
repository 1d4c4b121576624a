"""The package's prose names only modules that exist.

After a move (sandbox_git.py became sandbox/git.py, chat.py became chat/__init__.py) a docstring
that still says the old name sends the reader to a file that is not there. The prose of every module
of the package (its docstrings and comments, not its code, where `mcp_config` may be an alias) is
read, and three kinds of names are checked:
a path or a dotted name under tinyharness (`tinyharness/llm/ollama.py`, `tinyharness.chat.turns`)
must exist; a file name (`loop.py`, `mcp/client.py`) must name a file of the repository, unless it
is one of the workspace files the docstrings use as examples (EXAMPLES); and a flattened old name
(`llm_stream`, `sandbox_git`: a sub-package and one of its modules joined by "_") is refused.
Reads files only.
"""
import ast
import io
import re
import tokenize

from tests.ladder import ROOT

PACKAGE = ROOT / "tinyharness"
# File names the docstrings use as examples of a workspace's or another project's files, not as
# names of this repository's modules.
EXAMPLES = {
    "src/app.py", "app.py", "test_x.py", "file.py", "-eval.py", "-lesson.py", "a/b.py", "json.py",
    "duration.py", "eval_hidden_test.py", "slug.py", "test_duration.py", "test_slug.py",
    "count_words.py", "napp.py", "total.py", "notes_server.py", "server.py", "calc.py", "./calc.py",
    ".tinyharness/policy.py", "mcp/client/sse.py", "llama_cpp/llama_types.py",
    "llama_cpp/server/types.py", "llama_types.py", "llama_cpp/llama.py", "llama_cpp/server/errors.py",
}
# Files named like a dotted module: the completion script, a temporary file.
NOT_MODULES = {"tinyharness.fish", "tinyharness.tmp"}
FILE_NAME = re.compile(r"(?<![\w./-])([\w./-]*\w)\.py\b")
DOTTED = re.compile(r"\btinyharness\.([a-z_][\w.]*\w)")


def prose(source):
    """The docstrings and comments of a module's source, one text."""
    tree = ast.parse(source)
    docs = [ast.get_docstring(node, clean=False) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    comments = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT]
    return "\n".join(filter(None, docs + comments))


def repository_files():
    skip = {".git", ".venv", ".venv-system", "__pycache__"}
    return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")
            if not skip & set(p.relative_to(ROOT).parts) and "egg-info" not in p.as_posix()]


def sub_packages():
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def is_module(dotted):
    """Whether `tinyharness.<dotted>` is a module, or a name in one (tinyharness.loop.run_agent)."""
    parts = dotted.split(".")
    return any((PACKAGE.joinpath(*parts[:n]).with_suffix(".py")).is_file()
               or (PACKAGE.joinpath(*parts[:n]) / "__init__.py").is_file() for n in range(len(parts), 0, -1))


def file_exists(name, files, basenames):
    if name in EXAMPLES:
        return True
    if name.startswith("tinyharness/"):
        return name in files
    if "/" in name:
        return any(f == name or f.endswith("/" + name) for f in files)
    return name in basenames


def stale_names(text, files, basenames, packages):
    found = {m.group(1) + ".py" for m in FILE_NAME.finditer(text)
             if not file_exists(m.group(1) + ".py", files, basenames)}
    found |= {"tinyharness." + m.group(1) for m in DOTTED.finditer(text)
              if not is_module(m.group(1)) and "tinyharness." + m.group(1) not in NOT_MODULES}
    flattened = re.compile(r"\b(" + "|".join(packages) + r")_([a-z]+)\b")
    found |= {m.group(0) for m in flattened.finditer(text)
              if (PACKAGE / m.group(1) / (m.group(2) + ".py")).is_file()}
    return found


def test_the_package_names_no_module_that_does_not_exist():
    files = set(repository_files())
    basenames, packages = {f.rsplit("/", 1)[-1] for f in files}, sub_packages()
    stale = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" not in path.parts:
            found = stale_names(prose(path.read_text(encoding="utf-8")), files, basenames, packages)
            if found:
                stale[path.relative_to(ROOT).as_posix()] = sorted(found)
    assert stale == {}, f"names of modules that do not exist (moved or renamed?): {stale}"


def test_the_check_reads_prose_not_code():
    source = ('"""Module: see llm_stream."""\nfrom . import config as mcp_config  # the config, mcp/config.py\n'
              'def f():\n    "mcp_http is gone"\n    return mcp_config.x\n')
    assert prose(source) == "Module: see llm_stream.\nmcp_http is gone\n# the config, mcp/config.py"


def test_the_check_finds_each_kind_of_stale_name():
    files = {"tinyharness/llm/stream.py", "tinyharness/chat/__init__.py", "tinyharness/loop.py"}
    basenames = {f.rsplit("/", 1)[-1] for f in files}
    text = ('"""See llm_stream.py, chat.py and loop.py, tinyharness/ollama.py, tinyharness.chat_loop, '
            'tinyharness.loop.run_agent and llm/stream.py; the armour is in sandbox_git."""')
    assert stale_names(text, files, basenames, ["llm", "sandbox"]) == {
        "llm_stream.py", "chat.py", "tinyharness/ollama.py", "tinyharness.chat_loop", "llm_stream", "sandbox_git"}
