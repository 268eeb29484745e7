//! `ruleweave sessions`: a store's sessions, for `replay`.

use super::*;

/// `sessions` lists what a store keeps, newest first, with the ids `replay --session` takes; in
/// JSON one object a line, times as the HTTP API gives them.
#[test]
fn sessions_lists_a_stores_sessions_for_replay() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("kept.db").display());
    let (_moves, file) = temp_file("moves.yaml", "- Ahoy!\n- I bring rum.\n");
    let out =
        ruleweave(&repo_root()).args(["run", "pirate", "--store", &store, "--input"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let out = ruleweave(&repo_root()).args(["sessions", "--store", &store, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = json_lines(&out);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let s = &listed[0];
    assert_eq!((&s["pack"], &s["turns"], &s["finished"]), (&json!("pirate"), &json!(2), &json!(false)));
    let id = s["id"].as_str().unwrap();
    let updated = s["updated_at"].as_str().unwrap();
    assert!(updated.len() == 24 && updated.ends_with('Z') && updated.as_bytes()[10] == b'T', "RFC 3339: {updated}");

    let out = ruleweave(&repo_root()).args(["sessions", "--store", &store]).output().unwrap();
    let table = stdout(&out);
    let row = table.lines().find(|l| l.starts_with(id)).expect(&table);
    assert!(row.contains(" pirate ") && row.contains(updated) && row.ends_with("no"), "{row}");
    // The id it lists replays.
    let out = ruleweave(&repo_root()).args(["replay", "--store", &store, "--session", id]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let out = ruleweave(&repo_root()).args(["sessions", "interview", "--store", &store]).output().unwrap();
    assert!(stdout(&out).starts_with("no sessions of interview in sqlite://"), "{}", stdout(&out));
}
