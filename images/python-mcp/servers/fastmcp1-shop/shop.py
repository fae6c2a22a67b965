"""The shop tool suite (docs/TOOLS-shop.md) on mcp 1.x's FastMCP over stdio.

Real I/O against the cell's services: redis-py's asyncio client on one connection pool for
$BENCHLAB_REDIS_URL and one httpx.AsyncClient (keep-alive) for $BENCHLAB_API_URL, both made at
the first call, inside the server's event loop, and kept for the process. get_cart fetches its
items and its price concurrently (asyncio.gather); checkout's writes go in one MULTI/EXEC
pipeline. A failure of either service is an error result that names it.
"""

import asyncio
import os
from typing import Any
from urllib.parse import quote

import httpx
import redis.asyncio as aioredis
from mcp.server.fastmcp import FastMCP
from redis.exceptions import RedisError

REDIS_URL = os.environ.get("BENCHLAB_REDIS_URL") or "redis://127.0.0.1:6379/0"
API_URL = (os.environ.get("BENCHLAB_API_URL") or "http://127.0.0.1:8901").rstrip("/")

mcp = FastMCP("benchlab-fastmcp1-shop", log_level="WARNING")

_redis: aioredis.Redis | None = None
_api: httpx.AsyncClient | None = None


def redis_client() -> aioredis.Redis:
    """The process's Redis client (its pool opens connections as calls need them)."""
    global _redis
    if _redis is None:
        pool = aioredis.ConnectionPool.from_url(REDIS_URL, decode_responses=True)
        _redis = aioredis.Redis(connection_pool=pool)
    return _redis


def api_client() -> httpx.AsyncClient:
    """The process's HTTP client of the API service."""
    global _api
    if _api is None:
        _api = httpx.AsyncClient(
            base_url=API_URL,
            timeout=10.0,
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
        )
    return _api


async def redis_do(what: str, awaitable):
    try:
        return await awaitable
    except RedisError as e:
        raise RuntimeError(f"redis at {REDIS_URL}: {what}: {e}") from e


async def api(method: str, path: str, **kwargs) -> Any:
    """A request to the API service whose answer must be 200, as JSON."""
    try:
        r = await api_client().request(method, path, **kwargs)
    except httpx.HTTPError as e:
        raise RuntimeError(f"the API at {API_URL}: {method} {path}: {e!r}") from e
    if r.status_code == 404 and path.startswith("/items/"):
        raise ValueError(f"unknown product {path[len('/items/'):]!r}")
    if r.status_code != 200:
        raise RuntimeError(f"the API at {API_URL}: {method} {path} answered {r.status_code} {r.text}")
    return r.json()


async def read_cart(user: str) -> list[tuple[str, int]]:
    """HGETALL cart:<user> as (id, qty) lines, by id."""
    fields = await redis_do(f"HGETALL cart:{user}", redis_client().hgetall(f"cart:{user}"))
    return sorted((pid, int(qty)) for pid, qty in fields.items())


async def price(cart: list[tuple[str, int]]) -> int:
    """POST /price's total_cents (tax included) for the cart's lines."""
    answer = await api("POST", "/price", json={"items": [{"id": i, "qty": q} for i, q in cart]})
    return answer["total_cents"]


def item(pid: str):
    return api("GET", f"/items/{quote(pid, safe='')}")


@mcp.tool()
async def checkout(user: str) -> dict[str, Any]:
    """Order a user's cart: price it, take its items from stock, empty it, number the order."""
    cart = await read_cart(user)
    if not cart:
        return {"user": user, "order": None, "items": 0, "total_cents": 0}
    total = await price(cart)
    async with redis_client().pipeline(transaction=True) as pipe:
        for pid, qty in cart:
            pipe.decrby(f"stock:{pid}", qty)
        pipe.delete(f"cart:{user}")
        pipe.incr("orders")
        replies = await redis_do(f"checkout of cart:{user}", pipe.execute())
    return {"user": user, "order": replies[-1], "items": len(cart), "total_cents": total}


@mcp.tool()
async def get_cart(user: str) -> dict[str, Any]:
    """A user's cart with each item's price and the cart's total with tax."""
    cart = await read_cart(user)
    if not cart:
        return {"user": user, "items": [], "total_cents": 0}
    *items, total = await asyncio.gather(*(item(pid) for pid, _ in cart), price(cart))
    lines = [{"id": pid, "qty": qty, "price_cents": it["price_cents"]} for (pid, qty), it in zip(cart, items)]
    return {"user": user, "items": lines, "total_cents": total}


@mcp.tool()
async def get_stock(id: str) -> dict[str, Any]:
    """A product's name and stock."""
    stock = await redis_do(f"GET stock:{id}", redis_client().get(f"stock:{id}"))
    if stock is None:
        raise ValueError(f"unknown product {id!r}")
    answer = await item(id)
    return {"id": id, "name": answer["name"], "stock": int(stock)}


@mcp.tool()
async def search_products(query: str, limit: int) -> dict[str, Any]:
    """Products whose name or category contains the query."""
    return await api("GET", "/search", params={"q": query, "limit": limit})


if __name__ == "__main__":
    mcp.run()
