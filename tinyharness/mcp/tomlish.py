"""The part of TOML that Codex's config.toml uses for MCP servers, for Python 3.10 (no tomllib).

The problem. The project runs on Python 3.10, whose standard library cannot read TOML, and takes no
dependency beyond requests; yet Codex keeps its servers in `~/.codex/config.toml`.

The mechanism. `loads` reads `[table.header]` lines (bare, dotted or quoted keys) and `key = value`
lines whose value is a string ("basic", with JSON's escapes, or 'literal'), a number, true/false,
an array of those on one line, or an inline table `{ KEY = "value", ... }`; comments after `#`.

What it cannot do. Multi-line strings and arrays, arrays of tables (`[[x]]`), dates: a line it
cannot read is a ValueError naming the line (mcp/scopes.py turns it into one sentence). Python 3.11
and later use tomllib, which reads all of TOML.
"""
import json
import re

KEY = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
HEADER = re.compile(rf"\[\s*({KEY}(?:\s*\.\s*{KEY})*)\s*\]")
PAIR = re.compile(rf"({KEY}(?:\s*\.\s*{KEY})*)\s*=\s*(.*)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def loads(text):
    data: dict = {}
    table = data
    for number, raw in enumerate(text.splitlines(), 1):
        line = strip_comment(raw).strip()
        if not line:
            continue
        if header := HEADER.fullmatch(line):
            table = place(data, keys(header.group(1)), number)
            continue
        pair = PAIR.fullmatch(line)
        if not pair:
            raise ValueError(f"line {number} is not read here (Python 3.10: a subset of TOML)")
        *path, last = keys(pair.group(1))
        place(table, path, number)[last] = value(pair.group(2).strip(), number)
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


def value(text, number):
    """One value: a string, a number, a boolean, a one-line array or an inline table."""
    if text.startswith("'") and text.endswith("'") and len(text) > 1:
        return text[1:-1]
    if text.startswith("{") and text.endswith("}"):
        table = {}
        for part in split(text[1:-1]):
            pair = PAIR.fullmatch(part.strip())
            if not pair:
                raise ValueError(f"line {number}: an inline table this reader cannot read")
            table[unquote(pair.group(1).strip())] = value(pair.group(2).strip(), number)
        return table
    if text.startswith("[") and text.endswith("]"):
        return [value(part.strip(), number) for part in split(text[1:-1]) if part.strip()]
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"line {number}: a value this reader cannot read ({text[:40]})") from None


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
    return parts + [text[start:]]
