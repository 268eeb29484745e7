//! `ruleweave serve` as a process: killed under load and restarted, two replicas on one
//! PostgreSQL, a graceful shutdown with a turn in flight, reloading packs with `--watch`; and
//! `play` resuming a stored session and showing reloads.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply, judged};
use support::{
    counter_root, edit, get, http, post, reload_root, repo_root, ruleweave, run_with_stdin, start, start_with, stdout,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_keeps_every_acknowledged_turn() {
    let root = counter_root();
    let db = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", db.path().join("crash.db").display());
    let server = start(root.path(), &store, &[]);
    let mut ids = Vec::new();
    for _ in 0..8 {
        let (status, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "counter"})).await;
        assert_eq!(status, StatusCode::CREATED);
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    // Eight clients play turns as fast as they can (until the server dies, or 10,000 turns each);
    // every 200 is an acknowledged turn.
    let acked: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let (count, mut counted) = tokio::sync::watch::channel(0usize);
    let count = Arc::new(count);
    let mut clients = Vec::new();
    for id in ids.clone() {
        let (url, acked, count) = (server.url.clone(), acked.clone(), count.clone());
        clients.push(tokio::spawn(async move {
            for i in 1..=10_000 {
                let (status, body) =
                    post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {"text": format!("t{i}")}})).await;
                if status != StatusCode::OK {
                    break;
                }
                let mut acked = acked.lock().unwrap();
                acked.push((id.clone(), body["turn"].as_u64().unwrap()));
                count.send_replace(acked.len());
            }
        }));
    }
    // Killed once 200 turns are acknowledged, with every client mid-load.
    // (The watch's borrow is dropped at once: holding it would block the clients' sends.)
    let reached = tokio::time::timeout(Duration::from_secs(60), counted.wait_for(|n| *n >= 200)).await;
    assert!(reached.is_ok_and(|r| r.is_ok()), "the load never reached 200 turns");
    drop(server); // SIGKILL, mid-load
    for c in clients {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    let server = start(root.path(), &store, &[]);
    for id in &ids {
        let got = get(&format!("{}/v1/sessions/{id}", server.url)).await;
        let turns = got["turns"].as_u64().unwrap();
        let last_acked = acked.iter().filter(|(s, _)| s == id).map(|(_, t)| *t).max().unwrap_or(0);
        assert!(turns >= last_acked, "session {id}: {turns} turns stored, {last_acked} acknowledged");
        assert!(turns <= last_acked + 1, "at most the unacknowledged turn in flight was recorded too");
        // Nothing half-written: the checkpoints are the start and one per turn, and the state is
        // exactly what those turns made.
        let cps = get(&format!("{}/v1/sessions/{id}/checkpoints", server.url)).await;
        let seqs: Vec<(u64, &str)> = cps["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["seq"].as_u64().unwrap(), c["kind"].as_str().unwrap()))
            .collect();
        let expected: Vec<(u64, &str)> = (0..=turns).map(|s| (s, if s == 0 { "start" } else { "turn" })).collect();
        assert_eq!(seqs, expected);
        assert_eq!(got["state"]["n"].as_u64(), Some(turns));
        assert_eq!(got["state"]["log"].as_array().unwrap().len() as u64, turns);
        // And the session goes on.
        let (status, next) =
            post(&format!("{}/v1/sessions/{id}/turns", server.url), json!({"input": {"text": "after"}})).await;
        assert_eq!((status, next["turn"].as_u64()), (StatusCode::OK, Some(turns + 1)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_share_sessions_without_lost_updates() {
    let Some(pg) = support::postgres() else { return };
    let root = counter_root();
    let a = start(root.path(), &pg, &[]);
    let b = start(root.path(), &pg, &[]);
    let (_, created) = post(&format!("{}/v1/sessions", a.url), json!({"pack": "counter"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let url = if i % 2 == 0 { a.url.clone() } else { b.url.clone() };
            let id = id.clone();
            tokio::spawn(async move {
                post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": {"text": format!("t{i}")}})).await
            })
        })
        .collect();
    let mut numbers = Vec::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        numbers.push(body["turn"].as_u64().unwrap());
    }
    numbers.sort();
    assert_eq!(numbers, (1..=100).collect::<Vec<_>>(), "each turn numbered once across both servers");
    for server in [&a, &b] {
        let got = get(&format!("{}/v1/sessions/{id}", server.url)).await;
        assert_eq!((got["turns"].as_u64(), got["state"]["n"].as_u64()), (Some(100), Some(100)));
    }
}

/// What a person sees is one product across replicas: a party opened and played on A shows the
/// same display on B, and a fork made on B opens on A with its whole conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_show_the_same_display_and_conversation() {
    let Some(pg) = support::postgres() else { return };
    let a = start(&repo_root(), &pg, &[]);
    let b = start(&repo_root(), &pg, &[]);
    let (_, created) =
        post(&format!("{}/v1/sessions", a.url), json!({"pack": "party", "options": {"players": "ana,bo,cy"}})).await;
    assert_eq!(created["display"]["opening"]["play"], json!({}), "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (_, first) = post(&format!("{}/v1/sessions/{id}/turns", a.url), json!({"input": {}})).await;
    let (status, second) = post(&format!("{}/v1/sessions/{id}/turns", b.url), json!({"input": "all"})).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    for server in [&a, &b] {
        let got = get(&format!("{}/v1/sessions/{id}", server.url)).await;
        assert_eq!(got["display"], second["display"], "the same display on either replica");
    }
    let (_, fork) = post(&format!("{}/v1/sessions/{id}/fork", b.url), json!({"checkpoint": 2})).await;
    let fork_id = fork["id"].as_str().unwrap();
    let said = get(&format!("{}/v1/sessions/{fork_id}/conversation", a.url)).await;
    let turns = said["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{said}");
    assert_eq!(turns[0]["display"]["reply"], first["display"]["reply"]);
    assert_eq!(
        turns[1]["input"],
        json!({"answers": {"ana": "have", "bo": "have", "cy": "have"}, "join": [], "leave": []})
    );
    assert_eq!(turns[1]["display"]["reply"], second["display"]["reply"]);
}

/// A batch of simulated games is the same report on either replica and from the command line,
/// and leaves no session behind in the shared store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_is_the_same_on_either_replica_and_the_command_line() {
    let Some(pg) = support::postgres() else { return };
    let a = start(&repo_root(), &pg, &[]);
    let b = start(&repo_root(), &pg, &[]);
    let seed = format!("replicas-{}", std::process::id());
    let ask = json!({"games": 6, "players": ["liar"], "options": {"difficulty": "easy"}, "seed": seed});
    let (status, on_a) = post(&format!("{}/v1/packs/pirate/simulate", a.url), ask.clone()).await;
    assert_eq!(status, StatusCode::OK, "{on_a}");
    let (_, on_b) = post(&format!("{}/v1/packs/pirate/simulate", b.url), ask).await;
    assert_eq!(on_a, on_b, "the same games on either replica");
    assert_eq!(
        (&on_a["pack"], &on_a["games"], &on_a["players"][0]["name"], &on_a["players"][0]["games"]),
        (&json!("pirate"), &json!(6), &json!("liar"), &json!(6))
    );
    let cli = support::ruleweave(&repo_root())
        .args(["simulate", "pirate", "--games", "6", "--player", "liar", "--set", "difficulty=easy"])
        .args(["--seed", &seed, "--json"])
        .output()
        .unwrap();
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(cli, on_a, "the command line's report");
    let left = reqwest::get(format!("{}/v1/sessions/sim-{seed}-liar-0", b.url)).await.unwrap();
    assert_eq!(left.status(), StatusCode::NOT_FOUND, "no simulated game is kept in the store");
}

/// A server whose sessions talk to a real model still simulates on the stand-in: a client's
/// click never spends the operator's model budget (the model server sees no request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_never_calls_the_operators_model() {
    let mock = MockLlm::start();
    let env = [("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &mock.base_url), ("RULEWEAVE_SIMULATE_TURNS", "50")];
    let server = start(&repo_root(), "memory", &env);
    let (status, report) =
        post(&format!("{}/v1/packs/party/simulate", server.url), json!({"games": 2, "players": ["brave"]})).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    // The operator's bound on a batch: 3 games of up to 21 turns are more than its 50 turns.
    let (status, refused) =
        post(&format!("{}/v1/packs/party/simulate", server.url), json!({"games": 3, "players": ["brave"]})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "3 games for each of 1 player of up to 21 turns is more than a server batch plays (50 turns): \
         ask for at most 2 games, or run `ruleweave simulate`"
    );
    assert_eq!(report["players"][0]["games"], 2, "{report}");
    assert_eq!(report["players"][0]["cost"]["median"], 0.0, "the stand-in is free: {report}");
    // A session on the same server does reach the model, so the server is wired to it.
    let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "pirate"})).await;
    let id = created["id"].as_str().unwrap();
    post(&format!("{}/v1/sessions/{id}/turns", server.url), json!({"input": "Ahoy!"})).await;
    let seen = mock.seen();
    assert!(!seen.is_empty(), "the pirate turn called the model server");
    assert!(
        seen.iter().all(|s| !s.body.to_string().contains("Never have I ever")),
        "no party call reached the model server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_finishes_the_turn_in_flight() {
    let mock = MockLlm::start();
    let gate = Arc::new(tokio::sync::Notify::new());
    mock.judge(judged(10)).chat(Reply::Gated(gate.clone(), Box::new(Reply::Content("Slowly, arr.".into()))));
    let db = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", db.path().join("s.db").display());
    let mut server = start(&repo_root(), &store, &[("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &mock.base_url)]);
    let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "pirate"})).await;
    let turns = format!("{}/v1/sessions/{}/turns", server.url, created["id"].as_str().unwrap());
    let turn = tokio::spawn(async move { post(&turns, json!({"input": {"message": "Ahoy!"}})).await });
    // The turn is at the captain's model (judge, then chat) when SIGTERM arrives; the model
    // answers only once the server has begun shutting down.
    mock.wait_seen(2).await;
    server.terminate();
    gate.notify_one();
    let (status, body) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["output"]["pirate_response"], "Slowly, arr.");
    let exit = server.exit_status();
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn play_resumes_a_stored_session() {
    let db = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", db.path().join("play.db").display());
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", "pirate", "--store", &store]);
    let out = run_with_stdin(cmd, "Ahoy, captain!\n/quit\n");
    let text = stdout(&out);
    let id = text.split("--session ").nth(1).and_then(|s| s.split(')').next()).expect(&text).to_owned();
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", "pirate", "--store", &store, "--session", &id]);
    let out = run_with_stdin(cmd, "/state\n/quit\n");
    let text = stdout(&out);
    assert!(text.contains(&format!("session {id} resumed after turn 1")), "{text}");
    assert!(text.contains("\"content\": \"Ahoy, captain!\""), "{text}");
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", "pirate", "--store", &store, "--session", "nope"]);
    let out = run_with_stdin(cmd, "/quit\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(support::stderr(&out).contains("there is no session nope"), "{}", support::stderr(&out));
}

/// The next `event: reload` of a `GET /v1/events` stream, as JSON.
async fn next_reload(events: &mut reqwest::Response, parser: &mut ruleweave_testkit::sse::Parser) -> Value {
    loop {
        while let Some(e) = parser.next() {
            if e.name == "reload" {
                return serde_json::from_str(&e.data).unwrap();
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(10), events.chunk())
            .await
            .expect("no reload event within 10 s")
            .unwrap()
            .expect("the event stream ended");
        parser.feed(&chunk);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_watch_reloads_reports_and_streams_each_edit() {
    let root = reload_root();
    let server = start_with(root.path(), "memory", &[], &["--watch"]);
    let (status, body) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "marker"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let turns = format!("{}/v1/sessions/{}/turns", server.url, body["id"].as_str().unwrap());
    let (_, first) = post(&turns, json!({"input": {}})).await;
    assert_eq!(first["output"]["count"], json!(1));
    let packs = get(&format!("{}/v1/packs", server.url)).await;
    let old = packs["packs"][0]["version"].as_str().unwrap().to_owned();
    assert_eq!(packs["packs"][0]["status"], "ok");

    let mut events = http().get(format!("{}/v1/events", server.url)).send().await.unwrap();
    assert!(events.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut buffer = ruleweave_testkit::sse::Parser::default();
    edit(root.path(), "config/marker.yaml", "step: 1", "step: 10");
    let e = next_reload(&mut events, &mut buffer).await;
    assert_eq!((&e["pack"], &e["status"], &e["previous"]), (&json!("marker"), &json!("reloaded"), &json!(old)));
    assert_eq!(e["files"], json!(["config/marker.yaml"]), "the file saved, not every file the reload read");
    let new = e["version"].as_str().unwrap().to_owned();
    let (_, second) = post(&turns, json!({"input": {}})).await;
    assert_eq!(second["output"]["count"], json!(11), "the next turn runs the edited rules");
    let packs = get(&format!("{}/v1/packs", server.url)).await;
    assert_eq!((&packs["packs"][0]["version"], &packs["packs"][0]["reloads"]), (&json!(new), &json!(1)));

    // A broken save: reported with its place, and the last good version goes on serving.
    edit(root.path(), "config/marker.yaml", "- b -> END", "- nowhere -> END");
    let e = next_reload(&mut events, &mut buffer).await;
    assert_eq!((&e["status"], &e["version"]), (&json!("rejected"), &json!(new)));
    assert_eq!(e["files"], json!(["config/marker.yaml"]), "a refused save names the file saved, not the pack's");
    assert_eq!(
        (&e["diagnostics"][0]["file"], &e["diagnostics"][0]["line"]),
        (&json!("config/marker.yaml"), &json!(23))
    );
    let packs = get(&format!("{}/v1/packs", server.url)).await;
    let marker = &packs["packs"][0];
    assert_eq!((&marker["status"], &marker["version"]), (&json!("rejected"), &json!(new)));
    assert!(marker["last_error"].as_str().unwrap().contains("nowhere"), "{marker}");
    let (status, third) = post(&turns, json!({"input": {}})).await;
    assert_eq!((status, &third["output"]["count"]), (StatusCode::OK, &json!(21)));
}

#[test]
fn play_shows_reloads_between_turns() {
    use std::io::Write;
    let root = reload_root();
    let mut cmd = ruleweave(root.path());
    cmd.args(["play", "marker", "--store", "memory"]).stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let mut wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !seen.contains(what) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => seen.push_str(&(line + "\n")),
                Err(_) => panic!("`{what}` never showed; play printed:\n{seen}"),
            }
        }
        std::mem::take(&mut seen)
    };
    writeln!(stdin, "{{}}").unwrap();
    wait_for("\"count\":1");
    edit(root.path(), "config/marker.yaml", "step: 1", "step: 5");
    wait_for("marker reloaded (version ");
    writeln!(stdin, "{{}}").unwrap();
    wait_for("\"count\":6");
    edit(root.path(), "scripts/marker/marker.rhai", "first: param(\"marker\") }", "first: param(\"marker\") ");
    let refused = wait_for("scripts/marker/marker.rhai:5:1");
    assert!(refused.contains("marker not reloaded, version "), "{refused}");
    writeln!(stdin, "{{}}").unwrap();
    wait_for("\"count\":11");
    writeln!(stdin, "/quit").unwrap();
    assert!(child.wait().unwrap().success());
}
