"""The shop tool suite on mcp 1.x's FastMCP over HTTP: Streamable HTTP or legacy SSE.

HTTP settings live on the FastMCP settings object (the constructor's keywords): host, port,
json_response and stateless_http; `run()` then starts uvicorn at the settings' log level. The
service clients are the stdio module's, made in uvicorn's event loop at the first call.

Workers ($BENCHLAB_SERVER_WORKERS = N >= 2): uvicorn's own multi-process model. This process
becomes uvicorn's supervisor: it binds the port and spawns N worker processes (multiprocessing's
spawn context, so each is a child of this process), each importing this module by name and
calling `app()` (factory=True), which builds the same Starlette app `run()` would (the same
settings: the constructor's DNS-rebinding protection for a loopback host, replies, sessions and
log level). Each worker has its own service clients. A stateful session lives in the worker that
accepted its initialize: the lab's driver keeps one connection per virtual user, so its session
stays there, but a reconnect lands on any worker (and an unknown session id is a 404 there).
Without it (or N = 1), `run()` as before, one process.
"""

import os
import sys

# The worker processes import this module by name: /srv (this file's folder) must be on their path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from shop import mcp  # noqa: E402

TRANSPORT = os.environ.get("BENCHLAB_TRANSPORT", "streamable-http")
WORKERS = int(os.environ.get("BENCHLAB_SERVER_WORKERS") or "1")

mcp.settings.host = os.environ.get("BENCHLAB_HOST", "127.0.0.1")
mcp.settings.port = int(os.environ.get("BENCHLAB_PORT", "8000"))
mcp.settings.json_response = os.environ.get("BENCHLAB_REPLY", "sse") == "json"
mcp.settings.stateless_http = os.environ.get("BENCHLAB_SESSION", "stateful") == "stateless"


def app():
    """A worker's ASGI app: what `run()` serves for the transport (uvicorn's factory)."""
    return mcp.sse_app() if TRANSPORT == "sse" else mcp.streamable_http_app()


if __name__ == "__main__":
    if WORKERS > 1:
        import uvicorn

        # uvicorn needs an import string for workers; the config is run_*_async's.
        uvicorn.run(
            "shop_http:app",
            factory=True,
            workers=WORKERS,
            host=mcp.settings.host,
            port=mcp.settings.port,
            log_level=mcp.settings.log_level.lower(),
        )
    else:
        mcp.run(transport=TRANSPORT)
