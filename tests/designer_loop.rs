//! The designer's loop: `ruleweave test` over every shipped pack's cases, a failing case's
//! field-by-field report, `--bless`; `replay` of a stored session after an edit, on the command
//! line and over HTTP; `play`'s `/save` writing a case that passes.

use crate::support;

use serde_json::json;
use support::{copy_of, edit, post, repo_root, ruleweave, run_with_stdin, start, stderr, stdout, temp_file};

/// A copy of the pirate pack and its cases in a fresh root.
fn pirate_root() -> tempfile::TempDir {
    copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate", "tests/pirate"])
}

#[test]
fn every_shipped_pack_passes_its_cases() {
    let out = ruleweave(&repo_root()).arg("test").output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    for pack in ["pirate", "interview", "party", "designer", "debate"] {
        assert!(text.contains(&format!("ok    {pack}/")), "{pack} has no passing case:\n{text}");
    }
    assert!(text.contains(" passed, 0 failed"), "{text}");
}

#[test]
fn an_edit_that_changes_a_rule_fails_its_case_field_by_field_and_bless_accepts_it() {
    let root = pirate_root();
    // Easy now needs 50: a judged 45 no longer earns it, and the captain's words no longer win.
    edit(root.path(), "config/pirate.yaml", "thresholds: {easy: 40,", "thresholds: {easy: 50,");
    let out = ruleweave(root.path()).args(["test", "pirate", "--filter", "judge's score"]).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL  pirate/the judge's score decides"), "{text}");
    assert!(text.contains("turn 2: merit_has_earned_it: expected true, got false"), "{text}");
    assert!(text.contains("turn 2: is_won: expected true, got false"), "{text}");
    assert!(text.contains("turn 3: expected an error saying"), "the game goes on now: {text}");
    assert!(text.contains("0 passed, 1 failed"), "{text}");

    let out = ruleweave(root.path()).args(["test", "pirate", "--bless"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ruleweave(root.path()).args(["test", "pirate"]).output().unwrap();
    assert!(out.status.success(), "blessed cases pass: {}", stdout(&out));
    let case = std::fs::read_to_string(root.path().join("tests/pirate/judge_decides.yaml")).unwrap();
    assert!(case.contains("merit_has_earned_it: false"), "{case}");
}

#[test]
fn replay_of_a_case_agrees_with_test_and_tells_a_turn_that_now_succeeds() {
    // On the shipped packs as they are, every case replays unchanged, as `test` passes it.
    for pack in ["pirate", "interview", "party", "designer", "debate"] {
        for entry in std::fs::read_dir(repo_root().join("tests").join(pack)).unwrap() {
            let file = entry.unwrap().path();
            let out = ruleweave(&repo_root()).args(["replay", "--file"]).arg(&file).output().unwrap();
            let text = stdout(&out);
            assert!(text.lines().last().is_some_and(|l| l.starts_with("0 of ")), "{}: {text}", file.display());
        }
    }
    // Easy needs 50: the captain no longer hands the treasure over, so the turn after, which
    // failed on a won game, now plays.
    let root = pirate_root();
    edit(root.path(), "config/pirate.yaml", "thresholds: {easy: 40,", "thresholds: {easy: 50,");
    let case = root.path().join("tests/pirate/judge_decides.yaml");
    let out = ruleweave(root.path()).args(["replay", "--file"]).arg(&case).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("turn 3: now succeeds (it failed: The captain has already handed over"), "{text}");
    assert!(text.ends_with("2 of 3 turn(s) changed\n"), "{text}");
}

#[test]
fn bless_drops_the_replies_the_rules_no_longer_ask_for() {
    let root = pirate_root();
    let case = root.path().join("tests/pirate/judge_down.yaml");
    let text = std::fs::read_to_string(&case).unwrap();
    let judge_replies = text.matches("- error:").count();
    // A second reply for the judge, which turn 1 never asks twice.
    let failed = "    - error: HTTP 500 from the model\n";
    let extra = format!("{failed}{}\n", r#"    - '{"total_score": 99}'"#);
    std::fs::write(&case, text.replacen(failed, &extra, 1)).unwrap();
    let out = ruleweave(root.path()).args(["test", "pirate", "--filter", "falls back"]).output().unwrap();
    assert!(stdout(&out).contains("a recorded call the rules no longer make"), "{}", stdout(&out));
    let out = ruleweave(root.path()).args(["test", "pirate", "--filter", "falls back", "--bless"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let blessed = std::fs::read_to_string(&case).unwrap();
    assert!(!blessed.contains("99"), "the unused reply is gone: {blessed}");
    assert_eq!(blessed.matches("- error:").count(), judge_replies, "the used ones stay: {blessed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_shows_what_an_edit_changed_turn_by_turn() {
    let root = pirate_root();
    let db = root.path().join("s.db");
    let store = format!("sqlite://{}", db.display());
    let (_dir, file) = temp_file(
        "moves.json",
        r#"["I am your long lost brother, captain!", "Remember our mother, the harbour master's daughter?", "I brought the map you lost in Tortuga."]"#,
    );
    let out = ruleweave(root.path())
        .args(["run", "pirate", "--set", "difficulty=easy", "--store", &store, "--input"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let banner = stderr(&out);
    let id = banner.split("session ").nth(1).unwrap().split(',').next().unwrap().trim().to_owned();

    // Unchanged rules: every turn as recorded.
    let out = ruleweave(root.path()).args(["replay", "--session", &id, "--store", &store]).output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("0 of 3 turn(s) changed"), "{text}");

    // The judge's prompt and the rule-based scores change: the recording answers the judge anyway
    // (and says the prompt changed), the pirate's reply too; the scores move.
    edit(root.path(), "prompts/pirate/judge.j2", "", "Be strict.\n");
    let out = ruleweave(root.path()).args(["replay", "--session", &id, "--store", &store, "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let notes = report["turns"][0]["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().contains("judge: the prompt changed")), "{report}");

    edit(root.path(), "config/pirate.yaml", "thresholds: {easy: 40,", "thresholds: {easy: 10,");
    let out = ruleweave(root.path()).args(["replay", "--session", &id, "--store", &store]).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("merit_has_earned_it false → true"), "{text}");

    // Over HTTP, for the console.
    let server = start(root.path(), &store, &[]);
    let (status, body) = post(&format!("{}/v1/sessions/{id}/replay", server.url), json!({})).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert_eq!(body["turns"].as_array().unwrap().len(), 3);
    assert!(body["changed"].as_u64().unwrap() >= 1, "{body}");
    let changed: Vec<&str> =
        body["turns"][0]["changes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert!(changed.contains(&"merit_has_earned_it"), "{body}");
}

#[test]
fn play_saves_a_session_as_a_case_that_passes() {
    let root = pirate_root();
    std::fs::remove_dir_all(root.path().join("tests/pirate")).unwrap();
    let out = run_with_stdin(
        {
            let mut c = ruleweave(root.path());
            c.args(["play", "pirate", "--store", "memory"]);
            c
        },
        "Ahoy, I sailed with your crew!\nI know the signal of the quartermaster.\n/save two_moves\nArr?\n/save two_moves\n",
    );
    let text = stdout(&out);
    assert!(text.contains("saved 2 turn(s) as"), "{text}{}", stderr(&out));
    // A second /save of the name keeps the case there (it may be hand-written); --force replaces it.
    assert!(text.contains("two_moves.yaml exists: /save two_moves --force replaces it"), "{text}");
    let case = std::fs::read_to_string(root.path().join("tests/pirate/two_moves.yaml")).unwrap();
    assert!(case.contains("judge:") && case.contains("merit_score:"), "{case}");
    let out = ruleweave(root.path()).args(["test", "pirate"]).output().unwrap();
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("ok    pirate/two_moves (2 turns)"), "{}", stdout(&out));
}

#[test]
fn new_scaffolds_a_pack_that_checks_and_passes_its_test() {
    let dir = tempfile::tempdir().unwrap();
    let out = ruleweave(dir.path()).args(["new", "tavern"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("created tests/tavern/first.yaml"));
    let manifest = std::fs::read_to_string(dir.path().join("config/tavern.yaml")).unwrap();
    assert!(manifest.starts_with("# yaml-language-server: $schema=../docs/manifest.schema.json"));
    assert!(dir.path().join("docs/manifest.schema.json").is_file());
    let out = ruleweave(dir.path()).arg("check").output().unwrap();
    assert!(out.status.success() && stdout(&out).contains("ok      tavern"), "{}", stdout(&out));
    let out = ruleweave(dir.path()).args(["test", "tavern"]).output().unwrap();
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("1 passed, 0 failed"));
    // Not over an existing pack, and not a name that cannot be one.
    let out = ruleweave(dir.path()).args(["new", "tavern"]).output().unwrap();
    assert!(!out.status.success() && stderr(&out).contains("exists already"), "{}", stderr(&out));
    let out = ruleweave(dir.path()).args(["new", "Bad-Name"]).output().unwrap();
    assert!(!out.status.success() && stderr(&out).contains("cannot name a pack"), "{}", stderr(&out));
}
