# Seed 001's servers/official_server_v2.py, as the seed prints it. Comments are the lab's.
from mcp.server.mcpserver import MCPServer
mcp = MCPServer("bench-official")
@mcp.tool()
def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
@mcp.tool()
def echo(message: str) -> str:
    """Echo a message."""
    return message
@mcp.tool()
def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())
if __name__ == "__main__":
    mcp.run(transport="stdio")
