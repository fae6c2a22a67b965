import hashlib
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("pulse")


@mcp.tool
async def calculate_tax(
    amount: Annotated[float, Field(gt=0, description="Base transaction amount")],
    rate: Annotated[float, Field(description="Tax rate fraction")] = 0.08,
) -> float:
    """Calculate the tax on an amount at a given rate."""
    return round(amount * rate, 2)


@mcp.tool
async def checksum(
    values: Annotated[list[int], Field(min_length=1, max_length=100)],
) -> dict[str, int | str]:
    """Count, sum and SHA-256 a list of integers."""
    digest = hashlib.sha256(",".join(map(str, values)).encode()).hexdigest()
    return {"count": len(values), "sum": sum(values), "sha256": digest}


if __name__ == "__main__":
    mcp.run(transport="stdio")
