//! The fuzz targets on the stable toolchain: a seeded mutation loop over the same
//! targets the libFuzzer binaries use (`fuzz/targets.rs`, `fuzz/harness.rs`), bounded by
//! a number of executions (and optionally by time).
//!
//! ```sh
//! FUZZ_TARGET=sse FUZZ_EXECS=2000000 cargo run --release --example fuzz_stable
//! FUZZ_TARGET=all FUZZ_EXECS=20000 cargo run --example fuzz_stable   # every target (CI)
//! ```
//!
//! Variables: `FUZZ_TARGET` (a name from `fuzz/targets.rs`, or `all`; default
//! `mcp_request`), `FUZZ_EXECS` (executions per target), `FUZZ_SECS` (a time bound per
//! target; without either, 60 s), `FUZZ_SEED` (default 1), `FUZZ_SAVE_CORPUS=1` (write
//! inputs that reached a new outcome class to `fuzz/corpus/<target>/`, at most
//! `FUZZ_CORPUS_MAX` files, default 300, of at most 4 KiB each), `FUZZ_WRITE_SEEDS=DIR`
//! (write the target's built-in seeds as files and stop).
//!
//! Inputs start from the target's built-in seeds plus the files in `fuzz/seeds/<target>/`
//! and `fuzz/corpus/<target>/`, and are mutated: bit flips, byte insertions and
//! deletions, splices of two inputs, the target's dictionary tokens, and for
//! `mcp_request` generated hostile bodies (deep nesting, huge strings, invalid UTF-8,
//! ids of every JSON type, batches). An input that breaks an invariant is saved under
//! `fuzz/artifacts/stable/` and counted; the loop goes on. Prints per target the
//! executions, executions per second, wall time, outcome classes, corpus size and
//! findings. Exits 1 if there was any finding.

#[path = "../fuzz/harness.rs"]
mod harness;
#[path = "../fuzz/targets.rs"]
mod targets;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
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

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>], tokens: &[&str]) {
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
                let token = tokens[rng.below(tokens.len())].as_bytes();
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

/// Hostile `mcp_request` bodies the mutator would take long to reach.
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

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// FNV-1a, for content-addressed corpus file names.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every file of a folder, in name order (a reproducible pool).
fn files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// What one target's run did.
struct Report {
    execs: u64,
    secs: f64,
    findings: u64,
    classes: BTreeMap<String, u64>,
    corpus: usize,
}

fn fuzz(target: &targets::Target, seed: u64, execs: Option<u64>, secs: Option<u64>) -> Report {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus_dir = root.join("fuzz/corpus").join(target.name);
    let save = std::env::var("FUZZ_SAVE_CORPUS").is_ok_and(|v| v == "1");
    let corpus_max: usize = env("FUZZ_CORPUS_MAX").unwrap_or(300);
    let mut corpus = files(&corpus_dir).len();
    let mut rng = Rng(seed.max(1) ^ 0x9E37_79B9_7F4A_7C15);
    let mut pool = (target.seeds)();
    for folder in [
        root.join("fuzz/seeds").join(target.name),
        corpus_dir.clone(),
    ] {
        for bytes in files(&folder) {
            if !pool.contains(&bytes) {
                pool.push(bytes);
            }
        }
    }
    let artifacts = root.join("fuzz/artifacts/stable");
    let deadline = secs.map(|s| Instant::now() + Duration::from_secs(s));
    let started = Instant::now();
    let (mut done, mut findings) = (0u64, 0u64);
    let mut classes: BTreeMap<String, u64> = BTreeMap::new();
    // Every pool input once, unmutated: they must all pass, and their classes are known.
    let mut queue: Vec<Vec<u8>> = pool.iter().rev().cloned().collect();
    let unmutated = queue.len() as u64;
    while execs.is_none_or(|n| done < n) && deadline.is_none_or(|d| Instant::now() < d) {
        let input = match queue.pop() {
            Some(i) => i,
            None if target.name == "mcp_request" && rng.below(10) == 0 => generated(&mut rng),
            None => {
                let mut i = pool[rng.below(pool.len())].clone();
                mutate(&mut rng, &mut i, &pool, target.tokens);
                i
            }
        };
        done += 1;
        if done % 250_000 == 0 {
            eprintln!(
                "  {}: {done} executions, {:.0}/s, {} classes",
                target.name,
                done as f64 / started.elapsed().as_secs_f64(),
                classes.len()
            );
        }
        match catch_unwind(AssertUnwindSafe(|| (target.run)(&input))) {
            Ok(class) => {
                let count = classes.entry(class).or_default();
                *count += 1;
                let new = *count == 1;
                if new && done > unmutated && save && corpus < corpus_max && input.len() <= 4096 {
                    let _ = std::fs::create_dir_all(&corpus_dir);
                    let file = corpus_dir.join(format!("{:016x}", fnv(&input)));
                    if !file.exists() && std::fs::write(&file, &input).is_ok() {
                        corpus += 1;
                    }
                }
                if (new || rng.below(200) == 0) && pool.len() < 4096 {
                    pool.push(input);
                }
            }
            Err(_) => {
                findings += 1;
                let _ = std::fs::create_dir_all(&artifacts);
                let name = format!("crash-{}-{seed}-{done}", target.name);
                let _ = std::fs::write(artifacts.join(&name), &input);
                eprintln!(
                    "  saved fuzz/artifacts/stable/{name} ({} bytes)",
                    input.len()
                );
            }
        }
    }
    Report {
        execs: done,
        secs: started.elapsed().as_secs_f64(),
        findings,
        classes,
        corpus,
    }
}

fn main() {
    let name = std::env::var("FUZZ_TARGET").unwrap_or_else(|_| "mcp_request".into());
    let seed: u64 = env("FUZZ_SEED").unwrap_or(1);
    let execs: Option<u64> = env("FUZZ_EXECS");
    let secs: Option<u64> = env("FUZZ_SECS").or(if execs.is_none() { Some(60) } else { None });
    let chosen: Vec<&targets::Target> = if name == "all" {
        targets::TARGETS.iter().collect()
    } else {
        match targets::target(&name) {
            Some(t) => vec![t],
            None => {
                let names: Vec<&str> = targets::TARGETS.iter().map(|t| t.name).collect();
                eprintln!(
                    "unknown FUZZ_TARGET {name:?}; one of {}, or all",
                    names.join(", ")
                );
                std::process::exit(2);
            }
        }
    };
    if let Ok(dir) = std::env::var("FUZZ_WRITE_SEEDS") {
        for target in &chosen {
            let dir = Path::new(&dir).join(target.name);
            std::fs::create_dir_all(&dir).expect("seed folder");
            let seeds = (target.seeds)();
            for (n, seed) in seeds.iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{n:02}")), seed).expect("seed file");
            }
            println!("wrote {} seeds to {}", seeds.len(), dir.display());
        }
        return;
    }
    // Panics are findings here, not noise: keep their messages short.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("finding: {info}");
    }));
    let mut any = false;
    println!(
        "| target | executions | exec/s | wall time | findings | outcome classes | corpus files |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for target in chosen {
        let r = fuzz(target, seed, execs, secs);
        any |= r.findings > 0;
        println!(
            "| `{}` | {} | {:.0} | {:.1} s | {} | {} | {} |",
            target.name,
            r.execs,
            r.execs as f64 / r.secs,
            r.secs,
            r.findings,
            r.classes.len(),
            r.corpus
        );
        if std::env::var("FUZZ_VERBOSE").is_ok_and(|v| v == "1") {
            for (class, n) in &r.classes {
                eprintln!("    {n:>9}  {class}");
            }
        }
    }
    if any {
        std::process::exit(1);
    }
}
