//! JSON Schemas derived from types (`schemars`): a tool's arguments and its answer are
//! described by the types the tool parses and returns, so the schemas cannot drift from
//! them. Doc comments become descriptions; `#[schemars(range(..), length(..),
//! regex(pattern = ..))]` become the checks; `#[serde(default = ..)]` becomes `default`;
//! `#[schemars(extend("x-aliases" = [..]))]` declares another accepted spelling (see
//! [`ToolSet`](crate::ToolSet)).
//!
//! What is written differs from `schemars`' own output in ways clients read better:
//! every subschema is written in place (no `$ref`), a doc comment's line breaks are
//! spaces (only paragraph breaks stay), and the `format`s `schemars` gives Rust's
//! number types (`uint64`, `double`, …) are left out: they are not JSON Schema formats,
//! and strict clients refuse what they do not know.

use serde_json::{Map, Value};

/// `N`, as the default of an argument: `#[serde(default = "default_of::<50>")]`; the
/// derived input schema lists it as the argument's `default`, so the value a call gets
/// and the one its schema shows are one number.
pub const fn default_of<const N: usize>() -> usize {
    N
}

/// `T`'s JSON Schema with every subschema written in place (no `$ref`: some clients
/// do not follow them) and without `$schema` and `title`.
pub fn schema_of<T: schemars::JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(map) = schema.as_object_mut() {
        map.remove("title");
    }
    tidy(&mut schema);
    schema
}

/// The input schema of a tool whose arguments are a `T`: [`schema_of`], closed (an
/// argument the type does not name is refused, named, rather than ignored), with
/// `required` always written, and an argument that may be left out not also offered as
/// `null` (leaving it out is how a caller says "none"; `schemars` would add `null` for
/// every `Option`). `T`'s own doc comment is not listed: it is written for the code's
/// readers, and the tool's description says what the tool takes.
pub fn input_schema_of<T: schemars::JsonSchema>() -> Value {
    let mut schema = schema_of::<T>();
    let Some(object) = schema.as_object_mut() else {
        return schema;
    };
    object.remove("description");
    object.insert("type".into(), "object".into());
    object.insert("additionalProperties".into(), false.into());
    object
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let required = object
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()))
        .clone();
    let is_required = |name: &str| {
        required
            .as_array()
            .is_some_and(|r| r.iter().any(|n| n == name))
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !is_required(name) {
                without_null(property);
            }
        }
    }
    schema
}

/// `{"type": ["string", "null"]}` as `{"type": "string"}`, and `null` out of an `enum` or
/// an `anyOf`.
fn without_null(property: &mut Value) {
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(options)) = object.get_mut("anyOf") {
        options.retain(|o| o.get("type").is_none_or(|t| t != "null"));
        if let [only] = options.as_slice() {
            let Value::Object(only) = only.clone() else {
                return;
            };
            object.remove("anyOf");
            for (key, value) in only {
                object.entry(key).or_insert(value);
            }
        }
    }
}

/// The formats `schemars` writes for Rust's number types.
const NUMBER_FORMATS: [&str; 12] = [
    "int8", "int16", "int32", "int64", "int", "uint8", "uint16", "uint32", "uint64", "uint",
    "float", "double",
];

/// Unwraps doc comments' lines and drops number formats, everywhere in `schema`.
fn tidy(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::String(description)) = object.get_mut("description") {
                *description = unwrap_lines(description);
            }
            if object
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| NUMBER_FORMATS.contains(&f))
            {
                object.remove("format");
            }
            object.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// A doc comment's text with its line breaks as spaces; a blank line (a paragraph
/// break) stays.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// The arguments of an imaginary search tool.
    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct SearchArgs {
        /// What to look for, written over
        /// two lines.
        #[schemars(length(min = 1))]
        text: String,
        /// Most hits to return.
        #[serde(default = "default_of::<10>")]
        #[schemars(range(min = 1, max = 100))]
        limit: usize,
        /// Only hits of this kind.
        kind: Option<Kind>,
        #[schemars(extend("x-aliases" = ["case"]))]
        ignore_case: Option<bool>,
    }

    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Word,
        Line,
    }

    #[test]
    fn an_argument_type_becomes_a_closed_schema_with_its_checks_and_defaults() {
        let schema = input_schema_of::<SearchArgs>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["text"]));
        let p = &schema["properties"];
        assert_eq!(
            p["text"],
            json!({"type": "string", "minLength": 1,
                   "description": "What to look for, written over two lines."})
        );
        assert_eq!(
            p["limit"],
            json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
                   "description": "Most hits to return."})
        );
        assert_eq!(p["kind"]["enum"], json!(["word", "line"]));
        assert_eq!(p["kind"]["type"], "string");
        assert_eq!(
            p["ignore_case"],
            json!({"type": "boolean", "x-aliases": ["case"]})
        );
        assert!(!schema.to_string().contains("$ref"));
    }

    #[test]
    fn a_type_without_members_takes_no_arguments() {
        #[derive(Deserialize, schemars::JsonSchema)]
        struct NoArgs {}
        let schema = input_schema_of::<NoArgs>();
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {}, "required": [],
                   "additionalProperties": false})
        );
    }
}
