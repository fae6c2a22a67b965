// Suite `shop` (docs/TOOLS-shop.md) on McpServer + registerTool (@modelcontextprotocol/sdk 1.x), over
// HTTP: the tools and their service clients are shop.mjs's (one Redis client and fetch's pool for
// the process, whatever the sessions). On Node's plain `http` module: Streamable HTTP at /mcp
// (StreamableHTTPServerTransport, 1.10.0+) and the deprecated legacy HTTP+SSE (SSEServerTransport:
// GET /sse, POST /messages?sessionId=...).
// Stateful: one McpServer + transport per session, keyed by Mcp-Session-Id (randomUUID).
// Stateless: sessionIdGenerator undefined and a new McpServer + transport for every POST.
// JSON replies: enableJsonResponse; otherwise each reply is an SSE stream.
//
// Workers ($BENCHLAB_SERVER_WORKERS = N >= 2): `node:cluster` on both runtimes. This process is
// the primary: it forks N workers of this file (each a child of it, each running the HTTP server
// below with its own Redis client and sessions), serves nothing itself and stays alive; a worker
// that exits makes the primary stop the others and exit 1 (no silent respawn), so the lab sees a
// crash. The primary loads this file's imports but opens no client (shop.mjs connects at the
// first call). On Node the primary holds the listening socket and hands each accepted connection
// to a worker in turn (cluster's default round-robin on Linux). On Bun 1.1.38 `node:cluster`
// works for a node:http server on Linux too, differently: each worker binds its own listener with
// SO_REUSEPORT and the kernel spreads the connections (checked on 1.1.38: two listeners on the
// port, raw connections spread over both; node:http's own `reusePort` option is ignored there,
// so cluster is the way). A stateful session lives in the worker that accepted its initialize: the
// lab's driver keeps one connection per virtual user, so its session stays there, but a
// reconnect lands on any worker (an unknown Mcp-Session-Id is a 404 there). Without it (or
// N = 1): one process, no cluster.
import cluster from "node:cluster";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { buildServer } from "./shop.mjs";

const TRANSPORT = process.env.BENCHLAB_TRANSPORT ?? "streamable-http";
const JSON_REPLIES = process.env.BENCHLAB_REPLY === "json";
const STATELESS = process.env.BENCHLAB_SESSION === "stateless";
const WORKERS = Number(process.env.BENCHLAB_SERVER_WORKERS || "1");

const sessions = new Map(); // Mcp-Session-Id or SSE sessionId -> transport

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function jsonRpcError(res, status, message) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

async function handleStreamable(req, res) {
  if (STATELESS) {
    if (req.method !== "POST") {
      jsonRpcError(res, 405, "Method not allowed.");
      return;
    }
    const server = buildServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: JSON_REPLIES,
    });
    res.on("close", () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
    return;
  }
  const sessionId = req.headers["mcp-session-id"];
  if (sessionId) {
    const transport = sessions.get(sessionId);
    if (!transport) {
      jsonRpcError(res, 404, "Session not found");
      return;
    }
    await transport.handleRequest(req, res);
    return;
  }
  const body = req.method === "POST" ? await readJson(req) : undefined;
  if (!isInitializeRequest(body)) {
    jsonRpcError(res, 400, "Bad Request: No valid session ID provided");
    return;
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableJsonResponse: JSON_REPLIES,
    onsessioninitialized: (id) => sessions.set(id, transport),
  });
  transport.onclose = () => sessions.delete(transport.sessionId);
  await buildServer().connect(transport);
  await transport.handleRequest(req, res, body);
}

async function handleSse(req, res, url) {
  if (req.method === "GET" && url.pathname === "/sse") {
    const transport = new SSEServerTransport("/messages", res);
    sessions.set(transport.sessionId, transport);
    res.on("close", () => sessions.delete(transport.sessionId));
    await buildServer().connect(transport);
  } else if (req.method === "POST" && url.pathname === "/messages") {
    const transport = sessions.get(url.searchParams.get("sessionId"));
    if (!transport) {
      res.writeHead(404).end("Unknown session");
      return;
    }
    await transport.handlePostMessage(req, res);
  } else {
    res.writeHead(404).end();
  }
}

function primary() {
  let stopping = false;
  const stopAll = () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGTERM");
  };
  cluster.on("exit", (worker, code, signal) => {
    if (stopping) return;
    console.error(`worker ${worker.process.pid} exited (code ${code}, signal ${signal}): stopping`);
    stopping = true;
    stopAll();
    process.exit(1);
  });
  for (const sig of ["SIGTERM", "SIGINT"]) {
    process.once(sig, () => {
      // Stopped from outside: the workers go too, and the primary dies of the signal as one
      // process would.
      stopping = true;
      stopAll();
      process.kill(process.pid, sig);
      setTimeout(() => process.exit(sig === "SIGINT" ? 130 : 143), 200); // PID 1 ignores it
    });
  }
  for (let i = 0; i < WORKERS; i++) cluster.fork();
}

function serve() {
  const httpServer = createServer(async (req, res) => {
    const url = new URL(req.url, "http://localhost");
    try {
      if (TRANSPORT === "sse") {
        await handleSse(req, res, url);
      } else if (url.pathname === "/mcp") {
        await handleStreamable(req, res);
      } else {
        res.writeHead(404).end();
      }
    } catch (err) {
      if (!res.headersSent) jsonRpcError(res, 500, String(err));
    }
  });

  httpServer.listen(Number(process.env.BENCHLAB_PORT ?? 8000), process.env.BENCHLAB_HOST ?? "127.0.0.1");
}

if (WORKERS > 1 && cluster.isPrimary) primary();
else serve();
