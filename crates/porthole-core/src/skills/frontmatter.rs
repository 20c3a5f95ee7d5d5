//! Reads a `SKILL.md`'s YAML front matter into a JSON object, field for field, for the
//! Skills extension's `frontmatter` (which must equal what the author wrote).
//!
//! Front matter in Agent Skills is small and plain, so this reads the YAML it uses —
//! `key: scalar`, quoted strings, `>`/`|` block text, one level of nested mapping (the
//! `metadata` block) and `- item` lists — and refuses anything else with the line
//! number, rather than guessing.

use serde_json::{Map, Value};

/// The front matter of `text` as JSON, or what is wrong with it.
pub(super) fn parse(text: &str) -> Result<Map<String, Value>, String> {
    let mut lines = text.lines().enumerate();
    if lines.next().map(|(_, l)| l.trim_end()) != Some("---") {
        return Err("SKILL.md must start with a `---` line opening its YAML front matter".into());
    }
    let mut block: Vec<(usize, &str)> = Vec::new();
    let mut closed = false;
    for (number, line) in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        block.push((number + 1, line));
    }
    if !closed {
        return Err("the front matter has no closing `---` line".into());
    }
    let fields = mapping(&block, 0, 0)?;
    for required in ["name", "description"] {
        if !fields.get(required).is_some_and(Value::is_string) {
            return Err(format!("the front matter needs a `{required}` text field"));
        }
    }
    Ok(fields)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_blank(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// How deep mappings may nest (front matter needs two or three levels).
const MAX_DEPTH: usize = 8;

/// The mapping whose keys sit at exactly `indent` spaces, `depth` levels down.
fn mapping(
    lines: &[(usize, &str)],
    indent: usize,
    depth: usize,
) -> Result<Map<String, Value>, String> {
    if depth > MAX_DEPTH {
        let number = lines.first().map(|(n, _)| *n).unwrap_or_default();
        return Err(format!(
            "line {number}: mappings nest deeper than {MAX_DEPTH} levels"
        ));
    }
    let mut fields = Map::new();
    let mut index = 0;
    while index < lines.len() {
        let (number, line) = lines[index];
        index += 1;
        if is_blank(line) {
            continue;
        }
        if indent_of(line) != indent {
            return Err(format!("line {number}: unexpected indentation"));
        }
        let (key, rest) = line
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("line {number}: expected `key: value`"))?;
        let key = key.trim().trim_matches(['"', '\'']).to_string();
        let rest = rest.trim();
        // The lines that belong to this key: everything indented deeper.
        let start = index;
        while index < lines.len()
            && (is_blank(lines[index].1) || indent_of(lines[index].1) > indent)
        {
            index += 1;
        }
        let children = &lines[start..index];
        let value = match rest {
            "" => nested(children, number, depth)?,
            ">" | ">-" | "|" | "|-" => block_text(children, rest.starts_with('>')),
            _ if children.iter().any(|(_, l)| !is_blank(l)) => {
                return Err(format!(
                    "line {number}: a value continues on the next lines; quote it or use `>`"
                ));
            }
            scalar_text => scalar(scalar_text, number)?,
        };
        if fields.insert(key.clone(), value).is_some() {
            return Err(format!("line {number}: `{key}` appears twice"));
        }
    }
    Ok(fields)
}

/// The value of a key written with nothing after its colon: a list, a mapping or null.
fn nested(children: &[(usize, &str)], number: usize, depth: usize) -> Result<Value, String> {
    let Some(&(_, first)) = children.iter().find(|(_, l)| !is_blank(l)) else {
        return Ok(Value::Null);
    };
    let indent = indent_of(first);
    if first.trim_start().starts_with("- ") || first.trim() == "-" {
        let mut items = Vec::new();
        for &(line_number, line) in children.iter().filter(|(_, l)| !is_blank(l)) {
            let item = line.trim().strip_prefix('-').ok_or_else(|| {
                format!(
                    "line {line_number}: a list item must start with `- ` (under line {number})"
                )
            })?;
            items.push(scalar(item.trim(), line_number)?);
        }
        return Ok(Value::Array(items));
    }
    mapping(children, indent, depth + 1).map(Value::Object)
}

/// `>` folds lines into one with spaces; `|` keeps the line breaks.
fn block_text(children: &[(usize, &str)], folded: bool) -> Value {
    let lines: Vec<&str> = children.iter().map(|(_, l)| l.trim()).collect();
    let text = if folded {
        lines
            .iter()
            .filter(|l| !l.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        lines.join("\n").trim_end().to_string()
    };
    Value::String(text)
}

fn scalar(text: &str, number: usize) -> Result<Value, String> {
    if let Some(inner) = text.strip_prefix('"') {
        let inner = inner
            .strip_suffix('"')
            .ok_or_else(|| format!("line {number}: a double-quoted value is not closed"))?;
        return serde_json::from_str(&format!("\"{inner}\""))
            .map_err(|_| format!("line {number}: a double-quoted value has a bad escape"));
    }
    if let Some(inner) = text.strip_prefix('\'') {
        let inner = inner
            .strip_suffix('\'')
            .ok_or_else(|| format!("line {number}: a single-quoted value is not closed"))?;
        return Ok(Value::String(inner.replace("''", "'")));
    }
    if text.starts_with(['[', '{', '&', '*', '!']) {
        return Err(format!(
            "line {number}: flow collections, anchors and tags are not read here; write the value as plain text or a `- item` list"
        ));
    }
    let plain = match text.find(" #") {
        Some(comment) => text[..comment].trim_end(),
        None => text,
    };
    Ok(match plain {
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        "null" | "~" | "Null" | "NULL" => Value::Null,
        _ => plain
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| plain.parse::<f64>().map(Value::from))
            .unwrap_or_else(|_| Value::String(plain.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_front_matter_agent_skills_use() {
        let text = "---\nname: pdf-tools\ndescription: >\n  Fill forms\n  and merge files\nlicense: \"Apache-2.0\"\nmetadata:\n  version: 2\n  author: 'a team'\nallowed-tools:\n  - Bash\n  - Read\n---\n# Body\n";
        let fields = parse(text).unwrap();
        assert_eq!(
            Value::Object(fields),
            json!({"name": "pdf-tools", "description": "Fill forms and merge files",
                   "license": "Apache-2.0", "metadata": {"version": 2, "author": "a team"},
                   "allowed-tools": ["Bash", "Read"]})
        );
    }

    #[test]
    fn bad_front_matter_names_the_problem() {
        assert!(parse("no front matter").unwrap_err().contains("start with"));
        assert!(parse("---\nname: x\n").unwrap_err().contains("closing"));
        assert!(
            parse("---\nname: x\n---\n")
                .unwrap_err()
                .contains("description")
        );
        let flow = parse("---\nname: x\ndescription: y\ntags: [a, b]\n---\n").unwrap_err();
        assert!(flow.contains("line 4"), "{flow}");
        let deep: String = (0..40)
            .map(|level| format!("{}k{level}:\n", " ".repeat(level)))
            .collect();
        let error = parse(&format!("---\nname: x\ndescription: y\n{deep}---\n")).unwrap_err();
        assert!(error.contains("nest deeper"), "{error}");
    }
}
