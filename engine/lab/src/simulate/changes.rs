//! What differs between two copies of a pack, for a comparison to say what it compared: the
//! manifest's values key by key (`params.thresholds.easy: 60 → 40`), and for each other file of
//! the pack (its scripts, templates and data) the first line that differs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Change, FileDiff};

/// The differences between the pack `pack` under `ours` and under `theirs`, the manifest's first.
pub(super) fn between(ours: &Path, theirs: &Path, pack: &str) -> Vec<Change> {
    let manifest = format!("config/{pack}.yaml");
    let mut out = Vec::new();
    let read = |root: &Path| std::fs::read_to_string(root.join(&manifest)).ok();
    let (a, b) = (read(ours), read(theirs));
    match (parsed(a.as_deref()), parsed(b.as_deref())) {
        (Some(x), Some(y)) => values(&manifest, String::new(), &x, &y, &mut out),
        _ => lines(&manifest, a.as_deref(), b.as_deref(), &mut out),
    }
    for file in files_of(ours, theirs, pack) {
        let read = |root: &Path| std::fs::read(root.join(&file)).ok();
        let (a, b) = (read(ours), read(theirs));
        if a != b {
            let text = |bytes: &Option<Vec<u8>>| bytes.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
            let name = file.to_string_lossy().replace('\\', "/");
            lines(&name, text(&a).as_deref(), text(&b).as_deref(), &mut out);
        }
    }
    out
}

/// The pack's files other than its manifest under either root (its scripts, templates and
/// data), relative to the root, in order.
fn files_of(ours: &Path, theirs: &Path, pack: &str) -> BTreeSet<PathBuf> {
    [ours, theirs]
        .iter()
        .flat_map(|root| ["scripts", "prompts", "data"].map(|dir| (root, Path::new(dir).join(pack))))
        .flat_map(|(root, dir)| files_under(root, &dir))
        .collect()
}

/// Every file of the pack that differs between `ours` and `theirs`, the manifest first, as a
/// unified diff (a file only one side has is diffed against nothing).
pub(super) fn diffs(ours: &Path, theirs: &Path, pack: &str) -> Vec<FileDiff> {
    let manifest = PathBuf::from(format!("config/{pack}.yaml"));
    let there = theirs.display().to_string();
    std::iter::once(manifest)
        .chain(files_of(ours, theirs, pack))
        .filter_map(|file| {
            let read = |root: &Path| std::fs::read(root.join(&file)).ok();
            let (a, b) = (read(ours), read(theirs));
            if a == b {
                return None;
            }
            let text =
                |bytes: Option<Vec<u8>>| bytes.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            let (a, b) = (text(a), text(b));
            let name = file.to_string_lossy().replace('\\', "/");
            let unified = similar::TextDiff::from_lines(&a, &b)
                .unified_diff()
                .context_radius(3)
                .header(&format!("{name} (these rules)"), &format!("{name} ({there})"))
                .to_string();
            Some(FileDiff { file: name, unified })
        })
        .collect()
}

/// The manifest as values, when it parses (a manifest that does not is compared line by line).
fn parsed(text: Option<&str>) -> Option<Value> {
    serde_saphyr::from_str(text?).ok()
}

/// Each value that differs between `a` and `b`, under the dotted path `key`: maps key by key (in
/// the keys' order), lists item by item, anything else whole.
fn values(file: &str, key: String, a: &Value, b: &Value, out: &mut Vec<Change>) {
    if a == b {
        return;
    }
    let under = |k: &str| if key.is_empty() { k.to_owned() } else { format!("{key}.{k}") };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (p, q) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
                values(file, under(k), p, q, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let (p, q) = (x.get(i).unwrap_or(&Value::Null), y.get(i).unwrap_or(&Value::Null));
                values(file, format!("{key}[{i}]"), p, q, out);
            }
        }
        _ => out.push(Change { file: file.to_owned(), key, ours: a.clone(), theirs: b.clone() }),
    }
}

/// The first line that differs between two texts (a missing file is empty): `line N` and the two
/// lines, a side without that line null.
fn lines(file: &str, a: Option<&str>, b: Option<&str>, out: &mut Vec<Change>) {
    let (mut x, mut y) = (a.unwrap_or("").lines(), b.unwrap_or("").lines());
    for n in 1.. {
        let (p, q) = (x.next(), y.next());
        if p.is_none() && q.is_none() {
            return;
        }
        if p != q {
            let line = |l: Option<&str>| l.map_or(Value::Null, |l| Value::String(l.to_owned()));
            out.push(Change { file: file.to_owned(), key: format!("line {n}"), ours: line(p), theirs: line(q) });
            return;
        }
    }
}

/// The files under `root/dir`, as paths relative to `root`, in no order (the caller sorts).
fn files_under(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&d)) else { continue };
        for entry in entries.flatten() {
            let path = d.join(entry.file_name());
            match entry.file_type() {
                Ok(t) if t.is_dir() => todo.push(path),
                Ok(t) if t.is_file() => found.push(path),
                _ => {}
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_manifests_values_differ_key_by_key() {
        let mut out = Vec::new();
        let a = json!({"params": {"thresholds": {"easy": 60, "hard": 80}}, "edges": ["a -> b", "b -> c"]});
        let b = json!({"params": {"thresholds": {"easy": 40, "hard": 80}}, "edges": ["a -> b"]});
        values("config/p.yaml", String::new(), &a, &b, &mut out);
        let said: Vec<(String, Value, Value)> = out.into_iter().map(|c| (c.key, c.ours, c.theirs)).collect();
        assert_eq!(
            said,
            [
                ("edges[1]".into(), json!("b -> c"), Value::Null),
                ("params.thresholds.easy".into(), json!(60), json!(40)),
            ]
        );
    }

    #[test]
    fn another_file_shows_its_first_differing_line() {
        let mut out = Vec::new();
        lines("scripts/p/a.rhai", Some("fn a() {\n  1\n}\n"), Some("fn a() {\n  2\n}\n"), &mut out);
        lines("scripts/p/new.rhai", Some("fn b() {}\n"), None, &mut out);
        lines("scripts/p/same.rhai", Some("x\n"), Some("x\n"), &mut out);
        let said: Vec<(&str, &str, Value, Value)> =
            out.iter().map(|c| (c.file.as_str(), c.key.as_str(), c.ours.clone(), c.theirs.clone())).collect();
        assert_eq!(
            said,
            [
                ("scripts/p/a.rhai", "line 2", json!("  1"), json!("  2")),
                ("scripts/p/new.rhai", "line 1", json!("fn b() {}"), Value::Null),
            ]
        );
    }
}
