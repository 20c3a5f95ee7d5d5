//! The `/mcp` fuzz harness on the stable toolchain: a seeded mutation loop over the
//! same harness the libFuzzer target uses (`fuzz/harness.rs`), bounded in time.
//!
//! ```sh
//! FUZZ_SECS=120 FUZZ_SEED=1 cargo run --release --example fuzz_stable
//! ```
//!
//! Inputs start from the harness seeds (plus the files in `fuzz/seeds/mcp_request/` and,
//! when libFuzzer has run, `fuzz/corpus/mcp_request/`)
//! and are mutated: bit flips, byte insertions and deletions, splices of two inputs,
//! dictionary tokens of JSON and MCP, and generated hostile bodies (deep nesting, huge
//! strings, invalid UTF-8, ids of every JSON type, batches). An input that breaks an
//! invariant is saved under `fuzz/artifacts/stable/` and counted; the loop goes on.
//! Prints executions, executions per second, the status histogram and the findings.
//! Exits 1 if there was any finding.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "18446744073709551616",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"jsonrpc\":\"2.0\"",
    "\"id\":",
    "\"method\":",
    "\"params\":",
    "\"_meta\":",
    "\"name\":",
    "\"arguments\":",
    "\"cursor\":",
    "\"tools/call\"",
    "\"tools/list\"",
    "\"initialize\"",
    "\"ping\"",
    "\"resources/read\"",
    "\"prompts/get\"",
    "\"subscriptions/listen\"",
    "\"server/discover\"",
    "\"logging/setLevel\"",
    "\"notifications/cancelled\"",
    "\"completion/complete\"",
    "\"echo\"",
    "\"confirm\"",
    "\"io.modelcontextprotocol/protocolVersion\"",
    "\"io.modelcontextprotocol/clientCapabilities\"",
    "\"io.modelcontextprotocol/logLevel\"",
    "\"2026-07-28\"",
    "\"2025-11-25\"",
    "\"2025-03-26\"",
    "\"inputResponses\":",
    "\"requestState\":",
    "\"progressToken\":",
    "=?base64?",
    "?=",
    "\r\n",
    "\u{feff}",
    "\"offset-99999999999\"",
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(4) {
        match rng.below(9) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(input.len() + 1);
                input.insert(i, rng.next() as u8);
            }
            2 if input.len() > 1 => {
                let i = rng.below(input.len());
                let n = 1 + rng.below(16.min(input.len() - i));
                input.drain(i..i + n);
            }
            3 | 4 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                let i = rng.below(input.len() + 1);
                input.splice(i..i, token.iter().copied());
            }
            5 if !pool.is_empty() => {
                let other = &pool[rng.below(pool.len())];
                let cut = rng.below(input.len() + 1);
                let from = rng.below(other.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            6 if !input.is_empty() => input[0] = rng.next() as u8,
            7 if input.len() > 2 => {
                let i = 1 + rng.below(input.len() - 1);
                input.truncate(i);
            }
            _ => {
                // Duplicate a slice (repetition finds length and nesting bugs).
                if input.len() > 2 {
                    let a = rng.below(input.len());
                    let b = (a + 1 + rng.below(64)).min(input.len());
                    let slice = input[a..b].to_vec();
                    let at = rng.below(input.len() + 1);
                    input.splice(at..at, slice);
                }
            }
        }
    }
    input.truncate(256 * 1024);
}

/// Hostile bodies the mutator would take long to reach.
fn generated(rng: &mut Rng) -> Vec<u8> {
    let flag = rng.next() as u8 & !harness::flags::NO_TOKEN;
    let mut v = vec![flag];
    match rng.below(6) {
        0 => {
            let depth = [100, 1_000, 100_000][rng.below(3)];
            v.extend(std::iter::repeat_n(b'[', depth));
            v.extend(std::iter::repeat_n(b']', depth));
        }
        1 => {
            let n = [1_000, 60_000, 200_000][rng.below(3)];
            v.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#);
            v.extend(std::iter::repeat_n(b'a', n));
            v.extend_from_slice(br#""},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#);
        }
        2 => {
            v.extend_from_slice(
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":""#,
            );
            v.extend_from_slice(&[0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]);
            v.extend_from_slice(br#""}}"#);
        }
        3 => {
            let ids = [
                "1", "-1", "1.5", "\"a\"", "null", "true", "[]", "{}", "1e400", "\"\"",
            ];
            let id = ids[rng.below(ids.len())];
            v.extend(
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{}}}}"#)
                    .into_bytes(),
            );
        }
        4 => {
            let n = 1 + rng.below(50);
            let item = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
            v.extend(format!("[{}]", vec![item; n].join(",")).into_bytes());
        }
        _ => {
            let fields = ["jsonrpc", "id", "method", "params", "result", "error"];
            let values = ["1", "\"x\"", "null", "[]", "{}", "true", "\"2.0\""];
            let mut body = String::from("{");
            for (i, f) in fields.iter().enumerate() {
                if rng.below(2) == 0 {
                    continue;
                }
                if i > 0 && body.len() > 1 {
                    body.push(',');
                }
                body.push_str(&format!("\"{f}\":{}", values[rng.below(values.len())]));
            }
            body.push('}');
            v.extend(body.into_bytes());
        }
    }
    v
}

fn main() {
    let secs: u64 = std::env::var("FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut rng = Rng(seed.max(1) ^ 0x9E37_79B9_7F4A_7C15);
    let mut pool = harness::seeds();
    // `FUZZ_WRITE_SEEDS=DIR`: write the harness seeds as files (the libFuzzer seed
    // corpus, fuzz/seeds/mcp_request) and stop.
    if let Ok(dir) = std::env::var("FUZZ_WRITE_SEEDS") {
        std::fs::create_dir_all(&dir).expect("seed folder");
        for (n, seed) in pool.iter().enumerate() {
            std::fs::write(format!("{dir}/seed-{n:02}"), seed).expect("seed file");
        }
        println!("wrote {} seeds to {dir}", pool.len());
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for folder in ["fuzz/seeds/mcp_request", "fuzz/corpus/mcp_request"] {
        let Ok(dir) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in dir.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path())
                && !pool.contains(&bytes)
            {
                pool.push(bytes);
            }
        }
    }
    let seeds = pool.len();
    let artifacts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/artifacts/stable");
    // Panics are findings here, not noise: keep their messages short.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("finding: {info}");
    }));
    let h = harness::Harness::get();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let (mut execs, mut findings) = (0u64, 0u64);
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    // Every seed once, unmutated: they must all pass.
    let mut queue: Vec<Vec<u8>> = pool.clone();
    while Instant::now() < deadline {
        let input = match queue.pop() {
            Some(i) => i,
            None if rng.below(10) == 0 => generated(&mut rng),
            None => {
                let mut i = pool[rng.below(pool.len())].clone();
                mutate(&mut rng, &mut i, &pool);
                i
            }
        };
        execs += 1;
        match catch_unwind(AssertUnwindSafe(|| h.run(&input))) {
            Ok(status) => {
                *statuses.entry(status).or_default() += 1;
                // Keep a small pool of inputs that reached a 200: they went deepest.
                if status == 200 && pool.len() < 4096 && rng.below(20) == 0 {
                    pool.push(input);
                }
            }
            Err(_) => {
                findings += 1;
                let _ = std::fs::create_dir_all(&artifacts);
                let name = format!("crash-{seed}-{execs}");
                let _ = std::fs::write(artifacts.join(&name), &input);
                eprintln!(
                    "  saved fuzz/artifacts/stable/{name} ({} bytes)",
                    input.len()
                );
            }
        }
    }
    let took = started.elapsed().as_secs_f64();
    println!(
        "fuzz_stable: seed {seed}, {secs} s, {seeds} seeds, {execs} executions ({:.0}/s), {findings} findings",
        execs as f64 / took
    );
    let histogram: Vec<String> = statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    println!("statuses: {}", histogram.join(", "));
    if findings > 0 {
        std::process::exit(1);
    }
}
