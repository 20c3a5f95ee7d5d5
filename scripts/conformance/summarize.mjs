// Summarise one conformance run (one protocol revision) for scripts/conformance.sh.
//
//   node summarize.mjs --dir OUT --revision REV --required FILE [--log RUN_LOG] [--only SCENARIO]
//
// Reads OUT/server-<scenario>-<timestamp>/checks.json (written by the runner's -o option),
// prints a per-scenario table, every failing check with its message, and a pass-count line.
// The gate is the list in FILE (see required-scenarios.txt). Exit status: 0 when every gated
// scenario passed, 1 when one failed or has no results, 2 on usage errors.
import fs from 'node:fs';
import path from 'node:path';

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 1) {
    const key = argv[i];
    if (!key.startsWith('--') || i + 1 >= argv.length) {
      console.error(`summarize.mjs: bad argument '${key}'`);
      process.exit(2);
    }
    opts[key.slice(2)] = argv[i + 1];
    i += 1;
  }
  for (const k of ['dir', 'revision', 'required']) {
    if (!opts[k]) {
      console.error(`summarize.mjs: --${k} is required`);
      process.exit(2);
    }
  }
  return opts;
}

// Map scenario -> Set of exempt check ids, for the given revision.
function readRequired(file, revision) {
  const gate = new Map();
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  lines.forEach((raw, n) => {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) return;
    const f = line.split(/\s+/);
    if (f.length !== 2 && !(f.length === 4 && f[2] === 'except')) {
      console.error(`${file}:${n + 1}: expected '<revision> <scenario> [except <check-id>]'`);
      process.exit(2);
    }
    if (f[0] !== revision) return;
    if (!gate.has(f[1])) gate.set(f[1], new Set());
    if (f.length === 4) gate.get(f[1]).add(f[3]);
  });
  return gate;
}

// Scenarios the runner reports as "not scored" (with the reason), from its console log.
function readNotScored(logFile) {
  const out = new Map();
  if (!logFile || !fs.existsSync(logFile)) return out;
  const text = fs.readFileSync(logFile, 'utf8').replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');
  const block = text.split(/^Not scored for [^\n]*$/m)[1];
  if (!block) return out;
  for (const m of block.matchAll(/^\s+[✓✗]\s+(\S+)\s+\(([^)]+)\)\s*$/gm)) out.set(m[1], m[2]);
  return out;
}

const STAMP = /^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d+Z$/;

function readResults(dir) {
  const results = new Map();
  if (!fs.existsSync(dir)) return results;
  for (const entry of fs.readdirSync(dir).sort()) {
    const m = STAMP.exec(entry);
    if (!m) continue;
    const file = path.join(dir, entry, 'checks.json');
    if (!fs.existsSync(file)) {
      results.set(m[1], { skipped: true, dir: path.join(dir, entry) });
      continue;
    }
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      results.set(m[1], { error: `unreadable checks.json: ${err.message}`, dir: path.join(dir, entry) });
      continue;
    }
    results.set(m[1], { checks: Array.isArray(checks) ? checks : [], dir: path.join(dir, entry) });
  }
  return results;
}

function oneLine(value, max = 400) {
  const s = (typeof value === 'string' ? value : JSON.stringify(value)) ?? '';
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

const opts = parseArgs(process.argv.slice(2));
const gate = readRequired(opts.required, opts.revision);
const notScored = readNotScored(opts.log);
const results = readResults(opts.dir);

const names = new Set(results.keys());
for (const name of gate.keys()) if (!opts.only || opts.only === name) names.add(name);

const rows = [];
const failures = [];
let gatePassed = 0;
let gateTotal = 0;
let scoredPassed = 0;
let scoredTotal = 0;
let allPassed = 0;
let allTotal = 0;
let checksPassed = 0;
let checksFailed = 0;
let checksWarned = 0;
let checksTotal = 0;

for (const name of [...names].sort()) {
  const r = results.get(name);
  const exempt = gate.get(name);
  const required = exempt ? (exempt.size > 0 ? 'yes*' : 'yes') : 'no';
  const suite = notScored.has(name) ? `not scored (${notScored.get(name)})` : r ? 'scored' : '-';
  let counts = '-';
  let verdict;
  let ok;
  if (!r) {
    verdict = 'MISSING';
    ok = false;
  } else if (r.error) {
    verdict = 'ERROR';
    ok = false;
    failures.push({ name, id: '(results)', message: r.error, exempt: false });
  } else if (r.skipped) {
    verdict = 'N/A';
    ok = null;
  } else {
    const c = r.checks;
    const passed = c.filter((x) => x.status === 'SUCCESS').length;
    const failed = c.filter((x) => x.status === 'FAILURE');
    const warned = c.filter((x) => x.status === 'WARNING').length;
    const other = {};
    for (const x of c) {
      if (!['SUCCESS', 'FAILURE', 'WARNING'].includes(x.status)) {
        const k = String(x.status ?? '?').toLowerCase();
        other[k] = (other[k] ?? 0) + 1;
      }
    }
    const notes = [];
    if (failed.length) notes.push(`${failed.length} failed`);
    if (warned) notes.push(`${warned} warn`);
    for (const [k, v] of Object.entries(other)) notes.push(`${v} ${k}`);
    counts = `${passed}/${c.length}${notes.length ? ` (${notes.join(', ')})` : ''}`;
    checksPassed += passed;
    checksFailed += failed.length;
    checksWarned += warned;
    checksTotal += c.length;
    const counted = failed.filter((x) => !(exempt && exempt.has(x.id)));
    for (const x of failed) {
      failures.push({
        name,
        id: x.id,
        message: x.errorMessage ?? x.description ?? '',
        details: x.details,
        exempt: Boolean(exempt && exempt.has(x.id)),
      });
    }
    ok = failed.length === 0;
    verdict = ok ? 'PASS' : counted.length === 0 && exempt ? 'PASS*' : 'FAIL';
    if (verdict === 'PASS*') ok = true;
    allTotal += 1;
    if (failed.length === 0) allPassed += 1;
    if (suite === 'scored') {
      scoredTotal += 1;
      if (failed.length === 0) scoredPassed += 1;
    }
  }
  if (exempt) {
    gateTotal += 1;
    if (ok) gatePassed += 1;
  }
  rows.push([name, required, counts, verdict, suite]);
}

const header = ['SCENARIO', 'REQUIRED', 'CHECKS ok/total', 'RESULT', 'RUNNER'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const fmt = (r) => r.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd();
console.log(`--- ${opts.revision}: per-scenario results (${opts.dir})`);
console.log(fmt(header));
console.log(fmt(widths.map((w) => '-'.repeat(w))));
for (const r of rows) console.log(fmt(r));
console.log('REQUIRED: yes = gate (required-scenarios.txt); yes* = gate with exempt checks.');
console.log('RESULT: PASS* = only exempt (fixture-tool) checks failed; N/A = not applicable at this revision.');

if (failures.length) {
  console.log(`\n--- ${opts.revision}: failing checks`);
  for (const f of failures) {
    const tag = f.exempt ? ' [exempt]' : gate.has(f.name) ? ' [REQUIRED]' : '';
    console.log(`${f.name} :: ${f.id}${tag}`);
    console.log(`    ${oneLine(f.message)}`);
    if (f.details !== undefined) console.log(`    details: ${oneLine(f.details, 600)}`);
  }
}

const missing = rows.filter((r) => r[1] !== 'no' && (r[3] === 'MISSING' || r[3] === 'ERROR'));
console.log(
  `\n${opts.revision}: required ${gatePassed}/${gateTotal} passed` +
    ` | runner-scored ${scoredPassed}/${scoredTotal}` +
    ` | all ${allPassed}/${allTotal} scenarios` +
    ` | checks ${checksPassed}/${checksTotal} passed, ${checksFailed} failed, ${checksWarned} warnings` +
    (missing.length ? ` | no results for: ${missing.map((r) => r[0]).join(', ')}` : ''),
);
process.exit(gatePassed === gateTotal ? 0 : 1);
