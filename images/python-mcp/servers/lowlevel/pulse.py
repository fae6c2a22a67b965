"""The pulse tool suite on mcp 1.1.2's low-level Server over stdio."""

import hashlib
import json

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

server = Server("benchlab-lowlevel")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="calculate_tax",
            description="Calculate the tax on an amount, rounded to cents.",
            inputSchema={
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0, "description": "Base amount"},
                    "rate": {"type": "number", "default": 0.08, "description": "Tax rate fraction"},
                },
                "required": ["amount"],
            },
        ),
        types.Tool(
            name="checksum",
            description="Count, sum and SHA-256 of a list of integers.",
            inputSchema={
                "type": "object",
                "properties": {
                    "values": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 100},
                },
                "required": ["values"],
            },
        ),
    ]


def calculate_tax(arguments: dict) -> str:
    amount = float(arguments["amount"])
    rate = float(arguments.get("rate", 0.08))
    if amount <= 0:
        raise ValueError("amount must be greater than 0")
    return str(round(amount * rate, 2))


def checksum(arguments: dict) -> str:
    values = arguments["values"]
    if not isinstance(values, list) or not 1 <= len(values) <= 100:
        raise ValueError("values must be a list of 1 to 100 integers")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError("values must be integers")
    digest = hashlib.sha256(",".join(map(str, values)).encode()).hexdigest()
    return json.dumps({"count": len(values), "sum": sum(values), "sha256": digest})


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    if name == "calculate_tax":
        result = calculate_tax(arguments)
    elif name == "checksum":
        result = checksum(arguments)
    else:
        raise ValueError(f"Unknown tool: {name}")
    return [types.TextContent(type="text", text=result)]


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
