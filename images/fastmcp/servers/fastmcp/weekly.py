from fastmcp import FastMCP

mcp = FastMCP("weekly")


@mcp.tool
async def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool
async def echo(message: str) -> str:
    """Echo a message back."""
    return message


@mcp.tool
async def word_count(text: str) -> int:
    """Count the whitespace-separated words in a text."""
    return len(text.split())


if __name__ == "__main__":
    mcp.run(transport="stdio")
