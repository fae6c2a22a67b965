"""benchlab MCP stdio server on mcp 2.x's high-level MCPServer API; tool suite from BENCHLAB_SUITE."""

import os
import sys
from collections.abc import Callable

from mcp.server.mcpserver import MCPServer


def register_weekly(server: MCPServer) -> None:
    @server.tool()
    async def add_numbers(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def echo(message: str) -> str:
        """Return the message unchanged."""
        return message

    @server.tool()
    async def word_count(text: str) -> int:
        """Count the whitespace-separated words in the text."""
        return len(text.split())


SUITES: dict[str, Callable[[MCPServer], None]] = {
    "weekly": register_weekly,
}


def main() -> None:
    suite = os.environ.get("BENCHLAB_SUITE", "weekly")
    register = SUITES.get(suite)
    if register is None:
        print(f"unknown BENCHLAB_SUITE {suite!r}; known: {', '.join(sorted(SUITES))}", file=sys.stderr)
        sys.exit(2)
    server = MCPServer("benchlab-mcpserver", log_level="WARNING")
    register(server)
    server.run(transport="stdio")


if __name__ == "__main__":
    main()
