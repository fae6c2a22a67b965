// Prints what a Node.js or Bun image holds, for the lab's environment manifest: the runtime's
// version and every npm package npm installed (from its hidden lockfile in node_modules).
import { readFileSync } from "node:fs";

const lock = JSON.parse(readFileSync("/srv/node_modules/.package-lock.json", "utf8"));
const packages = Object.entries(lock.packages ?? {})
  .filter(([path, meta]) => path.includes("node_modules/") && meta.version)
  .map(([path, meta]) => ({ name: path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length), version: meta.version }))
  .sort((a, b) => (a.name === b.name ? a.version.localeCompare(b.version) : a.name < b.name ? -1 : 1));
const runtime = typeof Bun !== "undefined"
  ? { name: "bun", version: Bun.version }
  : { name: "node", version: process.versions.node };
console.log(JSON.stringify({ runtime, packages }));
