//! `ruleweave calibrate`: how far the pirate's stand-in judge is from a real judge that scores
//! every transcript 10 above it (give or take 1), on recorded sessions and on live games.

use super::*;

fn pirate_root() -> tempfile::TempDir {
    support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"])
}

fn judged_by_shift() -> MockLlm {
    let mock = MockLlm::start();
    mock.judge_by(support::mock_llm::shifted_judge(10));
    mock
}

fn run(root: &std::path::Path, mock: &MockLlm, store: &str, args: &[&str]) -> (std::process::Output, Value) {
    let out = ruleweave(root)
        .args(args)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_STORE", store)
        .output()
        .unwrap();
    (out.clone(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

/// The judge's `total_score` and its parts, model minus stand-in, as the test's judge makes them.
fn assert_shifted_by_ten(calibration: &Value) {
    let total = &calibration["profiles"]["judge"]["numbers"]["total_score"];
    let (mean, low, high) =
        (total["mean_difference"].as_f64().unwrap(), total["low"].as_f64().unwrap(), total["high"].as_f64().unwrap());
    assert!((mean - 10.0).abs() <= 2.0 && low <= 10.0 && 10.0 <= high, "+10 within its interval: {total}");
    assert!(total["rank_correlation"].as_f64().unwrap() > 0.9, "the same order: {total}");
    // The parts are the stand-in's own: no difference at all.
    let variety = &calibration["profiles"]["judge"]["numbers"]["strategy_variety"];
    assert_eq!((&variety["mean_difference"], &variety["mean_absolute"]), (&json!(0.0), &json!(0.0)), "{variety}");
    assert!(calibration["profiles"].get("pirate").is_none(), "the captain played on the stand-in: nothing to compare");
}

/// Sessions played on the real judge and kept in the store: every judge call is given to the
/// stand-in too; the replay with the stand-in in the judge's place counts the turns that would
/// have ended otherwise.
#[test]
fn calibrate_measures_the_stand_in_against_the_sessions_a_real_model_played() {
    let root = pirate_root();
    std::fs::write(root.path().join("ruleweave.toml"), "").unwrap();
    let mock = judged_by_shift();
    let store = format!("sqlite://{}", root.path().join("played.db").display());
    let simulate = ["simulate", "pirate", "--record", "--games", "12", "--player", "liar", "--model", "judge=openai"];
    let (out, _) =
        run(root.path(), &mock, &store, &[&simulate[..], &["--set", "difficulty=medium", "--json"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let asked = mock.seen_kind("judge").len();

    let (out, calibration) = run(root.path(), &mock, &store, &["calibrate", "pirate", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("12 sessions of `pirate` read"), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{asked} calls a real model answered")), "{}", stderr(&out));
    assert_eq!(calibration["profiles"]["judge"]["calls"], asked, "{calibration}");
    assert_eq!(mock.seen_kind("judge").len(), asked, "calibrating asks the model nothing");
    assert_shifted_by_ten(&calibration);
    let replayed = &calibration["replayed"];
    let turns = replayed["turns"].as_u64().unwrap();
    assert_eq!(turns as usize, asked, "one judge call a turn, every turn replayed: {replayed}");
    assert!(replayed["ended_differently"].as_u64().unwrap() > 0, "a judge 10 lower ends games otherwise: {replayed}");

    // Kept in the store: a simulate of the same version carries its headline.
    let (out, report) =
        run(root.path(), &mock, &store, &["simulate", "pirate", "--games", "2", "--player", "liar", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let kept = &report["calibration"]["profiles"]["judge"]["numbers"]["total_score"];
    let total = &calibration["profiles"]["judge"]["numbers"]["total_score"];
    assert_eq!(kept, &json!([total["mean_difference"], total["low"], total["high"]]), "{report}");
    assert_eq!(report["calibration"]["sessions"], 12);

    // One session, as a person reads it.
    let (out, _) = run(root.path(), &mock, &store, &["calibrate", "pirate", "--session", "sim-ruleweave-liar-0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("judge: ") && text.contains("total_score") && text.contains("model − stand-in"), "{text}");

    // A store with none: says what to do.
    let empty = format!("sqlite://{}", root.path().join("empty.db").display());
    let (out, _) = run(root.path(), &mock, &empty, &["calibrate", "pirate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no call a real model answered"), "{}", stderr(&out));
    let (out, _) = run(root.path(), &mock, &store, &["calibrate", "pirate", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--since yesterday: give an RFC 3339 time"), "{}", stderr(&out));
}

/// `--live N`: games played now with each judge call answered by the real judge (which drives
/// the game) and by the stand-in, for a pack with no recorded sessions, paid for as simulate's.
#[test]
fn calibrate_live_plays_games_asking_both() {
    let root = pirate_root();
    std::fs::write(root.path().join("ruleweave.toml"), "[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n")
        .unwrap();
    let mock = judged_by_shift();
    let args = ["calibrate", "pirate", "--live", "6", "--player", "liar", "--model", "judge=openai", "--json"];
    let (out, calibration) = run(root.path(), &mock, "memory", &[&args[..], &["--budget-usd", "1"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(calibration["sessions"], 6, "{calibration}");
    let asked = mock.seen_kind("judge").len();
    assert_eq!(
        (&calibration["profiles"]["judge"]["calls"], &calibration["spent"]["calls"]),
        (&json!(asked), &json!(asked))
    );
    assert_shifted_by_ten(&calibration);
}
