"""Read `run --output-format stream-json` lines (standard input) with the Claude Agent SDK's own message
parser, as a Claude script built on the SDK would; print one JSON summary per line (the class it became,
its subtype, its content blocks' classes, the result fields). Exits 1, naming the line, when the parser
refuses one. Run by tests/test_claude_output.py with an interpreter that has the SDK
(`python -m benchmarks.claude_sdk` installs one)."""
import json
import sys

from claude_agent_sdk._errors import MessageParseError
from claude_agent_sdk._internal.message_parser import parse_message


def summary(message):
    """What a test needs to know about one parsed message."""
    if message is None:  # the parser skips a type it does not know
        return {"class": None}
    found = {"class": type(message).__name__}
    if getattr(message, "subtype", None) is not None:
        found["subtype"] = message.subtype
    content = getattr(message, "content", None)
    if isinstance(content, list):
        found["blocks"] = [type(block).__name__ for block in content]
    if found["class"] == "ResultMessage":
        found.update(result=message.result, is_error=message.is_error, num_turns=message.num_turns,
                     session_id=message.session_id, denials=message.permission_denials)
    return found


def main():
    for number, line in enumerate(sys.stdin, 1):
        try:
            message = parse_message(json.loads(line))
        except (MessageParseError, ValueError) as e:
            print(f"line {number}: {e}: {line[:300]}", file=sys.stderr)
            return 1
        print(json.dumps(summary(message)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
