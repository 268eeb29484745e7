//! The `ruleweave` binary as a user runs it: `check`, `graph`, `run` and `play` on the shipped
//! packs, offline on the stand-in and against a local Chat Completions server that answers 429,
//! 500, slowly, and with malformed JSON.

use crate::support;

use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply, judged};
use support::{json_lines, repo_root, ruleweave, run_with_stdin, stderr, stdout, temp_file};

/// `ruleweave run pirate` against the mock, with quick retries and a short timeout.
fn run_against(mock: &MockLlm, inputs: &str, difficulty: &str) -> std::process::Output {
    let (_dir, file) = temp_file("inputs.yaml", inputs);
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "pirate", "--events", "--set", &format!("difficulty={difficulty}"), "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "2")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1")
        .env("RULEWEAVE_LLM_MAX_BACKOFF_MS", "20")
        .env("RULEWEAVE_LLM_TIMEOUT_MS", "3000");
    cmd.output().unwrap()
}

fn llm_events(line: &Value, profile: &str) -> Vec<Value> {
    line["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "llm" && e["profile"] == profile)
        .cloned()
        .collect()
}

// ---- check and graph ----------------------------------------------------------------------------

#[test]
fn check_passes_on_the_shipped_packs() {
    let out = ruleweave(&repo_root()).arg("check").output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("ok      pirate (version "), "{}", stdout(&out));
}

#[test]
fn root_is_a_global_flag_before_or_after_the_subcommand() {
    let fixture = repo_root().join("tests/packs/cycle");
    for args in [vec!["--root", fixture.to_str().unwrap(), "check"], vec!["check", "--root", fixture.to_str().unwrap()]]
    {
        let out = ruleweave(&std::env::temp_dir()).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("ok      cycle"), "{}", stdout(&out));
    }
}

#[test]
fn check_fails_bad_packs_with_the_spot() {
    for (case, spot, line) in [
        ("err_yaml", "config/game.yaml:2:21", "  score: {type: int}}"),
        ("err_rhai", "scripts/game/score.rhai:2:25", "    let x = this.score +;"),
        ("err_template_var", "prompts/game/ask.j2:2:14", "You said: {{ last_mesage }}"),
        ("err_unknown_edge", "config/game.yaml:8:14", "    - add -> judge"),
        ("err_route_missing", "config/game.yaml:11:13", "        to: celebrate"),
    ] {
        let root = repo_root().join("tests/packs").join(case);
        let out = ruleweave(&root).arg("check").output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{case}");
        let err = stderr(&out);
        assert!(err.contains(&format!("--> {spot}")), "{case}: {err}");
        assert!(err.contains(line), "{case}: the source line is shown: {err}");
        let col: usize = spot.rsplit(':').next().unwrap().parse().unwrap();
        let caret = format!("| {}^", " ".repeat(col - 1));
        assert!(err.contains(&caret), "{case}: a caret under column {col}: {err}");
    }
}

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

#[test]
fn an_unknown_pack_is_an_error() {
    let out = ruleweave(&repo_root()).args(["graph", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("there is no pack `nope` (packs: debate, designer, interview, party, pirate)"), "{err}");
    assert!(!err.contains("os error"), "no file system error text: {err}");
    let out = ruleweave(&repo_root()).args(["graph", "piratee"]).output().unwrap();
    assert!(stderr(&out).contains("there is no pack `piratee` (did you mean `pirate`? packs:"), "{}", stderr(&out));
}

// ---- run, offline --------------------------------------------------------------------------------

const WINNING_MOVES: &str = r#"
- Ahoy captain! I am your old shipmate from the crew, don't you remember me? We sailed together to Tortuga.
- You are the greatest and most legendary pirate of the seven seas, I truly admire your courage and your famous ship.
- Please, my family is starving and sick, the treasure could save my little daughter who is dying of fever.
- I will pay you with gold coins and silver, a generous reward for a famous captain, because it makes sense for both of us.
- One more thing, captain.
"#;

#[test]
fn run_prints_one_json_line_per_turn_and_a_won_game_refuses_more() {
    let (_dir, file) = temp_file("moves.yaml", WINNING_MOVES);
    let out = ruleweave(&repo_root())
        .args(["run", "pirate", "--set", "difficulty=medium", "--input"])
        .arg(&file)
        .output()
        .unwrap();
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 5, "{}", stderr(&out));
    for (i, line) in lines[..4].iter().enumerate() {
        let keys: Vec<&str> = line.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["display", "output", "state", "turn"], "exactly the contract's keys");
        // What a person sees travels with the line: the captain's words are the reply.
        assert_eq!(line["display"]["reply"], line["output"]["pirate_response"]);
        assert!(line["display"]["status"].as_str().unwrap().starts_with("merit "), "{line}");
        assert_eq!(line["turn"], i as u64 + 1);
        assert_eq!(line["state"]["conversation_history"].as_array().unwrap().len(), 2 * (i + 1));
    }
    let won = &lines[3]["output"];
    assert_eq!(won["is_won"], true, "{won}");
    // In English the captain agrees in English (the exact words are the game's Polish ones).
    assert_eq!(won["outcome"], "won_agreement");
    assert!(won["pirate_response"].as_str().unwrap().contains("The treasure is yours"), "{won}");
    assert_eq!(lines[4]["turn"], 5);
    assert_eq!(lines[4]["error"]["code"], "session_finished");
    assert!(lines[4]["error"]["message"].as_str().unwrap().contains("won and over"));
    assert_eq!(out.status.code(), Some(1), "a refused input makes the exit status 1");
    assert!(stderr(&out).contains("stand-in model"), "the stand-in is labelled: {}", stderr(&out));
}

#[test]
fn run_is_deterministic_on_the_stand_in() {
    // The first four moves, on medium: the fourth wins (a fifth would be refused).
    let moves: String =
        WINNING_MOVES.lines().filter(|l| l.starts_with('-')).take(4).map(|l| format!("{l}\n")).collect();
    let (_dir, file) = temp_file("moves.yaml", &moves);
    let run = || {
        let out = ruleweave(&repo_root())
            .args(["run", "pirate", "--set", "difficulty=medium", "--input"])
            .arg(&file)
            .output()
            .unwrap();
        // Two runs that fail alike would compare equal: each must play every move.
        assert!(out.status.success(), "{}", stderr(&out));
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines.iter().all(|l| l["output"]["pirate_response"].is_string()), "{lines:?}");
        lines
            .into_iter()
            .map(|mut l| {
                l["state"]["game_id"] = json!("");
                l
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn run_refuses_an_inputs_file_that_is_not_a_list() {
    let (_dir, file) = temp_file("moves.yaml", "message: hello\n");
    let out = ruleweave(&repo_root()).args(["run", "pirate", "--input"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("must hold a list of inputs"), "{}", stderr(&out));
}

// ---- run, against a Chat Completions server ------------------------------------------------------

#[test]
fn a_retry_after_past_any_clock_waits_the_longest_backoff() {
    let mock = MockLlm::start();
    mock.judge(Reply::RetryAfter("1e30".into()))
        .judge(Reply::RetryAfter("18446744073709551615".into()))
        .judge(judged(30))
        .chat(Reply::Content("Arr.".into()));
    let out = run_against(&mock, "- Ahoy!\n", "easy");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["output"]["merit_score"], 30);
    assert_eq!(llm_events(&lines[0], "judge")[0]["attempts"], 3);
}

#[test]
fn requests_carry_the_pirates_profiles_and_windows() {
    let mock = MockLlm::start();
    mock.judge(judged(20)).chat(Reply::Content("Arr, who goes there?".into()));
    mock.judge(judged(30)).chat(Reply::Content("Still no.".into()));
    let out = run_against(&mock, "- Ahoy, I am a sailor!\n- Please, captain.\n", "hard");
    assert!(out.status.success(), "{}", stderr(&out));

    let seen = mock.seen();
    assert!(seen.iter().all(|s| s.authorization.as_deref() == Some("Bearer sk-test")));
    let judge = mock.seen_kind("judge");
    assert_eq!(judge.len(), 2);
    let mut first = judge[0].clone();
    let prompt = first["messages"][0]["content"].take();
    assert_eq!(
        first,
        json!({"model": "gpt-4o-mini", "temperature": 0.3, "max_tokens": 500,
               "response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": null}]})
    );
    let prompt = prompt.as_str().unwrap();
    assert!(prompt.contains("Poziom trudności: hard"));
    assert!(prompt.contains("Persony gracza: crew_member"));
    assert!(prompt.contains("\nGracz: Ahoy, I am a sailor!\n"), "{prompt}");

    let chat = mock.seen_kind("chat");
    assert_eq!(chat.len(), 2);
    let second = &chat[1];
    assert_eq!(second["model"], "gpt-4-turbo");
    assert_eq!(second["temperature"], 0.8);
    assert_eq!(second["max_tokens"], 300);
    let roles: Vec<(&str, &str)> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(roles[0].0, "system");
    assert_eq!(
        &roles[1..],
        [("user", "Ahoy, I am a sailor!"), ("assistant", "Arr, who goes there?"), ("user", "Please, captain.")]
    );
    let lines = json_lines(&out);
    assert_eq!(lines[1]["output"]["merit_score"], 30);
    assert_eq!(lines[1]["output"]["pirate_response"], "Still no.");
    let judge_events = llm_events(&lines[0], "judge");
    assert_eq!(judge_events[0]["provider"], "openai");
    assert_eq!(judge_events[0]["prompt_tokens"], 11);
    assert_eq!(judge_events[0]["completion_tokens"], 7);
}

#[test]
fn a_429_is_retried() {
    let mock = MockLlm::start();
    mock.judge(Reply::Status(429, "Rate limit reached".into())).judge(judged(25));
    let out = run_against(&mock, "- Ahoy!\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["output"]["merit_breakdown"]["source"], "judge");
    assert_eq!(line["output"]["merit_score"], 25);
    assert_eq!(llm_events(line, "judge")[0]["attempts"], 2);
    assert_eq!(mock.seen_kind("judge").len(), 2);
}

#[test]
fn a_judge_that_keeps_failing_falls_back_to_the_rules() {
    let mock = MockLlm::start();
    for _ in 0..3 {
        mock.judge(Reply::Status(500, "The server had an error".into()));
    }
    let out = run_against(&mock, "- I am a sailor, please, I will pay you gold\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    let breakdown = &line["output"]["merit_breakdown"];
    assert_eq!(breakdown["source"], "fallback");
    assert_eq!(line["output"]["merit_score"], 2 * 5 + 3 + 2);
    let reason = breakdown["reason"].as_str().unwrap();
    assert!(reason.contains("HTTP 500") && reason.contains("after 3 attempts"), "{reason}");
    assert_eq!(mock.seen_kind("judge").len(), 3, "1 try and 2 retries");
    assert_eq!(llm_events(line, "judge")[0]["error"].as_str().map(|e| e.contains("HTTP 500")), Some(true));
}

#[test]
fn a_timeout_is_retried() {
    let mock = MockLlm::start();
    // The first answer never comes: the client's timeout gives up on it, whatever the machine's speed.
    mock.judge(Reply::Hang).judge(judged(44));
    let out = run_against(&mock, "- Ahoy!\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["output"]["merit_score"], 44, "the slow answer was abandoned");
    assert_eq!(llm_events(line, "judge")[0]["attempts"], 2);
}

#[test]
fn malformed_json_from_the_model_falls_back() {
    let mock = MockLlm::start();
    mock.judge(Reply::Content("Niestety nie potrafię ocenić tej rozmowy.".into()));
    mock.judge(Reply::Raw("{\"choices\": [ this is not json".into()));
    let out = run_against(&mock, "- Ahoy!\n- Ahoy again!\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let first = &lines[0]["output"]["merit_breakdown"];
    assert_eq!(first["source"], "fallback");
    assert!(first["reason"].as_str().unwrap().contains("contains no JSON"), "{first}");
    let second = &lines[1]["output"]["merit_breakdown"];
    assert_eq!(second["source"], "fallback");
    assert!(second["reason"].as_str().unwrap().contains("the reply is not valid JSON"), "{second}");
}

/// The captain's model failing after its retries leaves him silent for that move, with a note a
/// person sees; the game goes on.
#[test]
fn a_failed_captain_call_leaves_him_silent_and_the_game_going() {
    let mock = MockLlm::start();
    mock.chat(Reply::Content("First answer.".into()));
    for _ in 0..3 {
        mock.chat(Reply::Status(503, "overloaded".into()));
    }
    mock.chat(Reply::Content("Third answer.".into()));
    let out = run_against(&mock, "- one\n- two\n- three\n", "easy");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let silent = "The captain narrows his eyes and says nothing. Try him another way, landlubber.";
    assert_eq!((&lines[1]["turn"], &lines[1]["display"]["reply"]), (&json!(2), &json!(silent)), "{}", lines[1]);
    let notes = lines[1]["display"]["notes"].to_string();
    assert!(notes.contains("the captain says nothing") && notes.contains("503"), "{notes}");
    let history: Vec<&str> = lines[2]["state"]["conversation_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(history, ["one", "First answer.", "two", silent, "three", "Third answer."]);
}

// ---- play ------------------------------------------------------------------------------------------

#[test]
fn play_shows_replies_scores_and_the_breakdown_on_request() {
    let moves: Vec<&str> = WINNING_MOVES.lines().filter_map(|l| l.strip_prefix("- ")).collect();
    let input = format!("{}\n/why\n/events\n{}\n{}\n{}\n{}\n/quit\n", moves[0], moves[1], moves[2], moves[3], moves[4]);
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", "pirate"]);
    let out = run_with_stdin(cmd, &input);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("model: the pack's stand-in model"), "{text}");
    assert!(text.contains("pirate (stand-in) › "), "replies are labelled: {text}");
    assert!(text.contains("merit 15/100, needs 60 on medium"), "{text}");
    assert!(text.contains("judge: strategy variety 5/30"), "/why shows the breakdown: {text}");
    assert!(text.contains("You won! The captain hands over his treasure"), "{text}");
    assert!(text.contains("won and over"), "a further move is refused: {text}");
    // /events reads as lines, not JSON; piped output has no colour codes.
    assert!(text.contains("step 1: intake\n  intake done in "), "{text}");
    assert!(text.contains("  model merit_check (judge, gpt-4o-mini (stand-in), "), "{text}");
    assert!(text.contains("  validate_response → END"), "{text}");
    assert!(!text.contains(r#"{"type":"#) && !text.contains('\u{1b}'), "{text}");
}

/// No dead end: with every candidate vetoed (here, any similarity at all counts as a repeat), the
/// interview's fallback strategy asks, and the decision event says why; closing is unavailable in
/// the exploratory phase.
#[test]
fn the_interview_falls_back_when_every_candidate_is_vetoed() {
    let root = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    support::edit(root.path(), "config/interview.yaml", "params: {threshold: 0.45,", "params: {threshold: -1,");
    let (_dir, answers) =
        temp_file("answers.yaml", "- I like oat milk, it tastes nutty and foams well.\n- The price is high.\n");
    let mut cmd = ruleweave(root.path());
    cmd.args(["run", "interview", "--events", "--input", answers.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for line in json_lines(&out) {
        let decision = line["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap();
        let b = &decision["breakdown"];
        assert!(b["candidates"].as_array().unwrap().iter().all(|c| c["vetoed"] == true), "{b}");
        assert_eq!(b["fallback"], "every candidate was vetoed: the fallback strategy `ease` answers");
        assert_eq!(b["unavailable"], json!(["closing"]));
        assert_eq!(line["output"]["decision"]["strategy"]["id"], "ease");
        assert_eq!(
            line["output"]["question"],
            "Let's take a step back: what do you enjoy most about oat milk in coffee?"
        );
    }
}

/// The six qualitative signals, read once per turn from the recent answers by the stand-in as a
/// model would, each consumed where it belongs: reasoning raises engagement, a stance that shifts
/// calls for depth, a terminal "don't know" vetoes digging, and answers falling away move the
/// phase clock on.
#[test]
fn the_interview_reads_six_signals_each_turn_and_uses_them() {
    let (_dir, answers) = temp_file(
        "answers.yaml",
        r#"
- I love oat milk because it tastes nutty, and I think my morning coffee became a little ritual of comfort.
- Actually I don't like it anymore, the foam is not good in espresso.
- I don't know, whatever, I don't care.
"#,
    );
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--events", "--input", answers.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let keys = ["uncertainty", "reasoning", "emotional", "contradiction", "knowledge_ceiling", "concept_depth"];
    for line in &lines {
        let s = &line["state"]["qualitative_signals"];
        assert_eq!(s["source"], "llm", "the stand-in answered as the model: {s}");
        assert_eq!(s["turn"], line["turn"]);
        for k in keys {
            assert!(s[k].is_object(), "{k} missing: {s}");
        }
    }
    let signals = |n: usize| lines[n]["state"]["qualitative_signals"].clone();
    let decision = |n: usize| {
        lines[n]["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap()["breakdown"].clone()
    };
    let candidate = |b: &Value, strategy: &str| {
        b["candidates"].as_array().unwrap().iter().find(|c| c["strategy"] == strategy).cloned().unwrap()
    };
    let raw = |c: &Value, scorer: &str| {
        c["scores"].as_array().unwrap().iter().find(|s| s["scorer"] == scorer).unwrap()["raw_score"].as_f64().unwrap()
    };

    // Turn 1: causal and metacognitive reasoning, an abstract answer; engagement counts the reasoning.
    let first = signals(0);
    assert_eq!(first["reasoning"]["causal"], true);
    assert_eq!(first["reasoning"]["metacognitive"], true);
    assert!(first["concept_depth"]["level"].as_f64().unwrap() > 0.5, "{first}");
    let intensity = first["emotional"]["intensity"].as_f64().unwrap();
    let level = (intensity + 0.3 * first["reasoning"]["score"].as_f64().unwrap()).min(1.0);
    assert!((raw(&candidate(&decision(0), "deepen"), "engagement") - (0.6 + 0.8 * level)).abs() < 1e-9);

    // Turn 2: the stance shifted (love → don't like): depth is favoured by the balance scorer.
    assert_eq!(signals(1)["contradiction"]["detected"], true);
    let b = decision(1);
    let (deepen, broaden) = (candidate(&b, "deepen"), candidate(&b, "bridge"));
    assert!(raw(&deepen, "depth_breadth_balance") > raw(&broaden, "depth_breadth_balance"), "{b}");

    // Turn 3: a terminal "don't know": the ceiling vetoes digging; the answer fell away.
    let third = signals(2);
    assert_eq!(third["knowledge_ceiling"], json!({"says_dont_know": true, "is_terminal": true}));
    assert_eq!(third["uncertainty"]["kind"], "terminal");
    assert_eq!(third["emotional"]["trajectory"], "falling");
    let deepen = candidate(&decision(2), "deepen");
    assert_eq!(
        (&deepen["vetoes"][0]["scorer"], &deepen["vetoes"][0]["is_veto"]),
        (&json!("knowledge_ceiling"), &json!(true))
    );
    let state = &lines[2]["state"];
    // The phases follow the turn count (emotional pacing is an option, off by default).
    assert_eq!((state["turn_count"].as_i64(), state["phase_clock"].as_i64()), (Some(3), Some(3)));
}

/// A whole interview on the stand-in: no turn fails, every one asks a question, and none asks
/// about a filler word (the pack's stop words) — through every phase, with "don't know"s and a
/// stance that shifts — until the answer to the closing question ends it, and the next is refused.
#[test]
fn a_whole_interview_never_fails_nor_asks_about_filler() {
    let answers = [
        "I usually have oat milk in my coffee because it tastes nutty and foams well.",
        "Honestly it takes a while to get used to, but now I really like it.",
        "The price is a bit high compared to regular milk.",
        "I don't know, whatever, I don't care about the packaging.",
        "It is fine.",
        "I think it matters for the environment, that is something I value.",
        "Actually I don't like the carton, it is not good for recycling.",
        "Maybe the texture, I guess, it is kind of creamy.",
        "I don't know much about sustainability but I am curious about it.",
        "My mornings feel like a little ritual with it.",
        "Nothing else really.",
        "Yes.",
    ];
    let text: String = answers.iter().map(|a| format!("- {a:?}\n")).collect();
    let (_dir, file) = temp_file("answers.yaml", &text);
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--events", "--input", file.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the answer after the end is refused: {}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 12);
    let manifest = std::fs::read_to_string(repo_root().join("config/interview.yaml")).unwrap();
    let start = manifest.find("  stopwords: [").unwrap() + "  stopwords: [".len();
    let stopwords: Vec<String> = manifest[start..manifest[start..].find(']').unwrap() + start]
        .split(',')
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty())
        .collect();
    assert!(stopwords.len() > 50);
    let mut phases = std::collections::BTreeSet::new();
    let (last, lines) = lines.split_last().unwrap();
    let (thanks, lines) = lines.split_last().unwrap();
    assert!(last["error"]["message"].as_str().unwrap().contains("This interview is over"), "{last}");
    assert_eq!(thanks["output"]["finished"], true, "{thanks}");
    assert!(thanks["output"]["question"].as_str().unwrap().starts_with("Thank you, that was the last question"));
    for line in lines {
        assert!(line.get("error").is_none(), "turn {} failed: {line}", line["turn"]);
        let question = line["output"]["question"].as_str().unwrap().to_lowercase();
        assert!(question.ends_with('?'), "{question}");
        let decision = &line["output"]["decision"];
        phases.insert(decision["phase"].as_str().unwrap().to_owned());
        let about = decision["focus"]["label"].as_str().unwrap_or("");
        assert!(
            !stopwords.iter().any(|w| w == about),
            "turn {} asks about the filler word {about:?}: {question}",
            line["turn"]
        );
    }
    assert_eq!(phases.len(), 3, "every phase was reached: {phases:?}");
}

// ---- bench -----------------------------------------------------------------------------------------

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

// ---- interview against a Chat Completions server ---------------------------------------------------

#[test]
fn the_interview_uses_the_models_and_falls_back_to_rules_when_they_fail() {
    let mock = MockLlm::start();
    // Turn 1: extraction and signals answer; turn 2: extraction fails three times, signals are not JSON.
    mock.judge(Reply::Content(json!({"concepts": ["oat milk", "foam"], "links": [["oat milk", "foam"]]}).to_string()))
        .judge(Reply::Content(
            json!({
                "uncertainty": {"kind": "productive", "level": 0.6},
                "reasoning": {"causal": false, "counterfactual": false, "metacognitive": false, "score": 0.0},
                "emotional": {"intensity": 0.9, "trajectory": "rising"},
                "contradiction": {"detected": false, "about": ""},
                "knowledge_ceiling": {"says_dont_know": true, "is_terminal": false},
                "concept_depth": {"level": 0.2},
                "note": "curious"
            })
            .to_string(),
        ))
        .chat(Reply::Content("What makes the foam matter to you?".into()))
        .judge(Reply::Status(500, "overloaded".into()))
        .judge(Reply::Status(500, "overloaded".into()))
        .judge(Reply::Status(500, "overloaded".into()))
        .judge(Reply::Content("I think the respondent is curious.".into()))
        .chat(Reply::Content("And the price?".into()));
    let (_dir, file) = temp_file(
        "answers.yaml",
        "- I don't know why, but oat milk makes a lovely foam.\n- Cheaper would be better, honestly.\n",
    );
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--events", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "2")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let (first, second) = (&lines[0]["state"], &lines[1]["state"]);
    let labels = |s: &Value| s["nodes"].as_array().unwrap().iter().map(|n| n["label"].clone()).collect::<Vec<_>>();
    assert_eq!(labels(first), [json!("oat milk"), json!("foam")]);
    assert_eq!(first["edges"], json!([{"from": "n1", "to": "n2"}]));
    let signals = &first["qualitative_signals"];
    assert_eq!((&signals["source"], &signals["knowledge_ceiling"]["says_dont_know"]), (&json!("llm"), &json!(true)));
    assert_eq!((&signals["uncertainty"]["kind"], &signals["note"]), (&json!("productive"), &json!("curious")));
    assert_eq!(first["question"], "What makes the foam matter to you?");
    // The "don't know" was exploratory by the model's reading: deepening was not vetoed for it.
    let decision = lines[0]["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap();
    let deepen = decision["breakdown"]["candidates"].as_array().unwrap().iter().find(|c| c["strategy"] == "deepen");
    let ceiling = &deepen.expect("deepen on the newest concept")["vetoes"][0];
    assert_eq!((&ceiling["scorer"], &ceiling["is_veto"]), (&json!("knowledge_ceiling"), &json!(false)));
    assert_eq!(ceiling["signals"]["source"], "llm");
    // Turn 2: the heuristic grew the graph, the rules read the signals.
    assert_eq!(labels(second)[2..], [json!("cheaper")], "`better` is a filler word, no concept");
    assert_eq!(second["qualitative_signals"]["source"], "rules");
    assert_eq!(second["question"], "And the price?");
    assert_eq!(second["mentions"], json!({"price": 1, "texture": 1}));
    // What the models were asked.
    let asked = mock.seen_kind("judge");
    assert_eq!(asked.len(), 6);
    assert_eq!(asked[0]["model"], "gpt-4o-mini");
    assert!(asked[0]["messages"][0]["content"].as_str().unwrap().contains("Answer: I don't know why, but oat milk"));
    let chat = mock.seen_kind("chat");
    assert!(chat[0]["messages"][0]["content"].as_str().unwrap().contains("studying oat milk in coffee"));
    assert!(chat[0]["messages"][1]["content"].as_str().unwrap().contains("Strategy: "));
}

#[test]
fn the_interview_compares_by_embeddings_when_asked_and_by_words_when_they_fail() {
    let mock = MockLlm::start();
    let signals = json!({"emotional": {"intensity": 0.8, "trajectory": "steady"}, "note": "fine"}).to_string();
    let morning = json!({"concepts": ["morning"], "links": []}).to_string();
    let asked = "What gets you going at the start of the day?";
    // Turns 1 and 2: the embeddings endpoint answers (queued, since turn 3's failures queue after).
    for question in [asked, "And the price?"] {
        mock.judge(Reply::Content(morning.clone())).judge(Reply::Content(signals.clone()));
        mock.embedding(Reply::Content(String::new())).chat(Reply::Content(question.into()));
    }
    // Turn 3: the embeddings endpoint is down.
    mock.judge(Reply::Content(morning.clone()))
        .judge(Reply::Content(signals.clone()))
        .chat(Reply::Content("Thanks!".into()));
    for _ in 0..3 {
        mock.embedding(Reply::Status(500, "down".into()));
    }
    // The question asked means what deepening on "morning" would ask, in other words.
    let pair = |x: f32, y: f32| (0..26).map(|i| [x, y].get(i).copied().unwrap_or(0.0)).collect::<Vec<f32>>();
    mock.vector("why morning matters", &pair(0.6, 0.8)).vector(asked, &pair(0.8, 0.6));
    let (_dir, file) = temp_file("answers.yaml", "- I drink it every morning.\n- Mornings are slow.\n- Yes.\n");
    let out = ruleweave(&repo_root())
        .args(["run", "interview", "--events", "--set", "similarity=embedding", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "2")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let decision = |n: usize| {
        lines[n]["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap()["breakdown"].clone()
    };
    let deepen = |b: &Value| {
        let c = b["candidates"].as_array().unwrap().iter().find(|c| c["strategy"] == "deepen").unwrap().clone();
        c["vetoes"].as_array().unwrap().iter().find(|v| v["scorer"] == "recent_redundancy").cloned()
    };
    let (first, second, third) = (decision(0), decision(1), decision(2));
    assert_eq!(first["similarity"]["kind"], "embedding", "{}", first["similarity"]);
    assert_eq!(first["similarity"]["model"], "text-embedding-3-small");
    // Turn 2: the paraphrase is caught (cos 0.96 > 0.8); by words the two share nothing.
    assert_eq!(second["similarity"]["kind"], "embedding");
    let v = deepen(&second).expect("deepen reached recent_redundancy");
    assert_eq!((&v["is_veto"], &v["signals"]["kind"]), (&json!(true), &json!("embedding")), "{v}");
    assert_eq!(lines[1]["state"]["question"], "And the price?");
    // What was sent: focus descriptions and recent questions, each text once per provider.
    let sent = mock.seen_kind("embeddings");
    let inputs = |i: usize| {
        sent[i]["input"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert!(inputs(0).contains(&"why morning matters".to_owned()), "{:?}", inputs(0));
    assert!(inputs(1).contains(&asked.to_owned()), "{:?}", inputs(1));
    assert!(!inputs(1).contains(&"why morning matters".to_owned()), "embedded in turn 1, cached since");
    assert!(second["similarity"]["cached"].as_u64().unwrap() > 0, "{}", second["similarity"]);
    // Turn 3: three 500s; the turn goes on comparing words and says why.
    assert_eq!(third["similarity"]["kind"], "lexical");
    assert!(third["similarity"]["why"].as_str().unwrap().contains("500"), "{}", third["similarity"]);
    assert_eq!(lines[2]["state"]["question"], "Thanks!");
    let failed =
        lines[2]["events"].as_array().unwrap().iter().find(|e| e["type"] == "llm" && e["embedded"].is_object());
    assert!(failed.unwrap()["error"].is_string());
}

#[test]
fn play_opens_with_the_first_question_and_explains_how_texts_were_compared() {
    for (set, says) in [
        ("similarity=embedding", "similarity by embeddings (text-embedding-3-small (stand-in), "),
        ("similarity=lexical", "similarity by words"),
    ] {
        let mut cmd = ruleweave(&repo_root());
        cmd.args(["play", "interview", "--explain", "--no-watch", "--store", "memory", "--set", set]);
        let out = run_with_stdin(cmd, "/bogus\nI love the foam in the morning.\n/quit\n");
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(&format!("choose: exploratory phase (turn count 1), {says}")), "{text}");
        // The opening question and what to type come before the first prompt; an unknown command
        // is not an answer.
        let opening = "interview (stand-in) › Let's talk about oat milk in coffee. What comes to mind first?\n  \
                       type: Answer the question in your own words (\"I don't know\" is an answer too).\n> ";
        assert!(text.contains(opening), "{text}");
        assert!(text.contains("unknown command /bogus; commands: /why"), "{text}");
        assert!(text.contains("turn 1, exploratory"), "the answer after it is turn 1: {text}");
    }
}

#[test]
fn play_keeps_its_database_under_the_root_and_why_waits_for_a_turn() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let elsewhere = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ruleweave"));
    cmd.current_dir(elsewhere.path()).env("RULEWEAVE_LLM", "standin").env_remove("RULEWEAVE_STORE");
    cmd.arg("--root").arg(root.path()).args(["play", "pirate"]);
    let out = support::run_with_stdin(cmd, "/why\nAhoy!\n/quit\n");
    let text = support::stdout(&out);
    assert!(text.contains("nothing to explain yet: no turn has been played"), "{text}");
    assert!(text.contains("pirate (stand-in) ›"), "{text}");
    assert!(root.path().join("ruleweave.db").is_file(), "the default database is under --root");
    assert!(!elsewhere.path().join("ruleweave.db").exists(), "not where the command ran");
}

/// `play PACK` with `lines` typed (piped: plain text), its screen after the banner.
fn played(pack: &str, set: &[&str], lines: &str) -> String {
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", pack, "--store", "memory", "--no-watch"]);
    for s in set {
        cmd.args(["--set", s]);
    }
    let out = run_with_stdin(cmd, lines);
    let text = stdout(&out);
    let start = text.find("/quit\n").map_or(0, |i| i + "/quit\n".len());
    text[start..].to_owned()
}

#[test]
fn every_pack_plays_in_the_terminal_as_a_person_sees_it() {
    // The pirate: what to type, the captain's words, then where the merit stands.
    let screen = played("pirate", &[], "Ahoy, captain! I am the harbour master's daughter.\n");
    let mut lines = screen.lines();
    assert_eq!(
        lines.next().unwrap(),
        "  type: Say anything to the captain, in English or Polish: flattery, tales, bribes, threats… whatever wins his treasure."
    );
    let reply = lines.next().unwrap();
    assert!(reply.starts_with("> pirate (stand-in) › ") && !reply.ends_with("continue"), "{screen}");
    assert!(lines.next().unwrap().starts_with("  merit "), "{screen}");

    // The interview: its first question before the first answer, then the next with the choice.
    let screen = played("interview", &[], "I like oat milk because it foams.\n");
    assert!(screen.starts_with("interview (stand-in) › Let's talk about oat milk in coffee."), "{screen}");
    assert!(screen.contains("?\n  type: Answer the question in your own words"), "{screen}");
    assert!(screen.contains("\n  turn 1, exploratory: "), "{screen}");

    // The party: the lobby opens on its first question; `all` plays a round, `+gus` only joins.
    let screen = played("party", &["players=ana,bo,cy,dee"], "all\n+gus\n");
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[0].starts_with("party (stand-in) › Never have I ever"), "{screen}");
    assert!(lines[1].starts_with("  round 1/20 · "), "{screen}");
    assert_eq!(lines[2], "  type: 4/6, all, none, names of those who have; +name joins, -name leaves", "{screen}");
    assert!(lines[4].starts_with("  round 2/20 · safe (intensity 2) · B 0.15 + P 0.04"), "{screen}");
    let question = lines[3].trim_start_matches("> party (stand-in) › ");
    assert_eq!(
        lines[5],
        format!("> party (stand-in) › (now at the table: ana, bo, cy, dee, gus; the question stands) {question}")
    );
    assert!(lines[6].starts_with("  round 2/20 · ") && lines[6].ends_with("· 5 players"), "{screen}");

    // The designer: what to type, then the design it built.
    let screen = played("designer", &[], "the chambers of the heart\n");
    assert!(screen.starts_with("designer (stand-in) › Type what the game should teach"), "{screen}");
    assert!(screen.contains("› Explore the chambers of the heart: 2 scene(s), 160 points"), "{screen}");
    assert!(screen.contains("\n  complete · attempts 1 · validation 1.0"), "{screen}");

    // The debate at a pause: the status says what to type; a note goes to the next round.
    let screen =
        played("debate", &["rounds=2", "pause=rounds", "fact_check=off"], "start\nAddress the costs, please.\n");
    assert!(screen.contains("paused: type a note for the next round's debaters, or `continue`"), "{screen}");
    assert!(screen.contains("As the moderator asks, on \"Address the costs, please.\""), "{screen}");
    assert!(!screen.contains("PHASE") && !screen.contains("failed"), "{screen}");
}

// ---- simulate ----------------------------------------------------------------------------------------

fn simulate(root: &std::path::Path, args: &[&str]) -> (std::process::Output, Value) {
    let out = ruleweave(root).args(["simulate"]).args(args).arg("--json").output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, report)
}

/// `simulate pirate ARGS --json` in `root` against the model server, with `prices` as the
/// root's `ruleweave.toml`: the report.
fn simulate_priced(root: &std::path::Path, mock: &MockLlm, prices: &str, args: &[&str]) -> Value {
    std::fs::write(root.join("ruleweave.toml"), prices).unwrap();
    let out = ruleweave(root)
        .args(["simulate", "pirate", "--json"])
        .args(args)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn share(report: &Value, player: &str, outcome: &str) -> f64 {
    let p = report["players"].as_array().unwrap().iter().find(|p| p["name"] == player).unwrap();
    p["outcomes"][outcome]["share"].as_f64().unwrap_or(0.0)
}

/// The pack's scripted players play, and the report says how their games ended in the
/// contract's shape; the same seed gives the same report, a harder captain fewer wins.
#[test]
fn simulate_reports_how_the_players_games_end() {
    let (out, easy) = simulate(&repo_root(), &["pirate", "--games", "12", "--set", "difficulty=easy", "--seed", "s1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        (&easy["pack"], &easy["games"], &easy["seed"], &easy["max_turns"], &easy["against"]),
        (&json!("pirate"), &json!(12), &json!("s1"), &json!(20), &Value::Null)
    );
    let names: Vec<&str> = easy["players"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["flatterer", "liar", "rambler"]);
    // The flatterer never wins the easy captain over: every game is stopped by the cap, and is
    // unfinished, not the pack's `continue`; no game finished, so no turns to finish.
    let flatterer = &easy["players"][0];
    assert_eq!(flatterer["outcomes"].as_object().unwrap().keys().collect::<Vec<_>>(), ["unfinished"], "{flatterer}");
    assert_eq!((&flatterer["turns"]["median"], &flatterer["turns_histogram"]), (&Value::Null, &json!([])));
    let liar = &easy["players"][1];
    // How many finished games took each number of turns: the unfinished left out, the longest
    // the last entry.
    let histogram: Vec<u64> = liar["turns_histogram"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    let finished = 12.0 * (1.0 - share(&easy, "liar", "unfinished"));
    assert_eq!(histogram.iter().sum::<u64>() as f64, finished.round(), "{liar}");
    assert!(histogram.last() > Some(&0) && histogram.len() as f64 >= liar["turns"]["p90"].as_f64().unwrap(), "{liar}");
    let total: f64 = liar["outcomes"].as_object().unwrap().values().map(|o| o["share"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-9, "{liar}");
    for o in liar["outcomes"].as_object().unwrap().values() {
        assert!(
            o["low"].as_f64().unwrap() <= o["share"].as_f64().unwrap()
                && o["share"].as_f64().unwrap() <= o["high"].as_f64().unwrap()
        );
    }
    assert!(
        liar["turns"]["median"].as_f64().is_some() && liar["track"]["merit_score"]["p90"].as_f64().is_some(),
        "{liar}"
    );
    let (_, again) = simulate(&repo_root(), &["pirate", "--games", "12", "--set", "difficulty=easy", "--seed", "s1"]);
    assert_eq!(again, easy, "the same seed, the same report");
    // The table says the cap where the games stopped at it.
    let out = ruleweave(&repo_root())
        .args(["simulate", "pirate", "--games", "12", "--set", "difficulty=easy", "--seed", "s1"])
        .output()
        .unwrap();
    let table = support::stdout(&out);
    let flatterer = table.split("liar (12 games)").next().unwrap();
    let row = |label: &str, rest: &str| format!("\n  {label:<26} {rest}");
    assert!(flatterer.contains(&row("unfinished (cap 20 turns)", "   100%")), "{table}");
    assert!(flatterer.contains(&row("turns to finish", "median -, p10 -, p90 -")), "{table}");
    assert!(table.contains(&row("cost per game", "free (stand-in)")), "{table}");
    let (_, hard) = simulate(&repo_root(), &["pirate", "--games", "12", "--set", "difficulty=hard", "--seed", "s1"]);
    let won = |r: &Value| 1.0 - share(r, "liar", "unfinished");
    assert!(won(&easy) > won(&hard), "easy {} against hard {}", won(&easy), won(&hard));
    assert!(won(&easy) > 0.5, "the varied liar beats an easy captain: {}", won(&easy));
}

/// `--against DIR` plays the same games on a second copy of the rules: a captain who asks more
/// of the liar (the easy threshold raised from 40 to 60) gives in less often, and the report
/// says the difference is beyond noise; the same rules on both sides differ by nothing.
#[test]
fn simulate_against_another_copy_says_what_a_rule_change_did() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let manifest = root.path().join("config/pirate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let raised = text.replace("thresholds: {easy: 40,", "thresholds: {easy: 60,");
    assert_ne!(raised, text, "the pirate's thresholds moved: update this test");
    std::fs::write(&manifest, raised).unwrap();
    let shipped = repo_root();
    let args = ["pirate", "--games", "12", "--player", "liar", "--set", "difficulty=easy", "--against"];
    let page = root.path().join("report.html");
    let html = ["--html", page.to_str().unwrap()];
    let (out, report) = simulate(root.path(), &[&args[..], &[shipped.to_str().unwrap()], &html].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let against = &report["against"];
    assert_eq!(against["root"], json!(shipped.display().to_string()));
    assert_eq!(against["players"][0]["name"], "liar");
    assert_eq!(against["players"][0]["games"], 12);
    let won = |r: &Value| share(r, "liar", "won_agreement");
    assert!(won(&report) < won(against), "raised {} against shipped {}", won(&report), won(against));
    let diff = against["differences"].as_array().unwrap();
    let agreement = diff.iter().find(|d| d["outcome"] == "won_agreement").expect("a difference for the wins");
    assert_eq!(agreement["player"], "liar");
    assert!((agreement["delta"].as_f64().unwrap() - (won(&report) - won(against))).abs() < 1e-9, "{agreement}");
    assert!(agreement["high"].as_f64().unwrap() < 0.0, "{agreement}");
    assert_eq!(agreement["beyond_noise"], true, "{agreement}");
    // What differs between the copies: the one value edited, nothing else.
    assert_eq!(
        against["changes"],
        json!([{"file": "config/pirate.yaml", "key": "params.thresholds.easy", "ours": 60, "theirs": 40}])
    );
    // And every changed line, as a unified diff per file.
    let diffs = against["diff"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert_eq!(diffs[0]["file"], "config/pirate.yaml");
    let unified = diffs[0]["unified"].as_str().unwrap();
    let header = format!("--- config/pirate.yaml (these rules)\n+++ config/pirate.yaml ({})\n@@ ", shipped.display());
    assert!(unified.starts_with(&header), "{unified}");
    let changed = "-  thresholds: {easy: 60, medium: 60, hard: 80}\n+  thresholds: {easy: 40, medium: 60, hard: 80}\n";
    assert!(unified.contains(changed), "{unified}");
    assert_eq!(unified.lines().filter(|l| l.starts_with(['-', '+'])).count(), 4, "two headers, one line each way");
    // The merit the games end on, game by game (the same moves on both): the median difference
    // with the sign test's interval; a captain who gives in later lets the liar climb higher.
    let tracked = against["tracked"].as_array().unwrap();
    let merit = tracked.iter().find(|t| t["field"] == "merit_score").expect("a merit difference");
    assert_eq!((&merit["player"], &merit["games"]), (&json!("liar"), &json!(12)), "{merit}");
    let (delta, low, high) =
        (merit["delta"].as_f64().unwrap(), merit["low"].as_f64().unwrap(), merit["high"].as_f64().unwrap());
    assert!(low <= delta && delta <= high && delta > 0.0, "{merit}");
    assert!(tracked.iter().any(|t| t["field"] == "turns"), "{tracked:?}");

    // Per turn, over the games still going: the liar's merit climbs from where turn 1 left it.
    let per_turn = report["players"][0]["track"]["merit_score"]["per_turn"].as_array().unwrap();
    let most = report["players"][0]["turns"]["p90"].as_f64().unwrap();
    assert!(per_turn.len() as f64 >= most && !per_turn.is_empty(), "{per_turn:?}");
    for t in per_turn {
        assert!(t["p10"].as_f64() <= t["median"].as_f64() && t["median"].as_f64() <= t["p90"].as_f64(), "{t}");
    }
    assert!(per_turn[0]["median"].as_f64() < per_turn.last().unwrap()["median"].as_f64(), "{per_turn:?}");

    // The same report as one page a designer opens: both copies' charts, the difference, nothing fetched.
    let page = std::fs::read_to_string(&page).expect("the HTML report");
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(page.contains("<h1>pirate: 12 games per player</h1>"), "{page}");
    assert!(page.contains(&format!(
        "these rules · <span class=key style=\"background:#ea580c\"></span> {}",
        shipped.display()
    )));
    assert!(page.contains("<h2>liar <small>(12 games)</small></h2>"));
    assert!(page.contains("<h3>merit_score by turn (median, p10–p90)</h3>"));
    let row = format!("<tr><td>won_agreement</td><td>{:+.1} points</td>", agreement["delta"].as_f64().unwrap() * 100.0);
    assert!(page.contains(&row) && page.contains("<td class=beyond>beyond noise</td>"), "{page}");
    assert_eq!(page.matches("<svg ").count(), 3, "outcomes, turns and merit_score");
    assert!(page.contains("<td>params.thresholds.easy</td><td><code>60</code></td><td><code>40</code></td>"), "{page}");
    assert!(page.contains("<tr><td>merit_score (median)</td>"), "{page}");
    // The merit chart draws the easy captain's threshold on these rules, 60.
    assert!(page.contains("threshold 60</text>"), "{page}");
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="), "self-contained");

    // The table a person reads says the same: the value that differs, the cap, the merit's
    // difference with its interval.
    let out = ruleweave(root.path()).args(["simulate"]).args(args).arg(&shipped).output().unwrap();
    let table = support::stdout(&out);
    assert!(table.contains("12 games per player, each played to its end or 20 turns"), "{table}");
    assert!(table.contains("\n  config/pirate.yaml params.thresholds.easy: 60 → 40\n"), "{table}");
    assert!(table.contains(&format!("\n\n{unified}")), "the diff under what differs: {table}");
    let row = table.lines().find(|l| l.contains("merit_score (median)")).expect(&table);
    let num = |x: f64| ruleweave::text::decimals(x, 2);
    assert!(
        row.contains(&format!("+{}", num(delta))) && row.contains(&format!("({}–{})", num(low), num(high))),
        "{row}"
    );

    // The same rules on both sides: every difference is zero and within noise.
    let (_, same) = simulate(&shipped, &[&args[..], &[shipped.to_str().unwrap()]].concat());
    for d in same["against"]["differences"].as_array().unwrap() {
        assert_eq!((&d["delta"], &d["beyond_noise"]), (&json!(0.0), &json!(false)), "{d}");
    }
}

/// Games played at once give the report a game at a time gives; `--record` keeps each game in
/// the store under its id, to open with `replay`, and a second run with the seed replaces them.
#[test]
fn simulate_records_its_games_and_reports_the_same_at_any_jobs() {
    let args = ["pirate", "--games", "6", "--player", "liar", "--set", "difficulty=easy", "--seed", "j"];
    let (_, one) = simulate(&repo_root(), &[&args[..], &["--jobs", "1"]].concat());
    let (out, three) = simulate(&repo_root(), &[&args[..], &["--jobs", "3"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(one, three, "the same games, however many at once");

    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("sim.db").display());
    for _ in 0..2 {
        let out = ruleweave(&repo_root())
            .args(["simulate"])
            .args(args)
            .arg("--record")
            .env("RULEWEAVE_STORE", &store)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains("ruleweave replay --session sim-j-liar-0"), "{}", stdout(&out));
    }
    let out =
        ruleweave(&repo_root()).args(["replay", "--session", "sim-j-liar-5", "--store", &store]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("0 of ") && last.ends_with(" turn(s) changed"), "{text}");
    let played: f64 = last["0 of ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!((1.0..=20.0).contains(&played), "a game of the pack's 20 turns at most: {text}");
}

/// Tokens come from what the model server reported; with `[prices]` for every model called,
/// the report says what a game cost, and without a price for one, which model lacks it.
#[test]
fn simulate_counts_the_tokens_a_game_spent_and_prices_them() {
    let mock = MockLlm::start();
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let args = ["--games", "2", "--player", "liar", "--set", "difficulty=easy"];
    let run = |prices: &str| simulate_priced(root.path(), &mock, prices, &args)["players"][0].clone();
    // The judge (gpt-4o-mini) and the easy captain (gpt-3.5-turbo) each get 11 prompt and 7
    // completion tokens a call from this server, one call each a turn; the judge's 10 never
    // lets the liar win, so every game runs its 20 turns.
    let liar = run("[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n");
    assert_eq!(liar["outcomes"]["unfinished"]["share"], 1.0, "{liar}");
    assert_eq!(liar["track"]["merit_score"]["per_turn"].as_array().unwrap().len(), 20, "{liar}");
    assert_eq!(liar["tokens"], json!({"median": 720.0, "p10": 720.0, "p90": 720.0}), "{liar}");
    assert_eq!((&liar["cost"], &liar["unpriced"]), (&Value::Null, &json!(["gpt-3.5-turbo"])), "{liar}");
    let liar = run(
        "[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n\"gpt-3.5-turbo\" = { input = 0.5, output = 1.5 }\n",
    );
    let per_turn = (11.0 * 0.15 + 7.0 * 0.60 + 11.0 * 0.5 + 7.0 * 1.5) / 1e6;
    let cost = liar["cost"]["median"].as_f64().unwrap();
    assert!((cost - 20.0 * per_turn).abs() < 1e-12, "{liar}");
    assert!(liar.get("unpriced").is_none(), "{liar}");
}

/// `--player model:smuggler`: the pack's `smuggler` profile plays, its persona as the system
/// message and the captain's last words as the user's; its answer is the move, and its calls
/// are counted in what a game cost.
#[test]
fn simulate_lets_a_model_play_through_its_persona() {
    let mock = MockLlm::start();
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let prices = "[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n";
    let report = simulate_priced(root.path(), &mock, prices, &["--games", "1", "--player", "model:smuggler"]);
    let smuggler = &report["players"][0];
    assert_eq!((&smuggler["name"], &smuggler["games"]), (&json!("model:smuggler"), &json!(1)), "{report}");
    // The player's requests: its profile's model and temperature, its persona, the captain's words.
    let asked: Vec<Value> = mock
        .seen_kind("chat")
        .into_iter()
        .filter(|b| b["messages"][0]["content"].as_str().unwrap_or("").starts_with("You are a smooth-talking smuggler"))
        .collect();
    assert_eq!(asked.len(), 20, "one move a turn, 20 turns (the judge's 10 never lets it win)");
    assert_eq!((&asked[0]["model"], &asked[0]["temperature"]), (&json!("gpt-4o-mini"), &json!(0.9)));
    assert_eq!(asked[1]["messages"][1], json!({"role": "user", "content": "Arrr, no."}), "the captain's reply");
    let persona = asked[1]["messages"][0]["content"].as_str().unwrap();
    assert!(persona.contains("You: Arrr, no.\nCaptain: Arrr, no."), "the conversation so far: {persona}");
    // Judge, captain and player: three calls a turn of 11 + 7 tokens, all priced.
    assert_eq!(smuggler["tokens"]["median"], 20.0 * 3.0 * 18.0, "{smuggler}");
    let cost = smuggler["cost"]["median"].as_f64().unwrap();
    assert!((cost - 60.0 * (11.0 * 0.15 + 7.0 * 0.60) / 1e6).abs() < 1e-12, "{smuggler}");

    let (out, _) = simulate(&repo_root(), &["pirate", "--games", "1", "--player", "model:judge"]);
    assert!(
        stderr(&out).contains("`model:judge` needs its persona: write prompts/pirate/players/judge.j2"),
        "{}",
        stderr(&out)
    );
    let (out, _) = simulate(&repo_root(), &["pirate", "--games", "1", "--player", "model:nobody"]);
    assert!(stderr(&out).contains("pack `pirate` has no `llm:` profile `nobody`"), "{}", stderr(&out));
}

/// A brave table reaches the party's top tone only when NSFW is on.
#[test]
fn a_brave_table_reaches_the_top_tone_only_with_nsfw() {
    let (out, off) = simulate(&repo_root(), &["party", "--games", "4", "--player", "brave", "--set", "max_rounds=12"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(share(&off, "brave", "freaky"), 0.0, "{off}");
    let (_, on) = simulate(
        &repo_root(),
        &["party", "--games", "4", "--player", "brave", "--set", "max_rounds=12", "--set", "nsfw=true"],
    );
    assert!(share(&on, "brave", "freaky") > 0.0, "{on}");
}

/// A player script that fails stops its own games with a clear message; the others play on.
#[test]
fn a_failing_player_stops_its_games_and_the_others_go_on() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    std::fs::write(
        root.path().join("scripts/pirate/players/broken.rhai"),
        "fn play(view, state) { throw \"no idea what to say\"; }",
    )
    .unwrap();
    let (out, report) = simulate(root.path(), &["pirate", "--games", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let broken = &report["players"][0];
    assert_eq!(broken["name"], "broken");
    assert!(broken["error"].as_str().unwrap().contains("player `broken` failed in game 0"), "{broken}");
    assert!(broken["error"].as_str().unwrap().contains("no idea what to say"), "{broken}");
    assert_eq!(report["players"][1]["games"], 3, "the flatterer played on");
    // A player whose move is no input the pack reads stops too, saying so.
    std::fs::write(root.path().join("scripts/pirate/players/broken.rhai"), "fn play(view, state) { 42 }").unwrap();
    let (out, report) = simulate(root.path(), &["pirate", "--games", "2", "--player", "broken", "--player", "liar"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(report["players"][0]["error"].as_str().unwrap().contains("gave no input the pack reads"), "{report}");
    assert_eq!(report["players"][1]["games"], 2);
    for games in ["0", "100001"] {
        let (out, _) = simulate(&repo_root(), &["pirate", "--games", games]);
        assert!(stderr(&out).contains(&format!("--games is 1 to 100000 per player, not {games}")), "{}", stderr(&out));
    }
    let (out, _) = simulate(&repo_root(), &["pirate", "--games", "1", "--player", "nobody"]);
    assert!(
        stderr(&out).contains("pack `pirate` has no player `nobody` (players: flatterer, liar, rambler)"),
        "{}",
        stderr(&out)
    );
}

// ---- sessions, graph pages, quiet tests, a real terminal ---------------------------------------

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

/// `test` prints its results, not the warnings of the turns it replays; `--verbose` shows them.
#[test]
fn test_keeps_the_log_out_of_its_results_unless_asked() {
    let root = tempfile::tempdir().unwrap();
    let out = ruleweave(root.path()).args(["new", "noisy"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let script = root.path().join("scripts/noisy/noisy.rhai");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, text.replace("fn listen() {\n", "fn listen() {\n    warn(\"the listener is noisy\");\n"))
        .unwrap();
    let out = ruleweave(root.path()).args(["test", "noisy"]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(!stderr(&out).contains("the listener is noisy"), "{}", stderr(&out));
    let out = ruleweave(root.path()).args(["test", "noisy", "--verbose"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("the listener is noisy"), "{}", stderr(&out));
}

/// In a real terminal (a pseudo-terminal, through util-linux's `script`), a line that arrives in
/// one burst with its newline, as a paste does, runs as a typed one: the editor does not ask the
/// terminal to mark pastes (which would keep the newline in the line and wait for another Enter).
#[test]
fn a_pasted_line_runs_like_a_typed_one_in_a_terminal() {
    use std::io::{Read, Write};
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let exe = env!("CARGO_BIN_EXE_ruleweave");
    let mut child = std::process::Command::new("script")
        .args(["-qfec", &format!("{exe} play pirate --store memory --no-watch"), "/dev/null"])
        .current_dir(root.path())
        .env("RULEWEAVE_LLM", "standin")
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut screen = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = screen.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let mut wait_for = |text: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !seen.contains(text) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(bytes) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("the terminal never showed {text:?}: {seen:?}"),
            }
        }
        seen.clone()
    };
    wait_for("type: Say anything to the captain");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"/why\n").unwrap();
    let shown = wait_for("nothing to explain yet");
    assert!(!shown.contains("\x1b[?2004h"), "bracketed paste asked for: {shown:?}");
    stdin.write_all(b"/quit\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// Stepping in the terminal: a breakpoint set by name (a wrong name refused with the graph's
/// nodes), a turn held there, a move refused while it is held, a step at a time, a field set by
/// hand that the rest of the turn sees, then the reply.
#[test]
fn play_steps_through_a_turn() {
    let screen = played(
        "pirate",
        &[],
        "/break generate_respons\n/break after merit_check\nAhoy, captain!\nAnother move\n/set merit_score=95\n/set merit_score=\"high\"\n/step\n/continue\n/break\n",
    );
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(
        lines[1],
        "> ! no node `generate_respons` (nodes: intake, merit_check, generate_response, validate_response, handle_blocked)"
    );
    assert_eq!(lines[2], "> breakpoint after merit_check: a turn stops there (/step, /continue go on)");
    assert_eq!(lines[3], ">   ‖ turn 1 held after merit_check; next: generate_response");
    assert_eq!(lines[5], "> turn 1 is held after merit_check: /step, /continue, /set FIELD=VALUE, /state");
    assert_eq!(lines[6], "> merit_score = 95 (checkpoint 2, an edit)");
    assert_eq!(lines[7], "> ! `merit_score` is an int, not a string");
    assert_eq!(lines[8], ">   ‖ turn 1 held before validate_response", "one step: the reply node ran");
    assert!(lines[10].starts_with("> pirate (stand-in) › "), "{screen}");
    assert_eq!(
        lines[11], "  merit 95/100, needs 60 on medium · state edited at turn 1",
        "the rest of the turn saw the edit, and the status line says it was made by hand: {screen}"
    );
    assert_eq!(lines[13], "> breakpoints: after merit_check", "{screen}");
}
