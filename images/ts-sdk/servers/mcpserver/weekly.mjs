// Suite `weekly` on McpServer + registerTool (@modelcontextprotocol/sdk 1.x, zod schemas).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "weekly", version: "1.0.0" });

server.registerTool(
  "add_numbers",
  {
    description: "Add two integers.",
    inputSchema: { a: z.number().int(), b: z.number().int() },
  },
  async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }] }),
);

server.registerTool(
  "echo",
  {
    description: "Return the message unchanged.",
    inputSchema: { message: z.string() },
  },
  async ({ message }) => ({ content: [{ type: "text", text: message }] }),
);

server.registerTool(
  "word_count",
  {
    description: "Count the whitespace-separated words in a text.",
    inputSchema: { text: z.string() },
  },
  async ({ text }) => ({
    content: [{ type: "text", text: String((text.match(/\S+/g) ?? []).length) }],
  }),
);

const transport = new StdioServerTransport();
await server.connect(transport);
