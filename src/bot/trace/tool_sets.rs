//! The tool sets the trace writer has stored, shared with the turns' path.
//!
//! An LLM span names the tools it offered by the hash of their definitions
//! ([`TOOLS_HASH`](super::TOOLS_HASH)); the writer stores each distinct set once. A turn
//! offers the same set call after call, so once the writer has stored a set, the next
//! LLM call that offers it finds its hash here and records just that: no copy of every
//! schema on the turn's path, and no redacting, writing out and hashing of them on the
//! writer's. A set not found here travels in full ([`TOOL_DEFINITIONS`](super::TOOL_DEFINITIONS)),
//! and the writer stores it and remembers it.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::model::ToolDef;

/// How many distinct sets are remembered (each role, agent and filter offers its own);
/// the one used least recently goes first. A set forgotten is hashed and stored again,
/// which the store ignores.
const REMEMBERED: usize = 64;

/// A stored set: its definitions as the span carried them (before redaction, to
/// compare with what a call offers) and the hash it is stored under.
struct StoredSet {
    definitions: Vec<StoredDefinition>,
    hash: String,
}

/// One tool of a stored set.
struct StoredDefinition {
    name: String,
    description: String,
    /// After a call's tools matched the set in full, their own schemas: the registry
    /// shares each tool's schema with every copy of its definition, so the next calls
    /// offering the same tools match by pointer instead of comparing every schema.
    input_schema: Arc<Value>,
}

impl StoredSet {
    /// Whether the set is exactly `tools`, in order.
    fn is(&self, tools: &[ToolDef]) -> bool {
        self.definitions.len() == tools.len()
            && self.definitions.iter().zip(tools).all(|(stored, tool)| {
                stored.name == tool.name
                    && stored.description == tool.description
                    && (Arc::ptr_eq(&stored.input_schema, &tool.input_schema)
                        || stored.input_schema == tool.input_schema)
            })
    }
}

#[derive(Default)]
pub(super) struct StoredToolSets {
    /// Most recently used last.
    sets: Mutex<Vec<StoredSet>>,
}

impl StoredToolSets {
    /// The hash `tools` are stored under, if the writer has stored that set.
    pub(super) fn hash_of(&self, tools: &[ToolDef]) -> Option<String> {
        let mut sets = crate::bot::lock(&self.sets);
        let found = sets.iter().rposition(|set| set.is(tools))?;
        let mut set = sets.remove(found);
        for (stored, tool) in set.definitions.iter_mut().zip(tools) {
            if !Arc::ptr_eq(&stored.input_schema, &tool.input_schema) {
                stored.input_schema = Arc::clone(&tool.input_schema);
            }
        }
        let hash = set.hash.clone();
        sets.push(set);
        Some(hash)
    }

    /// Whether a set is stored under `hash`.
    pub(super) fn is_stored(&self, hash: &str) -> bool {
        crate::bot::lock(&self.sets)
            .iter()
            .any(|set| set.hash == hash)
    }

    /// Remembers that `definitions` (an array, as [`definitions`] made it) are stored
    /// under `hash`.
    pub(super) fn remember(&self, definitions: Value, hash: String) {
        let Value::Array(definitions) = definitions else {
            return;
        };
        let text = |definition: &Value, key: &str| {
            definition[key].as_str().unwrap_or_default().to_string()
        };
        let definitions = definitions
            .into_iter()
            .map(|mut definition| StoredDefinition {
                name: text(&definition, "name"),
                description: text(&definition, "description"),
                input_schema: Arc::new(definition["input_schema"].take()),
            })
            .collect();
        let mut sets = crate::bot::lock(&self.sets);
        if sets.iter().any(|set| set.hash == hash) {
            return;
        }
        if sets.len() == REMEMBERED {
            sets.remove(0);
        }
        sets.push(StoredSet { definitions, hash });
    }
}

/// The tools offered, as the provider is told of them: what a span carries when its
/// set is not stored yet.
pub(super) fn definitions(tools: &[ToolDef]) -> Value {
    tools
        .iter()
        .map(|t| {
            serde_json::json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSource;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            source: ToolSource::Native,
            description: format!("{name} does things"),
            input_schema: schema.into(),
            required_roles: Vec::new(),
            internal: false,
            read_only: false,
        }
    }

    #[test]
    fn a_set_is_found_only_when_every_definition_matches() {
        let sets = StoredToolSets::default();
        let tools = vec![
            tool("a", json!({"type": "object"})),
            tool(
                "b",
                json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            ),
        ];
        assert_eq!(sets.hash_of(&tools), None, "nothing stored yet");
        sets.remember(definitions(&tools), "h1".into());
        assert_eq!(sets.hash_of(&tools).as_deref(), Some("h1"));
        assert!(sets.is_stored("h1"));
        assert!(
            tools
                .iter()
                .all(|tool| Arc::strong_count(&tool.input_schema) == 2),
            "once matched, the set holds the tools' own schemas, to match by pointer"
        );
        let copied_schemas: Vec<ToolDef> = tools
            .iter()
            .map(|tool| ToolDef {
                input_schema: Value::clone(&tool.input_schema).into(),
                ..tool.clone()
            })
            .collect();
        assert_eq!(
            sets.hash_of(&copied_schemas).as_deref(),
            Some("h1"),
            "equal schemas not shared still match"
        );

        let mut changed_schema = tools.clone();
        changed_schema[1].input_schema = json!({"type": "object"}).into();
        assert_eq!(sets.hash_of(&changed_schema), None, "a schema differs");
        let mut changed_description = tools.clone();
        changed_description[0].description = "other".into();
        assert_eq!(sets.hash_of(&changed_description), None);
        assert_eq!(sets.hash_of(&tools[..1]), None, "a tool fewer");
        let reordered = vec![tools[1].clone(), tools[0].clone()];
        assert_eq!(
            sets.hash_of(&reordered),
            None,
            "the order is part of the set"
        );
    }

    #[test]
    fn the_set_used_least_recently_is_forgotten_first() {
        let sets = StoredToolSets::default();
        let set = |n: usize| vec![tool(&format!("t{n}"), json!({}))];
        for n in 0..REMEMBERED {
            sets.remember(definitions(&set(n)), format!("h{n}"));
        }
        assert!(sets.hash_of(&set(0)).is_some(), "used: now the most recent");
        sets.remember(definitions(&set(REMEMBERED)), "new".into());
        assert!(sets.hash_of(&set(0)).is_some(), "kept");
        assert_eq!(sets.hash_of(&set(1)), None, "the least recently used went");
        assert!(sets.is_stored("new"));
    }
}
