// Seed 000's TypeScript SDK program ("Approach B"), as the seed prints it (an ES module, so
// Node and Bun run the file as it is). Comments are the lab's. It imports McpServer from
// server/mcp.js, which the SDK first shipped in 1.3.0: the SDK 1.0.4 the seed names has no
// such module.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({
  name: "Tax-Service",
  version: "1.0.0",
});

server.tool(
  "calculate_tax",
  "Calculate total tax amount given a base price and tax rate.",
  {
    amount: z.number().positive().describe("Base transaction amount"),
    rate: z.number().default(0.08).describe("Tax rate fraction"),
  },
  async ({ amount, rate }) => {
    const total = Math.round(amount * rate * 100) / 100;
    return {
      content: [{ type: "text", text: String(total) }],
    };
  }
);

const transport = new StdioServerTransport();
await server.connect(transport);
