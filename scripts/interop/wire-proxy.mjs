#!/usr/bin/env node
// Logging reverse proxy used by scripts/interop.sh to capture the exact HTTP exchange between
// a third-party MCP client and the bot when a check fails. No dependencies.
//
//   node wire-proxy.mjs serve --target http://127.0.0.1:PORT --log FILE.jsonl
//       Listens on 127.0.0.1 (ephemeral port), prints "wire-proxy listening on PORT" once ready,
//       forwards every request verbatim (method, path, headers, body) to --target and streams
//       the response back unchanged (SSE included). Each event is appended to FILE as one JSON
//       line: {n, t_ms, ev: "request"|"response"|"chunk"|"end"|"client-closed"|"error", ...}.
//       Bearer tokens are masked in the log.
//   node wire-proxy.mjs print FILE.jsonl [--max-body N]
//       Renders the log as a readable transcript (one block per exchange, in request order).
import http from 'node:http';
import fs from 'node:fs';

const MASKED_HEADERS = new Set(['authorization']);
const mask = (name, value) =>
  MASKED_HEADERS.has(name) ? String(value).replace(/^(Bearer\s+)(.{4}).*$/i, '$1$2…(masked)') : value;

function parseFlags(argv) {
  const flags = {};
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) flags[argv[i].slice(2)] = argv[++i];
    else pos.push(argv[i]);
  }
  return { flags, pos };
}

function serve(flags) {
  if (!flags.target || !flags.log) {
    console.error('usage: wire-proxy.mjs serve --target URL --log FILE');
    process.exit(2);
  }
  const target = new URL(flags.target);
  const logFd = fs.openSync(flags.log, 'a');
  const t0 = Date.now();
  const write = (o) => fs.writeSync(logFd, JSON.stringify({ t_ms: Date.now() - t0, ...o }) + '\n');
  let counter = 0;

  const server = http.createServer((req, res) => {
    const n = ++counter;
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = mask(k, v);
      write({ n, ev: 'request', method: req.method, path: req.url, headers, body: body.toString('utf8') });

      const upstream = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: req.headers, // verbatim, Host and Origin included
        },
        (up) => {
          const rh = {};
          for (const [k, v] of Object.entries(up.headers)) rh[k] = v;
          write({ n, ev: 'response', status: up.statusCode, headers: rh });
          res.writeHead(up.statusCode ?? 502, up.headers);
          res.flushHeaders?.();
          up.on('data', (c) => {
            write({ n, ev: 'chunk', data: c.toString('utf8') });
            res.write(c);
          });
          up.on('end', () => {
            write({ n, ev: 'end' });
            res.end();
          });
          up.on('error', (e) => {
            write({ n, ev: 'error', where: 'upstream-response', error: String(e) });
            res.destroy();
          });
        }
      );
      upstream.on('error', (e) => {
        write({ n, ev: 'error', where: 'upstream-request', error: String(e) });
        if (!res.headersSent) {
          res.writeHead(502, { 'content-type': 'text/plain' });
          res.end(`wire-proxy: upstream error: ${e}`);
        } else res.destroy();
      });
      res.on('close', () => {
        if (!res.writableFinished) {
          write({ n, ev: 'client-closed' });
          upstream.destroy();
        }
      });
      upstream.end(body);
    });
  });
  server.listen(0, '127.0.0.1', () => {
    console.log(`wire-proxy listening on ${server.address().port}`);
  });
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

function print(file, flags) {
  const maxBody = Number(flags['max-body'] ?? 1500);
  const cut = (s) => (s.length > maxBody ? `${s.slice(0, maxBody)} …[${s.length - maxBody} more chars]` : s);
  const byN = new Map();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const e = JSON.parse(line);
    if (!byN.has(e.n)) byN.set(e.n, []);
    byN.get(e.n).push(e);
  }
  const shownHeaders = [
    'host', 'origin', 'accept', 'content-type', 'authorization', 'mcp-protocol-version', 'mcp-session-id',
    'mcp-method', 'mcp-name', 'last-event-id', 'user-agent', 'www-authenticate', 'content-length',
    'transfer-encoding', 'cache-control',
  ];
  const hdrs = (h) =>
    Object.entries(h)
      .filter(([k]) => shownHeaders.includes(k))
      .map(([k, v]) => `${k}: ${v}`)
      .join(' | ');
  for (const [n, events] of [...byN.entries()].sort((a, b) => a[0] - b[0])) {
    for (const e of events) {
      const t = `+${String(e.t_ms).padStart(5)}ms`;
      switch (e.ev) {
        case 'request':
          console.log(`#${n} ${t} >>> ${e.method} ${e.path}  [${hdrs(e.headers)}]`);
          if (e.body) console.log(`#${n}          >>> ${cut(e.body)}`);
          break;
        case 'response':
          console.log(`#${n} ${t} <<< HTTP ${e.status}  [${hdrs(e.headers)}]`);
          break;
        case 'chunk':
          console.log(`#${n} ${t} <<< ${cut(e.data.replace(/\n/g, '\\n'))}`);
          break;
        case 'end':
          console.log(`#${n} ${t} <<< (response complete)`);
          break;
        case 'client-closed':
          console.log(`#${n} ${t} --- client closed the connection before the response ended`);
          break;
        case 'error':
          console.log(`#${n} ${t} !!! ${e.where}: ${e.error}`);
          break;
      }
    }
  }
}

const [cmd, ...rest] = process.argv.slice(2);
const { flags, pos } = parseFlags(rest);
if (cmd === 'serve') serve(flags);
else if (cmd === 'print' && pos[0]) print(pos[0], flags);
else {
  console.error('usage: wire-proxy.mjs serve --target URL --log FILE | print FILE [--max-body N]');
  process.exit(2);
}
