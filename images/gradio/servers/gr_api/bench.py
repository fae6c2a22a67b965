# Suite `bench` (seed 003) on Gradio 6.x: every tool is a `gr.api` endpoint, served by
# `launch(mcp_server=True)` as MCP (streamable HTTP at /gradio_api/mcp/, SSE at
# /gradio_api/mcp/sse) and as Gradio's plain HTTP API (POST /gradio_api/call/<tool> then
# GET /gradio_api/call/<tool>/<event_id>; with the queue off also POST /gradio_api/run/<tool>).
#
# Environment (seed 003 sweeps the first two):
#   BENCHLAB_GRADIO_CONCURRENCY_LIMIT  an integer, or "none" for unlimited; default 1 (Gradio's
#                                      default concurrency limit per event)
#   BENCHLAB_GRADIO_QUEUE              "on" (default, Gradio's default) or "off": run the tools
#                                      outside Gradio's queue (`gr.api(..., queue=False)`)
#   BENCHLAB_PORT                      TCP port on 127.0.0.1; default 7860
import asyncio
import json
import os
import time

import gradio as gr

_limit = os.environ.get("BENCHLAB_GRADIO_CONCURRENCY_LIMIT", "1").strip().lower()
CONCURRENCY_LIMIT = None if _limit == "none" else int(_limit)
QUEUE = os.environ.get("BENCHLAB_GRADIO_QUEUE", "on").strip().lower() == "on"
PORT = int(os.environ.get("BENCHLAB_PORT", "7860"))


async def echo(message: str) -> dict:
    """Echo a message back. Measures raw framework overhead.

    Args:
        message: The message string to echo back.
    """
    return {"message": message, "timestamp_ns": time.time_ns()}


def _fib(k: int) -> int:
    return k if k <= 1 else _fib(k - 1) + _fib(k - 2)


async def fibonacci(n: int) -> dict:
    """Calculate the nth Fibonacci number recursively. CPU-bound workload.

    Args:
        n: Position in the Fibonacci sequence, clamped to 0-35.
    """
    n = min(max(n, 0), 35)
    start = time.perf_counter_ns()
    result = _fib(n)
    return {"n": n, "result": result, "compute_time_ns": time.perf_counter_ns() - start}


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


with gr.Blocks(title="benchlab bench") as demo:
    for tool in (echo, fibonacci, json_transform, async_sleep, payload_echo):
        gr.api(tool, queue=QUEUE, concurrency_limit=CONCURRENCY_LIMIT)

demo.launch(mcp_server=True, server_name="127.0.0.1", server_port=PORT, quiet=True)
