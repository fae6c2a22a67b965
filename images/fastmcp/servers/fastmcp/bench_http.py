"""Suite `bench` (seed 003) on fastmcp 4.x over HTTP, with a plain REST route per tool beside MCP.

The tools are those of images/gradio/servers/gr_api/bench.py, value for value. Seed 003 also
calls the same functions without MCP: `POST /api/<tool>` takes the tool's arguments object as its
JSON body and answers 200 with the tool's value as JSON (a FastMCP `custom_route`).
"""

import asyncio
import json
import os
import time

from starlette.requests import Request
from starlette.responses import JSONResponse

from fastmcp import FastMCP

mcp = FastMCP("bench")


@mcp.tool
async def echo(message: str) -> dict:
    """Echo a message back. Measures raw framework overhead.

    Args:
        message: The message string to echo back.
    """
    return {"message": message, "timestamp_ns": time.time_ns()}


def _fib(k: int) -> int:
    return k if k <= 1 else _fib(k - 1) + _fib(k - 2)


@mcp.tool
async def fibonacci(n: int) -> dict:
    """Calculate the nth Fibonacci number recursively. CPU-bound workload.

    Args:
        n: Position in the Fibonacci sequence, clamped to 0-35.
    """
    n = min(max(n, 0), 35)
    start = time.perf_counter_ns()
    result = _fib(n)
    return {"n": n, "result": result, "compute_time_ns": time.perf_counter_ns() - start}


@mcp.tool
async def json_transform(data: dict) -> dict:
    """Transform JSON data: upper-case every string value and sum every number.

    Args:
        data: A JSON object to transform.
    """
    stats = {"strings_transformed": 0, "numbers_found": 0, "number_sum": 0.0}

    def transform(value):
        if isinstance(value, dict):
            return {k: transform(v) for k, v in value.items()}
        if isinstance(value, list):
            return [transform(v) for v in value]
        if isinstance(value, str):
            stats["strings_transformed"] += 1
            return value.upper()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            stats["numbers_found"] += 1
            stats["number_sum"] += value
        return value

    start = time.perf_counter_ns()
    transformed = transform(data)
    elapsed_ns = time.perf_counter_ns() - start
    stats["json_size_bytes"] = len(json.dumps(transformed).encode("utf-8"))
    stats["processing_time_ns"] = elapsed_ns
    return {"transformed": transformed, "stats": stats}


@mcp.tool
async def async_sleep(duration_ms: int) -> dict:
    """Simulate an async I/O operation with a non-blocking sleep.

    Args:
        duration_ms: Sleep duration in milliseconds, clamped to 0-5000.
    """
    duration_ms = min(max(duration_ms, 0), 5000)
    start = time.perf_counter()
    await asyncio.sleep(duration_ms / 1000)
    actual_s = time.perf_counter() - start
    return {
        "requested_ms": duration_ms,
        "actual_ms": round(actual_s * 1000, 3),
        "overhead_ms": round(actual_s * 1000 - duration_ms, 3),
    }


@mcp.tool
async def payload_echo(payload: str) -> dict:
    """Echo a large payload back with its size in bytes.

    Args:
        payload: A string payload of arbitrary size.
    """
    return {
        "payload": payload,
        "size_bytes": len(payload.encode("utf-8")),
        "timestamp_ns": time.time_ns(),
    }


TOOLS = {tool.__name__: tool for tool in (echo, fibonacci, json_transform, async_sleep, payload_echo)}


@mcp.custom_route("/api/{tool}", methods=["POST"])
async def rest_api(request: Request) -> JSONResponse:
    tool = TOOLS.get(request.path_params["tool"])
    if tool is None:
        return JSONResponse({"error": "unknown tool"}, status_code=404)
    try:
        arguments = await request.json()
        return JSONResponse(await tool(**arguments))
    except (TypeError, ValueError) as error:
        return JSONResponse({"error": str(error)}, status_code=400)


if __name__ == "__main__":
    host = os.environ.get("BENCHLAB_HOST", "127.0.0.1")
    port = int(os.environ.get("BENCHLAB_PORT", "8000"))
    if os.environ.get("BENCHLAB_TRANSPORT", "streamable-http") == "sse":
        mcp.run(transport="sse", host=host, port=port)
    else:
        mcp.run(
            transport="http",
            host=host,
            port=port,
            json_response=os.environ.get("BENCHLAB_REPLY", "sse") == "json",
            stateless_http=os.environ.get("BENCHLAB_SESSION", "stateful") == "stateless",
        )
