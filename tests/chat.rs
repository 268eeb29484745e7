//! The chat face (`/v1/models`, `/v1/chat/completions`) through a real `ruleweave serve`:
//! stateless clients continuing their session, regenerated and edited messages forking, streaming,
//! OpenAI's error shape, two replicas on one PostgreSQL, and the official OpenAI Python SDK.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{copy_of, counter_root, get, http, post, start};

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// A completion: its status, reply text, session and turn.
async fn chat(url: &str, model: &str, messages: &[Value]) -> (StatusCode, Value) {
    post(&format!("{url}/v1/chat/completions"), json!({"model": model, "messages": messages})).await
}

fn said(v: &Value) -> (String, String, u64) {
    (
        v["choices"][0]["message"]["content"].as_str().unwrap_or_else(|| panic!("no reply in {v}")).to_owned(),
        v["ruleweave"]["session"].as_str().unwrap().to_owned(),
        v["ruleweave"]["turn"].as_u64().unwrap(),
    )
}

/// A streamed completion's `data:` payloads, in order.
async fn chat_stream(url: &str, body: Value) -> Vec<String> {
    let r = http().post(format!("{url}/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = r.text().await.unwrap();
    ruleweave_testkit::sse::events(&text).into_iter().map(|e| e.data).collect()
}

#[tokio::test]
async fn a_stateless_client_plays_the_pirate() {
    let root = copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;

    let models = get(&format!("{url}/v1/models")).await;
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["pirate", "pirate:easy", "pirate:hard"], "the pack, and its other difficulties");
    assert_eq!(get(&format!("{url}/v1/models/pirate:hard")).await["id"], "pirate:hard");

    // Turn 1 starts a session; turn 2, sent with the whole conversation, goes on with it.
    let m1 = "Ahoy captain! I bring word from your old mother in Tortuga.";
    let (status, first) = chat(url, "pirate:hard", &[json!({"role": "system", "content": "Be kind."}), user(m1)]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["object"], "chat.completion");
    assert_eq!(first["choices"][0]["finish_reason"], "stop");
    let usage = &first["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap())
    );
    let (a1, s, turn) = said(&first);
    assert_eq!(turn, 1);
    let session = get(&format!("{url}/v1/sessions/{s}")).await;
    assert_eq!(session["options"]["difficulty"], "hard", "the model's options chose the difficulty");

    let m2 = "She says you promised me a share of the treasure.";
    let (_, second) = chat(url, "pirate:hard", &[user(m1), assistant(&a1), user(m2)]).await;
    let (a2, s2, turn) = said(&second);
    assert_eq!((s2.as_str(), turn), (s.as_str(), 2), "the same session, one turn on: {second}");
    assert_eq!(get(&format!("{url}/v1/sessions/{s}")).await["turns"], 2);

    // Regenerating turn 2 (the same conversation again) forks from turn 1: the session keeps its
    // own turn 2.
    let (regenerated, again) = {
        let (_, again) = chat(url, "pirate:hard", &[user(m1), assistant(&a1), user(m2)]).await;
        (said(&again).0, again)
    };
    let (_, fork, turn) = said(&again);
    assert_ne!(fork, s);
    assert_eq!(turn, 2);
    assert_eq!(get(&format!("{url}/v1/sessions/{s}")).await["turns"], 2);
    // The stand-in said it word for word again: two sessions now stand where this conversation
    // does, so it goes on in a fork of the first, never in a session another client may hold.
    assert_eq!(regenerated, a2);

    // An edited earlier message forks too; the original goes on where it was.
    let (_, edited) = chat(url, "pirate:hard", &[user(m1), assistant(&a1), user("Give me the treasure.")]).await;
    assert_ne!(said(&edited).1, s);
    let m3 = "I can sing the song she sang to you as a boy.";
    let (_, third) = chat(url, "pirate:hard", &[user(m1), assistant(&a1), user(m2), assistant(&a2), user(m3)]).await;
    let s = {
        let (_, s3, turn) = said(&third);
        assert!(s3 != s && s3 != fork && turn == 3, "a fork of the first at turn 2: {third}");
        s3
    };

    // The same words under another difficulty are another conversation.
    let (_, other) = chat(url, "pirate", &[user(m1), assistant(&a1), user(m2)]).await;
    assert_ne!(said(&other).1, s);
    assert_eq!(said(&other).2, 2, "a new session catches up: both player messages are played");

    // Streamed: the role, the text, the end, the usage, [DONE]; the text sent continues the
    // conversation.
    let a3 = said(&third).0;
    let history = vec![user(m1), assistant(&a1), user(m2), assistant(&a2), user(m3), assistant(&a3), user("Arr?")];
    let data = chat_stream(
        url,
        json!({"model": "pirate:hard", "messages": history, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect::<Vec<_>>().concat();
    assert!(!text.trim().is_empty());
    let n = chunks.len();
    assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    assert!(chunks[n - 1]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let mut history = history;
    history.extend([assistant(&text), user("Well?")]);
    let (_, fifth) = chat(url, "pirate:hard", &history).await;
    assert_eq!((said(&fifth).1, said(&fifth).2), (s.clone(), 5), "the streamed reply was linked");

    // A client may pin its session.
    let (_, pinned) = post(
        &format!("{url}/v1/chat/completions"),
        json!({"model": "pirate:hard", "messages": [user("Still there?")], "metadata": {"session": s}}),
    )
    .await;
    assert_eq!((said(&pinned).1, said(&pinned).2), (s.clone(), 6));
}

#[tokio::test]
async fn errors_come_in_openais_shape() {
    let root = copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;
    let (status, body) = chat(url, "pirat", &[user("hi")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["code"], "model_not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains("did you mean `pirate`"), "{body}");
    assert_eq!(get(&format!("{url}/v1/models/pirat")).await["error"]["code"], "model_not_found");

    let (status, body) = chat(url, "pirate:impossible", &[user("hi")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"]["message"].as_str().unwrap().contains("difficulty: easy, medium, hard"), "{body}");
    let (status, body) = chat(url, "pirate", &[user("hi"), assistant("Arr")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "the last message must be the player's");
    assert!(body["error"]["message"].as_str().unwrap().contains("role `user`"));
    let (status, _) = chat(url, "pirate", &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = chat(url, "pirate", &[user(&"a".repeat(2001))]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("2000"), "{body}");
    // A body of the wrong shape is a bad request too, as OpenAI's API answers it.
    let (status, body) = post(&format!("{url}/v1/chat/completions"), json!({"messages": []})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn a_finished_game_is_a_conflict_and_a_pack_without_text_input_says_why() {
    let root = counter_root();
    std::fs::write(
        root.path().join("config/sums.yaml"),
        "state:\n  total: {type: int, reducer: add}\ninput:\n  a: {type: int, required: true}\n  b: {type: int, required: true}\noutput: [total]\ngraph:\n  nodes:\n    add: {script: sums.rhai::add}\n  edges:\n    - START -> add\n    - add -> END\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.path().join("scripts/sums")).unwrap();
    std::fs::write(root.path().join("scripts/sums/sums.rhai"), "fn add() { #{ total: input().a + input().b } }")
        .unwrap();
    let server = start(root.path(), "memory", &[]);
    let url = &server.url;

    let (status, done) = chat(url, "counter", &[user("stop")]).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    let (reply, _, _) = said(&done);
    assert_eq!(done["ruleweave"]["finished"], true);
    let (status, body) = chat(url, "counter", &[user("stop"), assistant(&reply), user("more")]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["message"], "Counted to the end.");

    let (status, body) = chat(url, "sums", &[user("two and three")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("takes a map of input fields (a, b)") && message.contains("JSON object"), "{message}");
    let (status, body) = chat(url, "sums", &[user(r#"{"a": 2, "b": 3}"#)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(said(&body).0, r#"{"total":5}"#, "a pack without display.reply shows its output");
}

/// Each shipped pack's first message as a person expects it: the interviewer answers it with its
/// first question, the party with the question its lobby opens on, the designer and the debate
/// take it as their first input (their openings are only hints of what to type).
#[tokio::test]
async fn every_pack_answers_its_first_message_as_a_person_expects() {
    let server = start(&support::repo_root(), "memory", &[]);
    let url = &server.url;
    let models = get(&format!("{url}/v1/models")).await;
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&"debate:pause=rounds") && !ids.contains(&"debate:rounds"),
        "a value named as an option reads as its option: {ids:?}"
    );
    assert!(ids.contains(&"debate:strict"), "{ids:?}");

    let (_, first) = chat(url, "interview", &[user("hi")]).await;
    let (opening, s, turn) = said(&first);
    assert_eq!(turn, 0, "the opening question answers the first message: {first}");
    // The question, then what to type.
    let (question, help) = opening.split_once("\n\n").unwrap();
    assert!(question.ends_with('?'), "{question}");
    assert_eq!(help, "(type: Answer the question in your own words (\"I don't know\" is an answer too).)");
    let (_, second) = chat(url, "interview", &[user("hi"), assistant(&opening), user("I like it frothy.")]).await;
    let (next, s2, turn) = said(&second);
    assert_eq!((s2, turn), (s, 1));
    let session = get(&format!("{url}/v1/sessions/{}", said(&second).1)).await;
    assert_eq!(next, session["display"]["reply"].as_str().unwrap());

    let (_, first) = chat(url, "party", &[user("hi everyone")]).await;
    let (opening, s, turn) = said(&first);
    assert_eq!(turn, 1, "the lobby opened by asking its first question: {first}");
    assert!(opening.starts_with("Never have I ever"), "{opening}");
    assert!(
        opening.ends_with("\n\n(type: 4/6, all, none, names of those who have; +name joins, -name leaves)"),
        "{opening}"
    );
    let (_, second) = chat(url, "party", &[user("hi everyone"), assistant(&opening), user("all")]).await;
    let (next, s2, turn) = said(&second);
    assert_eq!((s2.as_str(), turn), (s.as_str(), 2));
    let session = get(&format!("{url}/v1/sessions/{s}")).await;
    assert_eq!(next, session["display"]["reply"].as_str().unwrap());
    assert_eq!(session["state"]["escalation_history"][0]["have_ratio"], 1.0, "everyone had");

    let (status, first) = chat(url, "designer", &[user("the chambers of the heart")]).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (design, _, turn) = said(&first);
    assert_eq!(turn, 1, "the question is the designer's first input");
    assert!(design.contains("scene"), "{design}");

    // The debate: `start` is its first input; its speeches stream under their speakers, without
    // the debaters' reflection and critique.
    let data =
        chat_stream(url, json!({"model": "debate:rounds=1:off", "stream": true, "messages": [user("start")]})).await;
    let streamed: String = data[..data.len() - 1]
        .iter()
        .filter_map(|d| {
            serde_json::from_str::<Value>(d).ok()?["choices"][0]["delta"]["content"].as_str().map(str::to_owned)
        })
        .collect();
    assert!(streamed.starts_with("pro: Surveys where"), "{streamed}");
    assert!(streamed.contains("\n\ncon: Surveys where"), "{streamed}");
    assert!(!streamed.contains("PHASE"), "{streamed}");
    // Checking off, the stand-in judge finds neither side better: a draw (words never decide).
    assert!(streamed.ends_with("The debate is over. Winner: draw."), "{streamed}");
    // A line the debate does not take is answered in the debate's words, with what to type:
    // the conversation goes on.
    let (status, refused) = chat(url, "debate", &[user("hello")]).await;
    assert_eq!(status, StatusCode::OK, "{refused}");
    let (words, _, turn) = said(&refused);
    assert_eq!(turn, 0, "nothing was played: {refused}");
    assert!(words.contains("type \"start\" to begin the debate"), "{words}");
    assert!(
        words.ends_with("(type: `start` to begin; at a pause, `continue` or a note for the moderator.)"),
        "{words}"
    );
    assert!(!words.contains(".rhai"), "no script place reaches the player: {words}");
}

/// Two clients whose conversations open alike (the same first message, the same opening) never
/// play in each other's session: a conversation linked twice is continued in a fork, so what one
/// answers stays in that one's session.
#[tokio::test]
async fn clients_that_open_alike_never_share_a_session() {
    let server = start(&support::repo_root(), "memory", &[]);
    let url = &server.url;
    let (_, a) = chat(url, "interview", &[user("hi")]).await;
    let (_, b) = chat(url, "interview", &[user("hi")]).await;
    let (question, a0, _) = said(&a);
    assert_eq!(said(&b).0, question, "the same opening");
    let secret = |who: &str| format!("{who}'s private answer: I grew up on a farm near the river.");
    let (_, a1) = chat(url, "interview", &[user("hi"), assistant(&question), user(&secret("A"))]).await;
    let (_, b1) = chat(url, "interview", &[user("hi"), assistant(&question), user(&secret("B"))]).await;
    let (a_next, a_session, a_turn) = said(&a1);
    let (_, b_session, b_turn) = said(&b1);
    assert_ne!(a_session, b_session, "{a1} {b1}");
    assert_eq!((a_turn, b_turn), (1, 1));
    for (session, mine, theirs) in [(&a_session, "A", "B"), (&b_session, "B", "A")] {
        let said = get(&format!("{url}/v1/sessions/{session}/conversation")).await;
        let text = said.to_string();
        assert!(text.contains(&secret(mine)) && !text.contains(&secret(theirs)), "{session}: {text}");
    }
    // A goes on in its own session.
    let (_, a2) = chat(
        url,
        "interview",
        &[user("hi"), assistant(&question), user(&secret("A")), assistant(&a_next), user("More about the river.")],
    )
    .await;
    assert_eq!((said(&a2).1, said(&a2).2), (a_session, 2));
    let _ = a0;
}

#[tokio::test]
async fn a_conversation_goes_on_whichever_replica_it_reaches() {
    let Some(pg) = support::postgres() else { return };
    let root = copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let a = start(root.path(), &pg, &[]);
    let b = start(root.path(), &pg, &[]);
    let m1 = format!("Ahoy from a replica test {}", std::process::id());
    let (_, first) = chat(&a.url, "pirate", &[user(&m1)]).await;
    let (a1, s, _) = said(&first);
    let (_, second) = chat(&b.url, "pirate", &[user(&m1), assistant(&a1), user("Second move")]).await;
    let (a2, s2, turn) = said(&second);
    assert_eq!((s2.as_str(), turn), (s.as_str(), 2), "B found A's link: {second}");
    let (_, third) =
        chat(&a.url, "pirate", &[user(&m1), assistant(&a1), user("Second move"), assistant(&a2), user("3")]).await;
    assert_eq!((said(&third).1, said(&third).2), (s.clone(), 3), "A sees B's turn");
    let (_, regenerated) = chat(&b.url, "pirate", &[user(&m1), assistant(&a1), user("Second move")]).await;
    assert_ne!(said(&regenerated).1, s, "a regenerated turn forks on either replica");
}

/// The official OpenAI Python SDK (a virtualenv `.ci/run` makes; `RULEWEAVE_TEST_PYTHON` names
/// its interpreter) lists the models, plays two stateless turns, streams a third and gets its
/// `NotFoundError` for an unknown pack.
#[test]
fn the_openai_python_sdk_plays_the_pirate() {
    let Some(python) =
        support::needed("RULEWEAVE_TEST_PYTHON", "CI must test the OpenAI SDK", "the OpenAI SDK test did not run")
    else {
        return;
    };
    let root = copy_of(&[
        "config/pirate.yaml",
        "scripts/pirate",
        "prompts/pirate",
        "config/party.yaml",
        "scripts/party",
        "prompts/party",
        "data/party",
    ]);
    let server = start(root.path(), "memory", &[]);
    let out = std::process::Command::new(python)
        .arg(support::repo_root().join("tests/chat/sdk_client.py"))
        .arg(&server.url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("the SDK played 4 turns in one session, and a party round with a refused line"),
        "{stdout}"
    );
}

/// A long conversation this server has no record of (3,200 messages in one request) is looked
/// up in one pass and refused with what to do, while `/healthz` goes on answering: the lookup
/// once took 17 s of a worker per request, and could be replayed forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_unknown_conversation_is_refused_without_holding_the_server() {
    let server = start(&support::repo_root(), "memory", &[]);
    let url = server.url.clone();
    let messages: Vec<Value> = (0..1600)
        .flat_map(|i| [user(&format!("move number {i} of a long game")), assistant(&format!("reply {i}"))])
        .chain([user("and one more")])
        .collect();
    let bound = std::time::Duration::from_secs(60);
    let asked = tokio::spawn(async move { tokio::time::timeout(bound, chat(&url, "pirate", &messages)).await });
    let health = tokio::time::timeout(bound, get(&format!("{}/healthz", server.url))).await;
    assert_eq!(health.expect("/healthz answers meanwhile")["status"], "ok");
    let (status, body) = asked.await.unwrap().expect("the long conversation is answered");
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "unknown_conversation", "{body}");
}
