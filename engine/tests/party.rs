//! The party pack's question paths, with a model that answers from the prompt it is sent: the
//! picker's choice and rephrasing, the safety filter, the writer when the pool runs dry, the
//! fallbacks, and the times_used counters every lobby shares.

use crate::support;

use ruleweave::Engine;
use ruleweave::llm::LlmRequest;
use serde_json::{Value, json};
use support::{Answering, copy_of, repo_root, write_root};

/// A reply computed from the candidate ids a prompt lists.
type Answer = Box<dyn Fn(&[String]) -> String + Send + Sync>;

/// The candidate ids the request's last message lists (`[en-012] ...`).
fn candidate_ids(request: &LlmRequest) -> Vec<String> {
    let prompt = &request.messages.last().unwrap().content;
    prompt
        .lines()
        .filter_map(|l| l.strip_prefix('[').and_then(|l| l.split_once(']')).map(|(id, _)| id.to_owned()))
        .collect()
}

fn engine_at(root: &std::path::Path, reply: impl Fn(&[String]) -> String + Send + Sync + 'static) -> Engine {
    Engine::builder(root).provider(Answering::new(move |r| Ok(reply(&candidate_ids(r))))).build()
}

/// The first round's question: (state, the `question` event's data).
async fn first_question(engine: &Engine, options: Value) -> (Value, Value) {
    let mut session = engine.open("party", options.as_object().unwrap()).await.unwrap();
    let r = session.turn(json!({})).await.unwrap();
    let event = r
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .find(|e| e["name"] == "question")
        .expect("every path is a question event");
    (session.state(), event["data"].clone())
}

#[tokio::test]
async fn the_pickers_answer_is_used_only_when_it_is_safe() {
    let adapted = "Never have I ever sung in the rain with this group";
    let cases: Vec<(&str, Answer, &str, &str)> = vec![
        ("a rephrasing", Box::new(move |ids| json!({"id": ids[1], "question": adapted}).to_string()), "adapted", ""),
        ("a plain pick", Box::new(|ids| json!({"id": ids[2]}).to_string()), "picked", ""),
        (
            "an unknown id",
            Box::new(|_| json!({"id": "en-999"}).to_string()),
            "fallback_candidate",
            "the picker named en-999, which is not a candidate",
        ),
        (
            "prose",
            Box::new(|_| "Sure! The second one is great.".into()),
            "fallback_candidate",
            "the picker's answer is unusable",
        ),
        (
            "a refusal in JSON",
            Box::new(|_| json!({"error": "I cannot help with that."}).to_string()),
            "fallback_candidate",
            "the picker named no id",
        ),
        (
            "a deny-listed rephrasing",
            Box::new(|ids| json!({"id": ids[1], "question": "Never have I ever dated a minor"}).to_string()),
            "picked_as_written",
            "deny list",
        ),
        (
            "NSFW with NSFW off",
            Box::new(|ids| json!({"id": ids[1], "question": "Never have I ever sent nudes to a stranger"}).to_string()),
            "picked_as_written",
            "NSFW",
        ),
        (
            "another form",
            Box::new(|ids| json!({"id": ids[1], "question": "Have you ever lied to a friend?"}).to_string()),
            "picked_as_written",
            "form",
        ),
        (
            "another language",
            Box::new(|ids| json!({"id": ids[1], "question": "Nigdy nie kłamałem przyjacielowi"}).to_string()),
            "picked_as_written",
            "form",
        ),
        (
            "a speech",
            Box::new(|ids| {
                json!({"id": ids[1], "question": format!("Never have I ever {}", "said so much ".repeat(20))})
                    .to_string()
            }),
            "picked_as_written",
            "characters long",
        ),
    ];
    for (case, reply, source, why) in cases {
        let engine = engine_at(&repo_root(), reply);
        let (state, event) = first_question(&engine, json!({})).await;
        let candidates = state["candidates"].as_array().unwrap();
        assert_eq!(candidates.len(), 5, "{case}");
        assert_eq!(
            (state["question_source"].as_str(), event["source"].as_str()),
            (Some(source), Some(source)),
            "{case}"
        );
        assert!(event["why"].as_str().unwrap().contains(why), "{case}: {event}");
        let (id, text) = (state["question_id"].as_str().unwrap(), state["question"].as_str().unwrap());
        match source {
            "adapted" => assert_eq!((id, text), (candidates[1]["id"].as_str().unwrap(), adapted), "{case}"),
            "picked" => assert_eq!(id, candidates[2]["id"], "{case}"),
            // The picker's choice stands; only its rephrasing is dropped.
            "picked_as_written" => {
                assert_eq!((id, text), (candidates[1]["id"].as_str().unwrap(), candidates[1]["text"].as_str().unwrap()))
            }
            _ => {
                assert_eq!((id, text), (candidates[0]["id"].as_str().unwrap(), candidates[0]["text"].as_str().unwrap()))
            }
        }
        assert_eq!(state["used_question_ids"], json!([id]), "{case}");
    }
}

/// A rephrasing that names someone at the table is aimed at one player: the picker's choice is
/// asked as written.
#[tokio::test]
async fn a_question_naming_a_player_is_not_asked() {
    for (players, named) in [("ana, bo, cy", "Bo"), ("ana, Mary Jane, cy", "mary jane")] {
        let question = format!("Never have I ever lied to {named} about my age");
        let engine = engine_at(&repo_root(), move |ids| json!({"id": ids[1], "question": question}).to_string());
        let (state, event) = first_question(&engine, json!({"players": players})).await;
        assert_eq!(state["question_source"], "picked_as_written", "{players}");
        assert!(event["why"].as_str().unwrap().contains("a player at the table"), "{event}");
    }
    // A word that is no one's name passes.
    let engine = engine_at(&repo_root(), |ids| {
        json!({"id": ids[1], "question": "Never have I ever lied to a bouncer about my age"}).to_string()
    });
    let (state, _) = first_question(&engine, json!({"players": "ana, bo, cy"})).await;
    assert_eq!(state["question_source"], "adapted");
}

/// A copy of the party pack with a pool of two English questions.
fn dry_pool() -> tempfile::TempDir {
    let root = copy_of(&["config/party.yaml", "scripts/party", "prompts/party"]);
    std::fs::create_dir_all(root.path().join("data/party")).unwrap();
    std::fs::write(
        root.path().join("data/party/questions.yaml"),
        "- {id: q1, language: en, intensity: 1, is_nsfw: false, text: \"Never have I ever eaten cold pizza for breakfast\"}\n\
         - {id: q3, language: en, intensity: 3, is_nsfw: false, text: \"Never have I ever cried at a cartoon\"}\n\
         - {id: retired, language: en, intensity: 1, is_nsfw: false, active: false, text: \"Never have I ever owned a pager\"}\n",
    )
    .unwrap();
    root
}

#[tokio::test]
async fn with_fewer_than_three_candidates_a_model_writes_the_question() {
    let root = dry_pool();
    let written = "Never have I ever put orange juice on my cereal";
    let engine = engine_at(root.path(), move |ids| {
        assert!(ids.is_empty(), "the writer is shown no candidates");
        json!({"question": written}).to_string()
    });
    let (state, event) = first_question(&engine, json!({})).await;
    assert_eq!(state["candidates"].as_array().unwrap().len(), 2, "the inactive question is no candidate");
    assert_eq!(
        (state["question"].as_str(), state["question_id"].as_str(), state["question_source"].as_str()),
        (Some(written), Some("gen-1"), Some("generated"))
    );
    assert_eq!((state["intensity"].as_i64(), event["source"].as_str()), (Some(1), Some("generated")));
}

/// The writer is told what the pool still has (too few to choose from) and what the game has
/// asked, so that it writes something new.
#[tokio::test]
async fn the_writer_sees_the_candidates_left_and_the_questions_asked() {
    let root = dry_pool();
    let model = Answering::new(|r| {
        let n = r.messages.last().unwrap().content.matches("Already asked").count();
        Ok(json!({"question": format!("Never have I ever written question number {n} myself")}).to_string())
    });
    let engine = Engine::builder(root.path()).provider(model.clone()).build();
    let mut session = engine.open("party", &Default::default()).await.unwrap();
    session.turn(json!({})).await.unwrap();
    session.turn(json!("all")).await.unwrap();
    let asked = model.asked("writer");
    let first = &asked[0].messages.last().unwrap().content;
    assert!(first.contains("has only 2 questions left at this intensity, too few to choose from"), "{first}");
    assert!(first.contains("- Never have I ever eaten cold pizza for breakfast"), "{first}");
    assert!(!first.contains("Already asked"), "{first}");
    let second = &asked[1].messages.last().unwrap().content;
    assert!(second.contains("Already asked in this game"), "{second}");
    assert!(second.contains("- Never have I ever written question number 0 myself"), "{second}");
    assert_eq!(session.state()["asked_questions"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_bad_written_question_falls_back_to_the_pool_then_to_the_least_used() {
    let root = dry_pool();
    let engine = engine_at(root.path(), |_| json!({"question": "Have you ever eaten a whole cake?"}).to_string());
    let mut session = engine.open("party", &Default::default()).await.unwrap();
    let mut sources = Vec::new();
    for input in [json!({}), json!("all"), json!("all")] {
        session.turn(input).await.unwrap();
        let s = session.state();
        sources
            .push((s["question_id"].as_str().unwrap().to_owned(), s["question_source"].as_str().unwrap().to_owned()));
    }
    assert_eq!(
        sources,
        [
            ("q1".to_owned(), "fallback_candidate".to_owned()),
            ("q3".to_owned(), "fallback_candidate".to_owned()),
            // Round 3 is deeper (E = 0.255 + 0.06): no unused candidate in 3-5, so the band's
            // least used question, asked again.
            ("q3".to_owned(), "fallback_least_used".to_owned()),
        ]
    );
}

#[tokio::test]
async fn times_used_is_shared_by_every_lobby() {
    let engine = engine_at(&repo_root(), |ids| json!({"id": ids[0]}).to_string());
    let (a, _) = first_question(&engine, json!({})).await;
    let asked = a["question_id"].as_str().unwrap();
    assert_eq!(a["candidates"][0]["times_used"], 0);
    let (b, _) = first_question(&engine, json!({})).await;
    let ids: Vec<&str> = b["candidates"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(!ids.contains(&asked), "the other lobby's question is now used more than the rest: {ids:?}");
    let counters = engine.store().counters().unwrap().counts("party", "questions").await.unwrap();
    let mut counted: Vec<(String, i64)> = counters.into_iter().map(|(key, _, n)| (key, n)).collect();
    counted.sort();
    let mut want = vec![(asked.to_owned(), 1), (b["question_id"].as_str().unwrap().to_owned(), 1)];
    want.sort();
    assert_eq!(counted, want);
}

#[test]
fn every_pool_question_passes_the_safety_filter() {
    // The pack's own filter (question.rhai's unsafe_reason, with the pack's safety parameters),
    // run over every row of the pool in a pack of its own.
    let repo = repo_root();
    let manifest: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo.join("config/party.yaml")).unwrap()).unwrap();
    let questions = std::fs::read_to_string(repo.join("scripts/party/question.rhai")).unwrap();
    let check = r#"
fn check() {
    let bad = [];
    for q in query("questions", #{}) {
        let lobby = #{ language: q.language, nsfw: q.is_nsfw, players: ["anastazja", "bartholomew", "cyprian", "delphine"] };
        let why = lobby.unsafe_reason(q.text);
        if why != () {
            bad.push(`${q.id}: ${why}`);
        }
    }
    #{ bad: bad, checked: query("questions", #{}).len() }
}
"#;
    let pack = format!(
        // question.rhai's other functions read the party's fields, which `check` wants declared.
        "params: {{safety: {}}}\nlimits: {{max_wall_ms: 10000}}\ndata: {}\nstate:\n  bad: {{type: list}}\n  checked: {{type: int}}\n  \
         candidates: {{type: list}}\n  round: {{type: int}}\n  target_intensity: {{type: int}}\n  \
         language: {{type: string}}\n  nsfw: {{type: bool}}\n  intensity_range: {{type: list}}\n  players: {{type: list}}\n\
         graph:\n  nodes:\n    check: {{script: check.rhai::check}}\n  edges: [START -> check, check -> END]\n",
        manifest["params"]["safety"], manifest["data"]
    );
    let pool = std::fs::read_to_string(repo.join("data/party/questions.yaml")).unwrap();
    let root = write_root(&[
        ("config/poolcheck.yaml", &pack),
        ("scripts/poolcheck/check.rhai", &format!("{questions}\n{check}")),
        ("data/poolcheck/questions.yaml", &pool),
    ]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = Engine::builder(root.path()).build();
    let mut session = rt.block_on(engine.open("poolcheck", &Default::default())).unwrap();
    rt.block_on(session.turn(json!({}))).unwrap();
    let state = session.state();
    assert!(state["checked"].as_i64().unwrap() >= 200);
    assert_eq!(state["bad"], json!([]), "pool questions the safety filter refuses");
}

/// A lobby round whose closing turn keeps failing is tried again later and later, and after five
/// failures in a row no more, saying why; the next answer posted tries again.
#[tokio::test]
async fn a_round_that_cannot_close_backs_off_and_gives_up_visibly() {
    let root = write_root(&[
        (
            "config/table.yaml",
            "state:\n  players: {type: list, default: [a, b]}\n  round: {type: int}\n\
             input:\n  answers: {type: map, default: {}}\n\
             lobby: {players: players, round: round, answers: answers, timeout: 1s}\n\
             graph:\n  nodes:\n    play: {script: table.rhai::play}\n  edges:\n    - START -> play\n    - play -> END\n",
        ),
        // The first turn asks round 1; closing any round after it fails.
        (
            "scripts/table/table.rhai",
            "fn play() { if this.round > 0 { throw \"the table is broken\"; } #{ round: 1 } }",
        ),
    ]);
    let engine = Engine::builder(root.path()).build();
    let mut session = engine.open("table", &Default::default()).await.unwrap();
    session.turn(json!({})).await.unwrap();
    let id = session.id().to_owned();
    engine.keep(session);
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let failed_at = |closed: &[(String, ruleweave::Result<ruleweave::TurnResult>)]| {
        closed.iter().filter(|(s, r)| *s == id && r.is_err()).count()
    };
    assert_eq!(failed_at(&engine.close_due_rounds_at(start + 1_500).await.unwrap()), 1, "due after its timeout");
    assert_eq!(failed_at(&engine.close_due_rounds_at(start + 2_500).await.unwrap()), 0, "not again at once");
    let mut at = start + 1_500 + 5_000;
    let mut tries = 1;
    for _ in 0..20 {
        let closed = engine.close_due_rounds_at(at).await.unwrap();
        tries += failed_at(&closed);
        at += 5 * 60 * 1000; // past any backoff so far
    }
    assert_eq!(tries, 5, "five tries, then no more");
    let why = engine.close_problem(&id).expect("the sweep says why it gave up");
    assert!(why.contains("after 5 tries") && why.contains("the table is broken"), "{why}");
    engine.forget_close_failures(&id);
    assert!(engine.close_problem(&id).is_none(), "a post tries again");
}

/// A turn a breakpoint holds freezes its lobby until it is resumed: the lobby says so (held, the
/// round it closes, no timer), takes no input meant for the round the turn is opening, and the
/// sweep leaves it at any time; once resumed, the next round opens and takes its answers.
#[tokio::test]
async fn a_held_turn_holds_its_lobby_and_loses_no_answer() {
    use ruleweave::Breakpoints;
    use ruleweave::lobby::{InputKind, Post};
    let root = write_root(&[
        (
            "config/table.yaml",
            "state:\n  players: {type: list, default: [a, b]}\n  round: {type: int}\n  heard: {type: list, reducer: append}\n\
             input:\n  answers: {type: map, default: {}}\n\
             lobby: {players: players, round: round, answers: answers, timeout: 1s}\n\
             graph:\n  nodes:\n    tick: {script: table.rhai::tick}\n    hear: {script: table.rhai::hear}\n  \
             edges:\n    - START -> tick\n    - tick -> hear\n    - hear -> END\n",
        ),
        (
            "scripts/table/table.rhai",
            "fn tick() { #{ round: this.round + 1 } }\nfn hear() { #{ heard: input().answers.values() } }",
        ),
    ]);
    let engine = Engine::builder(root.path()).build();
    let mut session = engine.open("table", &Default::default()).await.unwrap();
    session.turn(json!({})).await.unwrap();
    let id = session.id().to_owned();
    let live = engine.keep(session);
    let answer = |player: &str, text: &str, round: Option<u64>| Post {
        player: player.into(),
        kind: InputKind::Answer,
        input: json!(text),
        round,
    };
    engine.post(&id, answer("a", "first", None)).await.unwrap();

    // A designer plays the round's turn held between its two nodes: the state's round is 2 by
    // then, but round 1 is the one still closing.
    let breaks = Breakpoints { before: vec!["hear".into()], ..Breakpoints::none() };
    let held = live.lock().await.turn_breaking(json!({"answers": {"a": "first"}}), breaks, None).await.unwrap();
    assert!(held.paused.as_ref().is_some_and(|p| p.breakpoint), "{:?}", held.paused);
    let status = live.lock().await.lobby().await.unwrap().unwrap();
    assert!(status.held && status.round == 1 && status.closes_at.is_none(), "{status:?}");
    assert!(status.waiting.is_empty() && status.answered == ["a"], "{status:?}");
    for post in [answer("b", "early", Some(2)), answer("b", "early", None)] {
        let refused = engine.post(&id, post).await.unwrap_err();
        assert_eq!(refused.kind(), ruleweave::ErrorKind::Conflict);
        assert!(refused.to_string().contains("is held at a breakpoint (before hear)"), "{refused}");
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let swept = engine.close_due_rounds_at(now + 3_600_000).await.unwrap();
    assert!(swept.iter().all(|(s, _)| *s != id), "the sweep closed nothing of it, nor failed to: {swept:?}");
    assert!(engine.close_problem(&id).is_none(), "holding is no failure");
    // Nor does the next sweep take the session's lock again at once (a designer editing the held
    // turn holds it now): it looks again in a while.
    let editing = live.lock().await;
    let next_sweep = engine.close_due_rounds_at(now + 3_600_500);
    let swept = tokio::time::timeout(std::time::Duration::from_secs(10), next_sweep)
        .await
        .expect("the sweep left the held lobby alone")
        .unwrap();
    assert!(swept.is_empty(), "{swept:?}");
    drop(editing);
    assert!(live.lock().await.held_turn().is_some(), "an hour past its timeout, the turn is still held");

    // Resumed: round 2 opens, with its own timer, and takes the answer refused while held.
    live.lock().await.resume(None, Breakpoints::none(), None).await.unwrap();
    let status = live.lock().await.lobby().await.unwrap().unwrap();
    assert!(!status.held && status.round == 2 && status.closes_at.is_some(), "{status:?}");
    engine.post(&id, answer("b", "early", Some(2))).await.unwrap();
    let status = live.lock().await.lobby().await.unwrap().unwrap();
    assert_eq!(status.answered, ["b"]);
    assert_eq!(live.lock().await.state()["heard"], json!(["first"]));
}
