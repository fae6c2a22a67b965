# Seed 000's FastMCP program ("Approach A"), as the seed prints it. Comments are the lab's.
from fastmcp import FastMCP

mcp = FastMCP("Tax-Service")

@mcp.tool()
def calculate_tax(amount: float, rate: float = 0.08) -> float:
    """Calculate total tax amount given a base price and tax rate."""
    return round(amount * rate, 2)

if __name__ == "__main__":
    mcp.run(transport="stdio")
