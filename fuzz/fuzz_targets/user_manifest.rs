//! `cargo +nightly fuzz run user_manifest`: the `user_manifest` target of `../targets.rs` (its input
//! layout and invariants are documented there).
#![no_main]

#[path = "../harness.rs"]
mod harness;
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = (targets::target("user_manifest").expect("a known target").run)(data);
});
