"""The shop tool suite on mcp 1.x's FastMCP over HTTP: Streamable HTTP or legacy SSE.

HTTP settings live on the FastMCP settings object (the constructor's keywords): host, port,
json_response and stateless_http; `run()` then starts uvicorn at the settings' log level. The
service clients are the stdio module's, made in uvicorn's event loop at the first call.
"""

import os

from shop import mcp

mcp.settings.host = os.environ.get("BENCHLAB_HOST", "127.0.0.1")
mcp.settings.port = int(os.environ.get("BENCHLAB_PORT", "8000"))
mcp.settings.json_response = os.environ.get("BENCHLAB_REPLY", "sse") == "json"
mcp.settings.stateless_http = os.environ.get("BENCHLAB_SESSION", "stateful") == "stateless"

if __name__ == "__main__":
    mcp.run(transport=os.environ.get("BENCHLAB_TRANSPORT", "streamable-http"))
