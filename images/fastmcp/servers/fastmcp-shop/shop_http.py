"""The shop tool suite on fastmcp 4.x over HTTP: Streamable HTTP ("http") or legacy SSE. The
service clients are the stdio module's, made in uvicorn's event loop at the first call.

Workers ($BENCHLAB_SERVER_WORKERS = N >= 2): uvicorn's own multi-process model. This process
becomes uvicorn's supervisor: it binds the port and spawns N worker processes (multiprocessing's
spawn context, so each is a child of this process), each importing this module by name and
calling `app()` (factory=True). `app()` builds what fastmcp 4.1.3's `run_http_async` builds: the
same `http_app` arguments (replies, sessions, the settings' host/origin protection with the
loopback host allowed as `run` resolves it) and the same uvicorn options and log level; the app's
own lifespan enters the server's lifespan in each worker. Each worker has its own service
clients. A stateful session lives in the worker that accepted its initialize: the lab's driver
keeps one connection per virtual user, so its session stays there, but a reconnect lands on any
worker (and an unknown session id is a 404 there). Without it (or N = 1), `run()` as before.
"""

import os
import sys

# The worker processes import this module by name: /srv (this file's folder) must be on their path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from shop import mcp  # noqa: E402

HOST = os.environ.get("BENCHLAB_HOST", "127.0.0.1")
PORT = int(os.environ.get("BENCHLAB_PORT", "8000"))
SSE = os.environ.get("BENCHLAB_TRANSPORT", "streamable-http") == "sse"
JSON_REPLIES = os.environ.get("BENCHLAB_REPLY", "sse") == "json"
STATELESS = os.environ.get("BENCHLAB_SESSION", "stateful") == "stateless"
WORKERS = int(os.environ.get("BENCHLAB_SERVER_WORKERS") or "1")


def app():
    """A worker's ASGI app, with run_http_async's arguments (uvicorn's factory)."""
    import fastmcp
    from fastmcp.server.mixins.transport import _resolve_allowed_hosts_for_run

    protection = fastmcp.settings.http_host_origin_protection
    allowed = _resolve_allowed_hosts_for_run(
        host=HOST,
        host_origin_protection=protection,
        allowed_hosts=None,
        configured_allowed_hosts=fastmcp.settings.http_allowed_hosts,
    )
    if SSE:
        return mcp.http_app(transport="sse", host_origin_protection=protection, allowed_hosts=allowed)
    return mcp.http_app(
        transport="http",
        json_response=JSON_REPLIES,
        stateless_http=STATELESS,
        host_origin_protection=protection,
        allowed_hosts=allowed,
    )


if __name__ == "__main__":
    if WORKERS > 1:
        import fastmcp
        import uvicorn

        # uvicorn needs an import string for workers; the options are run_http_async's.
        uvicorn.run(
            "shop_http:app",
            factory=True,
            workers=WORKERS,
            host=HOST,
            port=PORT,
            log_level=fastmcp.settings.log_level.lower(),
            timeout_graceful_shutdown=2,
            lifespan="on",
            ws="websockets-sansio",
        )
    elif SSE:
        mcp.run(transport="sse", host=HOST, port=PORT)
    else:
        mcp.run(
            transport="http",
            host=HOST,
            port=PORT,
            json_response=JSON_REPLIES,
            stateless_http=STATELESS,
        )
