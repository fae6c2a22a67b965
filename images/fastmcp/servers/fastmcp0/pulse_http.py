"""The pulse tool suite on fastmcp 0.4.x over legacy HTTP+SSE (its only HTTP transport).

`run("sse")` serves GET /sse and POST /messages with uvicorn, at the settings' host (default
0.0.0.0), port and log level.
"""

import os

from pulse import mcp

mcp.settings.host = os.environ.get("BENCHLAB_HOST", "127.0.0.1")
mcp.settings.port = int(os.environ.get("BENCHLAB_PORT", "8000"))

if __name__ == "__main__":
    mcp.run("sse")
