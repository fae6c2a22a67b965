"""The weekly tool suite on mcp 1.1.2's low-level Server over stdio."""

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

server = Server("benchlab-lowlevel")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="add_numbers",
            description="Add two integers.",
            inputSchema={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        ),
        types.Tool(
            name="echo",
            description="Return the message unchanged.",
            inputSchema={
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        ),
        types.Tool(
            name="word_count",
            description="Count the whitespace-separated words in the text.",
            inputSchema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        ),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    if name == "add_numbers":
        result = str(int(arguments["a"]) + int(arguments["b"]))
    elif name == "echo":
        result = str(arguments["message"])
    elif name == "word_count":
        result = str(len(str(arguments["text"]).split()))
    else:
        raise ValueError(f"Unknown tool: {name}")
    return [types.TextContent(type="text", text=result)]


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
