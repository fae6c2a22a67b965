// Suite `pulse` on the low-level Server API of @modelcontextprotocol/sdk 1.0.x, over legacy HTTP+SSE.
// SDK 1.0.x has no Streamable HTTP: SSEServerTransport on Node's plain `http` module. GET /sse opens
// a stream (first event `endpoint`: /messages?sessionId=...); each client POSTs its messages there.
// A Server drives one transport, so every SSE connection gets its own Server.
import { createServer } from "node:http";
import { createHash } from "node:crypto";
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
    { name: "pulse", version: "1.0.0" },
    { capabilities: { tools: {} } },
  );

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: "calculate_tax",
        description: "Calculate the tax on an amount at a given rate, rounded to 2 decimals.",
        inputSchema: {
          type: "object",
          properties: {
            amount: { type: "number", exclusiveMinimum: 0, description: "Base transaction amount" },
            rate: { type: "number", default: 0.08, description: "Tax rate fraction" },
          },
          required: ["amount"],
        },
      },
      {
        name: "checksum",
        description: "Count, sum and SHA-256 of the comma-joined decimal values of 1 to 100 integers.",
        inputSchema: {
          type: "object",
          properties: {
            values: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 100 },
          },
          required: ["values"],
        },
      },
    ],
  }));

  const text = (value) => ({ content: [{ type: "text", text: String(value) }] });
  const error = (message) => ({ content: [{ type: "text", text: message }], isError: true });

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args = {} } = request.params;
    switch (name) {
      case "calculate_tax": {
        const { amount, rate = 0.08 } = args;
        if (typeof amount !== "number" || !(amount > 0)) {
          return error("amount must be a number greater than 0");
        }
        if (typeof rate !== "number") {
          return error("rate must be a number");
        }
        return text(Math.round(amount * rate * 100) / 100);
      }
      case "checksum": {
        const { values } = args;
        if (!Array.isArray(values) || values.length < 1 || values.length > 100 || !values.every(Number.isInteger)) {
          return error("values must be a list of 1 to 100 integers");
        }
        const result = {
          count: values.length,
          sum: values.reduce((total, value) => total + value, 0),
          sha256: createHash("sha256").update(values.join(",")).digest("hex"),
        };
        return text(JSON.stringify(result));
      }
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
