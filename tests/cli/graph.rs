//! `ruleweave graph`: the Mermaid text, and a page that draws the pack offline.

use super::*;

#[test]
fn graph_prints_mermaid() {
    let out = ruleweave(&repo_root()).args(["graph", "pirate"]).output().unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.starts_with("flowchart TD\n"), "{text}");
    for edge in [
        "START --> intake",
        "intake --> merit_check",
        "merit_check --> generate_response",
        "generate_response --> validate_response",
        "validate_response -.->|\"this.is_blocked\"| handle_blocked",
        "validate_response -.->|\"otherwise\"| END",
        "handle_blocked --> END",
    ] {
        assert!(text.contains(edge), "missing `{edge}` in\n{text}");
    }
    // A condition with quotes keeps a label every Mermaid renderer reads as written.
    let out = ruleweave(&repo_root()).args(["graph", "interview"]).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains(r#"extract -.->|"param('use_llm_signals')"| signals"#), "{text}");
    assert!(!text.contains("#quot;"), "{text}");
}

/// `graph --html` writes a page that draws the graph offline: every node in its place, routes
/// labelled, nothing fetched, no script.
#[test]
fn graph_writes_a_page_that_draws_the_pack_offline() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("pirate.html");
    let out = ruleweave(&repo_root()).args(["graph", "pirate", "--html"]).arg(&page).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let manifest: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo_root().join("config/pirate.yaml")).unwrap()).unwrap();
    for node in manifest["graph"]["nodes"].as_object().unwrap().keys() {
        assert!(html.contains(&format!("data-node=\"{node}\"")), "{node} is drawn");
    }
    assert!(html.contains("<g class=\"node llm\" data-node=\"merit_check\">"), "the judge calls a model: {html}");
    assert!(html.matches("<g class=\"edge route\"").count() >= 1, "a route, dashed");
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="), "self-contained");
}
