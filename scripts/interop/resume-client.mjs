#!/usr/bin/env node
// The TypeScript SDK (1.x) client resuming its notification stream after a cut
// (scripts/interop.sh runs this). The bearer token comes from INTEROP_TOKEN.
//
//   node resume-client.mjs --url URL
//       Puts a proxy of its own in front of URL that passes the client's first GET stream
//       its first event, then cuts the connection, and holds the client's resuming GET
//       (the one with Last-Event-ID) for 1.5 s. Meanwhile the tool list changes twice
//       (toggle_tool, over the client's own POSTs). Both notifications/tools/list_changed
//       must reach the client, on the resumed stream.
//
// Prints one line per step and `PASS: <label>` or `FAIL: <label> — <reason>`; exit 0 iff PASS.
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const url = argv[argv.indexOf('--url') + 1];
if (!url || argv.indexOf('--url') < 0) {
  console.error('usage: resume-client.mjs --url URL');
  process.exit(2);
}
const label = 'resume-ts-sdk-v1';
const say = (msg) => console.log(`  ${msg}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const target = new URL(url);

let resolveCut;
const cut = new Promise((resolve) => (resolveCut = resolve));
let firstGet = true;
const resumedWith = [];
const proxy = http.createServer((req, res) => {
  const lastEventId = req.headers['last-event-id'];
  const cutThis = req.method === 'GET' && !lastEventId && firstGet;
  if (cutThis) firstGet = false;
  const forward = () => {
    const upstream = http.request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode, up.headers);
        if (!cutThis) return up.pipe(res);
        up.once('data', (chunk) => {
          res.write(chunk);
          setTimeout(() => {
            req.socket.destroy();
            up.destroy();
            resolveCut();
          }, 100);
        });
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  };
  if (req.method === 'GET' && lastEventId) {
    resumedWith.push(lastEventId);
    setTimeout(forward, 1500);
  } else {
    forward();
  }
});
await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const proxied = `http://127.0.0.1:${proxy.address().port}${target.pathname}`;

const client = new Client({ name: 'porthole-interop-resume', version: '1.0.0' });
let changes = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  changes += 1;
});
const transport = new StreamableHTTPClientTransport(new URL(proxied), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.INTEROP_TOKEN ?? ''}` } },
  reconnectionOptions: {
    initialReconnectionDelay: 200,
    maxReconnectionDelay: 2000,
    reconnectionDelayGrowFactor: 1.5,
    maxRetries: 5,
  },
});
transport.onerror = () => {}; // the cut is expected
try {
  await client.connect(transport);
  say(`connected through the cutting proxy (session ${transport.sessionId?.slice(0, 8)}…)`);
  await Promise.race([cut, sleep(10_000).then(() => { throw new Error('the client opened no GET stream'); })]);
  say('the GET stream was cut after its first event');
  for (const enabled of [false, true]) {
    await client.callTool({ name: 'toggle_tool', arguments: { name: 'calculator', enabled } });
    await sleep(300);
  }
  say('the tool list changed twice while the stream was away');
  const deadline = Date.now() + 10_000;
  while (changes < 2 && Date.now() < deadline) await sleep(100);
  if (resumedWith.length === 0) throw new Error('the client never resumed with Last-Event-ID');
  say(`the client resumed with Last-Event-ID ${resumedWith[0]}`);
  if (changes < 2) throw new Error(`${changes} of 2 notifications/tools/list_changed arrived`);
  say(`both notifications/tools/list_changed arrived (${changes})`);
  console.log(`PASS: ${label}`);
  await client.close();
  proxy.close();
  process.exit(0);
} catch (error) {
  console.log(`FAIL: ${label} — ${error.message ?? error}`);
  proxy.close();
  process.exit(1);
}
