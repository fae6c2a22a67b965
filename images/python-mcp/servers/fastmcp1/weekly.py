"""The weekly tool suite on mcp 1.x's FastMCP over stdio."""

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("benchlab-fastmcp1", log_level="WARNING")


@mcp.tool()
async def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def echo(message: str) -> str:
    """Return the message unchanged."""
    return message


@mcp.tool()
async def word_count(text: str) -> int:
    """Count the whitespace-separated words in the text."""
    return len(text.split())


if __name__ == "__main__":
    mcp.run()
