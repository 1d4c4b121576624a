"""An MCP server written with the official Python SDK (`pip install mcp`, 2.x: MCPServer, formerly FastMCP),
used by tests/test_mcp_sdk.py and benchmarks/mcp_sdk.py to check our client against a server we did not write."""
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
    server.run()
