//! `ruleweave bench`: each scorer, scripted and native, timed on recorded states.

use super::*;

#[test]
fn bench_times_every_scorer_scripted_and_native_on_recorded_states() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers.yaml");
    std::fs::write(&answers, "- I like oat milk, it tastes nutty and foams well.\n- The price is high.\n").unwrap();
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--input", answers.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let states = dir.path().join("states.jsonl");
    std::fs::write(&states, &out.stdout).unwrap();

    let mut cmd = ruleweave(&repo_root());
    cmd.args(["bench", "interview", "--states", states.to_str().unwrap(), "--iterations", "1"]);
    let out = cmd.output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("interview / next_question: 2 states, 1 runs each, similarity by words;"), "{text}");
    for row in [
        "whole selection",
        "knowledge_ceiling",
        "element_exhausted",
        "recent_redundancy",
        "coverage_gap",
        "ambiguity",
        "depth_breadth_balance",
        "engagement",
        "strategy_diversity",
        "novelty",
    ] {
        let line = text.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no row {row}:\n{text}"));
        assert_eq!(line.matches("µs").count(), 2, "{line}");
        assert!(line.trim_end().ends_with('x'), "{line}");
    }

    // The same states with embeddings on: the focus descriptions and questions get vectors.
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["bench", "interview", "--states", states.to_str().unwrap(), "--iterations", "1", "--embeddings"]);
    let out = cmd.output().unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("2 states, 1 runs each, similarity by the stand-in's embeddings ("),
        "{text}{}",
        stderr(&out)
    );
    assert!(text.lines().any(|l| l.starts_with("recent_redundancy") && l.trim_end().ends_with('x')), "{text}");

    // States from a stored session, turn by turn.
    let store = format!("sqlite://{}", dir.path().join("s.db").display());
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", "interview", "--store", &store, "--no-watch"]);
    let out = run_with_stdin(cmd, "Oat milk is creamy.\nIt is cheap enough.\nNo idea.\n/quit\n");
    let played = stdout(&out);
    let id = played.split("--session ").nth(1).and_then(|s| s.split(')').next()).expect(&played).to_owned();
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["bench", "interview", "--store", &store, "--session", &id, "--iterations", "1"]);
    let out = cmd.output().unwrap();
    assert!(stdout(&out).contains("interview / next_question: 3 states"), "{}{}", stdout(&out), stderr(&out));

    // Nothing to time is an error that says how to record states.
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["bench", "interview"]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("ruleweave run interview --input FILE"), "{}", stderr(&out));
    // A pack without selectors.
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["bench", "pirate", "--states", states.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(stderr(&out).contains("declares no selectors"), "{}", stderr(&out));
}
