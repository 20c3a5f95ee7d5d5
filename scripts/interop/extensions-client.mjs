#!/usr/bin/env node
// Drive the bot's MCP extensions with the official TypeScript clients (scripts/interop.sh
// runs this). The bearer token comes from INTEROP_TOKEN.
//
//   node extensions-client.mjs --check tasks-legacy --url URL
//       @modelcontextprotocol/sdk 1.x, 2025-11-25 experimental tasks:
//       client.experimental.tasks.callToolStream(db_query SELECT, {task: {ttl}}) must report
//       taskCreated, then the result; then tasks/list must show the task.
//   node extensions-client.mjs --check skills --url URL
//       @modelcontextprotocol/client 2.x SkillsClient (2026-07-28): list the skills, read
//       (and verify size, digest and frontmatter of) the first skill's SKILL.md, and read
//       its root directory.
//
// Prints one line per step and `PASS: <label>` or `FAIL: <label> — <reason>`; exit 0 iff PASS.

const argv = process.argv.slice(2);
const opt = {};
for (let i = 0; i < argv.length; i += 2) opt[argv[i].replace(/^--/, '')] = argv[i + 1];
const { check, url } = opt;
const token = process.env.INTEROP_TOKEN ?? '';
if (!url || !['tasks-legacy', 'skills'].includes(check)) {
  console.error('usage: extensions-client.mjs --check tasks-legacy|skills --url URL');
  process.exit(2);
}
const say = (msg) => console.log(`  ${msg}`);
const expect = (cond, msg) => {
  if (!cond) throw new Error(msg);
};
const headers = { Authorization: `Bearer ${token}` };

async function tasksLegacy() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { CallToolResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const client = new Client({ name: 'porthole-interop-tasks', version: '1.0.0' }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  say(`connect: ok, server tasks capability ${JSON.stringify(client.getServerCapabilities()?.tasks)}`);
  const stream = client.experimental.tasks.callToolStream(
    { name: 'db_query', arguments: { query: 'SELECT 40 + 2 AS answer' } },
    CallToolResultSchema,
    { task: { ttl: 60000 } },
  );
  let taskId;
  let result;
  for await (const message of stream) {
    if (message.type === 'taskCreated') taskId = message.task.taskId;
    if (message.type === 'taskStatus') say(`status: ${message.task.status}`);
    if (message.type === 'result') result = message.result;
    if (message.type === 'error') throw new Error(`the task stream reported ${message.error}`);
  }
  expect(typeof taskId === 'string', 'no taskCreated message');
  say(`task: ${taskId}`);
  expect(JSON.stringify(result?.structuredContent?.rows) === '[[42]]', `unexpected result ${JSON.stringify(result)}`);
  say(`result: rows ${JSON.stringify(result.structuredContent.rows)}`);
  const listed = await client.experimental.tasks.listTasks();
  expect(listed.tasks.some((t) => t.taskId === taskId && t.status === 'completed'), `tasks/list lacks ${taskId}`);
  say(`tasks/list: ${listed.tasks.length} task(s), ours completed`);
  await client.close();
}

async function skills() {
  const mod = await import('@modelcontextprotocol/client');
  const { SkillsClient } = await import('@modelcontextprotocol/client/ext/skills');
  const client = new mod.Client(
    { name: 'porthole-interop-skills', version: '1.0.0' },
    { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(new mod.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  const skillsClient = new SkillsClient(client);
  expect(skillsClient.supported, 'the server did not declare io.modelcontextprotocol/skills');
  const listing = await skillsClient.list();
  expect(listing.skills.length > 0, 'no skills listed');
  const skill = listing.skills[0];
  say(`skills/list: ${listing.skills.length} skill(s), first ${skill.uri} with ${skill.resources.length} file(s)`);
  const file = await skillsClient.read(skill);
  expect(typeof file.body === 'string' || typeof file.text === 'string', 'SKILL.md read returned no text');
  say(`read ${skill.uri}: verified (size, digest, frontmatter)`);
  if (skillsClient.directoryRead) {
    const root = skill.uri.replace(/\/SKILL\.md$/, '');
    const dir = await skillsClient.readDirectory(root);
    say(`resources/directory/read ${root}: ${dir.resources.map((r) => r.name).join(', ')}`);
  }
  await client.close();
}

const label = check === 'skills' ? 'skills (@modelcontextprotocol/client SkillsClient)' : 'tasks (@modelcontextprotocol/sdk experimental.tasks, 2025-11-25)';
try {
  await (check === 'skills' ? skills() : tasksLegacy());
  console.log(`PASS: ${label}`);
  process.exit(0);
} catch (e) {
  console.log(`FAIL: ${label} — ${e?.stack ?? e}`);
  process.exit(1);
}
