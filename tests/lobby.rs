//! Lobby rounds over HTTP, on the party pack: players answer one by one (concurrently), the
//! round's turn runs when the last one answers or the timeout passes, late and duplicate answers
//! get 409, strangers 422, players leave and join between rounds, and every follower's event
//! stream carries each new question, on one server and across two replicas on PostgreSQL; and a
//! round whose closing client left is still played and kept when the server shuts down.

use crate::support;

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply};
use support::{Process, get, http, post, repo_root, start};

/// The shipped party pack, its lobby timeout shortened to `timeout` so a test waits seconds.
pub(crate) fn party_root(timeout: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_root();
    for sub in ["scripts/party", "prompts/party", "data/party"] {
        ruleweave_testkit::copy_tree(&repo.join(sub), &dir.path().join(sub));
    }
    let manifest = std::fs::read_to_string(repo.join("config/party.yaml")).unwrap();
    assert!(manifest.contains("  timeout: 30s\n"));
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/party.yaml"),
        manifest.replace("  timeout: 30s\n", &format!("  timeout: {timeout}\n")),
    )
    .unwrap();
    dir
}

/// One follower of a session's event stream.
pub(crate) struct Follower {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Vec<u8>>> + Send>>,
    events: ruleweave_testkit::sse::Parser,
}

impl Follower {
    pub(crate) async fn open(url: &str) -> Self {
        let r = http().get(url).header("accept", "text/event-stream").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        Follower { body: Box::pin(r.bytes_stream().map(|c| c.map(|b| b.to_vec()))), events: Default::default() }
    }

    /// The next event (name, data), waiting at most 30 s; `None` when the stream ended.
    pub(crate) async fn next(&mut self) -> Option<(String, Value)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(e) = self.events.next() {
                return Some((e.name, serde_json::from_str(&e.data).unwrap()));
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => panic!("no event within 30 s"),
                Ok(None) => return None,
                Ok(Some(chunk)) => self.events.feed(&chunk.unwrap()),
            }
        }
    }

    /// Skips to the next event called `name`.
    pub(crate) async fn next_named(&mut self, name: &str) -> Value {
        loop {
            match self.next().await {
                Some((n, data)) if n == name => return data,
                Some(_) => {}
                None => panic!("the stream ended before a `{name}` event"),
            }
        }
    }
}

/// A lobby of ana and bo, its first question asked: the session's id.
async fn ana_and_bo_at_round_one(url: &str) -> String {
    let (_, created) =
        post(&format!("{url}/v1/sessions"), json!({"pack": "party", "options": {"players": ["ana", "bo"]}})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {}})).await;
    id
}

async fn answer(url: &str, id: &str, player: &str, answer: &str) -> (StatusCode, Value) {
    post(&format!("{url}/v1/sessions/{id}/inputs"), json!({"player": player, "input": answer})).await
}

fn question_of(v: &Value) -> (u64, String) {
    (v["output"]["round"].as_u64().unwrap(), v["output"]["question"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lobby_plays_round_by_round_over_http() {
    let root = party_root("1s");
    let db = tempfile::tempdir().unwrap();
    let server = start(root.path(), &format!("sqlite://{}", db.path().join("l.db").display()), &[]);
    let url = server.url.clone();
    let (status, created) = post(
        &format!("{url}/v1/sessions"),
        json!({"pack": "party", "options": {"players": "ana, bo, cy, dee", "max_rounds": 3}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let events = format!("{url}/v1/sessions/{id}/events");
    let mut followers = vec![Follower::open(&events).await, Follower::open(&events).await];
    for f in &mut followers {
        let first = f.next_named("state").await;
        assert_eq!(first["lobby"]["round"], 0);
        assert_eq!(first["lobby"]["players"], json!(["ana", "bo", "cy", "dee"]));
    }

    // The game starts with a whole-round turn of no answers: the first question.
    let (status, started) = post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {}})).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let first_question = question_of(&started);
    assert_eq!(first_question.0, 1);
    for f in &mut followers {
        assert_eq!(question_of(&f.next_named("turn").await), first_question, "every follower gets the question");
    }

    // Round 1: the four answer at once; the last answer runs the round's turn.
    let posts: Vec<_> = [("ana", "have"), ("bo", "have"), ("cy", "have_not"), ("dee", "have")]
        .into_iter()
        .map(|(p, a)| {
            let (url, id) = (url.clone(), id.clone());
            tokio::spawn(async move { answer(&url, &id, p, a).await })
        })
        .collect();
    let mut closed = Vec::new();
    for p in posts {
        let (status, body) = p.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        if !body["closed"].is_null() {
            closed.push(body);
        }
    }
    assert_eq!(closed.len(), 1, "exactly one answer closed the round: {closed:?}");
    let second = question_of(&closed[0]["closed"]);
    assert_eq!(second.0, 2);
    assert_eq!(closed[0]["lobby"]["round"], 2);
    assert_eq!(closed[0]["lobby"]["waiting"], json!(["ana", "bo", "cy", "dee"]));
    let history = &closed[0]["closed"]["output"]["escalation_history"];
    assert_eq!(history[0]["round"], 1);
    assert_eq!(history[0]["have_ratio"], 0.75);
    // δ(1) = 3/4 × 0.5 (safe); B(2) = 0.3 × 0.375 = 0.1125.
    let boldness = closed[0]["closed"]["output"]["boldness"].as_f64().unwrap();
    assert!((boldness - 0.1125).abs() < 1e-12, "{boldness}");
    for f in &mut followers {
        let mut answered = Vec::new();
        loop {
            match f.next().await.unwrap() {
                (name, data) if name == "input" => answered.push(data["player"].as_str().unwrap().to_owned()),
                (name, data) if name == "turn" => {
                    assert_eq!(question_of(&data), second);
                    break;
                }
                (name, _) => panic!("unexpected `{name}` event"),
            }
        }
        answered.sort();
        assert_eq!(answered, ["ana", "bo", "cy", "dee"], "each answer was an event");
    }

    // Round 2: a late answer (meant for round 1), a duplicate, a stranger, a bad answer.
    let inputs = format!("{url}/v1/sessions/{id}/inputs");
    let (status, body) = post(&inputs, json!({"player": "ana", "input": "have", "round": 1})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("round 1 is not open"), "{body}");
    assert_eq!(answer(&url, &id, "ana", "have_not").await.0, StatusCode::OK);
    let (status, body) = answer(&url, &id, "ana", "have").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("ana already answered round 2"), "{body}");
    let (status, body) = answer(&url, &id, "zed", "have").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")));
    assert!(body["error"]["message"].as_str().unwrap().contains("zed is not in this lobby"), "{body}");
    let (status, _) = answer(&url, &id, "bo", "maybe").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // dee leaves and gus joins; once bo and cy answer, the round closes without waiting for dee.
    let (status, body) = post(&inputs, json!({"player": "dee", "leave": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["lobby"]["waiting"], json!(["bo", "cy"]));
    let (status, body) = post(&inputs, json!({"player": "gus", "join": true})).await;
    assert_eq!((status, &body["lobby"]["joining"]), (StatusCode::OK, &json!(["gus"])), "{body}");
    // bo says again what he said in round 1, so he names the round (see the test of retries).
    let (status, body) = post(&inputs, json!({"player": "bo", "input": "have", "round": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = answer(&url, &id, "cy", "have").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["closed"]["output"]["players"], json!(["ana", "bo", "cy", "gus"]));
    assert_eq!(body["closed"]["output"]["escalation_history"][1]["have_ratio"].as_f64().unwrap(), 2.0 / 3.0);

    // Round 3: only gus answers; the timeout closes the round, and the lobby is finished.
    assert_eq!(answer(&url, &id, "gus", "have").await.0, StatusCode::OK);
    let mut last = Value::Null;
    for f in &mut followers {
        let third = f.next_named("turn").await;
        assert_eq!((third["output"]["round"].as_u64(), &third["finished"]), (Some(3), &json!(false)));
        last = f.next_named("turn").await;
        assert_eq!(last["finished"], true);
        while f.next().await.is_some() {}
    }
    let history = &last["output"]["escalation_history"];
    assert_eq!(history.as_array().unwrap().len(), 3);
    // Over everyone at the table (ana, bo, cy, gus): the three who stayed silent said neither.
    assert_eq!((history[2]["round"].as_u64(), history[2]["have_ratio"].as_f64()), (Some(3), Some(0.25)));
    let (status, body) = answer(&url, &id, "ana", "have").await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("session_finished")));
    drop(server);
}

/// A round nobody answers closes at its timeout, counted from when its question was asked, and
/// the next question follows; three such rounds in a row end the lobby (the table has gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_nobody_answers_closes_at_its_timeout_and_an_empty_table_ends_the_lobby() {
    let root = party_root("1s");
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;
    let (_, created) =
        post(&format!("{url}/v1/sessions"), json!({"pack": "party", "options": {"players": ["ana", "bo"]}})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let mut follower = Follower::open(&format!("{url}/v1/sessions/{id}/events")).await;
    follower.next_named("state").await;
    let (_, first) = post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {}})).await;
    let asked = get(&format!("{url}/v1/sessions/{id}")).await;
    assert!(asked["lobby"]["closes_at"].as_i64().is_some(), "the round's timeout runs from its question: {asked}");
    assert_eq!(asked["lobby"]["answered"], json!([]));
    let mut rounds = Vec::new();
    let last = loop {
        let turn = follower.next_named("turn").await;
        if turn["finished"] == true {
            break turn;
        }
        rounds.push(question_of(&turn));
    };
    // The opening question, then two more after rounds nobody answered; the third ends it.
    assert_eq!(rounds.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2, 3], "{rounds:?}");
    assert_eq!(rounds[0], question_of(&first));
    let history = last["output"]["escalation_history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert!(history.iter().all(|h| h["have_ratio"] == 0.0), "{history:?}");
    let done = get(&format!("{url}/v1/sessions/{id}")).await;
    assert!(done["finished"] == true && done["turns"] == 4, "{done}");
}

/// Two replicas on one PostgreSQL are one lobby: answers go to either, the follower on one sees
/// the rounds the other closed, and the timeout closes a round whichever replica took its answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lobby_spans_two_replicas() {
    let Some(pg) = support::postgres() else { return };
    let root = party_root("1s");
    let a = start(root.path(), &pg, &[]);
    let b = start(root.path(), &pg, &[]);
    let (status, created) =
        post(&format!("{}/v1/sessions", a.url), json!({"pack": "party", "options": {"players": ["ana", "bo", "cy"]}}))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let mut on_b = Follower::open(&format!("{}/v1/sessions/{id}/events", b.url)).await;
    on_b.next_named("state").await;
    let (_, started) = post(&format!("{}/v1/sessions/{id}/turns", a.url), json!({"input": {}})).await;
    assert_eq!(question_of(&on_b.next_named("turn").await), question_of(&started), "B follows what A did");

    // Answers alternate between the replicas; the last one closes the round wherever it lands.
    let servers: [&Process; 3] = [&a, &b, &a];
    for (server, player) in servers.iter().zip(["ana", "bo", "cy"]) {
        let (status, body) = answer(&server.url, &id, player, "have").await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let second = on_b.next_named("turn").await;
    assert_eq!(second["output"]["round"], 2);
    // The same answer as in round 1, so bo names the round (a retry would not).
    let (status, body) =
        post(&format!("{}/v1/sessions/{id}/inputs", b.url), json!({"player": "bo", "input": "have", "round": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = answer(&a.url, &id, "bo", "have_not").await;
    assert_eq!(status, StatusCode::CONFLICT, "replica A knows bo answered on B");

    // Only bo answered round 2: a replica's sweep closes it after the timeout.
    let third = on_b.next_named("turn").await;
    assert_eq!(third["output"]["round"], 3);
    // Over the three at the table: ana and cy stayed silent.
    assert_eq!(third["output"]["escalation_history"][1]["have_ratio"], 1.0 / 3.0);
    for server in [&a, &b] {
        let got = get(&format!("{}/v1/sessions/{id}", server.url)).await;
        assert_eq!((got["turns"].as_u64(), got["lobby"]["round"].as_u64()), (Some(3), Some(3)), "{got}");
    }
}

/// The answer that closes a round runs the round's turn; when its client leaves while that turn
/// waits for the model, the turn still finishes and is kept, and shutting the server down waits
/// for it: no request is left to wait for it, so nothing but the server's own shutdown does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_whose_closing_client_left_is_kept_through_a_shutdown() {
    let mock = MockLlm::start();
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    // The picker's answers: the opening question's (unusable, so the first candidate), then the
    // round's, held until the server is shutting down.
    mock.judge(Reply::Content("No pick.".into()))
        .judge(Reply::Gated(gate.clone(), Box::new(Reply::Content("No pick either.".into()))));
    let root = party_root("10m");
    let db = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", db.path().join("l.db").display());
    let env = [("GROQ_API_KEY", "gsk-test"), ("GROQ_BASE_URL", mock.base_url.as_str()), ("RULEWEAVE_LLM_RETRIES", "0")];
    let mut server = start(root.path(), &store, &env);
    let url = server.url.clone();
    let (status, created) =
        post(&format!("{url}/v1/sessions"), json!({"pack": "party", "options": {"players": "ana, bo"}})).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, started) = post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {}})).await;
    assert_eq!((status, started["output"]["round"].as_u64()), (StatusCode::OK, Some(1)), "{started}");
    assert_eq!(answer(&url, &id, "ana", "have").await.0, StatusCode::OK);

    // bo's answer closes round 1; its client gives up while the round's turn is at the picker.
    let closing = tokio::spawn({
        let (url, id) = (url.clone(), id.clone());
        async move { answer(&url, &id, "bo", "have_not").await }
    });
    mock.wait_seen(2).await;
    closing.abort();
    assert!(closing.await.unwrap_err().is_cancelled());
    server.terminate();
    gate.notify_one();
    let exit = server.exit_status();
    assert!(exit.success(), "{exit:?}");

    // A new server on the same database finds the round closed and the next one open.
    let server = start(root.path(), &store, &env);
    let got = get(&format!("{}/v1/sessions/{id}", server.url)).await;
    assert_eq!((got["turns"].as_u64(), got["lobby"]["round"].as_u64()), (Some(2), Some(2)), "{got}");
    assert_eq!(got["state"]["escalation_history"][0]["have_ratio"], 0.5, "{got}");
}

/// A name that looks like another is no new player: a zero-width space, a direction override, any
/// character Unicode says shows nothing, a space at an end, a full-width, upper-case, accented or
/// other-script twin are refused, each saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookalike_names_do_not_join_as_new_players() {
    let root = party_root("30s");
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;
    let id = &ana_and_bo_at_round_one(url).await;
    let inputs = format!("{url}/v1/sessions/{id}/inputs");
    for (name, says) in [
        ("an\u{200B}a", "invisible ones"),
        ("\u{202E}ana", "invisible ones"),
        (" ana", "without spaces at its ends"),
        ("ａｎａ", "looks the same as ana"),
        ("Ana", "looks the same as ana"),
        // What Unicode says shows nothing: a grapheme joiner, a variation selector, a tag
        // character, the Hangul filler.
        ("a\u{034F}na", "invisible ones"),
        ("a\u{FE0F}na", "invisible ones"),
        ("ana\u{E0041}", "invisible ones"),
        ("\u{3164}", "invisible ones"),
        // Letters of other scripts and marks that pass for `ana` (UTS #39's skeleton), and letters
        // Unicode does not recommend for names.
        ("\u{430}na", "looks the same as ana"),
        ("aná", "looks the same as ana"),
        ("\u{1D00}na", "does not recommend"),
        ("\u{251}na", "does not recommend"),
    ] {
        let (status, body) = post(&inputs, json!({"player": name, "join": true})).await;
        assert!(status == StatusCode::UNPROCESSABLE_ENTITY || status == StatusCode::CONFLICT, "{name:?}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{name:?}: {body}");
    }
    let (status, body) = post(&inputs, json!({"player": "gus", "join": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = post(&inputs, json!({"player": "GUS", "join": true})).await;
    assert_eq!(status, StatusCode::CONFLICT, "one who is joining counts too: {body}");
}

/// The players a lobby starts with are held to the names a joiner is: a zero-width space or a
/// twin in another case makes no second player.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookalike_names_do_not_start_a_lobby() {
    let root = party_root("30s");
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;
    for (players, says) in [
        (json!("ana, an\u{200B}a"), "cannot be a player's name"),
        (json!(["ana", "bo", "ANA"]), "\"ana\" and \"ANA\" look the same"),
        (json!(["ana", "bo", "\u{430}na"]), "look the same"),
        (json!("ana, a\u{FE0F}na"), "cannot be a player's name"),
    ] {
        let (status, body) =
            post(&format!("{url}/v1/sessions"), json!({"pack": "party", "options": {"players": players}})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{players}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{players}: {body}");
    }
}

/// A client that lost the reply to its answer and posts it again, without saying the round, is
/// told the round it answered has closed; its answer does not land in the question after, which
/// the player has not seen. Naming the round, or a different answer, goes in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_answer_does_not_land_in_the_next_round() {
    let root = party_root("30s");
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;
    let id = &ana_and_bo_at_round_one(url).await;
    assert_eq!(answer(url, id, "ana", "have").await.0, StatusCode::OK);
    let (status, closed) = answer(url, id, "bo", "have_not").await;
    assert_eq!((status, closed["lobby"]["round"].as_u64()), (StatusCode::OK, Some(2)), "{closed}");

    let (status, body) = answer(url, id, "bo", "have_not").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("bo answered \"have_not\" to round 1, which has closed"), "{message}");
    assert!(message.contains("\"round\": 2"), "{message}");
    let now = get(&format!("{url}/v1/sessions/{id}")).await;
    assert_eq!(now["lobby"]["answered"], json!([]), "the retry is in no round: {now}");

    let inputs = format!("{url}/v1/sessions/{id}/inputs");
    let (status, body) = post(&inputs, json!({"player": "bo", "input": "have_not", "round": 2})).await;
    assert_eq!(status, StatusCode::OK, "naming the round says it is meant: {body}");
    let (status, body) = answer(url, id, "ana", "have_not").await;
    assert_eq!(status, StatusCode::OK, "a different answer is no retry: {body}");
}

/// One lobby's slow model holds up no other lobby: while lobby A's closing turn waits at the
/// picker, lobby B's round, falling due meanwhile, is closed by the next sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_round_holds_up_no_other_lobby() {
    let mock = MockLlm::start();
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    // The picker: A's opening question, then A's round 2, held until the test opens the gate.
    mock.judge(Reply::Content("No pick.".into()))
        .judge(Reply::Gated(gate.clone(), Box::new(Reply::Content("No pick either.".into()))));
    let root = party_root("1s");
    let env = [("GROQ_API_KEY", "gsk-test"), ("GROQ_BASE_URL", mock.base_url.as_str()), ("RULEWEAVE_LLM_RETRIES", "0")];
    let server = start(root.path(), "memory", &env);
    let url = server.url.clone();
    let lobby = |players: &'static str| {
        let url = url.clone();
        async move {
            let (_, created) =
                post(&format!("{url}/v1/sessions"), json!({"pack": "party", "options": {"players": players}})).await;
            let id = created["id"].as_str().unwrap().to_owned();
            let (status, started) = post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {}})).await;
            assert_eq!(status, StatusCode::OK, "{started}");
            id
        }
    };
    let a = lobby("ana, bo").await;
    // Nobody answers A: its round closes at its timeout, and the closing turn waits at the gate.
    mock.wait_seen(2).await;
    let b = lobby("cy, dee").await;
    let mut follower = Follower::open(&format!("{url}/v1/sessions/{b}/events")).await;
    follower.next_named("state").await;
    let closed = follower.next_named("turn").await;
    assert_eq!(closed["output"]["round"], 2, "B's round closed while A's waited: {closed}");
    let a_now = get(&format!("{url}/v1/sessions/{a}")).await;
    assert_eq!(a_now["turns"], 1, "A's round is still at its model: {a_now}");
    gate.notify_one();
}

/// A round the sweep closes is a turn like any other: when its turn fails, the server counts a
/// failed turn and the error by its code, as it does for a turn a request plays.
#[tokio::test]
async fn a_round_the_sweep_fails_to_close_is_counted_as_a_failed_turn() {
    let root = party_root("1s");
    let script = root.path().join("scripts/party/rounds.rhai");
    let text = std::fs::read_to_string(&script).unwrap();
    let broken =
        text.replacen("fn score() {\n", "fn score() {\n    if this.round >= 1 { throw \"the tally broke\"; }\n", 1);
    assert_ne!(broken, text);
    std::fs::write(&script, broken).unwrap();
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;
    let (_, created) =
        post(&format!("{url}/v1/sessions"), json!({"pack": "party", "options": {"players": ["ana", "bo"]}})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, first) = post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {}})).await;
    assert_eq!(status, StatusCode::OK, "the opening plays: {first}");
    // Nobody answers: the sweep closes the round at its timeout, and the round's turn throws.
    let said = server.wait_for_line("cannot close the lobby round");
    assert!(said.contains("the tally broke"), "{said}");
    let metrics = http().get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"ruleweave_turns_total{pack="party",outcome="error"}"#), "{metrics}");
    assert!(metrics.contains(r#"ruleweave_errors_total{pack="party",code="script_error"}"#), "{metrics}");
}
