# Seed 000's official Python SDK program ("Approach C"), as the seed prints it. Comments are the
# lab's.
import asyncio
from mcp.server import Server
from mcp.server.stdio import stdio_server
import mcp.types as types

app = Server("Tax-Service")

@app.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="calculate_tax",
            description="Calculate total tax amount given a base price and tax rate.",
            inputSchema={
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "description": "Base transaction amount"},
                    "rate": {"type": "number", "default": 0.08, "description": "Tax rate fraction"},
                },
                "required": ["amount"],
            },
        )
    ]

@app.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    if name != "calculate_tax":
        raise ValueError(f"Unknown tool: {name}")
    amount = float(arguments["amount"])
    rate = float(arguments.get("rate", 0.08))
    total = round(amount * rate, 2)
    return [types.TextContent(type="text", text=str(total))]

async def main():
    async with stdio_server() as (read_stream, write_stream):
        await app.run(read_stream, write_stream, app.create_initialization_options())

if __name__ == "__main__":
    asyncio.run(main())
