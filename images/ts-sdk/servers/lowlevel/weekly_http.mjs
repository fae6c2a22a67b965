// Suite `weekly` on the low-level Server API of @modelcontextprotocol/sdk 1.0.x, over legacy HTTP+SSE.
// SDK 1.0.x has no Streamable HTTP: SSEServerTransport on Node's plain `http` module. GET /sse opens
// a stream (first event `endpoint`: /messages?sessionId=...); each client POSTs its messages there.
// A Server drives one transport, so every SSE connection gets its own Server.
import { createServer } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";

function buildServer() {
  const server = new Server(
    { name: "weekly", version: "1.0.0" },
    { capabilities: { tools: {} } },
  );

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: "add_numbers",
        description: "Add two integers.",
        inputSchema: {
          type: "object",
          properties: { a: { type: "integer" }, b: { type: "integer" } },
          required: ["a", "b"],
        },
      },
      {
        name: "echo",
        description: "Return the message unchanged.",
        inputSchema: {
          type: "object",
          properties: { message: { type: "string" } },
          required: ["message"],
        },
      },
      {
        name: "word_count",
        description: "Count the whitespace-separated words in a text.",
        inputSchema: {
          type: "object",
          properties: { text: { type: "string" } },
          required: ["text"],
        },
      },
    ],
  }));

  const text = (value) => ({ content: [{ type: "text", text: String(value) }] });

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args = {} } = request.params;
    switch (name) {
      case "add_numbers":
        return text(args.a + args.b);
      case "echo":
        return text(args.message);
      case "word_count":
        return text((args.text.match(/\S+/g) ?? []).length);
      default:
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    }
  });

  return server;
}

const transports = new Map();

const httpServer = createServer(async (req, res) => {
  const url = new URL(req.url, "http://localhost");
  try {
    if (req.method === "GET" && url.pathname === "/sse") {
      const transport = new SSEServerTransport("/messages", res);
      transports.set(transport.sessionId, transport);
      res.on("close", () => transports.delete(transport.sessionId));
      await buildServer().connect(transport);
    } else if (req.method === "POST" && url.pathname === "/messages") {
      const transport = transports.get(url.searchParams.get("sessionId"));
      if (!transport) {
        res.writeHead(404).end("Unknown session");
        return;
      }
      await transport.handlePostMessage(req, res);
    } else {
      res.writeHead(404).end();
    }
  } catch (err) {
    if (!res.headersSent) res.writeHead(500).end(String(err));
  }
});

httpServer.listen(Number(process.env.BENCHLAB_PORT ?? 8000), process.env.BENCHLAB_HOST ?? "127.0.0.1");
