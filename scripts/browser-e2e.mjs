#!/usr/bin/env node
// Browser end-to-end test of the Porthole web chat page.
//
// Usage: node scripts/browser-e2e.mjs <base-url> <bot-log-file> <out-dir>
// Normally started by scripts/browser-e2e.sh, which installs playwright-core
// into scripts/.e2e/ and starts the bot.
//
// Environment:
//   E2E_MCP_SECRET    bearer token of the bot's /mcp (the bot runs with
//                     MCP_SERVER_ENABLED=true); without it the MCP check fails
//   E2E_TIMEOUT_SECS  the whole run is failed after this long (default 300)
//   E2E_REPLAY_URL    a second bot, on a fake provider, for the Replay button
//                     (the offline provider has nothing to replay)
//   E2E_PAGE_FROM_SRC=1  serve /, /app.js and /style.css from
//                     src/bot/web/static instead of the copies embedded in the
//                     binary (to try page edits without a rebuild; /api and /ws
//                     are still the real bot's). Never set in CI.
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [baseUrlArg, logFile, outDirArg] = process.argv.slice(2);
if (!baseUrlArg || !logFile || !outDirArg) {
  console.error('usage: node scripts/browser-e2e.mjs <base-url> <bot-log-file> <out-dir>');
  process.exit(2);
}
const baseUrl = baseUrlArg.replace(/\/+$/, '');
const outDir = resolve(outDirArg);
mkdirSync(outDir, { recursive: true });

const CHROMIUM = '/usr/bin/chromium';
const MCP_SECRET = process.env.E2E_MCP_SECRET || '';
const MCP_PROTOCOL_VERSION = '2026-07-28';
const STATIC_DIR = resolve(here, '..', 'src', 'bot', 'web', 'static');
const REPLAY_URL = (process.env.E2E_REPLAY_URL || '').replace(/\/+$/, '');
// The replay bot's provider key (a fake one): in a message, the stored request redacts it.
const E2E_FAKE_LLM_KEY = process.env.E2E_FAKE_LLM_KEY || '';
const PAGE_ASSETS = {
  '/': 'index.html',
  '/app.js': 'app.js',
  '/trace-panel.js': 'trace-panel.js',
  '/replay-form.js': 'replay-form.js',
  '/style.css': 'style.css',
};
const JS_TYPE = 'text/javascript; charset=utf-8';
const PAGE_TYPES = {
  '/': 'text/html; charset=utf-8',
  '/app.js': JS_TYPE,
  '/trace-panel.js': JS_TYPE,
  '/replay-form.js': JS_TYPE,
  '/style.css': 'text/css; charset=utf-8',
};
const PAGE_FROM_SRC = /^(1|true|yes)$/i.test(process.env.E2E_PAGE_FROM_SRC || '');
const TIMEOUT_SECS = Number(process.env.E2E_TIMEOUT_SECS) > 0 ? Number(process.env.E2E_TIMEOUT_SECS) : 300;
const e2eRequire = createRequire(join(here, '.e2e', 'package.json'));
let chromium;
try {
  ({ chromium } = e2eRequire('playwright-core'));
} catch (err) {
  console.error(`FAIL: cannot load playwright-core from ${join(here, '.e2e')} (run scripts/browser-e2e.sh): ${err.message}`);
  process.exit(1);
}

const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');
const results = [];
function pass(name, detail = '') {
  results.push({ name, ok: true });
  console.log(`PASS ${name}${detail ? ` — ${detail}` : ''}`);
}
function fail(name, detail) {
  results.push({ name, ok: false });
  console.log(`FAIL ${name} — ${stripAnsi(String(detail))}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A hung browser or bot must not hold CI until its own time limit.
const watchdog = setTimeout(() => {
  console.log(`FAIL watchdog — the run took longer than ${TIMEOUT_SECS} s (E2E_TIMEOUT_SECS)`);
  console.log(`--- bot log (last 40 lines of ${logFile}) ---`);
  console.log(tail(readLog(), 40));
  process.exit(1);
}, TIMEOUT_SECS * 1000);
watchdog.unref();

/** The JSON-RPC message of a /mcp reply: plain JSON, or the last `data:` of an SSE stream. */
function parseMcpBody(contentType, text) {
  if (/^\s*text\/event-stream/i.test(contentType || '')) {
    const messages = [];
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) messages.push(JSON.parse(data));
    }
    const response = messages.reverse().find((m) => m && ('result' in m || 'error' in m));
    if (!response) throw new Error(`no JSON-RPC response in the SSE stream: ${text.slice(0, 300)}`);
    return response;
  }
  return JSON.parse(text);
}

/** One stateless (protocol 2026-07-28) tools/call on the bot's /mcp. */
async function mcpToolCall(name, args) {
  const body = {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name,
      arguments: args,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': MCP_PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  };
  const res = await fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${MCP_SECRET}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': MCP_PROTOCOL_VERSION,
      'Mcp-Method': 'tools/call',
      'Mcp-Name': name,
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST /mcp tools/call ${name}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  const message = parseMcpBody(res.headers.get('content-type'), text);
  if (message.error) throw new Error(`tools/call ${name}: JSON-RPC error ${JSON.stringify(message.error).slice(0, 300)}`);
  if (!message.result) throw new Error(`tools/call ${name}: no result: ${text.slice(0, 300)}`);
  if (message.result.isError) {
    throw new Error(`tools/call ${name} reported an error: ${JSON.stringify(message.result.content).slice(0, 300)}`);
  }
  return message.result;
}

/** On the bot with a fake provider: chat once, open the turn's LLM call, replay it with
 * another system prompt, and find the new answer beside the original. */
async function replayAnLlmCall(replayPage) {
  await replayPage.goto(`${REPLAY_URL}/`, { waitUntil: 'load', timeout: 15000 });
  await replayPage.waitForSelector('body[data-connected="true"]', { timeout: 15000 });
  const form = await openReplayForm(replayPage, 'Say hello.', 0);
  const system = form.locator('textarea');
  const recorded = await system.inputValue();
  if (!recorded.trim()) throw new Error('the form is not prefilled with the recorded system prompt');
  const model = await form.locator('input[type="text"]').inputValue();
  if (model !== 'e2e-fake-model') throw new Error(`the form shows model ${JSON.stringify(model)}`);
  await system.fill('You are a pirate. Answer in one line.');
  await form.locator('.replay-submit').click();
  const columns = form.locator('.replay-columns');
  try {
    await columns.waitFor({ timeout: 15000 });
  } catch (err) {
    const refusal = await form.locator('.replay-error').innerText().catch(() => '');
    throw new Error(`no result beside the original${refusal ? `: ${refusal}` : ''} (${err.message.split('\n')[0]})`);
  }
  const texts = await columns.locator('.replay-text').allInnerTexts();
  if (texts.length !== 2) throw new Error(`${texts.length} answers shown, expected the original and the replay`);
  if (!texts[0].includes(recorded.split('\n')[0].slice(0, 30))) {
    throw new Error(`the original answer is ${JSON.stringify(texts[0])}`);
  }
  if (!texts[1].includes('You are a pirate')) throw new Error(`the replay answered ${JSON.stringify(texts[1])}`);
  const replayTrace = form.locator('.replay-result .trace-panel');
  await replayTrace.locator('summary').first().click();
  await replayTrace.locator('.trace-span[data-kind="llm"]').waitFor({ timeout: 10000 });
  const changed = (await form.locator('.replay-changed').innerText()).trim();
  if (!/system prompt/.test(changed)) throw new Error(`the change is shown as ${JSON.stringify(changed)}`);
  await form.scrollIntoViewIfNeeded();
  const file = join(outDir, 'trace-replay.png');
  await replayPage.screenshot({ path: file });
  // A refusal is shown in the form, never swallowed.
  await form.locator('input[type="number"]').first().fill('5');
  await form.locator('.replay-submit').click();
  const error = form.locator('.replay-error');
  await error.waitFor({ state: 'visible', timeout: 10000 });
  const refusal = await error.innerText();
  if (!refusal.includes('temperature 5 is out of range')) throw new Error(`the refusal shows ${JSON.stringify(refusal)}`);
  const redacted = await replayRedacted(replayPage);
  return `${changed}; replay: ${texts[1].slice(0, 80)}; refusals: ${refusal.slice(0, 60)}, ${redacted}; screenshot ${file}`;
}

/** On the bot with a fake provider: chat once, open the turn's LLM call and replay the
 * turn from there with another system prompt; the steps, the verdict and the replay's
 * trace are shown. */
async function replayFromHere(replayPage) {
  await replayPage.goto(`${REPLAY_URL}/`, { waitUntil: 'load', timeout: 15000 });
  await replayPage.waitForSelector('body[data-connected="true"]', { timeout: 15000 });
  const form = await openReplayForm(replayPage, 'Say hello again.', 0);
  await form.locator('textarea').fill('You are a poet. Answer in one line.');
  await form.locator('.replay-turn').click();
  const verdict = form.locator('.replay-verdict');
  try {
    await verdict.waitFor({ timeout: 15000 });
  } catch (err) {
    const refusal = await form.locator('.replay-error').innerText().catch(() => '');
    throw new Error(`no turn replay shown${refusal ? `: ${refusal}` : ''} (${err.message.split('\n')[0]})`);
  }
  const said = (await verdict.innerText()).trim();
  if (!/final answer changed/.test(said)) throw new Error(`the verdict reads ${JSON.stringify(said)}`);
  const steps = await form.locator('.replay-step').count();
  if (steps !== 1) throw new Error(`${steps} steps shown, expected the one answer`);
  const texts = await form.locator('.replay-columns .replay-text').allInnerTexts();
  if (!texts[1] || !texts[1].includes('You are a poet')) throw new Error(`the replay answered ${JSON.stringify(texts[1])}`);
  await form.locator('.replay-result .trace-panel').first().waitFor({ timeout: 10000 });
  const file = join(outDir, 'trace-replay-turn.png');
  await form.scrollIntoViewIfNeeded();
  await replayPage.screenshot({ path: file });
  return `${said}; screenshot ${file}`;
}

/** Sends `message`, opens the panel of answer number `answer` and its LLM row's Replay form. */
async function openReplayForm(replayPage, message, answer) {
  await replayPage.click('#message-input');
  await replayPage.keyboard.type(message);
  await replayPage.keyboard.press('Enter');
  // The answer's own panel, not a replay's nested in it.
  const panel = replayPage.locator('.message.assistant[data-state="done"] > .trace-panel').nth(answer);
  await panel.waitFor({ timeout: 30000 });
  await panel.locator('summary').first().click();
  const llmRow = panel.locator('.trace-span[data-kind="llm"]').first();
  await llmRow.waitFor({ timeout: 10000 });
  await llmRow.locator('> summary').click();
  await llmRow.locator('.replay-open').click();
  return llmRow.locator('.replay-form');
}

/** A call whose stored request holds [REDACTED] (the provider's key was in the message) is
 * refused until the allow_redacted box is ticked. */
async function replayRedacted(replayPage) {
  const form = await openReplayForm(replayPage, `my key is ${E2E_FAKE_LLM_KEY}`, 1);
  const allow = form.locator('.replay-allow');
  if (!(await allow.isVisible())) throw new Error('no allow_redacted box for a request with [REDACTED]');
  await form.locator('.replay-submit').click();
  const error = form.locator('.replay-error');
  await error.waitFor({ state: 'visible', timeout: 10000 });
  const refusal = await error.innerText();
  if (!refusal.includes('allow_redacted')) throw new Error(`the redaction refusal shows ${JSON.stringify(refusal)}`);
  await allow.locator('input').check();
  await form.locator('.replay-submit').click();
  await form.locator('.replay-columns').waitFor({ timeout: 15000 });
  if (await error.isVisible()) throw new Error(`still refused: ${await error.innerText()}`);
  return 'redacted parts sent once the box was ticked';
}

function readLog() {
  try {
    return stripAnsi(readFileSync(logFile, 'utf8'));
  } catch {
    return '';
  }
}

function tail(text, n) {
  return text.split('\n').slice(-n).join('\n');
}

const pageConsole = [];
const pageErrors = [];
let browser;
let page;
let exitCode = 0;

async function step(name, fn) {
  try {
    const detail = await fn();
    pass(name, typeof detail === 'string' ? detail : '');
    return true;
  } catch (err) {
    fail(name, err && err.message ? err.message.split('\n')[0] : String(err));
    throw Object.assign(new Error(`step "${name}" failed`), { cause: err, reported: true });
  }
}

try {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found`);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // A page the test serves itself has no address space of its own, and
      // Chromium would block its requests to the loopback bot.
      ...(PAGE_FROM_SRC ? ['--disable-features=LocalNetworkAccessChecks'] : []),
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  if (PAGE_FROM_SRC) {
    const origins = [baseUrl, REPLAY_URL].filter(Boolean).map((u) => new URL(u).origin);
    await context.route(
      (url) => origins.includes(url.origin) && Object.hasOwn(PAGE_ASSETS, url.pathname),
      (route) =>
        route.fulfill({
          status: 200,
          headers: { 'content-type': PAGE_TYPES[new URL(route.request().url()).pathname], 'cache-control': 'no-cache' },
          body: readFileSync(join(STATIC_DIR, PAGE_ASSETS[new URL(route.request().url()).pathname]), 'utf8'),
        })
    );
    console.log(`NOTE E2E_PAGE_FROM_SRC=1: the page comes from ${STATIC_DIR}, not from the bot binary`);
  } else {
    // The page is embedded in the binary at build time: say so when it is stale.
    const stale = [];
    for (const [path, file] of Object.entries(PAGE_ASSETS)) {
      try {
        const served = await (await fetch(baseUrl + path, { signal: AbortSignal.timeout(5000) })).text();
        if (existsSync(join(STATIC_DIR, file)) && served !== readFileSync(join(STATIC_DIR, file), 'utf8')) stale.push(file);
      } catch {
        /* the 'page loads' step reports an unreachable bot */
      }
    }
    if (stale.length) {
      console.log(
        `NOTE the bot serves a ${stale.join(', ')} that differs from src/bot/web/static (binary built before the last page edit?); ` +
          'rebuild, or set E2E_PAGE_FROM_SRC=1 to test the edited page'
      );
    }
  }
  page = await context.newPage();
  page.on('console', (msg) => pageConsole.push(`[${msg.type()}] ${msg.text()}`));
  page.on('pageerror', (err) => pageErrors.push(err.stack || err.message || String(err)));

  await step('page loads', async () => {
    const res = await page.goto(`${baseUrl}/?debug=1`, { waitUntil: 'load', timeout: 15000 });
    if (!res) throw new Error('no response for the page');
    if (!res.ok()) throw new Error(`GET / returned HTTP ${res.status()}`);
    await page.waitForSelector('#message-input', { timeout: 5000 });
    await page.waitForSelector('#send-button', { timeout: 5000 });
    // The stylesheet must have applied (sidebar is a flex column).
    const styled = await page.evaluate(
      () => getComputedStyle(document.getElementById('sidebar')).display === 'flex'
    );
    if (!styled) throw new Error('style.css does not seem to be applied');
    return `HTTP ${res.status()}`;
  });

  await step('websocket connects', async () => {
    await page.waitForSelector('body[data-connected="true"]', { timeout: 15000 });
  });

  await step('header shows the LLM provider', async () => {
    await page.waitForFunction(
      () => {
        const t = document.getElementById('llm-provider').textContent.trim();
        return t && t !== '\u2026';
      },
      null,
      { timeout: 10000 }
    );
    const provider = (await page.textContent('#llm-provider')).trim();
    const model = ((await page.textContent('#llm-model')) || '').trim();
    if (provider === 'unknown') throw new Error('GET /api/info failed (provider shown as "unknown")');
    return `${provider}${model ? ` / ${model}` : ''}`;
  });

  await step('"/help" gets a finished reply listing /run', async () => {
    await page.click('#message-input');
    await page.keyboard.type('/help');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.message.user', { timeout: 5000 });
    const userText = await page.textContent('.message.user');
    if (!userText.includes('/help')) throw new Error(`user bubble shows ${JSON.stringify(userText)}`);
    const bubble = await page.waitForSelector(
      '.message.assistant[data-state="done"], .message.assistant[data-state="error"]',
      { timeout: 30000 }
    );
    const stateAttr = await bubble.getAttribute('data-state');
    const text = (await bubble.innerText()).trim();
    if (stateAttr !== 'done') throw new Error(`reply ended in state "${stateAttr}": ${text.slice(0, 300)}`);
    if (!text.includes('/run')) throw new Error(`reply does not mention /run: ${JSON.stringify(text.slice(0, 300))}`);
    return `${text.length} chars`;
  });

  await step('conversation list refreshes after the reply', async () => {
    await page.waitForSelector('#conversation-list .conversation-item', { timeout: 10000 });
    const n = await page.locator('#conversation-list .conversation-item').count();
    return `${n} conversation(s)`;
  });

  await step('the "What happened" panel shows the turn\'s LLM and tool calls', async () => {
    await page.click('#message-input');
    await page.keyboard.type('/run calculator {"expression": "6*7"}');
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      () => document.querySelectorAll('.message.assistant[data-state="done"] .trace-panel').length >= 2,
      null,
      { timeout: 30000 }
    );
    const panel = page.locator('.message.assistant[data-state="done"] .trace-panel').last();
    if (await panel.evaluate((p) => p.open)) throw new Error('the panel should start collapsed');
    await panel.locator('summary').first().click();
    await panel.locator('.trace-span[data-kind="tool"]').first().waitFor({ timeout: 10000 });
    const summary = (await panel.locator('summary').first().innerText()).trim();
    if (!/2 LLM calls/.test(summary) || !/1 tool call/.test(summary)) {
      throw new Error(`panel summary is ${JSON.stringify(summary)}`);
    }
    const kinds = await panel.locator('.trace-span').evaluateAll((rows) => rows.map((r) => r.dataset.kind));
    if (kinds.join(',') !== 'turn,llm,tool,llm') throw new Error(`timeline rows are ${kinds.join(',')}`);
    await panel.locator('.trace-span[data-kind="tool"] > summary').click();
    const payload = await panel.locator('.trace-span[data-kind="tool"] .trace-payload').first().innerText();
    if (!payload.includes('6*7')) throw new Error(`the tool row does not show its arguments: ${payload.slice(0, 200)}`);
    await panel.scrollIntoViewIfNeeded();
    const file = join(outDir, 'trace-panel.png');
    await page.screenshot({ path: file });
    return `${summary}; screenshot ${file}`;
  });

  await step('answers read back from history get their panels too', async () => {
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector('body[data-connected="true"]', { timeout: 15000 });
    await page.waitForFunction(
      () => document.querySelectorAll('.message.assistant[data-state="history"] .trace-panel').length >= 2,
      null,
      { timeout: 15000 }
    );
    const n = await page.locator('.message.assistant[data-state="history"] .trace-panel').count();
    return `${n} panels on stored answers`;
  });

  await step('a failed tool call is marked failed, live and after a reload', async () => {
    const chips = () =>
      page.locator('.message.tool').evaluateAll((rows) =>
        rows.map((r) => `${r.dataset.status}:${(r.querySelector('.tool-status') || {}).textContent}`)
      );
    await page.click('#message-input');
    await page.keyboard.type('/run no_such_tool {}');
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      () => {
        const rows = document.querySelectorAll('.message.tool');
        const last = rows[rows.length - 1];
        return last && last.dataset.status === 'error';
      },
      null,
      { timeout: 30000 }
    );
    const live = (await chips()).pop();
    if (live !== 'error:error') throw new Error(`live chip is ${live}`);
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector('body[data-connected="true"]', { timeout: 15000 });
    await page.waitForFunction(() => document.querySelectorAll('.message.tool').length >= 2, null, { timeout: 15000 });
    const stored = await chips();
    if (stored[stored.length - 1] !== 'error:error') throw new Error(`chips after reload: ${stored.join(', ')}`);
    if (!stored.includes('ok:done')) throw new Error(`the successful call lost its chip: ${stored.join(', ')}`);
    return stored.join(', ');
  });

  const probe = `probe-${randomBytes(6).toString('hex')}`;
  await step('browser console line is forwarded to the server log', async () => {
    await page.evaluate((p) => console.warn(p), probe);
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline) {
      const line = readLog()
        .split('\n')
        .find((l) => l.includes(probe));
      if (line) return line.trim().slice(0, 200);
      await sleep(200);
    }
    throw new Error(`"${probe}" did not appear in ${logFile} within 10 s`);
  });

  await step('the same console line reaches the MCP web_log tool', async () => {
    if (!MCP_SECRET) throw new Error('E2E_MCP_SECRET is not set (run scripts/browser-e2e.sh)');
    const deadline = Date.now() + 10000;
    let last = null;
    for (;;) {
      const result = await mcpToolCall('web_log', { grep: probe });
      last = result;
      const lines = result.structuredContent && result.structuredContent.lines;
      if (Array.isArray(lines) && lines.length > 0) {
        const line = lines[0];
        if (typeof line.message !== 'string' || !line.message.includes(probe)) {
          throw new Error(`web_log lines[0].message is ${JSON.stringify(line.message)}, expected it to contain ${probe}`);
        }
        if (line.source !== 'web') throw new Error(`web_log lines[0].source is ${JSON.stringify(line.source)}, expected "web"`);
        return `[${line.level}] ${line.message.slice(0, 120)} (source ${line.source})`;
      }
      if (Date.now() > deadline) break;
      await sleep(250);
    }
    throw new Error(
      `web_log found no line containing "${probe}" within 10 s; last result: ${JSON.stringify(last && last.structuredContent).slice(0, 300)}`
    );
  });

  await step('the Replay button replays an LLM call with another system prompt', async () => {
    if (!REPLAY_URL) throw new Error('E2E_REPLAY_URL is not set (run scripts/browser-e2e.sh)');
    const replayPage = await context.newPage();
    replayPage.on('pageerror', (err) => pageErrors.push(err.stack || err.message || String(err)));
    try {
      return await replayAnLlmCall(replayPage);
    } finally {
      await replayPage.close();
    }
  });

  await step('"Replay from here" replays the whole turn from an LLM call', async () => {
    if (!REPLAY_URL) throw new Error('E2E_REPLAY_URL is not set (run scripts/browser-e2e.sh)');
    const replayPage = await context.newPage();
    replayPage.on('pageerror', (err) => pageErrors.push(err.stack || err.message || String(err)));
    try {
      return await replayFromHere(replayPage);
    } finally {
      await replayPage.close();
    }
  });

  await step('screenshot 1280x800', async () => {
    const file = join(outDir, 'chat-1280.png');
    await page.screenshot({ path: file });
    return file;
  });

  await step('screenshot 390x844 (phone)', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await sleep(300);
    const sidebarHidden = await page.evaluate(() => {
      const r = document.getElementById('sidebar').getBoundingClientRect();
      return r.right <= 0;
    });
    if (!sidebarHidden) throw new Error('sidebar is not collapsed at phone width');
    if (!(await page.isVisible('#sidebar-toggle'))) throw new Error('#sidebar-toggle is not visible at phone width');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    if (overflow) throw new Error('page scrolls horizontally at phone width');
    const file = join(outDir, 'chat-phone.png');
    await page.screenshot({ path: file });
    // Bonus: the opened conversation drawer.
    await page.click('#sidebar-toggle');
    await sleep(400);
    await page.screenshot({ path: join(outDir, 'chat-phone-menu.png') });
    await page.click('#sidebar-close');
    return file;
  });

  if (pageErrors.length) {
    fail('no uncaught page errors', pageErrors[0].split('\n')[0]);
  } else {
    pass('no uncaught page errors');
  }
} catch (err) {
  if (!err.reported) fail('setup', err && err.message ? err.message : String(err));
  const cause = err.cause || err;
  if (cause && cause.message && cause.message.includes('\n')) {
    const extra = stripAnsi(cause.message).split('\n').slice(1, 8).filter((l) => l.trim());
    if (extra.length) console.log(`  details:\n  ${extra.join('\n  ')}`);
  }
  if (page) {
    try {
      await page.screenshot({ path: join(outDir, 'failure.png') });
      console.log(`  screenshot: ${join(outDir, 'failure.png')}`);
    } catch {
      /* ignore */
    }
  }
}

try {
  if (browser) await browser.close();
} catch {
  /* ignore */
}

const failed = results.filter((r) => !r.ok);
const passed = results.length - failed.length;
if (failed.length) {
  exitCode = 1;
  if (pageConsole.length) {
    console.log('--- browser console (last 30 lines) ---');
    console.log(pageConsole.slice(-30).join('\n'));
  }
  if (pageErrors.length) {
    console.log('--- uncaught page errors ---');
    console.log(pageErrors.join('\n'));
  }
  console.log(`--- bot log (last 40 lines of ${logFile}) ---`);
  console.log(tail(readLog(), 40));
  console.log(`browser e2e FAILED: ${failed.map((r) => r.name).join('; ')}`);
} else {
  console.log(`browser e2e OK, screenshots in ${outDir}`);
}
console.log(`${passed} passed, ${failed.length} failed`);
process.exit(exitCode);
