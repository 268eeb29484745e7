//! The party pack through `ruleweave run`: its formulas against hand-computed values (every tone,
//! NSFW on and off, the safety valve fired and not), the pool it asks from, the lobby finishing,
//! and its models reached through a named provider (Groq) on a local server speaking the protocol.

use crate::support;

use std::collections::HashMap;

use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply};
use support::{json_lines, repo_root, ruleweave, stderr, temp_file};

/// Plays the party pack on the stand-in: `moves` are typed lines ("4/6"), the first `{}` included.
fn play(sets: &[&str], moves: &[Value]) -> Vec<Value> {
    let (_dir, file) = temp_file("moves.json", &Value::from(moves.to_vec()).to_string());
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "party", "--events", "--input"]).arg(&file);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().unwrap();
    json_lines(&out)
}

/// The start, then one "n/6" line per round.
fn haves(counts: &[usize]) -> Vec<Value> {
    let mut moves = vec![json!({})];
    moves.extend(counts.iter().map(|n| json!(format!("{n}/6"))));
    moves
}

/// A round as the design's formulas make it.
#[derive(Debug, Clone, PartialEq)]
struct Round {
    round: u64,
    tone: &'static str,
    intensity: i64,
    boldness: f64,
    progression: f64,
    effective: f64,
    de_escalated: bool,
}

/// The design's formulas, written out independently of the pack: δ(r) = have / answering ×
/// weight(tone), B(r+1) = 0.3 δ(r) + 0.7 B(r), P(r) = min(0.2, r / max × 0.4), E = B + P, the
/// tone bands, the NSFW clamp, linear target intensity, and the safety valve (R > 0.75 twice at
/// intensity > 5: one tone down, B − 0.15).
fn model(players: usize, max_rounds: u64, nsfw: bool, haves: &[usize]) -> Vec<Round> {
    let all = [("safe", 0.0, 1, 3), ("deeper", 0.30, 3, 5), ("secretive", 0.55, 5, 7), ("freaky", 0.80, 7, 10)];
    let ends = [0.30, 0.55, 0.80, 1.20];
    let bands: Vec<usize> = (0..all.len()).filter(|&i| nsfw || i < 3).collect();
    let weight = |tone: &str| match tone {
        "safe" => 0.5,
        "deeper" => 1.0,
        "secretive" => 1.5,
        _ => 2.0,
    };
    let mut out: Vec<Round> = Vec::new();
    let mut b = 0.0_f64;
    let mut streak = 0;
    for r in 1..=(haves.len() as u64 + 1).min(max_rounds) {
        if let Some(last) = out.last() {
            let ratio = haves[r as usize - 2] as f64 / players as f64;
            b = 0.3 * (ratio * weight(last.tone)) + 0.7 * b;
            streak = if last.intensity > 5 && 1.0 - ratio > 0.75 { streak + 1 } else { 0 };
        }
        let p = (r as f64 / max_rounds as f64 * 0.4).min(0.2);
        let mut at = bands.iter().rposition(|&i| b + p >= all[i].1).unwrap_or(0);
        let de_escalated = streak >= 2;
        if de_escalated {
            at = at.saturating_sub(1);
            b = (b - 0.15).max(0.0);
        }
        let e = b + p;
        let (tone, from, lo, hi) = all[bands[at]];
        let t = ((e - from) / (ends[bands[at]] - from)).clamp(0.0, 1.0);
        let cap = if nsfw { 10 } else { 7 };
        let intensity = ((lo as f64 + t * (hi - lo) as f64).round() as i64).clamp(lo, hi.min(cap));
        out.push(Round { round: r, tone, intensity, boldness: b, progression: p, effective: e, de_escalated });
    }
    out
}

/// The rounds a run reports, one per turn.
fn rounds(lines: &[Value]) -> Vec<Round> {
    lines
        .iter()
        .filter(|l| l["output"]["finished"] != true)
        .map(|l| {
            let o = &l["output"];
            assert!(l["error"].is_null(), "{l}");
            Round {
                round: o["round"].as_u64().unwrap(),
                tone: match o["tone"].as_str().unwrap() {
                    "safe" => "safe",
                    "deeper" => "deeper",
                    "secretive" => "secretive",
                    "freaky" => "freaky",
                    other => panic!("unknown tone {other}"),
                },
                // The intensity E asks for (the question's is the nearest the pool still has).
                intensity: l["state"]["target_intensity"].as_i64().unwrap(),
                boldness: o["boldness"].as_f64().unwrap(),
                progression: o["progression"].as_f64().unwrap(),
                effective: o["effective_score"].as_f64().unwrap(),
                de_escalated: l["state"]["de_escalated"].as_bool().unwrap(),
            }
        })
        .collect()
}

fn assert_rounds(got: &[Round], want: &[Round]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(
            g.round == w.round
                && g.tone == w.tone
                && g.intensity == w.intensity
                && g.de_escalated == w.de_escalated
                && close(g.boldness, w.boldness)
                && close(g.progression, w.progression)
                && close(g.effective, w.effective),
            "round {}: got {g:?}, the formulas say {w:?}",
            w.round
        );
    }
}

/// (round, tone, intensity, B, P, E) computed by hand for a bold table of six (everyone says
/// "have"), 20 rounds, NSFW on: B(2) = 0.3 × (6/6 × 0.5) = 0.15; B(3) = 0.3 × 0.5 + 0.7 × 0.15
/// = 0.255; B(4) = 0.3 × 1.0 + 0.7 × 0.255 = 0.4785; B(5) = 0.3 × 1.5 + 0.7 × 0.4785 = 0.78495.
const BOLD_TABLE: [(u64, &str, i64, f64, f64, f64); 5] = [
    (1, "safe", 1, 0.0, 0.02, 0.02),
    (2, "safe", 2, 0.15, 0.04, 0.19),
    (3, "deeper", 3, 0.255, 0.06, 0.315),
    (4, "secretive", 5, 0.4785, 0.08, 0.5585),
    (5, "freaky", 8, 0.78495, 0.10, 0.88495),
];

#[test]
fn a_bold_table_reaches_every_tone_as_the_formulas_say() {
    let lines = play(&["nsfw=true"], &haves(&[6, 6, 6, 6, 6, 6, 6, 6]));
    let got = rounds(&lines);
    for (r, (round, tone, intensity, b, p, e)) in got.iter().zip(BOLD_TABLE) {
        let close = |x: f64, y: f64| (x - y).abs() < 1e-12;
        assert!(
            r.round == round
                && r.tone == tone
                && r.intensity == intensity
                && close(r.boldness, b)
                && close(r.progression, p)
                && close(r.effective, e),
            "round {round}: got {r:?}"
        );
    }
    assert_rounds(&got, &model(6, 20, true, &[6, 6, 6, 6, 6, 6, 6, 6]));
    // The history has the design's shape, one entry per answered round.
    let last = lines.last().unwrap();
    let history = last["output"]["escalation_history"].as_array().unwrap();
    assert_eq!(history.len(), 8);
    assert_eq!(
        history[1],
        json!({"round": 2, "tone": "safe", "intensity": 2, "boldness": 0.15, "have_ratio": 1.0, "de_escalated": false})
    );
    // The questions asked are the pool's, at the round's intensity, each once.
    let pool = pool();
    let mut seen = Vec::new();
    for l in &lines {
        let o = &l["output"];
        let id = o["question_id"].as_str().unwrap();
        let q = &pool[id];
        assert_eq!((q["language"].as_str(), q["intensity"].as_i64()), (Some("en"), o["intensity"].as_i64()), "{id}");
        assert!(!seen.contains(&id.to_owned()), "{id} asked twice");
        seen.push(id.to_owned());
    }
    assert_eq!(last["output"]["used_question_ids"], json!(seen));
}

#[test]
fn without_nsfw_the_tone_stops_at_secretive_and_no_nsfw_question_comes_up() {
    let bold = vec![6; 19];
    let lines = play(&["language=pl"], &haves(&bold));
    let got = rounds(&lines);
    assert_rounds(&got, &model(6, 20, false, &bold));
    assert!(got.iter().all(|r| r.tone != "freaky" && r.intensity <= 7));
    assert_eq!(got[4].tone, "secretive", "E = 0.88495 would be freaky with NSFW on");
    assert_eq!(got[4].intensity, 7);
    let pool = pool();
    for l in &lines {
        let q = &pool[l["output"]["question_id"].as_str().unwrap()];
        assert_eq!((q["language"].as_str(), q["is_nsfw"].as_bool()), (Some("pl"), Some(false)));
        assert!(l["output"]["question"].as_str().unwrap().starts_with("Nigdy"));
    }
}

#[test]
fn a_table_that_keeps_saying_have_not_makes_the_game_back_off() {
    // Round 5 (freaky, intensity 8) and round 6 (secretive, intensity 6): nobody has. Round 7's
    // E = 0.3846255 + 0.14 is deeper; the valve drops it to safe and B to 0.2346255.
    let counts = [6, 6, 6, 6, 0, 0];
    let lines = play(&["nsfw=true"], &haves(&counts));
    let got = rounds(&lines);
    assert_rounds(&got, &model(6, 20, true, &counts));
    let seventh = &got[6];
    assert_eq!((seventh.tone, seventh.intensity, seventh.de_escalated), ("safe", 3, true));
    assert!((seventh.boldness - 0.2346255).abs() < 1e-12, "{seventh:?}");
    let events = lines[6]["events"].as_array().unwrap();
    let fired = events.iter().find(|e| e["name"] == "de_escalated").expect("the valve is an event");
    assert_eq!((&fired["data"]["from"], &fired["data"]["to"]), (&json!("deeper"), &json!("safe")));
    assert!(events.iter().any(|e| e["type"] == "log" && e["message"].as_str().unwrap().contains("drops")));

    // Two in six having in round 6 (R = 0.67) keeps the valve shut.
    let counts = [6, 6, 6, 6, 0, 2];
    let got = rounds(&play(&["nsfw=true"], &haves(&counts)));
    assert_rounds(&got, &model(6, 20, true, &counts));
    assert_eq!((got[6].tone, got[6].de_escalated), ("secretive", false));
}

#[test]
fn a_lobby_finishes_after_max_rounds_and_refuses_more() {
    let lines = play(
        &["max_rounds=3", "players=ana,bo,cy"],
        &[json!({}), json!("ana"), json!("all"), json!("none"), json!("all")],
    );
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[3]["output"]["finished"], true);
    assert_eq!(lines[3]["output"]["escalation_history"].as_array().unwrap().len(), 3);
    assert_eq!(lines[4]["error"]["code"], "session_finished", "{}", lines[4]);
    // P(r) = min(0.2, r / 3 × 0.4): the cap from round 2 on.
    assert_eq!(lines[1]["output"]["progression"], 0.2);
}

#[test]
fn players_are_checked_and_typed_lines_refused_clearly() {
    let (_dir, file) = temp_file("moves.json", r#"[{}, "7/6", "4/5", "zed", {"answers": {"ana": "maybe"}}]"#);
    let out = ruleweave(&repo_root())
        .args(["run", "party", "--set", "players=ana,bo,cy,dee,eli,fox", "--input"])
        .arg(&file)
        .output()
        .unwrap();
    let lines = json_lines(&out);
    let message = |i: usize| lines[i]["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message(1).contains("7 of 6 players cannot say \"have\""), "{}", lines[1]);
    assert!(message(2).contains("4/5: this table has 6 players"), "{}", lines[2]);
    assert!(message(3).contains("zed is not a player"), "{}", lines[3]);
    assert_eq!(lines[4]["error"]["code"], "invalid_input", "{}", lines[4]);
    assert!(message(4).contains("ana's answer is \"have\" or \"have_not\""), "{}", lines[4]);

    for (players, says) in [("ana", "2 to 20 players, not 1"), ("ana,bo,ana", "ana is listed twice")] {
        let (_dir, file) = temp_file("moves.json", "[{}]");
        let out = ruleweave(&repo_root())
            .args(["run", "party", "--set", &format!("players={players}"), "--input"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
}

/// The pool by id.
fn pool() -> HashMap<String, Value> {
    let text = std::fs::read_to_string(repo_root().join("data/party/questions.yaml")).unwrap();
    let rows: Vec<Value> = serde_saphyr::from_str(&text).unwrap();
    rows.into_iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r)).collect()
}

#[test]
fn the_pool_covers_every_intensity_in_both_languages() {
    let pool = pool();
    assert!(pool.len() >= 200, "{} questions", pool.len());
    for language in ["en", "pl"] {
        for intensity in 1..=10 {
            let n = pool
                .values()
                .filter(|q| q["language"] == language && q["intensity"] == intensity)
                .inspect(|q| assert_eq!(q["is_nsfw"], intensity >= 8, "{q}"))
                .count();
            assert!(n >= 12, "{language} intensity {intensity}: {n} questions");
        }
    }
}

/// The picker on Groq when GROQ_API_KEY is set; on the default provider, with its default model
/// and a notice, when it is not. Bad answers fall back to the first candidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_picker_runs_on_groq_and_falls_back_to_the_default_provider() {
    let mock = MockLlm::start();
    mock.judge(Reply::Content("I'd rather not pick one of these.".into()));
    mock.judge(Reply::Raw("{\"choices\": [".into()));
    let (_dir, file) = temp_file("moves.json", r#"[{}, "all"]"#);
    let out = ruleweave(&repo_root())
        .args(["run", "party", "--events", "--input"])
        .arg(&file)
        .env("GROQ_API_KEY", "gsk-test")
        .env("GROQ_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "0")
        .output()
        .unwrap();
    let lines = json_lines(&out);
    let seen = mock.seen();
    assert_eq!(seen.len(), 2, "{}", stderr(&out));
    for s in &seen {
        assert_eq!(s.body["model"], "llama-3.3-70b-versatile");
        assert_eq!(s.authorization.as_deref(), Some("Bearer gsk-test"));
    }
    for l in &lines {
        assert_eq!(l["output"]["question_id"], l["state"]["candidates"][0]["id"], "the first candidate: {l}");
        assert_eq!(l["state"]["question_source"], "fallback_candidate");
        let event = l["events"].as_array().unwrap().iter().find(|e| e["name"] == "question").unwrap().clone();
        assert!(event["data"]["why"].as_str().unwrap().contains("the picker's answer is unusable"), "{event}");
    }

    // No Groq key: the default provider answers, asked for the profile's default model.
    let mock = MockLlm::start();
    mock.judge(Reply::Content(r#"{"id": "nope", "question": "Never have I ever"}"#.into()));
    let (_dir, file) = temp_file("moves.json", "[{}]");
    let out = ruleweave(&repo_root())
        .args(["run", "party", "--events", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .output()
        .unwrap();
    let lines = json_lines(&out);
    assert_eq!(mock.seen()[0].body["model"], "gpt-4o-mini");
    assert_eq!(mock.seen()[0].authorization.as_deref(), Some("Bearer sk-test"));
    let events = lines[0]["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["type"] == "log"
        && e["message"].as_str().unwrap().contains("asks for provider `groq`, which is not set up")));
    let event = events.iter().find(|e| e["name"] == "question").unwrap();
    assert!(event["data"]["why"].as_str().unwrap().contains("the picker named nope"), "{event}");
}
