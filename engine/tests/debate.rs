//! The debate pack: configuration checks, routing in each fact-check mode, the strict loop and
//! its retry limit, fact-checker failures logged (never rejecting), claims verified at once, the
//! transcript and metadata across rounds, pauses, three participants, and a debater's failure.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ruleweave::llm::{BoxFuture, LlmRequest};
use ruleweave::search::{Search, SearchChoice, SearchResult};
use ruleweave::{Engine, Error, ErrorKind, Event, Result};
use serde_json::{Map, Value, json};
use support::{Answering, copy_of, repo_root};

fn prompt(r: &LlmRequest) -> &str {
    &r.messages.iter().rev().find(|m| m.role == "user").unwrap().content
}

/// A debater that says what its side is, with one claim the tests judge by its words.
fn speech(r: &LlmRequest) -> String {
    let side = prompt(r).lines().find_map(|l| l.strip_prefix("SIDE: ")).unwrap().to_owned();
    let retried = prompt(r).contains("FEEDBACK:");
    format!(
        "PHASE 1 - REFLECTION:\nThinking.\n\nPHASE 2 - CRITIQUE:\nWeak points.\n\nPHASE 3 - REFINEMENT:\n\
         The {side} side claims the sky is {}. Jobs grew by 3 percent last year.",
        if retried { "blue" } else { "green" }
    )
}

/// Claims: the speech's sentences. Evidence: "green" is false, anything else true.
fn answer(r: &LlmRequest) -> std::result::Result<String, String> {
    match r.profile.as_str() {
        "debater" => Ok(speech(r)),
        "claims" => {
            let speech = prompt(r).split("SPEECH: ").nth(1).unwrap();
            let claims: Vec<&str> = speech.split(". ").map(str::trim).filter(|s| !s.is_empty()).collect();
            Ok(json!({"claims": claims}).to_string())
        }
        "evidence" => {
            let claim = prompt(r).lines().find_map(|l| l.strip_prefix("CLAIM: ")).unwrap();
            let verdict = if claim.contains("green") { "false" } else { "true" };
            Ok(json!({"verdict": verdict, "reasoning": "checked"}).to_string())
        }
        other => Err(format!("unexpected profile {other}")),
    }
}

fn options(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

async fn debate(engine: &Engine, opts: &[(&str, Value)]) -> (Value, Vec<Event>) {
    let mut s = engine.open("debate", &options(opts)).await.unwrap();
    let r = s.turn(json!("start")).await.unwrap();
    (r.output, r.events)
}

fn speakers(o: &Value) -> Vec<(i64, String, i64)> {
    o["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (t["round"].as_i64().unwrap(), t["speaker"].as_str().unwrap().to_owned(), t["attempt"].as_i64().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn every_configuration_problem_is_listed_at_once() {
    let engine = Engine::builder(repo_root()).build();
    let bad = options(&[("topic", json!("AI?")), ("rounds", json!(0)), ("word_limit", json!(1500))]);
    let err = engine.open("debate", &bad).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Input);
    let text = err.to_string();
    assert!(text.contains("the options have 3 problem(s)"), "{text}");
    assert!(text.contains("option `topic` is \"AI?\", shorter than 10 characters (its min_length)"), "{text}");
    assert!(text.contains("option `rounds` is 0, not between 1 and 10"), "{text}");
    assert!(text.contains("option `word_limit` is 1500, not between 200 and 1000"), "{text}");
}

#[tokio::test]
async fn off_makes_no_fact_check_calls_and_standard_never_loops() {
    let model = Answering::new(answer);
    let engine = Engine::builder(repo_root()).provider(model.clone()).build();
    let (o, events) = debate(&engine, &[("fact_check", json!("off")), ("rounds", json!(2))]).await;
    let order = [(1, "pro".to_owned(), 1), (1, "con".into(), 1), (2, "pro".into(), 1), (2, "con".into(), 1)];
    assert_eq!(speakers(&o), order);
    assert!(model.asked("claims").is_empty() && model.asked("evidence").is_empty());
    assert!(!events.iter().any(|e| matches!(e, Event::Search { .. })));
    assert_eq!(o["transcript"][0]["factuality"], Value::Null);

    let model = Answering::new(answer);
    let engine = Engine::builder(repo_root()).provider(model.clone()).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("standard")), ("rounds", json!(2))]).await;
    assert_eq!(speakers(&o), order, "standard flags false claims; the speech stands");
    assert_eq!(o["rejected_turns"], json!([]));
    assert_eq!(o["transcript"][0]["false_claims"], json!(["The pro side claims the sky is green"]));
    assert_eq!(o["transcript"][0]["factuality"], json!(0.5));
    assert_eq!(o["fact_check_logs"].as_array().unwrap().len(), 8, "two claims per speech");
}

#[tokio::test]
async fn strict_sends_a_false_claim_back_with_feedback_and_keeps_the_fix() {
    let model = Answering::new(answer);
    let engine = Engine::builder(repo_root()).provider(model.clone()).build();
    let (o, events) = debate(&engine, &[("fact_check", json!("strict")), ("rounds", json!(1))]).await;
    assert_eq!(speakers(&o), [(1, "pro".to_owned(), 2), (1, "con".into(), 2)]);
    assert_eq!(o["rejected_turns"].as_array().unwrap().len(), 2);
    assert_eq!(o["rejected_turns"][0]["false_claims"], json!(["The pro side claims the sky is green"]));
    assert_eq!(o["transcript"][0]["factuality"], json!(1.0));
    assert_eq!(o["transcript"][0]["retries"], json!(1));
    let debater = model.asked("debater");
    assert_eq!(debater.len(), 4);
    assert!(prompt(&debater[1]).contains("FEEDBACK: The fact checker found these claims false:"));
    assert!(prompt(&debater[1]).contains("- The pro side claims the sky is green"));
    // The route went back to the speaker, then on to the next.
    let routes: Vec<Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            Event::Route { from, to } if from == "judge" => Some(to.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(routes, [vec!["speak"], vec!["speak"], vec!["speak"], vec!["round_transition"]]);
}

#[tokio::test]
async fn strict_gives_up_after_three_retries_and_marks_the_speech() {
    // A debater who never fixes the claim: four attempts, three sent back, the last kept.
    let model = Answering::new(|r| match r.profile.as_str() {
        "debater" => Ok(speech(r).replace("blue", "green")),
        _ => answer(r),
    });
    let engine = Engine::builder(repo_root()).provider(model.clone()).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("strict")), ("rounds", json!(1))]).await;
    assert_eq!(speakers(&o), [(1, "pro".to_owned(), 4), (1, "con".into(), 4)]);
    let pro_rejected = o["rejected_turns"].as_array().unwrap().iter().filter(|r| r["speaker"] == "pro").count();
    assert_eq!(pro_rejected, 3);
    assert_eq!(o["transcript"][0]["kept_after_max_retries"], json!(true));
    assert_eq!(o["transcript"][0]["retries"], json!(3));
    assert_eq!(model.asked("debater").len(), 8);
    assert_eq!(o["metadata"]["stats"]["sides"]["pro"]["retries"], json!(3));
}

/// A search engine that always fails.
struct Down;

impl Search for Down {
    fn name(&self) -> &str {
        "down"
    }

    fn search<'a>(&'a self, _: &'a str, _: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>> {
        Box::pin(std::future::ready(Err(Error::new(ErrorKind::Llm, "tavily: HTTP 500: overloaded"))))
    }
}

#[tokio::test]
async fn a_fact_checker_failure_is_logged_and_never_rejects() {
    let model = Answering::new(answer);
    let engine =
        Engine::builder(repo_root()).provider(model.clone()).search(SearchChoice::Engine(Arc::new(Down))).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("strict")), ("rounds", json!(1))]).await;
    assert_eq!(speakers(&o), [(1, "pro".to_owned(), 1), (1, "con".into(), 1)], "nothing is sent back");
    assert!(o["fact_check_logs"].as_array().unwrap().iter().all(|c| c["verdict"] == "unverifiable"));
    let errors = o["metadata"]["fact_check_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 4);
    assert!(errors[0]["error"].as_str().unwrap().contains("tavily: HTTP 500: overloaded"), "{}", errors[0]);
    assert!(model.asked("evidence").is_empty(), "no verdict without evidence");

    // The claim extractor failing: no claims, logged, the speech stands.
    let model = Answering::new(|r| if r.profile == "claims" { Err("HTTP 429".into()) } else { answer(r) });
    let engine = Engine::builder(repo_root()).provider(model).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("strict")), ("rounds", json!(1))]).await;
    assert_eq!(speakers(&o).len(), 2);
    let errors = o["metadata"]["fact_check_errors"].as_array().unwrap();
    assert!(errors[0]["error"].as_str().unwrap().starts_with("claim extraction failed"), "{}", errors[0]);
}

/// A search engine that answers only once `want` searches are waiting at the same time.
struct Together {
    want: usize,
    waiting: tokio::sync::watch::Sender<usize>,
}

impl Search for Together {
    fn name(&self) -> &str {
        "together"
    }

    fn search<'a>(&'a self, query: &'a str, _: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>> {
        Box::pin(async move {
            self.waiting.send_modify(|n| *n += 1);
            let mut rx = self.waiting.subscribe();
            let all = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|n| *n >= self.want)).await;
            if all.is_err() {
                return Err(Error::new(ErrorKind::Llm, "the searches were not made at the same time"));
            }
            Ok(vec![SearchResult {
                title: query.into(),
                url: "https://example.org".into(),
                content: query.into(),
                score: 1.0,
            }])
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speechs_claims_are_verified_at_the_same_time() {
    // Five claims in one speech: the searches answer only when all five wait together.
    let model = Answering::new(|r| match r.profile.as_str() {
        "claims" => Ok(json!({"claims": ["a 1", "b 2", "c 3", "d 4", "e 5", "f 6"]}).to_string()),
        _ => answer(r),
    });
    let search = Arc::new(Together { want: 5, waiting: tokio::sync::watch::channel(0).0 });
    let engine = Engine::builder(repo_root()).provider(model).search(SearchChoice::Engine(search.clone())).build();
    let mut s = engine.open("debate", &options(&[("rounds", json!(1))])).await.unwrap();
    let r = s.turn(json!("start")).await.unwrap();
    let logs = r.output["fact_check_logs"].as_array().unwrap();
    assert_eq!(logs.len(), 10, "at most five claims per speech");
    assert!(logs.iter().all(|c| c["verdict"] == "true" && c.get("error").is_none()), "{logs:?}");
    let searches: Vec<&str> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Search { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(searches[..5].iter().filter(|n| n.starts_with("verify[")).count(), 5);
}

#[tokio::test]
async fn the_transcript_and_metadata_accumulate_across_rounds() {
    let model = Answering::new(answer);
    let engine = Engine::builder(repo_root()).provider(model).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("standard")), ("rounds", json!(3))]).await;
    assert_eq!(o["transcript"].as_array().unwrap().len(), 6);
    assert_eq!(o["current_round"], json!(3));
    assert_eq!(o["is_debate_complete"], json!(true));
    let m = &o["metadata"];
    // Merged from several nodes: the moderator's announcement, the transition's stats and winner.
    assert!(m["announcement"].as_str().unwrap().starts_with("Round 3 of 3"));
    assert_eq!(m["rounds_completed"], json!(3));
    assert_eq!(m["status"], json!("complete"));
    assert_eq!(m["stats"]["speeches"], json!(6));
    assert_eq!(m["stats"]["factuality"], json!({"pro": 0.5, "con": 0.5}));
    assert_eq!(m["winner"], json!("draw"), "no judge here: by the rule, equal factuality is a draw");
    assert_eq!(m["winner_by"], json!("rule"));
    let t = &o["transcript"][0];
    assert_eq!(t["reflection"], json!("Thinking."));
    assert_eq!(t["critique"], json!("Weak points."));
    assert_eq!(t["word_count"], json!(15));
    assert_eq!(t["format_followed"], json!(true));
}

#[tokio::test]
async fn models_personas_and_the_word_limit_per_side() {
    let long = "word ".repeat(400);
    let model = Answering::new(move |r| match r.profile.as_str() {
        "debater" if prompt(r).contains("SIDE: con") => Ok(long.clone()),
        _ => answer(r),
    });
    let engine = Engine::builder(repo_root()).provider(model.clone()).build();
    let opts = [
        ("fact_check", json!("off")),
        ("rounds", json!(1)),
        ("pro_model", json!("claude-sonnet")),
        ("pro_persona", json!("a labour economist")),
        ("word_limit", json!(200)),
    ];
    let (o, _) = debate(&engine, &opts).await;
    let asked = model.asked("debater");
    assert_eq!(asked[0].model, "claude-sonnet");
    assert_eq!(asked[1].model, "gpt-4o", "the profile's model when the side has none");
    assert!(asked[0].messages[0].content.contains("Speak as a labour economist."));
    let con = &o["transcript"][1];
    assert_eq!(con["format_followed"], json!(false), "a reply without the sections is the speech");
    assert_eq!((&con["word_count"], &con["truncated_from"]), (&json!(200), &json!(400)));
    assert_eq!(o["transcript"][0]["model"], json!("claude-sonnet"));
}

#[tokio::test]
async fn three_participants_speak_in_the_order_the_manifest_gives() {
    let root = copy_of(&["config/debate.yaml", "scripts/debate", "prompts/debate"]);
    let manifest = root.path().join("config/debate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let edited = text.replace(
        "persona_option: con_persona}\n",
        "persona_option: con_persona}\n    - {id: skeptic, side: neither}\n",
    );
    assert_ne!(edited, text);
    std::fs::write(&manifest, edited).unwrap();
    let model = Answering::new(answer);
    let engine = Engine::builder(root.path()).provider(model).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("standard")), ("rounds", json!(2))]).await;
    let who: Vec<String> = speakers(&o).into_iter().map(|(r, s, _)| format!("{r}:{s}")).collect();
    assert_eq!(who, ["1:pro", "1:con", "1:skeptic", "2:pro", "2:con", "2:skeptic"]);
    assert!(o["metadata"]["stats"]["sides"]["neither"].is_object());
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_paused_debate_goes_on_from_where_it_stopped_even_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("d.db").display());
    let make = || async { Engine::builder(repo_root()).store(ruleweave::store::open(&url).await.unwrap()).build() };
    let engine = make().await;
    let opts = options(&[("rounds", json!(2)), ("pause", json!("rounds"))]);
    let mut s = engine.open("debate", &opts).await.unwrap();
    let first = s.turn(json!("start")).await.unwrap();
    let paused = first.paused.clone().expect("the first round pauses");
    assert_eq!(
        (paused.after.as_deref().unwrap_or_default(), paused.next.clone()),
        ("round_transition", vec!["moderator".to_owned()])
    );
    assert!(first.events.iter().any(|e| matches!(e, Event::Paused { .. })));
    assert_eq!(first.output["current_round"], json!(1));
    let id = s.id().to_owned();
    drop(s);
    drop(engine);

    // Another engine on the same store: the pause point is in the session's checkpoint.
    let engine = make().await;
    let mut s = engine.resume(&id).await.unwrap();
    assert_eq!(s.paused().map(|p| p.next), Some(vec!["moderator".to_owned()]));
    let second = s.turn(json!("continue")).await.unwrap();
    assert_eq!(second.paused, None, "the last round does not pause");
    assert_eq!(second.output["current_round"], json!(2));
    assert_eq!(second.output["is_debate_complete"], json!(true));
    let rounds: Vec<i64> = speakers(&second.output).into_iter().map(|(r, ..)| r).collect();
    assert_eq!(rounds, [1, 1, 2, 2], "the second turn added round 2 only");
    let err = s.turn(json!("continue")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Finished);
}

#[tokio::test]
async fn a_debaters_failure_fails_the_turn_and_undoes_it() {
    let model = Answering::new(|r| {
        if r.profile == "debater" && prompt(r).contains("SIDE: con") { Err("HTTP 500".into()) } else { answer(r) }
    });
    let engine = Engine::builder(repo_root()).provider(model).build();
    let mut s = engine.open("debate", &options(&[("rounds", json!(1))])).await.unwrap();
    let before = s.state();
    let err = s.turn(json!("start")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Llm, "{err}");
    assert_eq!(s.state(), before);
}

/// A debater's reply in the shapes real models write it. Each shape's speech is the refined
/// part only, without markup; the reflection and critique are kept apart.
#[tokio::test]
async fn the_debaters_reply_is_read_in_the_shapes_models_write() {
    let shapes = [
        "**Phase 1 – Reflection**\nThinking.\n\n**Phase 2 – Critique**\nWeak points.\n\n**Phase 3 – Refinement**\nThe **real** speech.",
        "### Phase 1: Reflection\nThinking.\n### Phase 2: Critique\nWeak points.\n### Phase 3: Refinement\nThe **real** speech.",
        "phase 1 - reflection: Thinking.\nphase 2 - critique: Weak points.\nphase 3 - refinement: The **real** speech.",
        "PHASE 1 — REFLECTION\nThinking.\nPHASE 2 — CRITIQUE\nWeak points.\nPHASE 3 — REFINEMENT\nThe **real** speech.",
        "FASE 1 - REFLEXIÓN:\nThinking.\nFASE 2 - CRÍTICA:\nWeak points.\nFASE 3 - REFINAMIENTO:\nThe **real** speech.",
        "Here is my turn.\n\n1. Reflection:\nThinking.\n2. Critique:\nWeak points.\n3. Refinement:\nThe **real** speech.",
    ];
    for shape in shapes {
        let model = Answering::new(move |r| if r.profile == "debater" { Ok(shape.to_owned()) } else { answer(r) });
        let engine = Engine::builder(repo_root()).provider(model).build();
        let (o, _) = debate(&engine, &[("fact_check", json!("off")), ("rounds", json!(1))]).await;
        let t = &o["transcript"][0];
        assert_eq!(
            (&t["speech"], &t["reflection"], &t["critique"], &t["format_followed"]),
            (&json!("The real speech."), &json!("Thinking."), &json!("Weak points."), &json!(true)),
            "{shape:?}"
        );
    }
    // A sentence that starts with a heading's word is no heading.
    let prose = "Reflection on this motion shows the evidence is thin. Critique comes easily.";
    let model = Answering::new(move |r| if r.profile == "debater" { Ok(prose.to_owned()) } else { answer(r) });
    let engine = Engine::builder(repo_root()).provider(model).build();
    let (o, events) = debate(&engine, &[("fact_check", json!("off")), ("rounds", json!(1))]).await;
    assert_eq!((&o["transcript"][0]["speech"], &o["transcript"][0]["format_followed"]), (&json!(prose), &json!(false)));
    assert!(
        events.iter().any(|e| matches!(e, Event::Log { message, .. } if message.contains("ignores the RCR format")))
    );
}

/// A refusal is no speech: the turn fails, saying who refused, and is undone.
#[tokio::test]
async fn a_refusal_is_not_read_out_as_a_speech() {
    let model = Answering::new(|r| {
        if r.profile == "debater" && prompt(r).contains("SIDE: con") {
            Ok("I'm sorry, but I can't argue against this motion.".into())
        } else {
            answer(r)
        }
    });
    let engine = Engine::builder(repo_root()).provider(model).build();
    let mut s = engine.open("debate", &options(&[("rounds", json!(1))])).await.unwrap();
    let before = s.state();
    let err = s.turn(json!("start")).await.unwrap_err();
    assert!(err.to_string().contains("con's model refused to speak"), "{err}");
    assert_eq!(s.state(), before);
}

/// Verdicts as analysts write them: `True`, `FALSE`, a JSON bool, a synonym; anything else is
/// no verdict (unverifiable, with the error noted).
#[tokio::test]
async fn verdicts_are_read_in_any_case_and_as_booleans() {
    for (said, verdict) in [
        (json!("True"), "true"),
        (json!(" FALSE "), "false"),
        (json!(true), "true"),
        (json!(false), "false"),
        (json!("Supported."), "true"),
        (json!("Unverifiable"), "unverifiable"),
        (json!("probably"), "unverifiable"),
    ] {
        let reply = json!({"verdict": said, "reasoning": "checked"}).to_string();
        let model = Answering::new(move |r| if r.profile == "evidence" { Ok(reply.clone()) } else { answer(r) });
        let engine = Engine::builder(repo_root()).provider(model).build();
        let (o, _) = debate(&engine, &[("fact_check", json!("standard")), ("rounds", json!(1))]).await;
        let log = &o["fact_check_logs"][0];
        assert_eq!(log["verdict"], json!(verdict), "{said}: {log}");
        assert_eq!(log.get("error").is_some(), said == json!("probably"), "{said}: {log}");
    }
}

/// Factuality counts an unverifiable claim half: a speech of vague claims scores 0.5, below one
/// of nine true claims and a false one (0.9); with no claims it is not scored.
#[tokio::test]
async fn unverifiable_claims_count_half_and_a_speech_without_claims_is_not_scored() {
    let claims = |n: usize| json!({"claims": (0..n).map(|i| format!("claim {i}")).collect::<Vec<_>>()}).to_string();
    for (n, verdict_of, want) in [
        (4, (|_: &str| "unverifiable") as fn(&str) -> &'static str, json!(0.5)),
        (10, |c: &str| if c == "claim 9" { "false" } else { "true" }, json!(0.9)),
        (0, |_: &str| "true", Value::Null),
    ] {
        let listed = claims(n);
        let model = Answering::new(move |r| match r.profile.as_str() {
            "claims" => Ok(listed.clone()),
            "evidence" => {
                let claim = prompt(r).lines().find_map(|l| l.strip_prefix("CLAIM: ")).unwrap();
                Ok(json!({"verdict": verdict_of(claim)}).to_string())
            }
            _ => answer(r),
        });
        let root = copy_of(&["config/debate.yaml", "scripts/debate", "prompts/debate"]);
        let manifest = root.path().join("config/debate.yaml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(&manifest, text.replace("  max_claims: 5\n", "  max_claims: 10\n")).unwrap();
        let engine = Engine::builder(root.path()).provider(model).build();
        let (o, _) = debate(&engine, &[("fact_check", json!("standard")), ("rounds", json!(1))]).await;
        assert_eq!(o["transcript"][0]["factuality"], want, "{n} claims");
    }
}

/// The winner is the judge model's when it names a side; when its call fails or it names
/// nobody, the factuality rule decides (and says so); words spoken never decide.
#[tokio::test]
async fn a_judge_names_the_winner_and_the_rule_stands_in_for_it() {
    let judged = |reply: Result<Value, String>| {
        Answering::new(move |r| match r.profile.as_str() {
            "judge" => reply.clone().map(|v| v.to_string()),
            // The con side's claims all hold; the pro side's include a false one.
            "evidence" => {
                let claim = prompt(r).lines().find_map(|l| l.strip_prefix("CLAIM: ")).unwrap();
                let verdict = if claim.contains("green") && claim.contains("pro") { "false" } else { "true" };
                Ok(json!({"verdict": verdict}).to_string())
            }
            _ => answer(r),
        })
    };
    let cases = [
        (Ok(json!({"winner": "Pro", "reason": "Bolder."})), "pro", "judge"),
        (Err("HTTP 500".to_owned()), "con", "rule"),
        (Ok(json!({"winner": "the audience"})), "con", "rule"),
    ];
    for (reply, winner, by) in cases {
        let model = judged(reply.clone());
        let engine = Engine::builder(repo_root()).provider(model.clone()).build();
        let (o, _) = debate(&engine, &[("fact_check", json!("standard")), ("rounds", json!(1))]).await;
        let m = &o["metadata"];
        assert_eq!((&m["winner"], &m["winner_by"]), (&json!(winner), &json!(by)), "{reply:?}: {m}");
        let asked = model.asked("judge");
        assert_eq!(asked.len(), 1);
        assert!(
            prompt(&asked[0]).contains("SIDE con: factuality 1, 2 claims checked, 0 false"),
            "{}",
            prompt(&asked[0])
        );
    }
    // Fact checking off, the judge down: a draw, however many more words one side spoke.
    let model = Answering::new(|r| match r.profile.as_str() {
        "judge" => Err("HTTP 500".into()),
        "debater" if prompt(r).contains("SIDE: con") => Ok(format!("{} {}", speech(r), "more ".repeat(100))),
        _ => answer(r),
    });
    let engine = Engine::builder(repo_root()).provider(model).build();
    let (o, _) = debate(&engine, &[("fact_check", json!("off")), ("rounds", json!(1))]).await;
    assert_eq!((&o["metadata"]["winner"], &o["metadata"]["winner_by"]), (&json!("draw"), &json!("rule")));
}
