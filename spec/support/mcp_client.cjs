// Drives `tecs-profile mcp` with the official TypeScript SDK over stdio,
// as spec/support/mcp_client.py does with PyPI's (same arguments, same
// output): PACKAGE "sdk" is @modelcontextprotocol/sdk 1.x (the handshake
// revisions; MODE "legacy"), "client" its 2.x successor
// @modelcontextprotocol/client (MODE "legacy" or "2026-07-28"). Both are
// found in the node_modules directory NODE_MODULES names
// (scripts/mcp-clients.sh installs them).
//
//   node mcp_client.cjs PACKAGE MODE LUAJIT TECS_PROFILE_BIN CALLS
"use strict";
const path = require("path");
const { createRequire } = require("module");

const [pkg, mode, luajit, cli, callsJson] = process.argv.slice(2);
const load = createRequire(path.join(process.env.NODE_MODULES, "..", "package.json"));

function modules() {
  if (pkg === "sdk") {
    if (mode !== "legacy") throw new Error("@modelcontextprotocol/sdk 1.x speaks only the handshake revisions");
    return {
      name: "@modelcontextprotocol/sdk",
      Client: load("@modelcontextprotocol/sdk/client/index.js").Client,
      StdioClientTransport: load("@modelcontextprotocol/sdk/client/stdio.js").StdioClientTransport,
      options: {},
    };
  }
  const negotiation = mode === "legacy" ? { mode: "legacy" } : { mode: { pin: mode } };
  return {
    name: "@modelcontextprotocol/client",
    Client: load("@modelcontextprotocol/client").Client,
    StdioClientTransport: load("@modelcontextprotocol/client/stdio").StdioClientTransport,
    options: { versionNegotiation: negotiation },
  };
}

function failure(e) {
  return { type: e.constructor && e.constructor.name, code: e.code === undefined ? null : e.code, message: e.message };
}

async function main() {
  const m = modules();
  const fs = require("fs");
  const version = JSON.parse(fs.readFileSync(path.join(process.env.NODE_MODULES, m.name, "package.json"))).version;
  const out = { client: `${m.name} ${version} (${mode})`, calls: [] };
  const transport = new m.StdioClientTransport({ command: luajit, args: [cli, "mcp"], env: process.env,
    stderr: "ignore" });
  const client = new m.Client({ name: "tecs-profile-spec", version: "1" }, m.options);
  // The 1.x client tells the revision it settled on only to a transport
  // that asks (HTTP's); this one asks.
  let negotiated;
  if (!transport.setProtocolVersion) transport.setProtocolVersion = (v) => { negotiated = v; };
  await client.connect(transport);
  out.protocolVersion = client.getNegotiatedProtocolVersion ? client.getNegotiatedProtocolVersion() : negotiated;
  out.server = (client.getServerVersion() || {}).name;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const links = [];
  for (const [name, args] of JSON.parse(callsJson)) {
    const progress = [];
    const call = { name, progress };
    const options = { onprogress: (p) => progress.push([p.progress, p.total, p.message]), timeout: 600000 };
    try {
      const r = pkg === "sdk" ? await client.callTool({ name, arguments: args }, undefined, options)
        : await client.callTool({ name, arguments: args }, options);
      call.text = r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
      call.links = r.content.filter((c) => c.type === "resource_link");
      call.structured = r.structuredContent === undefined ? null : r.structuredContent;
      call.isError = Boolean(r.isError);
      links.push(...call.links);
    } catch (e) {
      call.error = failure(e);
    }
    out.calls.push(call);
  }
  out.reads = [];
  for (const link of links) {
    const read = { uri: link.uri };
    try {
      read.contents = (await client.readResource({ uri: link.uri })).contents;
    } catch (e) {
      read.error = failure(e);
    }
    out.reads.push(read);
  }
  out.resources = (await client.listResources()).resources;
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(String((e && e.stack) || e) + "\n");
  process.exit(1);
});
