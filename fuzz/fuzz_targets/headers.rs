//! `cargo +nightly fuzz run headers`: the `headers` target of `../targets.rs` (its input
//! layout and invariants are documented there).
#![no_main]

#[path = "../harness.rs"]
mod harness;
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = (targets::target("headers").expect("a known target").run)(data);
});
