"""TOML, read one way for every file the harness reads in it: its own defaults file
(`config.toml`, defaults.py) and Codex's `~/.codex/config.toml` (mcp/scopes.py).

The problem. Python 3.11 reads TOML (tomllib); 3.10, which the project supports, does not, and the
project takes no dependency beyond requests. Two small readers, one per file, had grown apart: one
refused a key given twice and `null`, the other took both - so the same line meant one thing to one
file and another to the next, and neither was what tomllib would have read.

The mechanism. `loads` uses tomllib (3.11+), else tomli where it is installed, else `subset`: the
part of TOML these files use - `[table.header]` lines (bare, dotted or quoted keys), `key = value`
lines whose value is a "basic" string (JSON's escapes) or a 'literal' one, an integer (1_000, +1,
0x1f), a float, true or false, an array of those on one line, or an inline table `{ k = "v" }`;
comments after `#`. What it reads, it reads as tomllib does; what it does not read - or what TOML
forbids, such as a key given twice or a JSON `null` - is a ValueError naming the line, never a
different value (tests/test_defaults_file.py holds it against tomllib line by line).

What it cannot do. Multi-line strings and arrays, arrays of tables (`[[x]]`), dates and times: on
Python 3.10 without tomli, a file using them is refused (each caller says so in one sentence and
goes on without it).
"""
import json
import re
import sys

KEY = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
HEADER = re.compile(rf"\[\s*({KEY}(?:\s*\.\s*{KEY})*)\s*\]")
PAIR = re.compile(rf"({KEY}(?:\s*\.\s*{KEY})*)\s*=\s*(.*)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')
DIGITS = r"[0-9](?:_?[0-9])*"
INTEGER = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)|0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*"
                     r"|0o[0-7](?:_?[0-7])*|0b[01](?:_?[01])*")
FLOAT = re.compile(rf"[+-]?(?:0|[1-9](?:_?[0-9])*)(?:\.{DIGITS})?(?:[eE][+-]?{DIGITS})?"
                   r"|[+-]?(?:inf|nan)")


def loads(text):
    """{key: value} of TOML text: tomllib, tomli, else `subset`. ValueError when it is not TOML
    (tomllib's TOMLDecodeError is a ValueError)."""
    try:
        return by_version(text)
    except RecursionError:  # `a = [[[[...]]]]`, thousands deep: a sentence, not a traceback
        raise ValueError("it nests arrays or tables deeper than can be read") from None


def by_version(text):
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib.loads(text)
    try:  # Python 3.10
        import tomli
    except ImportError:
        return subset(text)
    return tomli.loads(text)


def subset(text):
    """The part of TOML the module's docstring names, read as tomllib reads it."""
    data: dict = {}
    table, headers = data, set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = strip_comment(raw).strip()
        if not line:
            continue
        if header := HEADER.fullmatch(line):
            path = tuple(keys(header.group(1)))
            if path in headers:
                raise ValueError(f"line {number}: the table [{'.'.join(path)}] is given twice")
            headers.add(path)
            table = place(data, path, number)
            continue
        pair = PAIR.fullmatch(line)
        if not pair:
            raise ValueError(f"line {number} is not read here (Python 3.10: a subset of TOML)")
        *path, last = keys(pair.group(1))
        put(place(table, path, number), last, value(pair.group(2).strip(), number), number)
    return data


def strip_comment(line):
    """The line without a # comment (a # inside a string stays)."""
    out, at = "", 0
    for match in STRING.finditer(line):
        before = line[at:match.start()]
        if "#" in before:
            return out + before[:before.index("#")]
        out, at = out + before + match.group(0), match.end()
    rest = line[at:]
    return out + (rest[:rest.index("#")] if "#" in rest else rest)


def keys(text):
    return [unquote(part.strip()) for part in re.findall(rf"{KEY}", text)]


def unquote(text):
    if text.startswith('"'):
        return json.loads(text)
    return text[1:-1] if text.startswith("'") else text


def place(data, path, number):
    for key in path:
        data = data.setdefault(key, {})
        if not isinstance(data, dict):
            raise ValueError(f"line {number}: {key} is not a table")  # noqa: TRY004 - as tomllib
    return data


def put(table, key, found, number):
    """table[key] = found, once: TOML forbids a key given twice."""
    if key in table:
        raise ValueError(f"line {number}: {key} is given twice")
    table[key] = found


def value(text, number):
    """One value: a string, a number, a boolean, a one-line array or an inline table."""
    if STRING.fullmatch(text):
        if text.startswith("'"):
            return text[1:-1]
        if re.search(r'(?<!\\)(?:\\\\)*\\/', text):  # JSON reads \/ as /; TOML has no such escape
            raise ValueError(f"line {number}: a string with an escape TOML does not have")
        return json.loads(text)
    if text in ("true", "false"):
        return text == "true"
    if INTEGER.fullmatch(text):
        return int(text.replace("_", ""), 0) if text[:2] in ("0x", "0o", "0b") else int(text)
    if FLOAT.fullmatch(text):
        return float(text.replace("_", ""))
    if text.startswith("{") and text.endswith("}"):
        table: dict = {}
        for part in split(text[1:-1]):
            if not (pair := PAIR.fullmatch(part.strip())):
                raise ValueError(f"line {number}: an inline table this reader cannot read")
            put(table, unquote(pair.group(1).strip()), value(pair.group(2).strip(), number), number)
        return table
    if text.startswith("[") and text.endswith("]"):
        parts = split(text[1:-1])
        if parts and not parts[-1].strip():
            parts = parts[:-1]  # TOML allows a trailing comma
        return [value(part.strip(), number) for part in parts]
    raise ValueError(f"line {number}: a value this reader cannot read ({text[:40]})")


def split(text):
    """TEXT split at the commas outside strings, brackets and braces."""
    parts, depth, start, at = [], 0, 0, 0
    while at < len(text):
        if string := STRING.match(text, at):
            at = string.end()
            continue
        char = text[at]
        depth += (char in "[{") - (char in "]}")
        if char == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
        at += 1
    return parts + [text[start:]] if text.strip() else []
