//! Sessions that last: turns recorded in a store, reloaded by a new engine, forked, expired,
//! serialized under concurrency, and long turns resumed after an interruption.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, Provider, TokenSink, Usage};
use ruleweave::store::{self, CheckpointKind, Retention, Store};
use ruleweave::{Engine, ErrorKind};
use serde_json::json;
use support::write_root;

const COUNTER: &str = r#"
state:
  n: {type: int, reducer: add}
  log: {type: list, reducer: append}
  done: {type: bool}
input:
  text: {type: string, required: true}
output: [n, log]
finish: {when: done, message: Counted to the end.}
graph:
  nodes:
    count: {script: count.rhai::count}
  edges:
    - START -> count
    - count -> END
"#;

fn counter() -> tempfile::TempDir {
    write_root(&[
        ("config/counter.yaml", COUNTER),
        ("scripts/counter/count.rhai", r#"fn count() { #{ n: 1, log: input().text, done: input().text == "stop" } }"#),
    ])
}

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    store::open(&format!("sqlite://{}", dir.path().join("sessions.db").display())).await.unwrap()
}

fn engine(root: &tempfile::TempDir, store: Arc<dyn Store>, retention: Retention) -> Engine {
    Engine::builder(root.path()).store(store).retention(retention).build()
}

#[tokio::test]
async fn turns_survive_a_new_engine() {
    let root = counter();
    let db = tempfile::tempdir().unwrap();
    let id = {
        let e = engine(&root, sqlite(&db).await, Retention::default());
        let mut s = e.open("counter", &Default::default()).await.unwrap();
        for t in ["a", "b", "c"] {
            s.turn(json!({"text": t})).await.unwrap();
        }
        s.id().to_owned()
    };
    // A new engine (a restarted host) on the same file.
    let e = engine(&root, sqlite(&db).await, Retention::default());
    let mut s = e.resume(&id).await.unwrap();
    assert_eq!((s.turns(), s.checkpoint()), (3, 3));
    assert_eq!(s.state(), json!({"n": 3, "log": ["a", "b", "c"], "done": false}));
    let r = s.turn(json!({"text": "d"})).await.unwrap();
    assert_eq!((r.turn, r.checkpoint), (4, 4));
    assert_eq!(e.info(&id).await.unwrap().turns, 4);
}

#[tokio::test]
async fn a_long_session_keeps_a_few_snapshots_not_one_per_turn() {
    let root = counter();
    let db = tempfile::tempdir().unwrap();
    let e = engine(&root, sqlite(&db).await, Retention { snapshot_every: 16, ..Retention::default() });
    let mut s = e.open("counter", &Default::default()).await.unwrap();
    for i in 0..40 {
        s.turn(json!({"text": format!("message {i}")})).await.unwrap();
    }
    let snapshots: Vec<u64> =
        e.checkpoints(s.id()).await.unwrap().iter().filter(|c| c.snapshot).map(|c| c.seq).collect();
    assert_eq!(snapshots, [0, 32], "the start and the newest snapshot; the one at 16 was pruned");
    let again = e.resume(s.id()).await.unwrap();
    assert_eq!(again.state(), s.state(), "snapshot 32 plus 8 replayed turns is the same state");
    // What is stored grows with the messages, not with messages × turns: each message once in
    // its turn's updates, and in the two snapshots kept.
    let pool =
        sqlx::SqlitePool::connect(&format!("sqlite://{}", db.path().join("sessions.db").display())).await.unwrap();
    let (snapshots, bytes): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(snapshot), SUM(LENGTH(body)) + SUM(LENGTH(COALESCE(snapshot, ''))) FROM checkpoints",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(snapshots, 2);
    let one_message = r#"["count",{"done":false,"log":"message 10","n":1}],"#.len() as i64;
    assert!(bytes < 40 * one_message + 2 * 40 * 16 + 1_000, "{bytes} bytes stored");
}

#[tokio::test]
async fn a_session_forks_from_an_earlier_checkpoint() {
    let root = counter();
    let e = engine(&root, Arc::new(store::MemoryStore::new()), Retention::default());
    let mut s = e.open("counter", &Default::default()).await.unwrap();
    for t in ["a", "b", "c"] {
        s.turn(json!({"text": t})).await.unwrap();
    }
    let mut f = e.fork(s.id(), 2).await.unwrap();
    assert_ne!(f.id(), s.id());
    assert_eq!(f.state(), json!({"n": 2, "log": ["a", "b"], "done": false}));
    f.turn(json!({"text": "x"})).await.unwrap();
    assert_eq!(f.state()["log"], json!(["a", "b", "x"]));
    assert_eq!(s.state()["log"], json!(["a", "b", "c"]), "the original is untouched");
    assert_eq!(e.info(f.id()).await.unwrap().parent, Some((s.id().to_owned(), 2)));
    assert_eq!(e.fork(s.id(), 9).await.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(e.fork("nope", 1).await.unwrap_err().kind(), ErrorKind::NotFound);
}

/// A field declared `fork: init` is the fork's own (its id, from the pack's init); the rest is
/// the parent's as it was. A pack without init cannot declare one.
#[tokio::test]
async fn a_fork_takes_its_own_fields_from_init() {
    let manifest = COUNTER
        .replace("  done: {type: bool}", "  done: {type: bool}\n  game_id: {type: string, fork: init}")
        + "init: count.rhai::init\n";
    let script = r#"fn count() { #{ n: 1, log: input().text } }
fn init() { #{ game_id: session_id() } }"#;
    let root = write_root(&[("config/counter.yaml", &manifest), ("scripts/counter/count.rhai", script)]);
    let store = Arc::new(store::MemoryStore::new());
    let e = engine(&root, store.clone(), Retention::default());
    let mut s = e.open("counter", &Default::default()).await.unwrap();
    s.turn(json!({"text": "a"})).await.unwrap();
    assert_eq!(s.state()["game_id"], s.id());
    let f = e.fork(s.id(), 1).await.unwrap();
    assert_eq!(f.state()["game_id"], f.id(), "the fork's own id");
    assert_eq!(f.state()["log"], json!(["a"]), "the parent's turns");
    let reloaded = e.resume(f.id()).await.unwrap();
    assert_eq!(reloaded.state()["game_id"], f.id(), "as stored");

    let without_init =
        COUNTER.replace("  done: {type: bool}", "  done: {type: bool}\n  game_id: {type: string, fork: init}");
    let root = write_root(&[("config/counter.yaml", &without_init), ("scripts/counter/count.rhai", script)]);
    let err = engine(&root, store, Retention::default()).packs().load("counter").unwrap_err();
    assert!(err.to_string().contains("field `game_id` takes its value from `init` on a fork"), "{err}");
}

#[tokio::test]
async fn finished_sessions_expire_and_deleted_ones_are_gone() {
    let root = counter();
    let retention = Retention { expire_finished_after: Some(Duration::ZERO), ..Retention::default() };
    let e = engine(&root, Arc::new(store::MemoryStore::new()), retention);
    let mut done = e.open("counter", &Default::default()).await.unwrap();
    done.turn(json!({"text": "stop"})).await.unwrap();
    assert_eq!(done.turn(json!({"text": "more"})).await.unwrap_err().kind(), ErrorKind::Finished);
    let mut going = e.open("counter", &Default::default()).await.unwrap();
    going.turn(json!({"text": "a"})).await.unwrap();
    assert_eq!(e.expire_finished().await.unwrap(), 1, "kept for zero time: gone at once");
    assert_eq!(e.info(done.id()).await.unwrap_err().kind(), ErrorKind::NotFound);
    e.delete(going.id()).await.unwrap();
    assert_eq!(e.session(going.id()).await.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(e.delete(going.id()).await.unwrap_err().kind(), ErrorKind::NotFound);
}

/// With `expire_idle_after`, an unfinished session nobody plays goes (a one-off chat, an abandoned
/// game), with what links to it; without the setting nothing unfinished ever goes. In memory and
/// in SQLite (a file of the test's own: the shared PostgreSQL test database holds other tests'
/// sessions, which an expiry would take too).
#[tokio::test]
async fn idle_unfinished_sessions_expire_by_a_setting() {
    let dir = tempfile::tempdir().unwrap();
    for store in [Arc::new(store::MemoryStore::new()) as Arc<dyn Store>, sqlite(&dir).await] {
        let root = counter();
        let kept = engine(&root, store.clone(), Retention::default());
        let mut idle = kept.open("counter", &Default::default()).await.unwrap();
        idle.turn(json!({"text": "a"})).await.unwrap();
        store.transcripts().unwrap().link_transcript("a-chat", idle.id(), 1).await.unwrap();
        assert_eq!(kept.expire_finished().await.unwrap(), 0, "no setting: kept");
        let retention = Retention { expire_idle_after: Some(Duration::ZERO), ..Retention::default() };
        let e = engine(&root, store.clone(), retention);
        assert_eq!(e.expire_finished().await.unwrap(), 1, "idle for as long as allowed: gone");
        assert_eq!(e.info(idle.id()).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert!(
            store.transcripts().unwrap().find_transcripts(&["a-chat".to_owned()]).await.unwrap().is_empty(),
            "its links with it"
        );
    }
}

async fn hundred_concurrent_turns(store: Arc<dyn Store>) {
    let root = counter();
    let e = engine(&root, store, Retention::default());
    let id = e.open("counter", &Default::default()).await.unwrap().id().to_owned();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let e = e.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let live = e.session(&id).await.unwrap();
            let mut s = live.lock().await;
            s.turn(json!({"text": format!("t{i}")})).await.unwrap().turn
        }));
    }
    let mut turns: Vec<u64> = Vec::new();
    for t in tasks {
        turns.push(t.await.unwrap());
    }
    turns.sort();
    assert_eq!(turns, (1..=100).collect::<Vec<_>>(), "every turn got its own number");
    let info = e.info(&id).await.unwrap();
    assert_eq!(info.turns, 100);
    let fresh = e.resume(&id).await.unwrap();
    assert_eq!(fresh.state()["n"], 100);
    assert_eq!(fresh.state()["log"].as_array().unwrap().len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_turns_all_count_in_memory() {
    hundred_concurrent_turns(Arc::new(store::MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_turns_all_count_in_sqlite() {
    let db = tempfile::tempdir().unwrap();
    hundred_concurrent_turns(sqlite(&db).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_turns_all_count_in_postgres() {
    let Some(url) = support::postgres() else { return };
    hundred_concurrent_turns(store::open(&url).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_engines_on_one_postgres_lose_no_update() {
    let Some(url) = support::postgres() else { return };
    let root = counter();
    // Two engines, each with its own connection pool and session cache: two replicas.
    let a = engine(&root, store::open(&url).await.unwrap(), Retention::default());
    let b = engine(&root, store::open(&url).await.unwrap(), Retention::default());
    let id = a.open("counter", &Default::default()).await.unwrap().id().to_owned();
    let mut tasks = Vec::new();
    for i in 0..60 {
        let e = if i % 2 == 0 { a.clone() } else { b.clone() };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let live = e.session(&id).await.unwrap();
            let mut s = live.lock().await;
            s.turn(json!({"text": format!("t{i}")})).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let fresh = a.resume(&id).await.unwrap();
    assert_eq!(fresh.turns(), 60);
    assert_eq!(fresh.state()["n"], 60);
}

// ---- long turns: a checkpoint after every step, and resuming after an interruption -------------

const LONG: &str = r#"
llm:
  a: {model: m}
  b: {model: m}
  c: {model: m}
state:
  said: {type: list, reducer: append}
  roll: {type: int}
input:
  go: {type: bool, default: true}
output: [said, roll]
graph:
  checkpoint: step
  nodes:
    first: {llm: a, prompt: p.j2, then: s.rhai::said}
    second: {llm: b, prompt: p.j2, then: s.rhai::said}
    third: {llm: c, prompt: p.j2, then: s.rhai::said_and_roll}
  edges:
    - START -> first
    - first -> second
    - second -> third
    - third -> END
"#;

/// Answers each profile with its name, counting calls; hangs on profile `c` while `hang` is set.
#[derive(Default)]
struct Steps {
    calls: Mutex<HashMap<String, usize>>,
    hang: AtomicBool,
    /// Told when a call hangs.
    hung: tokio::sync::Notify,
}

impl Provider for Steps {
    fn name(&self) -> &str {
        "steps"
    }

    fn complete<'a>(
        &'a self,
        r: &'a LlmRequest,
        _: Option<TokenSink>,
    ) -> BoxFuture<'a, ruleweave::Result<LlmResponse>> {
        *self.calls.lock().unwrap().entry(r.profile.clone()).or_default() += 1;
        if r.profile == "c" && self.hang.load(Ordering::SeqCst) {
            self.hung.notify_one();
            return Box::pin(std::future::pending());
        }
        let response =
            LlmResponse { content: r.profile.clone(), model: r.model.clone(), usage: Usage::default(), attempts: 1 };
        Box::pin(std::future::ready(Ok(response)))
    }
}

#[tokio::test]
async fn an_interrupted_long_turn_resumes_without_repeating_model_calls() {
    let root = write_root(&[
        ("config/long.yaml", LONG),
        ("prompts/long/p.j2", "say something"),
        (
            "scripts/long/s.rhai",
            "fn said(reply) { #{ said: reply } }\nfn said_and_roll(reply) { #{ said: reply, roll: random_int(1, 1000000) } }",
        ),
    ]);
    let db = tempfile::tempdir().unwrap();
    let provider = Arc::new(Steps::default());
    provider.hang.store(true, Ordering::SeqCst);
    let id = {
        let e = Engine::builder(root.path()).store(sqlite(&db).await).provider(provider.clone()).build();
        let mut s = e.open("long", &Default::default()).await.unwrap();
        // The host dies while the third model call hangs: the turn is dropped then.
        tokio::select! {
            r = s.turn(json!({})) => panic!("the turn should hang, not end: {r:?}"),
            () = provider.hung.notified() => {}
        }
        s.id().to_owned()
    };
    let steps: Vec<CheckpointKind> = {
        let e = Engine::builder(root.path()).store(sqlite(&db).await).build();
        e.checkpoints(&id).await.unwrap().iter().map(|c| c.kind).collect()
    };
    assert_eq!(steps, [CheckpointKind::Start, CheckpointKind::Step, CheckpointKind::Step]);

    // A new host finishes the turn from the last step: `a` and `b` are not asked again.
    provider.hang.store(false, Ordering::SeqCst);
    let e = Engine::builder(root.path()).store(sqlite(&db).await).provider(provider.clone()).build();
    assert_eq!(e.finish_interrupted().await.unwrap(), 1);
    let calls = provider.calls.lock().unwrap().clone();
    assert_eq!((calls["a"], calls["b"], calls["c"]), (1, 1, 2), "only the unfinished step's call repeats");
    let s = e.resume(&id).await.unwrap();
    assert_eq!(s.turns(), 1);
    assert_eq!(s.state()["said"], json!(["a", "b", "c"]));
    let kinds: Vec<CheckpointKind> = e.checkpoints(&id).await.unwrap().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CheckpointKind::Start, CheckpointKind::Step, CheckpointKind::Step, CheckpointKind::Turn]);

    // The resumed turn's dice are the dice an uninterrupted turn throws.
    let clean = Engine::builder(root.path()).provider(Arc::new(Steps::default())).build();
    let mut twin = clean.open_with_id("long", &Default::default(), Some(id.clone())).await.unwrap();
    twin.turn(json!({})).await.unwrap();
    assert_eq!(twin.state()["roll"], s.state()["roll"]);
}

#[tokio::test]
async fn a_long_turn_that_fails_withdraws_its_steps() {
    let root = write_root(&[
        ("config/long.yaml", LONG),
        ("prompts/long/p.j2", "say something"),
        ("scripts/long/s.rhai", "fn said(reply) { #{ said: reply } }\nfn said_and_roll(reply) { throw \"no\"; }"),
    ]);
    let db = tempfile::tempdir().unwrap();
    let e = Engine::builder(root.path()).store(sqlite(&db).await).provider(Arc::new(Steps::default())).build();
    let mut s = e.open("long", &Default::default()).await.unwrap();
    assert!(s.turn(json!({})).await.is_err());
    let kinds: Vec<CheckpointKind> = e.checkpoints(s.id()).await.unwrap().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CheckpointKind::Start], "all or nothing: the failed turn's steps are gone");
    assert_eq!(s.state()["said"], json!([]));
    assert!(!e.resume(s.id()).await.unwrap().is_interrupted());
}

#[tokio::test]
async fn checkpoints_record_the_pack_version_and_model_exchanges() {
    let db = tempfile::tempdir().unwrap();
    let e = Engine::builder(support::repo_root()).store(sqlite(&db).await).build();
    let mut game = e.open("pirate", &Default::default()).await.unwrap();
    game.turn(json!({"message": "Ahoy!"})).await.unwrap();
    let list = e.checkpoints(game.id()).await.unwrap();
    let turn = &list[1];
    assert_eq!(turn.pack_version, game.pack().version());
    assert_eq!(turn.llm_calls, 2);
    assert_eq!(turn.nodes, ["intake", "merit_check", "generate_response", "validate_response"]);
    let stored = e.store().load(game.id()).await.unwrap().unwrap();
    let x: Vec<&ruleweave::ModelExchange> = stored.after[0].exchanges.iter().filter_map(|x| x.model()).collect();
    assert_eq!(x[0].request.profile, "judge");
    assert!(x[1].response.as_ref().unwrap().content.len() > 10);
}

/// The pages of SQLite's log the turns of one pirate session write, by what owns each
/// (`dbstat`'s name: a table or an index), with the number of turns: what a durable turn costs
/// the store, page by page.
async fn wal_pages_of_pirate_turns(turns: usize) -> Vec<String> {
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("wal.db");
    let store = store::open(&format!("sqlite://{}", path.display())).await.unwrap();
    let canned = support::Canned::new();
    let e = Engine::builder(support::repo_root()).provider(canned.clone()).store(store).build();
    let mut s = e.open("pirate", &Default::default()).await.unwrap();
    for _ in 0..3 {
        canned.reply("judge", support::judged(20)).reply("pirate", "Arrr, no.");
        s.turn(json!({"message": "Ahoy, a warm-up move."})).await.unwrap();
    }
    // A checkpoint of everything: the next commit starts the log over, from its first frame.
    let reader = rusqlite::Connection::open(&path).unwrap();
    reader.execute_batch("PRAGMA wal_checkpoint(PASSIVE)").unwrap();
    for i in 0..turns {
        canned.reply("judge", support::judged(20)).reply("pirate", "Arrr, no, not for such a tale.");
        s.turn(json!({"message": format!("Ahoy, captain, move {i}: I bring rum and a map.")})).await.unwrap();
    }
    let frames: i64 = reader.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1)).unwrap();
    // Each frame: a 24-byte header whose first four bytes are the page's number, then the page.
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap();
    let page_size = u32::from_be_bytes(wal[8..12].try_into().unwrap()) as usize;
    (0..frames as usize)
        .map(|k| {
            let at = 32 + k * (24 + page_size);
            let page = u32::from_be_bytes(wal[at..at + 4].try_into().unwrap());
            reader.query_row("SELECT name FROM dbstat WHERE pageno = ?1", [page], |r| r.get(0)).unwrap()
        })
        .collect()
}

/// An ordinary pirate turn writes at most three pages of the log on average: its session's row,
/// the page its checkpoint's row is appended to (two rows to a page), and on every other turn
/// the new page's entry in the table's interior page and the header (the file grew). No page of
/// the lobby sweep's index (a pack without lobby rounds) and none of another index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_turn_writes_three_pages_and_none_of_the_lobby_index() {
    let pages = wal_pages_of_pirate_turns(20).await;
    assert!(!pages.iter().any(|p| p == "sessions_open_rounds"), "{pages:?}");
    assert!(
        pages.iter().all(|p| ["sqlite_schema", "sqlite_master", "sessions", "checkpoints"].contains(&p.as_str())),
        "{pages:?}"
    );
    let per_turn = pages.len() as f64 / 20.0;
    assert!(per_turn <= 3.0, "{per_turn} pages a turn: {pages:?}");
    eprintln!("WAL pages per pirate turn: {per_turn} ({})", pages[..5].join(", "));
}
