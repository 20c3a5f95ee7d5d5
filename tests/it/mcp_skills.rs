//! The Skills extension against the real bot over real HTTP: the bot's SKILLS_DIR served
//! through `skills/list`, `skills/get`, `resources/read` and `resources/directory/read`,
//! and `notifications/resources/list_changed` when the folder changes on disk; the
//! bot's `list_skills` tool reads the same live view.

use crate::common;

use common::*;
use serde_json::json;

const SKILL_MD: &str = "---\nname: summarise-logs\ndescription: How to summarise a day of server logs\nmetadata:\n  owner: ops\n---\nRead `steps/one.md` first.\n";

fn write_skill(dir: &std::path::Path) {
    let skill = dir.join("summarise-logs");
    std::fs::create_dir_all(skill.join("steps")).unwrap();
    std::fs::write(skill.join("SKILL.md"), SKILL_MD).unwrap();
    std::fs::write(skill.join("steps/one.md"), "Step one.\n").unwrap();
}

#[tokio::test]
async fn skills_are_listed_with_their_front_matter_and_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path());
    let skills_dir = dir.path().display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills_dir)]).await;

    let discover = modern(&app, 1, "server/discover", json!({})).await;
    let declared =
        &discover.result()["capabilities"]["extensions"]["io.modelcontextprotocol/skills"];
    assert_eq!(declared["directoryRead"], true, "{}", discover.raw);

    let list = modern(&app, 2, "skills/list", json!({})).await;
    let skill = &list.result()["skills"][0];
    assert_eq!(
        skill["uri"], "skill://summarise-logs/SKILL.md",
        "{}",
        list.raw
    );
    assert_eq!(skill["frontmatter"]["metadata"]["owner"], "ops");
    assert_eq!(skill["resources"][0]["size"], SKILL_MD.len());
    let digest = skill["resources"][0]["digest"].as_str().unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    assert_eq!(
        skill["resources"][1]["uri"],
        "skill://summarise-logs/steps/one.md"
    );
    assert!(list.result()["ttlMs"].is_number() && list.result()["cacheScope"].is_string());

    let got = modern(
        &app,
        3,
        "skills/get",
        json!({"uri": "skill://summarise-logs/SKILL.md"}),
    )
    .await;
    assert_eq!(&got.result()["skill"], skill);
    let unknown = modern(
        &app,
        4,
        "skills/get",
        json!({"uri": "skill://nope/SKILL.md"}),
    )
    .await;
    assert_eq!(unknown.error_code(), Some(-32602));

    app.shutdown().await;
}

#[tokio::test]
async fn skill_files_and_folders_are_read_as_resources() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(dir.path());
    let skills_dir = dir.path().display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills_dir)]).await;
    let read = modern(
        &app,
        5,
        "resources/read",
        json!({"uri": "skill://summarise-logs/steps/one.md"}),
    )
    .await;
    assert_eq!(
        read.result()["contents"][0]["text"],
        "Step one.\n",
        "{}",
        read.raw
    );
    let escape = modern(
        &app,
        6,
        "resources/read",
        json!({"uri": "skill://summarise-logs/../../etc/passwd"}),
    )
    .await;
    assert_eq!(
        escape.error_code(),
        Some(-32602),
        "only listed files are served"
    );

    let root = modern(
        &app,
        7,
        "resources/directory/read",
        json!({"uri": "skill://summarise-logs"}),
    )
    .await;
    let children = root.result()["resources"].as_array().unwrap();
    assert!(
        children
            .iter()
            .any(|c| c["uri"] == "skill://summarise-logs/steps"
                && c["mimeType"] == "inode/directory"),
        "{}",
        root.raw
    );
    let not_dir = modern(
        &app,
        8,
        "resources/directory/read",
        json!({"uri": "skill://summarise-logs/SKILL.md"}),
    )
    .await;
    assert_eq!(not_dir.error_code(), Some(-32602));
    app.shutdown().await;
}

#[tokio::test]
async fn a_change_in_the_skills_folder_is_announced_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let skills_dir = dir.path().display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills_dir)]).await;
    let empty = modern(&app, 1, "skills/list", json!({})).await;
    assert_eq!(empty.result()["skills"], json!([]));

    let response = listen(&app, json!("watch"), json!({"resourcesListChanged": true})).await;
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    // Wait for the acknowledgment, then change the folder.
    read_sse_until(&mut stream, &mut seen, |m| {
        m.iter()
            .find(|m| m["method"] == "notifications/subscriptions/acknowledged")
            .cloned()
    })
    .await
    .expect("acknowledged");
    // Written elsewhere and moved in, as an editor or deploy would, so the watcher never
    // sees half a skill.
    let staging = tempfile::tempdir_in(dir.path().parent().unwrap()).unwrap();
    write_skill(staging.path());
    std::fs::rename(
        staging.path().join("summarise-logs"),
        dir.path().join("summarise-logs"),
    )
    .unwrap();
    let changed = tokio::time::timeout(std::time::Duration::from_secs(6), async {
        loop {
            if let Some(found) = read_sse_until(&mut stream, &mut seen, |m| {
                m.iter()
                    .find(|m| m["method"] == "notifications/resources/list_changed")
                    .cloned()
            })
            .await
            {
                return found;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no list_changed within 6 s: {seen}"));
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "watch"
    );
    let list = modern(&app, 2, "skills/list", json!({})).await;
    assert_eq!(
        list.result()["skills"][0]["frontmatter"]["name"],
        "summarise-logs"
    );
    let tool = call_tool(&app, "list_skills", json!({})).await;
    assert_eq!(
        tool["structuredContent"]["skills"][0]["name"], "summarise-logs",
        "list_skills reads the view /mcp refreshed: {tool}"
    );
    app.shutdown().await;
}

/// `list_skills` and `skills/list` read one folder the same way: a skill the strict
/// reader refuses is in neither, and of two skills with one name the one in the first
/// folder by folder name is in both.
#[tokio::test]
async fn list_skills_and_skills_list_agree_on_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let write = |folder: &str, front_matter: &str| {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        std::fs::write(
            dir.path().join(folder).join("SKILL.md"),
            format!("---\n{front_matter}---\nBody.\n"),
        )
        .unwrap();
    };
    // Created out of order, so the file system's listing order is not the answer.
    write("b-second", "name: twin\ndescription: the second twin\n");
    write("a-first", "name: twin\ndescription: the first twin\n");
    write("c-flow", "name: flow\ndescription: d\ntags: [a, b]\n");
    write("d-good", "name: good\ndescription: a good skill\n");
    let skills_dir = dir.path().display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills_dir)]).await;

    let list = modern(&app, 1, "skills/list", json!({})).await;
    let served: Vec<(String, String)> = list.result()["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let fields = &s["frontmatter"];
            (
                fields["name"].to_string(),
                fields["description"].to_string(),
            )
        })
        .collect();
    let tool = call_tool(&app, "list_skills", json!({})).await;
    let listed: Vec<(String, String)> = tool["structuredContent"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].to_string(), s["description"].to_string()))
        .collect();
    let expected = [
        ("\"good\"", "\"a good skill\""),
        ("\"twin\"", "\"the first twin\""),
    ]
    .map(|(n, d)| (n.to_string(), d.to_string()));
    assert_eq!(served, expected, "{}", list.raw);
    assert_eq!(listed, expected, "{tool}");
    app.shutdown().await;
}

/// A skill's front matter and files are the author's text, secrets included: every way
/// of reading them is redacted (`skills/list`, `skills/get`, `resources/list`), and a
/// file that is not UTF-8 but holds a secret is served as redacted text, not Base64.
#[tokio::test]
async fn a_skills_secrets_are_redacted_on_every_way_in() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("leaky");
    std::fs::create_dir_all(&skill).unwrap();
    let planted = "sk-proj-PLANTEDabcdefghijklmnop";
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: leaky\ndescription: uses {planted}\nmetadata:\n  api_key: plain-value-123\n---\nBody.\n"),
    )
    .unwrap();
    let mut binary = format!("key {planted}\n").into_bytes();
    binary.push(0xff);
    std::fs::write(skill.join("notes.bin"), &binary).unwrap();
    let skills_dir = dir.path().display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills_dir)]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    for reply in [
        modern(&app, 1, "skills/list", json!({})).await,
        modern(
            &app,
            2,
            "skills/get",
            json!({"uri": "skill://leaky/SKILL.md"}),
        )
        .await,
        modern(&app, 3, "resources/list", json!({})).await,
        legacy(&app, &session, 4, "resources/list", json!({})).await,
        modern(
            &app,
            5,
            "resources/read",
            json!({"uri": "skill://leaky/notes.bin"}),
        )
        .await,
    ] {
        assert!(reply.error_code().is_none(), "{}", reply.raw);
        assert!(!reply.raw.contains("PLANTED"), "{}", reply.raw);
        assert!(!reply.raw.contains("plain-value-123"), "{}", reply.raw);
    }
    let read = modern(
        &app,
        6,
        "resources/read",
        json!({"uri": "skill://leaky/notes.bin"}),
    )
    .await;
    let content = &read.result()["contents"][0];
    assert!(
        content["text"].as_str().unwrap().contains("[REDACTED]"),
        "{content}"
    );
    app.shutdown().await;
}
