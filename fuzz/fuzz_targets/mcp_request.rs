//! `cargo +nightly fuzz run mcp_request`: one fuzzed HTTP request through the real
//! `/mcp` router (see `../harness.rs` for the input format and the invariants checked).
#![no_main]

#[path = "../harness.rs"]
mod harness;
#[path = "../targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = harness::Harness::get().run(data);
});
