"""One TOML reader for the harness's two TOML files (its config.toml, Codex's config.toml).

On Python 3.10 without tomli, `tomlread.subset` reads them. What it reads must be what tomllib
reads - the same value - and what TOML forbids it must refuse, never read as something else: a
key given twice, a table given twice, JSON's `null` or `\\/`, a number TOML does not have. Each
line below is read by both and compared (tomllib is the judge, so the test needs Python 3.11+).
"""
import pytest

from tinyharness.tomlread import loads, subset

tomllib = pytest.importorskip("tomllib")

READ_ALIKE = [
    'a = 1', 'a = "x\\ty" # c', "a = 'lit\\\\'", 'a = 1_000', 'a = +1', 'a = -0', 'a = 0x1f',
    'a = 0o17', 'a = 0b101', 'a = 1.5e3', 'a = -2.5', 'a = inf', 'a = -inf',
    'a = true', 'a = false', '"a b" = 1', "'c d' = 2", 'a.b = 1\na.c = 2', '[a.b]\nx = 1\n[a]\ny = 2',
    'a = []', 'a = [ ]', 'a = [1, "two", [3]]', 'a = ["x",]', 'x = "#not a comment" # a comment',
    '[mcp_servers.notes]\ncommand = "npx"\nargs = ["-y", "pkg"]\nenv = { KEY = "v", "q k" = 2 }',
    '[mcp_servers."quoted.name"]\nurl = "http://h/mcp"\nenabled = false\ntool_timeout_sec = 30',
]
REFUSED = [
    'a = null', 'a = 1\na = 2', '[a]\n[a]', 'a = "x\\/y"', 'a = 01', 'a = 1.', 'a = .5', 'a = [,]',
    'a = {x = 1, x = 2}', 'a = infinity', 'a = 1__0', 'a = TRUE', 'a = bare', '= 1', 'a = "x',
    'a = 1\n[a]',
]
# TOML the subset does not read (its docstring says so): refused in one line, never misread
NOT_READ_HERE = ['[a]\nx = """multi\nline"""', 'a = "\\U0001F600"', '[[servers]]\nname = "x"',
                 'when = 1979-05-27']


@pytest.mark.parametrize("text", READ_ALIKE)
def test_the_subset_reads_what_tomllib_reads(text):
    assert subset(text) == tomllib.loads(text) == loads(text)


@pytest.mark.parametrize("text", REFUSED)
def test_what_the_subset_does_not_read_as_tomllib_it_refuses(text):
    with pytest.raises(ValueError, match="line"):
        subset(text)
    try:
        tomllib.loads(text)
    except ValueError:
        return
    pytest.fail("tomllib reads it: the subset should read it alike, not refuse (or the case is wrong)")


@pytest.mark.parametrize("text", NOT_READ_HERE)
def test_toml_the_subset_leaves_out_is_refused_not_misread(text):
    tomllib.loads(text)  # it is TOML
    with pytest.raises(ValueError, match="line"):
        subset(text)


def test_a_file_nested_deeper_than_python_reads_is_a_sentence_not_a_traceback():
    """tomllib recurses once per bracket: 200,000 of them end in RecursionError, which no caller
    catches; loads says it in words (a ValueError, which every caller turns into one line)."""
    with pytest.raises(ValueError, match="deeper than can be read"):
        loads("a = " + "[" * 200_000 + "]" * 200_000 + "\n")
