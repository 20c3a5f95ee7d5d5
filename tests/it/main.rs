//! The bot's integration tests, as one test binary: each module is what was once a
//! file of its own under `tests/`, and `common`, `fake_llm` and `doc_examples` are the
//! helpers they share. One binary links the bot once for every test instead of once a
//! file (`docs/performance.md` has the build figures before and after).
//!
//! Run one module with a filter: `cargo test --test it replay_turn::`; the tests that
//! need a service (`phoenix::`, `postgres::`) say how to start it when it is missing.

mod common;
mod doc_examples;
mod fake_llm;

mod agent_loop;
mod allocations;
// Linux only: elsewhere there is no parent-death signal.
#[cfg(target_os = "linux")]
mod child_processes;
mod curl_doc;
mod diagnostics;
mod extension_docs;
mod faults;
mod idle_streams;
mod log_readers;
mod mcp_skills;
mod mcp_sse_client;
mod mcp_tasks;
mod mcp_transport;
mod output_schemas;
mod phoenix;
mod postgres;
mod postgres_restart;
mod postgres_tls;
mod red_team;
mod replay;
mod replay_sets;
mod replay_turn;
mod robustness;
mod scheduled_runs;
mod seed_interfaces;
mod self_report;
mod startup_banner;
mod stdio_relay;
mod tool_filters;
mod tools_doc;
mod trace_canary;
mod trace_export;
mod traces;
mod trust_boundary;
mod web_api;
mod web_replay;
