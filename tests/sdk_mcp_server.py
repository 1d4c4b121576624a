"""An MCP server written with the official Python SDK (`pip install mcp`, 2.x: MCPServer, formerly FastMCP),
used by tests/test_mcp_sdk.py and benchmarks/mcp_sdk.py to check our client against a server we did not write.

    python tests/sdk_mcp_server.py                       # stdio
    python tests/sdk_mcp_server.py --http PORT [--json]  # Streamable HTTP on 127.0.0.1:PORT/mcp (SSE or JSON answers)
"""
import argparse

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--json", action="store_true", help="answer with JSON instead of an SSE stream")
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:
        server.run(transport="streamable-http", host="127.0.0.1", port=args.http, json_response=args.json)
