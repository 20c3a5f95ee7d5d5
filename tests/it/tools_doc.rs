//! `docs/tools.md` must describe every MCP tool the bot serves, with its current
//! description and parameters. Regenerate with `cargo run --example tools_doc > docs/tools.md`.

use crate::common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn tool_reference_matches_the_registry() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tools.md"))
        .expect("docs/tools.md exists");
    let app = start_bot(&[]).await;
    let listing = modern(&app, 1, "tools/list", json!({})).await;
    let mut stale = Vec::new();
    for tool in listing.result()["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        if !doc.contains(&format!("\n## {name}\n")) {
            stale.push(format!("tool `{name}` has no section"));
        }
        if !doc.contains(tool["description"].as_str().unwrap()) {
            stale.push(format!("`{name}`: description changed"));
        }
        for param in tool["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
        {
            if !doc.contains(&format!("| `{param}` |")) {
                stale.push(format!("`{name}`: parameter `{param}` missing"));
            }
        }
    }
    app.shutdown().await;
    assert!(
        stale.is_empty(),
        "docs/tools.md is stale ({}); run `cargo run --example tools_doc > docs/tools.md`",
        stale.join("; ")
    );
}
