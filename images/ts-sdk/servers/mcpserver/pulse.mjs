// Suite `pulse` on McpServer + registerTool (@modelcontextprotocol/sdk 1.x, zod schemas).
import { createHash } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "pulse", version: "1.0.0" });

server.registerTool(
  "calculate_tax",
  {
    description: "Calculate the tax on an amount at a given rate, rounded to 2 decimals.",
    inputSchema: {
      amount: z.number().positive().describe("Base transaction amount"),
      rate: z.number().default(0.08).describe("Tax rate fraction"),
    },
  },
  async ({ amount, rate }) => ({
    content: [{ type: "text", text: String(Math.round(amount * rate * 100) / 100) }],
  }),
);

server.registerTool(
  "checksum",
  {
    description: "Count, sum and SHA-256 of the comma-joined decimal values of 1 to 100 integers.",
    inputSchema: { values: z.array(z.number().int()).min(1).max(100) },
    outputSchema: { count: z.number().int(), sum: z.number().int(), sha256: z.string() },
  },
  async ({ values }) => {
    const result = {
      count: values.length,
      sum: values.reduce((total, value) => total + value, 0),
      sha256: createHash("sha256").update(values.join(",")).digest("hex"),
    };
    return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
  },
);

const transport = new StdioServerTransport();
await server.connect(transport);
