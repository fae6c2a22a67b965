// Suite `shop` (docs/TOOLS-shop.md) on McpServer + registerTool (@modelcontextprotocol/sdk 1.x,
// zod schemas), over stdio when run itself; shop_http.mjs serves the same tools over HTTP.
// Real I/O against the cell's services, with clients kept for the process: one node-redis client
// for $BENCHLAB_REDIS_URL (it pipelines the commands of concurrent calls on its connection;
// checkout's writes go in one MULTI/EXEC), connected at the first call, and the runtime's own
// fetch (undici's keep-alive pool on Node, Bun's on Bun) for $BENCHLAB_API_URL. get_cart fetches
// its items and its price concurrently (Promise.all). A failure of either service is an error
// result that names it.
import { pathToFileURL } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createClient } from "redis";
import { z } from "zod";

const REDIS_URL = process.env.BENCHLAB_REDIS_URL || "redis://127.0.0.1:6379/0";
const API_URL = (process.env.BENCHLAB_API_URL || "http://127.0.0.1:8901").replace(/\/+$/, "");

// Commands fail at once while the connection is down, so a lost Redis is an error result, not a
// call that hangs: once connected, the client reconnects by itself (backing off up to 1 s); a
// first connection that fails fails the call, and the next call tries again.
let wasReady = false;
const redis = createClient({
  url: REDIS_URL,
  disableOfflineQueue: true,
  socket: {
    connectTimeout: 5000,
    reconnectStrategy: (retries, cause) => (wasReady ? Math.min(50 * (retries + 1), 1000) : cause),
  },
});
redis.on("ready", () => {
  wasReady = true;
});
redis.on("error", () => {}); // each failed command reports its own error
let connected;

async function redisDo(what, run) {
  try {
    connected ??= redis.connect().catch((e) => {
      connected = undefined;
      throw e;
    });
    await connected;
    return await run(redis);
  } catch (e) {
    throw new Error(`redis at ${REDIS_URL}: ${what}: ${e?.message ?? e}`);
  }
}

// A request to the API service whose answer must be 200, as JSON.
async function api(method, path, body) {
  let res;
  let text;
  try {
    res = await fetch(
      API_URL + path,
      body === undefined
        ? { method }
        : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
    );
    text = await res.text();
  } catch (e) {
    throw new Error(`the API at ${API_URL}: ${method} ${path}: ${e?.cause?.message ?? e?.message ?? e}`);
  }
  if (res.status === 404 && path.startsWith("/items/")) {
    throw new Error(`unknown product ${JSON.stringify(decodeURIComponent(path.slice("/items/".length)))}`);
  }
  if (res.status !== 200) {
    throw new Error(`the API at ${API_URL}: ${method} ${path} answered ${res.status} ${text}`);
  }
  return JSON.parse(text);
}

// HGETALL cart:<user> as [id, qty] lines, by id.
async function readCart(user) {
  const fields = await redisDo(`HGETALL cart:${user}`, (r) => r.hGetAll(`cart:${user}`));
  return Object.entries(fields)
    .map(([id, qty]) => [id, Number(qty)])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

// POST /price's total_cents (tax included) for the cart's lines.
async function price(cart) {
  const answer = await api("POST", "/price", { items: cart.map(([id, qty]) => ({ id, qty })) });
  return answer.total_cents;
}

const item = (id) => api("GET", `/items/${encodeURIComponent(id)}`);
const json = (value) => ({ content: [{ type: "text", text: JSON.stringify(value) }] });

export function buildServer() {
  const server = new McpServer({ name: "shop", version: "1.0.0" });

  server.registerTool(
    "checkout",
    {
      description: "Order a user's cart: price it, take its items from stock, empty it, number the order.",
      inputSchema: { user: z.string() },
    },
    async ({ user }) => {
      const cart = await readCart(user);
      if (cart.length === 0) return json({ user, order: null, items: 0, total_cents: 0 });
      const total = await price(cart);
      const replies = await redisDo(`checkout of cart:${user}`, (r) => {
        const tx = r.multi();
        for (const [id, qty] of cart) tx.decrBy(`stock:${id}`, qty);
        tx.del(`cart:${user}`);
        tx.incr("orders");
        return tx.exec();
      });
      return json({ user, order: Number(replies.at(-1)), items: cart.length, total_cents: total });
    },
  );

  server.registerTool(
    "get_cart",
    {
      description: "A user's cart with each item's price and the cart's total with tax.",
      inputSchema: { user: z.string() },
    },
    async ({ user }) => {
      const cart = await readCart(user);
      if (cart.length === 0) return json({ user, items: [], total_cents: 0 });
      const [items, total] = await Promise.all([Promise.all(cart.map(([id]) => item(id))), price(cart)]);
      const lines = cart.map(([id, qty], i) => ({ id, qty, price_cents: items[i].price_cents }));
      return json({ user, items: lines, total_cents: total });
    },
  );

  server.registerTool(
    "get_stock",
    {
      description: "A product's name and stock.",
      inputSchema: { id: z.string() },
    },
    async ({ id }) => {
      const stock = await redisDo(`GET stock:${id}`, (r) => r.get(`stock:${id}`));
      if (stock === null) throw new Error(`unknown product ${JSON.stringify(id)}`);
      const { name } = await item(id);
      return json({ id, name, stock: Number(stock) });
    },
  );

  server.registerTool(
    "search_products",
    {
      description: "Products whose name or category contains the query.",
      inputSchema: { query: z.string(), limit: z.number().int().min(0).max(50) },
    },
    async ({ query, limit }) => json(await api("GET", `/search?q=${encodeURIComponent(query)}&limit=${limit}`)),
  );

  return server;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await buildServer().connect(new StdioServerTransport());
}
