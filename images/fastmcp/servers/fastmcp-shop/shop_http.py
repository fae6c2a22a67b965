"""The shop tool suite on fastmcp 4.x over HTTP: Streamable HTTP ("http") or legacy SSE. The
service clients are the stdio module's, made in uvicorn's event loop at the first call."""

import os

from shop import mcp

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
