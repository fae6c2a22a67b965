"""The weekly tool suite on mcp 1.1.2's low-level Server over legacy HTTP+SSE.

mcp 1.1.2 has no Streamable HTTP: `SseServerTransport` gives two ASGI apps (the GET event
stream and the POST message endpoint), mounted in Starlette and served by uvicorn.
"""

import os

import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Mount, Route

from mcp.server.sse import SseServerTransport

from weekly import server

sse = SseServerTransport("/messages/")


async def handle_sse(request):
    async with sse.connect_sse(request.scope, request.receive, request._send) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
    return Response()


app = Starlette(
    routes=[
        Route("/sse", endpoint=handle_sse),
        Mount("/messages/", app=sse.handle_post_message),
    ]
)

if __name__ == "__main__":
    uvicorn.run(
        app,
        host=os.environ.get("BENCHLAB_HOST", "127.0.0.1"),
        port=int(os.environ.get("BENCHLAB_PORT", "8000")),
        log_level="warning",
        access_log=False,
    )
