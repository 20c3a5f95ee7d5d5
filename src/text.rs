//! Small text helpers shared by both layers: "did you mean" suggestions.

/// Levenshtein distance between two strings, by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// Up to `max` of `candidates` close to `wanted` (containing it, contained in it, or a
/// few edits away), closest first.
pub fn closest<'a>(
    candidates: impl IntoIterator<Item = &'a str>,
    wanted: &str,
    max: usize,
) -> Vec<String> {
    let wanted = wanted.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|candidate| {
            let lower = candidate.to_ascii_lowercase();
            let distance = if lower.contains(&wanted) || wanted.contains(&lower) {
                0
            } else {
                edit_distance(&wanted, &lower)
            };
            (distance, candidate)
        })
        .filter(|(d, _)| *d <= 3.max(wanted.len() / 3))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(max)
        .map(|(_, n)| n.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_first() {
        assert_eq!(edit_distance("helth", "health"), 1);
        let names = ["health", "server_log", "web_log", "db_query"];
        assert_eq!(closest(names, "helth", 3), vec!["health"]);
        assert_eq!(closest(names, "log", 3), vec!["server_log", "web_log"]);
        assert!(closest(names, "zzzzzzzzzz", 3).is_empty());
    }
}
