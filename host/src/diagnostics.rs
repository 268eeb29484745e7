//! Showing engine errors the way compilers do: the message, `file:line:col`, the source line and
//! a caret under the spot.

use std::fmt::Write as _;
use std::path::Path;

use ruleweave::Error;

/// Every problem in `e`, each with its source line and a caret when the place is known.
pub fn render(e: &Error, root: &Path) -> String {
    render_as("error", e, root)
}

/// A warning (something that loads but is likely a mistake), shown as errors are.
pub fn render_warning(e: &Error, root: &Path) -> String {
    render_as("warning", e, root)
}

fn render_as(label: &str, e: &Error, root: &Path) -> String {
    let mut out = String::new();
    // Each file read and split into lines once, however many problems it has.
    let mut files: std::collections::HashMap<&str, Vec<String>> = std::collections::HashMap::new();
    for err in e.all() {
        let _ = writeln!(out, "{label}: {}", err.detail());
        if let Some(node) = err.node() {
            let _ = writeln!(out, "  in node `{node}`");
        }
        let Some(origin) = err.origin() else { continue };
        let _ = writeln!(out, "  --> {origin}");
        if origin.line == 0 {
            continue;
        }
        let lines = files.entry(origin.file.as_str()).or_insert_with(|| {
            read_inside(root, &origin.file).unwrap_or_default().lines().map(str::to_owned).collect()
        });
        if let Some(line) = lines.get(origin.line as usize - 1) {
            let n = origin.line.to_string();
            let pad = " ".repeat(n.len());
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{n} | {line}");
            if origin.column > 0 {
                let lead: String =
                    line.chars().take(origin.column as usize - 1).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
                let _ = writeln!(out, "{pad} | {lead}^");
            }
        }
    }
    out
}

/// The text of `file` under `root`, unless its real path (links resolved) lies outside the root:
/// a diagnostic about a link out of the root must not show what the link points at.
fn read_inside(root: &Path, file: &str) -> Option<String> {
    let real = root.join(file).canonicalize().ok()?;
    let real_root = root.canonicalize().ok()?;
    real.starts_with(real_root).then(|| std::fs::read_to_string(real).ok()).flatten()
}

/// A one-line `{"code", "message"}` form of an error, as the HTTP API and `run` report it.
pub fn json(e: &Error) -> serde_json::Value {
    serde_json::json!({ "code": e.kind().code(), "message": e.to_string() })
}
