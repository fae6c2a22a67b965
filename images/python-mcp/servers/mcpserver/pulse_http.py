"""The pulse tool suite on mcp 2.x's MCPServer over HTTP: Streamable HTTP or legacy SSE.

mcp 2.x takes the transport options as `run()` keywords.
"""

import os

from pulse import mcp

if __name__ == "__main__":
    host = os.environ.get("BENCHLAB_HOST", "127.0.0.1")
    port = int(os.environ.get("BENCHLAB_PORT", "8000"))
    if os.environ.get("BENCHLAB_TRANSPORT", "streamable-http") == "sse":
        mcp.run(transport="sse", host=host, port=port)
    else:
        mcp.run(
            transport="streamable-http",
            host=host,
            port=port,
            json_response=os.environ.get("BENCHLAB_REPLY", "sse") == "json",
            stateless_http=os.environ.get("BENCHLAB_SESSION", "stateful") == "stateless",
        )
