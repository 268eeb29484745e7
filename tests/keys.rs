//! Who may touch a session, through a real client: two clients with different keys cannot reach
//! each other's sessions (a session that is not theirs answers exactly as one that does not
//! exist), a session's key reaches its session and the forks it made, a lobby's player answers
//! for themselves alone, a chat client's conversations are its key's, and keys hold on two
//! replicas sharing one PostgreSQL (a revoked one refused on the other at once).

use crate::support;

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use ruleweave::Engine;
use serde_json::{Value, json};

const OPERATOR: &str = "the-operators-token-of-tests";

/// A request as a client with `key` makes it: (status, body).
async fn call(method: Method, url: &str, key: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut r = support::http().request(method, url).bearer_auth(key);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn server(root: &std::path::Path) -> support::Server {
    let engine = Engine::builder(root).store(Arc::new(ruleweave::store::MemoryStore::new())).build();
    support::serve(engine, Some(OPERATOR), 1 << 20).await
}

/// Issues a key as the operator: its id and secret.
async fn issue(base: &str, label: &str, packs: Option<&[&str]>) -> (String, String) {
    let mut body = json!({"label": label});
    if let Some(p) = packs {
        body["packs"] = json!(p);
    }
    let (status, key) = call(Method::POST, &format!("{base}/v1/keys"), OPERATOR, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    (key["id"].as_str().unwrap().to_owned(), key["key"].as_str().unwrap().to_owned())
}

/// Opens a pirate session with `key`: its id and its own key.
async fn open(base: &str, key: &str) -> (String, String) {
    let (status, opened) =
        call(Method::POST, &format!("{base}/v1/sessions"), key, Some(json!({"pack": "pirate"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    (opened["id"].as_str().unwrap().to_owned(), opened["key"].as_str().unwrap().to_owned())
}

/// Every route of a session, as (method, path under the session, body).
fn session_routes() -> Vec<(Method, &'static str, Option<Value>)> {
    vec![
        (Method::GET, "", None),
        (Method::POST, "/turns", Some(json!({"input": "Ahoy!"}))),
        (Method::GET, "/checkpoints", None),
        (Method::GET, "/conversation", None),
        (Method::POST, "/fork", Some(json!({"checkpoint": 0}))),
        (Method::POST, "/replay", None),
        (Method::POST, "/resume", Some(json!({}))),
        (Method::PATCH, "/state", Some(json!({"set": {"merit_score": 1}}))),
        (Method::GET, "/events", None),
        (Method::POST, "/inputs", Some(json!({"player": "ana", "input": {"answer": "have"}}))),
        (Method::DELETE, "", None),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_cannot_reach_each_others_sessions() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let s = server(root.path()).await;
    let base = &s.url;
    let (_, alice) = issue(base, "alice's bot", None).await;
    let (_, bob) = issue(base, "bob's bot", None).await;
    let (a, a_key) = open(base, &alice).await;
    let (b, b_key) = open(base, &bob).await;

    // Each lists its own; the operator lists both; a session key lists nothing.
    let ids = |page: &Value| -> Vec<String> {
        page["sessions"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_owned()).collect()
    };
    let listing = format!("{base}/v1/sessions");
    assert_eq!(ids(&call(Method::GET, &listing, &alice, None).await.1), std::slice::from_ref(&a));
    assert_eq!(ids(&call(Method::GET, &listing, &bob, None).await.1), std::slice::from_ref(&b));
    let all = ids(&call(Method::GET, &listing, OPERATOR, None).await.1);
    assert!(all.contains(&a) && all.contains(&b), "{all:?}");
    let before = all.len();
    assert_eq!(call(Method::GET, &listing, &a_key, None).await.0, StatusCode::FORBIDDEN);

    // Neither key, nor the other's session key, reaches the other's session on any route: each
    // answers what a session that does not exist answers.
    let nowhere = "0123456789abcdef0123";
    for (method, tail, body) in session_routes() {
        let (gone, absent) =
            call(method.clone(), &format!("{base}/v1/sessions/{nowhere}{tail}"), &alice, body.clone()).await;
        assert_eq!(gone, StatusCode::NOT_FOUND, "{method} {tail}: {absent}");
        for key in [&alice, &a_key] {
            let (status, foreign) =
                call(method.clone(), &format!("{base}/v1/sessions/{b}{tail}"), key, body.clone()).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {tail}: {foreign}");
            let foreign = foreign.to_string().replace(&b, nowhere);
            assert_eq!(foreign, absent.to_string(), "{method} {tail}: the same body as a session that does not exist");
        }
    }
    // Spelled with a percent escape, Bob's id is still Bob's.
    let escaped: String = format!("%{:02x}{}", b.as_bytes()[0], &b[1..]);
    let (status, body) = call(Method::GET, &format!("{base}/v1/sessions/{escaped}"), &alice, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // Bob's session is as it was: no turn played, not forked, not deleted.
    let (status, still) = call(Method::GET, &format!("{base}/v1/sessions/{b}"), &b_key, None).await;
    assert_eq!((status, &still["turns"]), (StatusCode::OK, &json!(0)), "{still}");
    let after = ids(&call(Method::GET, &listing, OPERATOR, None).await.1);
    assert_eq!(after.len(), before, "no fork of it was made: {after:?}");

    // Alice's session key plays its session, reads the packs, and nothing of the operator's.
    let (status, turn) =
        call(Method::POST, &format!("{base}/v1/sessions/{a}/turns"), &a_key, Some(json!({"input": "Ahoy!"}))).await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    // It plays; it does not debug (a player must not edit the game they play).
    let stepped = Some(json!({"input": "Again!", "break": {"after": ["merit_check"]}}));
    let (status, refused) = call(Method::POST, &format!("{base}/v1/sessions/{a}/turns"), &a_key, stepped).await;
    assert_eq!((status, &refused["error"]["code"]), (StatusCode::FORBIDDEN, &json!("forbidden")), "{refused}");
    let (status, turn) =
        call(Method::POST, &format!("{base}/v1/sessions/{a}/turns"), &a_key, Some(json!({"input": "Again!"}))).await;
    assert_eq!((status, &turn["turn"]), (StatusCode::OK, &json!(2)), "{turn}");
    assert_eq!(call(Method::GET, &format!("{base}/v1/packs"), &a_key, None).await.0, StatusCode::OK);
    for (method, path) in [(Method::GET, "/metrics"), (Method::GET, "/v1/keys"), (Method::POST, "/v1/sessions")] {
        let (status, body) =
            call(method.clone(), &format!("{base}{path}"), &a_key, Some(json!({"pack": "pirate"}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
        assert_eq!(body["error"]["code"], "forbidden");
    }
    // A key nobody issued, and no key: 401.
    assert_eq!(
        call(Method::GET, &format!("{base}/v1/sessions/{a}"), "rw_session_made_up", None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        support::http().get(format!("{base}/v1/packs")).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );

    // A fork answers its own key; the key that made it reaches it too, the fork's key only it.
    let (status, fork) =
        call(Method::POST, &format!("{base}/v1/sessions/{a}/fork"), &a_key, Some(json!({"checkpoint": 1}))).await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    let (f, f_key) = (fork["id"].as_str().unwrap(), fork["key"].as_str().unwrap());
    assert_ne!(f_key, a_key);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{f}"), &a_key, None).await.0, StatusCode::OK);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{f}"), f_key, None).await.0, StatusCode::OK);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{a}"), f_key, None).await.0, StatusCode::NOT_FOUND);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{f}"), &bob, None).await.0, StatusCode::NOT_FOUND);
    // A fork of the fork, made with the fork's key, is the fork's, and so reached by the keys that
    // made the fork.
    let (status, ff) =
        call(Method::POST, &format!("{base}/v1/sessions/{f}/fork"), f_key, Some(json!({"checkpoint": 0}))).await;
    assert_eq!(status, StatusCode::CREATED, "{ff}");
    let ff = ff["id"].as_str().unwrap();
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{ff}"), f_key, None).await.0, StatusCode::OK);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{ff}"), &a_key, None).await.0, StatusCode::OK);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{ff}"), &b_key, None).await.0, StatusCode::NOT_FOUND);
    // The issued key that made Alice's session reaches what its session's key made.
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{ff}"), &alice, None).await.0, StatusCode::OK);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{ff}"), &bob, None).await.0, StatusCode::NOT_FOUND);
    // Who each key is.
    let (_, me) = call(Method::GET, &format!("{base}/v1/access"), &a_key, None).await;
    assert_eq!((me["as"].as_str(), me["session"].as_str()), (Some("session"), Some(a.as_str())), "{me}");
    let (_, me) = call(Method::GET, &format!("{base}/v1/access"), &alice, None).await;
    assert_eq!((me["as"].as_str(), me["key"]["label"].as_str()), (Some("issued"), Some("alice's bot")), "{me}");

    // Deleting with the session's key deletes it; Bob's stays.
    assert_eq!(call(Method::DELETE, &format!("{base}/v1/sessions/{a}"), &a_key, None).await.0, StatusCode::NO_CONTENT);
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{b}"), OPERATOR, None).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issued_key_plays_only_its_packs_and_is_revoked_at_once() {
    let root = support::copy_of(&[
        "config/pirate.yaml",
        "scripts/pirate",
        "prompts/pirate",
        "config/party.yaml",
        "scripts/party",
        "prompts/party",
        "data/party",
    ]);
    let s = server(root.path()).await;
    let base = &s.url;
    let (id, key) = issue(base, "pirate only", Some(&["pirate"])).await;
    let (session, session_key) = open(base, &key).await;
    for (path, body) in [
        ("/v1/sessions", json!({"pack": "party"})),
        ("/v1/packs/party/simulate", json!({"games": 1})),
        ("/v1/chat/completions", json!({"model": "party", "messages": [{"role": "user", "content": "4/6"}]})),
    ] {
        let (status, refused) = call(Method::POST, &format!("{base}{path}"), &key, Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("may play pirate, not `party`"), "{refused}");
    }
    let (_, models) = call(Method::GET, &format!("{base}/v1/models"), &key, None).await;
    let models = models["data"].as_array().unwrap();
    assert!(!models.is_empty() && models.iter().all(|m| m["id"].as_str().unwrap().starts_with("pirate")), "{models:?}");
    // The packs it is shown are the packs it may play.
    let (_, packs) = call(Method::GET, &format!("{base}/v1/packs"), &key, None).await;
    let names: Vec<&str> = packs["packs"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pirate"], "{packs}");
    // Listed without its secret; revoked, it opens nothing; revoking again finds nothing.
    let (_, listed) = call(Method::GET, &format!("{base}/v1/keys"), OPERATOR, None).await;
    assert!(!listed.to_string().contains(&key), "no secret is listed: {listed}");
    assert_eq!(listed["keys"][0]["packs"], json!(["pirate"]));
    assert_eq!(call(Method::DELETE, &format!("{base}/v1/keys/{id}"), OPERATOR, None).await.0, StatusCode::NO_CONTENT);
    assert_eq!(call(Method::GET, &format!("{base}/v1/packs"), &key, None).await.0, StatusCode::UNAUTHORIZED);
    // The sessions it made go with it: their keys open nothing either.
    let (status, _) = call(Method::GET, &format!("{base}/v1/sessions/{session}"), &session_key, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(call(Method::DELETE, &format!("{base}/v1/keys/{id}"), OPERATOR, None).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lobby_player_answers_and_leaves_for_themselves_alone() {
    let root = crate::lobby::party_root("30s");
    let s = server(root.path()).await;
    let base = &s.url;
    let body = json!({"pack": "party", "options": {"players": "ana,bo,cy"}});
    let (status, opened) = call(Method::POST, &format!("{base}/v1/sessions"), OPERATOR, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let id = opened["id"].as_str().unwrap();
    let session_key = opened["key"].as_str().unwrap();
    let players = opened["player_keys"].as_object().unwrap();
    assert_eq!(players.keys().collect::<Vec<_>>(), ["ana", "bo", "cy"]);
    let ana = players["ana"].as_str().unwrap();
    let inputs = format!("{base}/v1/sessions/{id}/inputs");
    // The host starts the game: its first question.
    let (status, _) =
        call(Method::POST, &format!("{base}/v1/sessions/{id}/turns"), session_key, Some(json!({"input": {}}))).await;
    assert_eq!(status, StatusCode::OK);

    let answer = |player: &str| json!({"player": player, "input": "have"});
    let (status, posted) = call(Method::POST, &inputs, ana, Some(answer("ana"))).await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    assert_eq!(posted["lobby"]["answered"], json!(["ana"]));
    for body in [answer("bo"), json!({"player": "bo", "leave": true}), json!({"player": "dan", "join": true})] {
        let (status, refused) = call(Method::POST, &inputs, ana, Some(body.clone())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}: {refused}");
    }
    // The player follows the game, and reaches no other route of it.
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{id}"), ana, None).await.0, StatusCode::OK);
    let (status, _) =
        call(Method::POST, &format!("{base}/v1/sessions/{id}/turns"), ana, Some(json!({"input": {}}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The host joins a player with the session's key, and the join answers the new key.
    let (status, joined) = call(Method::POST, &inputs, session_key, Some(json!({"player": "dan", "join": true}))).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    let dan = joined["player_key"].as_str().unwrap();
    assert_eq!(call(Method::GET, &format!("{base}/v1/access"), dan, None).await.1["player"], "dan");
    // Ana leaves with her own key, which then opens nothing.
    let (status, left) = call(Method::POST, &inputs, ana, Some(json!({"player": "ana", "leave": true}))).await;
    assert_eq!(status, StatusCode::OK, "{left}");
    assert_eq!(call(Method::GET, &format!("{base}/v1/sessions/{id}"), ana, None).await.0, StatusCode::UNAUTHORIZED);
    // The host may still play for the whole table.
    let (status, _) = call(Method::POST, &inputs, session_key, Some(answer("bo"))).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_clients_conversations_are_its_keys() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let s = server(root.path()).await;
    let base = &s.url;
    let (_, alice) = issue(base, "alice's chat", None).await;
    let (_, bob) = issue(base, "bob's chat", None).await;
    let chat = |key: String, messages: Value, metadata: Option<Value>| {
        let url = format!("{base}/v1/chat/completions");
        async move {
            let mut body = json!({"model": "pirate", "messages": messages});
            if let Some(m) = metadata {
                body["metadata"] = m;
            }
            call(Method::POST, &url, &key, Some(body)).await
        }
    };
    let first = json!([{"role": "user", "content": "Ahoy captain!"}]);
    let (status, a1) = chat(alice.clone(), first.clone(), None).await;
    assert_eq!(status, StatusCode::OK, "{a1}");
    let a_session = a1["ruleweave"]["session"].as_str().unwrap().to_owned();
    let reply = a1["choices"][0]["message"]["content"].as_str().unwrap();
    let more = json!([
        {"role": "user", "content": "Ahoy captain!"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "I bring word from your mother."},
    ]);
    // The same conversation continued with Bob's key is not Alice's session.
    let (status, b2) = chat(bob.clone(), more.clone(), None).await;
    assert_eq!(status, StatusCode::OK, "{b2}");
    assert_ne!(b2["ruleweave"]["session"].as_str().unwrap(), a_session);
    let (_, a2) = chat(alice.clone(), more, None).await;
    assert_eq!(a2["ruleweave"]["session"].as_str().unwrap(), a_session, "Alice goes on in hers");
    // Bob cannot pin Alice's session either.
    let (status, pinned) = chat(bob.clone(), first.clone(), Some(json!({"session": a_session}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{pinned}");
    let nowhere = "0123456789abcdef0123";
    let (_, missing) = chat(bob.clone(), first, Some(json!({"session": nowhere}))).await;
    assert_eq!(
        pinned.to_string().replace(&a_session, nowhere),
        missing.to_string(),
        "the same answer as a session that does not exist"
    );
    // Alice lists her chat session; Bob does not see it.
    let (_, bobs) = call(Method::GET, &format!("{base}/v1/sessions"), &bob, None).await;
    assert!(!bobs.to_string().contains(&a_session), "{bobs}");
    let (_, alices) = call(Method::GET, &format!("{base}/v1/sessions"), &alice, None).await;
    assert!(alices.to_string().contains(&a_session), "{alices}");
}

/// Keys live in the store: a key issued on one replica opens on the other, sessions reach as they
/// do on one, and a key revoked on one is refused by the other on its next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_hold_on_two_replicas() {
    let Some(url) = support::postgres() else { return };
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let env = [("RULEWEAVE_TOKEN", OPERATOR)];
    let one = support::start(root.path(), &url, &env);
    let two = support::start(root.path(), &url, &env);
    let (id, key) = issue(&one.url, "on two replicas", None).await;
    let (session, session_key) = open(&two.url, &key).await;
    let (status, _) = call(Method::GET, &format!("{}/v1/sessions/{session}", one.url), &session_key, None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, other_key) = issue(&two.url, "another", None).await;
    let (status, _) = call(Method::GET, &format!("{}/v1/sessions/{session}", one.url), &other_key, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        call(Method::DELETE, &format!("{}/v1/keys/{id}", two.url), OPERATOR, None).await.0,
        StatusCode::NO_CONTENT
    );
    // The very next request to the other replica is refused: no replica holds keys of its own.
    let (status, _) = call(Method::GET, &format!("{}/v1/packs", one.url), &key, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "refused on the other replica");
}

/// Without a token nothing is asked (the local default), and a new session still answers its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_everything_is_open_and_keys_are_still_answered() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let engine = Engine::builder(root.path()).store(Arc::new(ruleweave::store::MemoryStore::new())).build();
    let s = support::serve(engine, None, 1 << 20).await;
    let (status, opened) = support::post(&format!("{}/v1/sessions", s.url), json!({"pack": "pirate"})).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(opened["key"].as_str().unwrap().starts_with("rw_session_"), "{opened}");
    let (status, listed) = support::post(&format!("{}/v1/keys", s.url), json!({"label": "local"})).await;
    assert_eq!(status, StatusCode::CREATED, "{listed}");
    assert_eq!(support::get(&format!("{}/v1/access", s.url)).await["as"], "open");
}

/// A player a turn takes off the table (the party's `-cy`, typed by the host) loses their key with
/// their place; a player's key of another lobby does not reach this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_players_key_goes_with_their_place_at_the_table() {
    let root = crate::lobby::party_root("30s");
    let s = server(root.path()).await;
    let base = &s.url;
    let open_party = |players: &'static str| async move {
        let body = json!({"pack": "party", "options": {"players": players}});
        let (status, opened) = call(Method::POST, &format!("{base}/v1/sessions"), OPERATOR, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{opened}");
        opened
    };
    let opened = open_party("ana,bo,cy").await;
    let other = open_party("dee,eve").await;
    let id = opened["id"].as_str().unwrap();
    let (session_key, cy) = (opened["key"].as_str().unwrap(), opened["player_keys"]["cy"].as_str().unwrap());
    let session = format!("{base}/v1/sessions/{id}");
    assert_eq!(call(Method::GET, &session, cy, None).await.0, StatusCode::OK);
    let dee = other["player_keys"]["dee"].as_str().unwrap();
    let (status, body) = call(Method::GET, &session, dee, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another lobby's player: {body}");

    let turns = format!("{session}/turns");
    let turn = |input: Value| call(Method::POST, &turns, session_key, Some(json!({"input": input})));
    let (status, first) = turn(json!("start")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, played) = turn(json!("ana -cy")).await;
    assert_eq!(status, StatusCode::OK, "{played}");
    let (_, now) = call(Method::GET, &session, session_key, None).await;
    assert_eq!(now["state"]["players"], json!(["ana", "bo"]), "{now}");
    assert_eq!(call(Method::GET, &session, cy, None).await.0, StatusCode::UNAUTHORIZED, "cy left with the turn");
    let ana = opened["player_keys"]["ana"].as_str().unwrap();
    assert_eq!(call(Method::GET, &session, ana, None).await.0, StatusCode::OK, "ana is still at the table");
}

/// A stream opened with a key ends once the key is revoked: the next event it would have carried
/// is not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_keys_stream_ends() {
    use futures_util::StreamExt;
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let s = server(root.path()).await;
    let base = &s.url;
    let (id, key) = issue(base, "followed", None).await;
    let (session, session_key) = open(base, &key).await;
    let r = support::http()
        .get(format!("{base}/v1/sessions/{session}/events"))
        .bearer_auth(&session_key)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut body = r.bytes_stream();
    let mut parser = ruleweave_testkit::sse::Parser::default();
    // The stream is open once the server has sent its first bytes (headers came with them).
    assert_eq!(call(Method::DELETE, &format!("{base}/v1/keys/{id}"), OPERATOR, None).await.0, StatusCode::NO_CONTENT);
    let turns = format!("{base}/v1/sessions/{session}/turns");
    let (status, turn) = call(Method::POST, &turns, OPERATOR, Some(json!({"input": "Ahoy!"}))).await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut names = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => panic!("the stream did not end within 20 s: {names:?}"),
            Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok(chunk))) => parser.feed(&chunk),
        }
        while let Some(e) = parser.next() {
            names.push(e.name);
        }
    }
    assert!(!names.iter().any(|n| n == "turn"), "no turn reached a revoked key: {names:?}");
}

/// An issued key K makes session A; A's key forks A into F, and F's key forks F into G. With A
/// deleted, K still reaches F and G, and F's key G; revoking K then ends every key down the
/// line (401), whichever replica (`one`, `two`) is asked.
async fn a_deleted_parent_cuts_nothing(one: &str, two: &str) {
    let (k, key) = issue(one, "a game server", None).await;
    let (a, a_key) = open(two, &key).await;
    let fork = |base: &str, id: &str, with: &str| {
        let (base, id, with) = (base.to_owned(), id.to_owned(), with.to_owned());
        async move {
            let url = format!("{base}/v1/sessions/{id}/fork");
            let (status, forked) = call(Method::POST, &url, &with, Some(json!({"checkpoint": 0}))).await;
            assert_eq!(status, StatusCode::CREATED, "{forked}");
            (forked["id"].as_str().unwrap().to_owned(), forked["key"].as_str().unwrap().to_owned())
        }
    };
    let (f, f_key) = fork(one, &a, &a_key).await;
    let (g, g_key) = fork(two, &f, &f_key).await;
    let (status, _) = call(Method::DELETE, &format!("{one}/v1/sessions/{a}"), &key, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for (base, id, with, who) in [(two, &f, &key, "K, F"), (one, &g, &key, "K, G"), (two, &g, &f_key, "F's key, G")] {
        let (status, body) = call(Method::GET, &format!("{base}/v1/sessions/{id}"), with, None).await;
        assert_eq!(status, StatusCode::OK, "{who}: the parent's deletion cut nothing: {body}");
    }
    let (status, _) = call(Method::DELETE, &format!("{two}/v1/keys/{k}"), OPERATOR, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for (base, id, with, who) in [(one, &f, &f_key, "F's key"), (two, &g, &g_key, "G's key"), (one, &f, &key, "K")] {
        let (status, body) = call(Method::GET, &format!("{base}/v1/sessions/{id}"), with, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{who}: revoked down the line: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_follows_every_fork_in_memory() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let s = server(root.path()).await;
    a_deleted_parent_cuts_nothing(&s.url, &s.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_follows_every_fork_on_sqlite() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let db = format!("sqlite://{}", root.path().join("keys.db").display());
    let server = support::start(root.path(), &db, &[("RULEWEAVE_TOKEN", OPERATOR)]);
    a_deleted_parent_cuts_nothing(&server.url, &server.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_follows_every_fork_on_two_replicas() {
    let Some(url) = support::postgres() else { return };
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let env = [("RULEWEAVE_TOKEN", OPERATOR)];
    let (one, two) = (support::start(root.path(), &url, &env), support::start(root.path(), &url, &env));
    a_deleted_parent_cuts_nothing(&one.url, &two.url).await;
}

/// Playing is not debugging. With a token, a session's key (and a player's) plays, reads and
/// streams; editing the state, breakpoints, resuming a held turn, forking with `set` and
/// replaying are 403 for it. An issued key given `"rights": ["debug"]` does all of them, and so
/// does the key of a session it made with `"debug": true` (a designer's playtest) and the forks
/// made with that key; a key without the right cannot ask for such a session. `GET /v1/access`
/// says each key's rights. An issued key may expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_players_key_plays_and_only_a_debuggers_key_debugs() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let s = server(root.path()).await;
    let base = &s.url;
    let (_, player_server) = issue(base, "a game server", None).await;
    let (_, session_key) = open(base, &player_server).await;
    let (_, key) = call(Method::GET, &format!("{base}/v1/access"), &session_key, None).await;
    assert_eq!(key["rights"], json!([]), "{key}");
    // What a playing key may not do, each refused by name, and what it may.
    let debugging = |id: &str| {
        vec![
            (
                Method::POST,
                format!("/v1/sessions/{id}/turns"),
                json!({"input": "x", "break": {"before": ["merit_check"]}}),
            ),
            (Method::PATCH, format!("/v1/sessions/{id}/state"), json!({"set": {"is_won": true}})),
            (Method::POST, format!("/v1/sessions/{id}/fork"), json!({"checkpoint": 0, "set": {"merit_score": 100}})),
            (Method::POST, format!("/v1/sessions/{id}/replay"), json!({})),
        ]
    };
    let (mine, mine_key) = open(base, &player_server).await;
    for (method, path, body) in debugging(&mine) {
        for key in [&mine_key, &player_server] {
            let (status, refused) = call(method.clone(), &format!("{base}{path}"), key, Some(body.clone())).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {refused}");
            assert!(refused["error"]["message"].as_str().unwrap().contains("is debugging: it needs"), "{refused}");
        }
    }
    let (status, refused) = call(
        Method::POST,
        &format!("{base}/v1/sessions"),
        &player_server,
        Some(json!({"pack": "pirate", "debug": true})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a playing key makes no debugging session: {refused}");
    let (status, played) =
        call(Method::POST, &format!("{base}/v1/sessions/{mine}/turns"), &mine_key, Some(json!({"input": "Ahoy!"})))
            .await;
    assert_eq!(status, StatusCode::OK, "{played}");

    // A designer's key: everything, and a playtest session whose key may debug too.
    let (status, designer) = call(
        Method::POST,
        &format!("{base}/v1/keys"),
        OPERATOR,
        Some(json!({"label": "designer", "rights": ["debug"]})),
    )
    .await;
    assert_eq!((status, &designer["rights"]), (StatusCode::CREATED, &json!(["debug"])), "{designer}");
    let designer_id = designer["id"].as_str().unwrap().to_owned();
    let designer = designer["key"].as_str().unwrap().to_owned();
    let (_, me) = call(Method::GET, &format!("{base}/v1/access"), &designer, None).await;
    assert_eq!(me["rights"], json!(["debug"]));
    let (status, opened) =
        call(Method::POST, &format!("{base}/v1/sessions"), &designer, Some(json!({"pack": "pirate", "debug": true})))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let (test, test_key) = (opened["id"].as_str().unwrap().to_owned(), opened["key"].as_str().unwrap().to_owned());
    let (_, me) = call(Method::GET, &format!("{base}/v1/access"), &test_key, None).await;
    assert_eq!(me["rights"], json!(["debug"]), "a playtest's key may debug it: {me}");
    for (key, who) in [(&designer, "the designer's key"), (&test_key, "the playtest's key")] {
        let (status, held) = call(
            Method::POST,
            &format!("{base}/v1/sessions/{test}/turns"),
            key,
            Some(json!({"input": "Ahoy!", "break": {"after": ["merit_check"]}})),
        )
        .await;
        assert_eq!((status, &held["held"]), (StatusCode::OK, &json!(true)), "{who}: {held}");
        let set = Some(json!({"set": {"merit_score": 1}}));
        let (status, edited) = call(Method::PATCH, &format!("{base}/v1/sessions/{test}/state"), key, set).await;
        assert_eq!((status, &edited["state"]["merit_score"]), (StatusCode::OK, &json!(1)), "{who}: {edited}");
        let (status, done) = call(Method::POST, &format!("{base}/v1/sessions/{test}/resume"), key, None).await;
        assert_eq!((status, done.get("held")), (StatusCode::OK, None), "{who}: {done}");
        let (status, _) = call(Method::POST, &format!("{base}/v1/sessions/{test}/replay"), key, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "{who} replays");
    }
    // Each hold, edit and resume is recorded with the key that made it.
    let (_, listed) = call(Method::GET, &format!("{base}/v1/sessions/{test}/checkpoints"), OPERATOR, None).await;
    let made: Vec<(String, String)> = listed["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|c| (c["kind"].as_str().unwrap().to_owned(), c["by"].as_str().unwrap_or("nobody").to_owned()))
        .collect();
    let playtest = format!("session:{test}");
    let expected: Vec<(String, String)> = [("break", &designer_id), ("edit", &designer_id), ("turn", &designer_id)]
        .into_iter()
        .chain([("break", &playtest), ("edit", &playtest), ("turn", &playtest)])
        .map(|(kind, by)| (kind.to_owned(), by.clone()))
        .collect();
    assert_eq!(made, expected, "{listed}");
    let fork = Some(json!({"checkpoint": 0, "set": {"merit_score": 50}}));
    let (status, forked) = call(Method::POST, &format!("{base}/v1/sessions/{test}/fork"), &test_key, fork).await;
    assert_eq!((status, &forked["state"]["merit_score"]), (StatusCode::CREATED, &json!(50)), "{forked}");
    let (_, me) = call(Method::GET, &format!("{base}/v1/access"), forked["key"].as_str().unwrap(), None).await;
    assert_eq!(me["rights"], json!(["debug"]), "a playtest's fork may be debugged with its own key: {me}");

    // An issued key may expire (the store refuses it after: `store::tests`' keys); it says
    // when, and opens until then. A bad right or lifetime is refused by name.
    let (status, brief) =
        call(Method::POST, &format!("{base}/v1/keys"), OPERATOR, Some(json!({"label": "brief", "expires_in": 3600})))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{brief}");
    assert!(brief["expires_at"].as_str().is_some_and(|t| t > brief["created_at"].as_str().unwrap()), "{brief}");
    assert_eq!(
        call(Method::GET, &format!("{base}/v1/packs"), brief["key"].as_str().unwrap(), None).await.0,
        StatusCode::OK
    );
    for (body, says) in [
        (json!({"label": "x", "rights": ["root"]}), "there is no right `root`"),
        (json!({"label": "x", "expires_in": 0}), "`expires_in` is 1 to "),
    ] {
        let (status, refused) = call(Method::POST, &format!("{base}/v1/keys"), OPERATOR, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains(says), "{refused}");
    }
}

/// Revoking a key stops the jobs it started and ends their streams (`cancelled`), as it ends
/// its sessions' streams; the operator sees the job cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_keys_jobs_stop_and_their_streams_end() {
    let s = server(&support::repo_root().join("tests/packs/coin")).await;
    let base = &s.url;
    let (k, key) = issue(base, "a tuner", None).await;
    let long = json!({"vary": "chance=0..100", "target": "caller:won=0.3", "within": 0.004, "games_max": 100000});
    let (status, started) = call(Method::POST, &format!("{base}/v1/packs/coin/tune"), &key, Some(long)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let mut events =
        support::http().get(format!("{base}/v1/jobs/{job}/events")).bearer_auth(&key).send().await.unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    let mut parser = ruleweave_testkit::sse::Parser::default();
    let mut next = async || -> Option<ruleweave_testkit::sse::Event> {
        loop {
            if let Some(e) = parser.next() {
                return Some(e);
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), events.chunk())
                .await
                .expect("the job's stream says something within 30 s")
                .unwrap()?;
            parser.feed(&chunk);
        }
    };
    let first = next().await.expect("a first event");
    assert_eq!(first.name, "progress", "{}", first.data);
    let (status, _) = call(Method::DELETE, &format!("{base}/v1/keys/{k}"), OPERATOR, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let mut last = first;
    while let Some(e) = next().await {
        last = e;
    }
    assert_eq!(last.name, "cancelled", "the stream ends with the job: {}", last.data);
    let (status, seen) = call(Method::GET, &format!("{base}/v1/jobs/{job}"), OPERATOR, None).await;
    assert_eq!((status, &seen["state"]), (StatusCode::OK, &json!("cancelled")), "{seen}");
}

/// A lobby's players edited by hand obey the lobby's rules (names only, as many as it holds, none
/// a look-alike of another), and a player edited off the table loses their key at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lobby_edited_by_hand_keeps_its_rules_and_its_keys() {
    let root = crate::lobby::party_root("30s");
    let s = server(root.path()).await;
    let base = &s.url;
    let body = json!({"pack": "party", "options": {"players": "ana,bo,cy"}});
    let (status, opened) = call(Method::POST, &format!("{base}/v1/sessions"), OPERATOR, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let id = opened["id"].as_str().unwrap();
    let (session, state) = (format!("{base}/v1/sessions/{id}"), format!("{base}/v1/sessions/{id}/state"));
    let too_many: Vec<String> = (0..21).map(|i| format!("p{i}")).collect();
    for (players, says) in [
        (json!(too_many), "the lobby holds at most 20 players, not 21"),
        (json!(["ana", 7]), "`players[1]` is an int, but the items of `players` are a string"),
        (json!(["ana", "аna"]), "look the same"),
        (json!(["ana", " bo"]), "cannot be a player's name"),
    ] {
        let (status, refused) = call(Method::PATCH, &state, OPERATOR, Some(json!({"set": {"players": players}}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains(says), "{says}: {refused}");
    }
    let bo = opened["player_keys"]["bo"].as_str().unwrap();
    assert_eq!(call(Method::GET, &session, bo, None).await.0, StatusCode::OK);
    let (status, edited) =
        call(Method::PATCH, &state, OPERATOR, Some(json!({"set": {"players": ["ana", "cy"]}}))).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(call(Method::GET, &session, bo, None).await.0, StatusCode::UNAUTHORIZED, "bo was edited off the table");
    let ana = opened["player_keys"]["ana"].as_str().unwrap();
    assert_eq!(call(Method::GET, &session, ana, None).await.0, StatusCode::OK, "ana is still at the table");
}

/// With a token, a request with a body and no key the server knows is answered 401 from its
/// headers, before its body arrives; so a flood of keyless uploads that stall leaves nothing
/// buffered: the server's memory stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_buffered_for_who_shows_no_key() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let server = support::start(root.path(), "memory", &[("RULEWEAVE_TOKEN", OPERATOR)]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    let head = |key: &str| {
        let auth = if key.is_empty() { String::new() } else { format!("Authorization: Bearer {key}\r\n") };
        format!(
            "POST /v1/keys HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{{"
        )
    };
    // The answer comes while the body is still owed (the body timeout is 30 s).
    for key in ["", "rw_key_nobody_issued_this"] {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        conn.write_all(head(key).as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 12];
        tokio::time::timeout(std::time::Duration::from_secs(10), conn.read_exact(&mut answer))
            .await
            .expect("answered before the body came")
            .unwrap();
        assert_eq!(&answer, b"HTTP/1.1 401", "{key:?}");
    }
    // Many stalled uploads of most of a MiB each: the server's resident memory hardly moves.
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
        let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
        kb.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap() / 1024
    };
    let before = rss();
    let chunk = vec![b'x'; 1 << 20];
    let mut stalled = Vec::new();
    for _ in 0..300 {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        conn.write_all(head("").as_bytes()).await.unwrap();
        // As much of the body as the connection takes in a moment; then nothing more.
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(20), conn.write_all(&chunk[..chunk.len() - 2])).await;
        stalled.push(conn);
    }
    // Every one of them has its answer: the server read their headers and is done with them.
    for conn in &mut stalled {
        let mut answer = vec![0u8; 12];
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), conn.read_exact(&mut answer)).await;
    }
    let after = rss();
    assert!(after < before + 100, "300 stalled keyless uploads took the server from {before} MB to {after} MB");
    assert!(after < 200, "{after} MB");
}

/// One key cannot fill the disk: the sessions that go back to an issued key (its own and their
/// forks) are at most `sessions_per_key_per_hour` an hour (429 naming it); the operator is not
/// limited, and `GET /v1/keys` counts each key's sessions and the bytes they take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_makes_at_most_its_quota_of_sessions() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let env = [("RULEWEAVE_TOKEN", OPERATOR), ("RULEWEAVE_SESSIONS_PER_KEY_PER_HOUR", "3")];
    let dir = tempfile::tempdir().unwrap();
    let server = support::start(root.path(), &format!("sqlite://{}", dir.path().join("k.db").display()), &env);
    let base = &server.url;
    let (_, key) = issue(base, "a flooder", None).await;
    let (a, a_key) = open(base, &key).await;
    open(base, &key).await;
    let fork = format!("{base}/v1/sessions/{a}/fork");
    let (status, forked) = call(Method::POST, &fork, &a_key, Some(json!({"checkpoint": 0}))).await;
    assert_eq!(status, StatusCode::CREATED, "{forked}");
    for (url, with, body) in [
        (format!("{base}/v1/sessions"), &key, json!({"pack": "pirate"})),
        (fork.clone(), &a_key, json!({"checkpoint": 0})),
        // A new conversation on the chat face is a new session too.
        (
            format!("{base}/v1/chat/completions"),
            &key,
            json!({"model": "pirate", "messages": [{"role": "user", "content": "Ahoy!"}]}),
        ),
    ] {
        let (status, refused) = call(Method::POST, &url, with, Some(body)).await;
        assert_eq!(
            (status, &refused["error"]["code"]),
            (StatusCode::TOO_MANY_REQUESTS, &json!("quota_exceeded")),
            "{refused}"
        );
        assert!(
            refused["error"]["message"].as_str().unwrap().contains("`[server] sessions_per_key_per_hour` = 3"),
            "{refused}"
        );
    }
    let (status, _) =
        call(Method::POST, &format!("{base}/v1/sessions"), OPERATOR, Some(json!({"pack": "pirate"}))).await;
    assert_eq!(status, StatusCode::CREATED, "the operator has no quota");
    let flooder = async || {
        let (_, listed) = call(Method::GET, &format!("{base}/v1/keys"), OPERATOR, None).await;
        listed["keys"].as_array().unwrap().iter().find(|k| k["label"] == "a flooder").unwrap()["sessions"].clone()
    };
    let counted = flooder().await;
    assert_eq!((&counted["kept"], &counted["last_hour"]), (&json!(3), &json!(3)), "{counted}");
    // And what they take on disk, which grows as they play.
    let before = counted["bytes"].as_u64().unwrap();
    assert!(before > 0, "{counted}");
    let turn = Some(json!({"input": "Ahoy! I bring a chest of gold and a map to a second one."}));
    let (status, _) = call(Method::POST, &format!("{base}/v1/sessions/{a}/turns"), &a_key, turn).await;
    assert_eq!(status, StatusCode::OK);
    let after = flooder().await["bytes"].as_u64().unwrap();
    assert!(after > before, "{before} then {after} bytes");
}

/// One key cannot keep the server's job place to itself: an issued key starts at most
/// `jobs_per_key_per_hour` jobs an hour (429 naming it); the operator is not limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_starts_at_most_its_quota_of_jobs() {
    let env = [("RULEWEAVE_TOKEN", OPERATOR), ("RULEWEAVE_JOBS_PER_KEY_PER_HOUR", "1")];
    let server = support::start(&support::repo_root().join("tests/packs/coin"), "memory", &env);
    let base = &server.url;
    let (_, key) = issue(base, "a tuner", None).await;
    let quick = json!({"vary": "chance=0..100", "target": "caller:won=0.3", "within": 0.2});
    let tune = format!("{base}/v1/packs/coin/tune");
    let (status, started) = call(Method::POST, &tune, &key, Some(quick.clone())).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    // Stopped, so the server's one place is free: what refuses the next is the key's quota.
    call(Method::DELETE, &format!("{base}/v1/jobs/{job}"), &key, None).await;
    let (status, refused) = call(Method::POST, &tune, &key, Some(quick.clone())).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (StatusCode::TOO_MANY_REQUESTS, &json!("quota_exceeded")),
        "{refused}"
    );
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("`[server] jobs_per_key_per_hour` = 1"),
        "{refused}"
    );
}
