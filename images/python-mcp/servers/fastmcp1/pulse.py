"""The pulse tool suite on mcp 1.x's FastMCP over stdio."""

import hashlib
from typing import Annotated

from pydantic import BaseModel, Field

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("benchlab-fastmcp1", log_level="WARNING")


class Checksum(BaseModel):
    count: int
    sum: int
    sha256: str


@mcp.tool()
async def calculate_tax(
    amount: Annotated[float, Field(gt=0, description="Base amount")],
    rate: Annotated[float, Field(description="Tax rate fraction")] = 0.08,
) -> float:
    """Calculate the tax on an amount, rounded to cents."""
    return round(amount * rate, 2)


@mcp.tool()
async def checksum(values: Annotated[list[int], Field(min_length=1, max_length=100)]) -> Checksum:
    """Count, sum and SHA-256 of a list of integers."""
    digest = hashlib.sha256(",".join(map(str, values)).encode()).hexdigest()
    return Checksum(count=len(values), sum=sum(values), sha256=digest)


if __name__ == "__main__":
    mcp.run()
