#!/usr/bin/env node
// Drive the bot with the official TypeScript MCP clients (scripts/interop.sh runs this).
//
//   node ts-client.mjs --sdk v1 --url URL                      # @modelcontextprotocol/sdk 1.x, Streamable HTTP
//   node ts-client.mjs --sdk v2 --era auto|modern|legacy --url URL   # @modelcontextprotocol/client 2.x
//   node ts-client.mjs --sdk v1 --stdio COMMAND --url URL      # sdk 1.x StdioClientTransport spawning
//                                                              # COMMAND with PORTHOLE_URL/PORTHOLE_TOKEN
//
// The bearer token comes from the environment (INTEROP_TOKEN), not argv. HTTP transports send
// it as `Authorization: Bearer …` through requestInit.headers.
//
// Steps: connect, tools/list (>= 18 tools incl. health, server_log, db_query, send_message),
// tools/call health (structuredContent.uptime_secs is a number), tools/call server_log
// (structuredContent.lines is an array; skipped with --stdio, which calls health only).
// Prints one line per step and a final `PASS: <label>` or `FAIL: <label> — <reason>`; exit 0 iff PASS.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const opt = {};
for (let i = 0; i < argv.length; i++) {
  if (!argv[i].startsWith('--')) {
    console.error(`unexpected argument ${argv[i]}`);
    process.exit(2);
  }
  opt[argv[i].slice(2)] = argv[++i];
}
const sdk = opt.sdk ?? 'v1';
const era = opt.era ?? 'legacy';
const url = opt.url;
const stdioCommand = opt.stdio;
const token = process.env.INTEROP_TOKEN ?? '';
const timeout = Number(process.env.INTEROP_TIMEOUT_MS ?? 20000);
if (!url || !['v1', 'v2'].includes(sdk) || !['legacy', 'auto', 'modern'].includes(era)) {
  console.error('usage: ts-client.mjs --sdk v1|v2 [--era legacy|auto|modern] --url URL [--stdio COMMAND]');
  process.exit(2);
}

const REQUIRED_TOOLS = ['health', 'server_log', 'db_query', 'send_message'];
const MIN_TOOLS = 18;
const HERE = dirname(fileURLToPath(import.meta.url));
const versionOf = (pkg) => JSON.parse(readFileSync(join(HERE, 'node_modules', pkg, 'package.json'), 'utf8')).version;

const label = stdioCommand
  ? `ts-sdk-v1 stdio relay (${stdioCommand.split('/').pop()})`
  : sdk === 'v1'
    ? 'ts-sdk-v1 streamable-http'
    : `ts-client-v2 streamable-http era=${era}`;
const say = (msg) => console.log(`  ${msg}`);
class CheckFailure extends Error {}
const expect = (cond, msg) => {
  if (!cond) throw new CheckFailure(msg);
};
const short = (v, n = 300) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s && s.length > n ? `${s.slice(0, n)}…` : s;
};

let client;
let transport;
let stderrTail = '';
try {
  let Client;
  let clientOptions = { capabilities: {} };
  if (sdk === 'v2') {
    const mod = await import('@modelcontextprotocol/client');
    Client = mod.Client;
    const mode = era === 'modern' ? { pin: '2026-07-28' } : era;
    clientOptions = { ...clientOptions, versionNegotiation: { mode } };
    say(`client: @modelcontextprotocol/client@${versionOf('@modelcontextprotocol/client')} versionNegotiation.mode=${JSON.stringify(mode)}`);
    transport = new mod.StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  } else {
    ({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
    say(`client: @modelcontextprotocol/sdk@${versionOf('@modelcontextprotocol/sdk')}`);
    if (stdioCommand) {
      const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
      say(`transport: StdioClientTransport spawning ${stdioCommand} with PORTHOLE_URL=${url} PORTHOLE_TOKEN=<token>`);
      transport = new StdioClientTransport({
        command: stdioCommand,
        args: [],
        env: { ...process.env, PORTHOLE_URL: url, PORTHOLE_TOKEN: token },
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (d) => {
        stderrTail = (stderrTail + d.toString()).slice(-4000);
      });
    } else {
      const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
      transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      });
    }
  }
  client = new Client({ name: 'porthole-interop-ts', version: '1.0.0' }, clientOptions);
  // SDK v1 keeps the negotiated version only on transports that track it (not stdio): note it.
  let seenVersion;
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    seenVersion = v;
    setVersion?.(v);
  };

  // 1. connect (handshake or discovery, depending on the era)
  const started = Date.now();
  await client.connect(transport, { timeout });
  const negotiated = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? seenVersion;
  const protoEra = client.getProtocolEra?.();
  const server = client.getServerVersion();
  say(
    `connect: ok in ${Date.now() - started} ms — server ${server?.name}@${server?.version}, protocol ${negotiated ?? '?'}` +
      `${protoEra ? `, era ${protoEra}` : ''}${transport.sessionId ? `, session ${transport.sessionId}` : ''}`
  );
  if (!stdioCommand) {
    if (sdk === 'v1' || era === 'legacy') {
      // 2025-era session protocol: initialize must have issued a session id.
      expect(typeof transport.sessionId === 'string' && transport.sessionId.length > 0,
        `no Mcp-Session-Id after initialize (negotiated ${negotiated})`);
    } else {
      // The bot speaks 2026-07-28, so auto must pick the modern era, and the pin must hold.
      expect(negotiated === '2026-07-28',
        `expected the modern era (2026-07-28) to be negotiated, got ${negotiated} (era ${protoEra})`);
    }
  }

  // 2. tools/list
  const { tools } = await client.listTools(undefined, { timeout });
  const names = tools.map((t) => t.name);
  say(`tools/list: ${names.length} tools: ${names.join(', ')}`);
  expect(names.length >= MIN_TOOLS, `expected at least ${MIN_TOOLS} tools, got ${names.length}`);
  const missing = REQUIRED_TOOLS.filter((n) => !names.includes(n));
  expect(missing.length === 0, `tools/list lacks ${missing.join(', ')}`);

  // 3. tools/call health
  const health = await client.callTool({ name: 'health', arguments: {} }, undefined, { timeout });
  expect(!health.isError, `health returned isError: ${short(health.content)}`);
  const uptime = health.structuredContent?.uptime_secs;
  expect(typeof uptime === 'number', `health structuredContent.uptime_secs is not a number: ${short(health.structuredContent)}`);
  say(`tools/call health: ok — uptime_secs=${uptime}, structuredContent keys: ${Object.keys(health.structuredContent).join(', ')}`);

  // 4. tools/call server_log
  if (!stdioCommand) {
    const log = await client.callTool({ name: 'server_log', arguments: { limit: 5 } }, undefined, { timeout });
    expect(!log.isError, `server_log returned isError: ${short(log.content)}`);
    const lines = log.structuredContent?.lines;
    expect(Array.isArray(lines), `server_log structuredContent.lines is not an array: ${short(log.structuredContent)}`);
    say(`tools/call server_log: ok — ${lines.length} lines; last: ${short(lines.at(-1)?.message ?? lines.at(-1), 120)}`);
  }

  // 5. end the session (DELETE on the 2025-era wire)
  if (!stdioCommand && transport.sessionId && typeof transport.terminateSession === 'function') {
    await transport.terminateSession();
    say('terminate session (DELETE): ok');
  }
  const child = stdioCommand ? transport._process : undefined; // to report how the relay ends
  const closing = Date.now();
  await client.close();
  client = undefined;
  if (child) {
    // close() ends the relay's stdin and waits up to 2 s before it sends SIGTERM.
    const how = child.signalCode ? `killed by ${child.signalCode}` : `exit code ${child.exitCode}`;
    say(`close: stdin closed; relay ended in ${Date.now() - closing} ms (${how})`);
    if (child.signalCode) say('WARN: the relay did not exit on stdin EOF; the SDK had to signal it');
  }
  console.log(`PASS: ${label}`);
  process.exit(0);
} catch (e) {
  const reason = e instanceof CheckFailure ? e.message : `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
  if (!(e instanceof CheckFailure) && e?.stack) say(`error: ${e.stack.split('\n').slice(0, 6).join('\n      ')}`);
  if (e?.cause) say(`cause: ${e.cause?.message ?? e.cause}`);
  if (stderrTail) say(`relay stderr (tail):\n${stderrTail.replace(/^/gm, '    | ')}`);
  try {
    await client?.close();
  } catch {}
  console.log(`FAIL: ${label} — ${reason}`);
  process.exit(1);
}
