//! Hot reload: edits to a copy of `tests/reload/` while sessions play, seen through the watcher.

use crate::support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ruleweave::{Engine, PackEvent, ReloadStatus};
use serde_json::{Value, json};
use tokio::sync::broadcast::Receiver;

/// A fresh copy of the reload pack's root.
fn pack_root() -> tempfile::TempDir {
    support::copy_root("reload")
}

use support::edit;

/// The next reload event of the `marker` pack (failing the test after 10 s).
async fn next(rx: &mut Receiver<PackEvent>) -> PackEvent {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no reload within 10 s of the edit")
            .unwrap();
        if e.pack == "marker" {
            return e;
        }
    }
}

async fn setup() -> (tempfile::TempDir, Engine, ruleweave::Watcher, Receiver<PackEvent>) {
    let root = pack_root();
    let engine = Engine::builder(root.path()).build();
    engine.packs().get("marker").unwrap();
    let rx = engine.packs().subscribe();
    let watcher = ruleweave::Watcher::start(engine.packs()).unwrap();
    (root, engine, watcher, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_parameter_is_used_on_the_next_turn() {
    let (root, engine, _w, mut rx) = setup().await;
    let mut s = engine.open("marker", &Default::default()).await.unwrap();
    let before = s.turn(json!({})).await.unwrap();
    assert_eq!(before.output["count"], json!(1));

    edit(root.path(), "config/marker.yaml", "step: 1", "step: 5");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Reloaded, "{e:?}");
    assert_eq!(e.previous.as_deref(), Some(before.pack_version.as_str()));
    assert_eq!(e.files, ["config/marker.yaml"]);

    let after = s.turn(json!({})).await.unwrap();
    assert_eq!(after.output["count"], json!(6), "the turn after the save adds the new step");
    assert_eq!(Some(&after.pack_version), e.version.as_ref());
    // The checkpoints say which version produced each turn.
    let versions: Vec<String> = engine.checkpoints(s.id()).await.unwrap().into_iter().map(|c| c.pack_version).collect();
    assert_eq!(versions, [before.pack_version.clone(), before.pack_version, after.pack_version]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_save_keeps_the_last_good_version_until_fixed() {
    let (root, engine, _w, mut rx) = setup().await;
    let mut s = engine.open("marker", &Default::default()).await.unwrap();
    let good = s.turn(json!({})).await.unwrap().pack_version;

    // A Rhai syntax error: refused, with the spot named; the old version answers.
    edit(root.path(), "scripts/marker/marker.rhai", "first: param(\"marker\") }", "first: param(\"marker\") ");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Rejected);
    assert_eq!(e.version.as_deref(), Some(good.as_str()), "the last good version serves");
    let origin = e.diagnostics[0].origin().expect("the diagnostic names a place");
    assert_eq!((origin.file.as_str(), origin.line), ("scripts/marker/marker.rhai", 5), "{:?}", e.diagnostics);
    assert!(origin.column > 0);
    let status = engine.packs().status().into_iter().find(|p| p.name == "marker").unwrap();
    assert_eq!(status.pack.unwrap().version(), good);
    assert!(status.error.is_some());
    let r = s.turn(json!({})).await.unwrap();
    assert_eq!((r.pack_version.as_str(), &r.output["count"]), (good.as_str(), &json!(2)));

    // A YAML error, on top: refused too, placed where the list it leaves open opened.
    edit(root.path(), "config/marker.yaml", "  step: 1", "  step: [1");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Rejected);
    let origin = e.diagnostics[0].origin().unwrap();
    assert_eq!((origin.file.as_str(), origin.line, origin.column), ("config/marker.yaml", 6, 9), "{origin}");
    assert!(e.diagnostics[0].detail().starts_with("a list opened with `[` here is not closed"), "{:?}", e.diagnostics);
    edit(root.path(), "config/marker.yaml", "  step: [1", "  step: 1");
    assert_eq!(next(&mut rx).await.status, ReloadStatus::Rejected, "the script is still broken");

    // A graph naming a node that does not exist.
    edit(root.path(), "scripts/marker/marker.rhai", "first: param(\"marker\") ", "first: param(\"marker\") }");
    let fixed = next(&mut rx).await;
    assert_eq!(fixed.status, ReloadStatus::Reloaded);
    edit(root.path(), "config/marker.yaml", "- b -> END", "- c -> END");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Rejected);
    assert_eq!(e.diagnostics[0].origin().unwrap().line, 23, "{:?}", e.diagnostics);
    assert_eq!(s.turn(json!({})).await.unwrap().pack_version, fixed.version.clone().unwrap());

    // Fixed: the new version answers, with no restart.
    edit(root.path(), "config/marker.yaml", "- c -> END", "- b -> END");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Reloaded);
    assert!(engine.packs().status().into_iter().find(|p| p.name == "marker").unwrap().error.is_none());
    let r = s.turn(json!({})).await.unwrap();
    assert_eq!(Some(&r.pack_version), e.version.as_ref());
    assert_eq!(r.output["count"], json!(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_take_new_fields_drop_old_ones_and_migrate() {
    let (root, engine, _w, mut rx) = setup().await;
    let mut s = engine.open("marker", &Default::default()).await.unwrap();
    s.turn(json!({})).await.unwrap();
    s.turn(json!({})).await.unwrap();
    assert_eq!(s.state()["legacy"], json!(3));

    // A new field takes its default, a removed one goes.
    edit(root.path(), "config/marker.yaml", "  legacy: {type: int, default: 3}", "  bonus: {type: int, default: 7}");
    assert_eq!(next(&mut rx).await.status, ReloadStatus::Reloaded);
    s.turn(json!({})).await.unwrap();
    let state = s.state();
    assert_eq!((state.get("legacy"), &state["bonus"], &state["count"]), (None, &json!(7), &json!(3)));

    // A field whose values no longer fit is refused without a migrate script...
    edit(root.path(), "config/marker.yaml", "  count: {type: int, reducer: add}", "  count: {type: string}");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Rejected);
    let d = &e.diagnostics[0];
    assert!(d.detail().contains("`count` changed from int to string"), "{d}");
    assert_eq!((d.origin().unwrap().file.as_str(), d.origin().unwrap().line), ("config/marker.yaml", 9));
    edit(root.path(), "config/marker.yaml", "  count: {type: string}", "  count: {type: int, reducer: add}");
    next(&mut rx).await;

    // ... and `migrate(state, from_version)` handles the rest: here, rescaling a counter.
    let tmp = root.path().join("scripts/marker/migrate.tmp~");
    std::fs::write(&tmp, "fn migrate(state, from) { #{ count: state.count * 100, note: `from ${from}` } }\n").unwrap();
    std::fs::rename(&tmp, root.path().join("scripts/marker/migrate.rhai")).unwrap();
    assert_eq!(next(&mut rx).await.status, ReloadStatus::Reloaded, "a new script is a new version");
    let from = s.pack().version().to_owned();
    edit(root.path(), "config/marker.yaml", "output: [count", "migrate: migrate.rhai::migrat\noutput: [count");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Rejected, "a misspelt function is refused");
    assert!(e.diagnostics[0].detail().contains("migrat"), "{:?}", e.diagnostics);
    edit(root.path(), "config/marker.yaml", "migrate.rhai::migrat\n", "migrate.rhai::migrate\n");
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Reloaded);
    // This migrate sets `note`, which the pack does not have yet: it fails, and the session
    // plays on the version it had rather than break.
    let r = s.turn(json!({})).await.unwrap();
    assert_eq!((r.pack_version.as_str(), &r.output["count"]), (from.as_str(), &json!(4)));

    edit(
        root.path(),
        "config/marker.yaml",
        "  bonus: {type: int, default: 7}",
        "  bonus: {type: int, default: 7}\n  note: {type: string}",
    );
    let e = next(&mut rx).await;
    assert_eq!(e.status, ReloadStatus::Reloaded);
    let r = s.turn(json!({})).await.unwrap();
    assert_eq!(Some(&r.pack_version), e.version.as_ref());
    assert_eq!(r.output["count"], json!(401), "migrate multiplied 4 by 100, then the turn added 1");
    assert_eq!(s.state()["note"], json!(format!("from {from}")));

    // The store holds what migrate made: a session resumed from it agrees.
    let resumed = engine.resume(s.id()).await.unwrap();
    assert_eq!(resumed.state(), s.state());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_reloads_while_turns_run_fail_no_turn() {
    let (root, engine, _w, mut rx) = setup().await;
    let stop = Arc::new(AtomicBool::new(false));
    // How many turns the players have played, for the loop below to wait on.
    let (played, mut counted) = tokio::sync::watch::channel(0usize);
    let played = Arc::new(played);
    let mut players = Vec::new();
    for _ in 0..4 {
        let (engine, stop, played) = (engine.clone(), stop.clone(), played.clone());
        players.push(tokio::spawn(async move {
            let mut s = engine.open("marker", &Default::default()).await.unwrap();
            let mut turns: Vec<(String, Value, Value)> = Vec::new();
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match s.turn(json!({})).await {
                    Ok(r) => turns.push((r.pack_version, r.output["first"].clone(), r.output["second"].clone())),
                    Err(e) => failures.push(e.to_string()),
                }
                played.send_modify(|n| *n += 1);
                tokio::task::yield_now().await;
            }
            (s.id().to_owned(), turns, failures)
        }));
    }
    let mut marker_of: HashMap<String, i64> = HashMap::new();
    marker_of.insert(engine.packs().get("marker").unwrap().version().to_owned(), 1);
    for i in 2..=101 {
        edit(root.path(), "config/marker.yaml", &format!("marker: {}", i - 1), &format!("marker: {i}"));
        let e = next(&mut rx).await;
        assert_eq!(e.status, ReloadStatus::Reloaded, "{e:?}");
        marker_of.insert(e.version.unwrap(), i);
        // Let a few turns run on this version.
        let now = *counted.borrow_and_update();
        let more = tokio::time::timeout(Duration::from_secs(30), counted.wait_for(|n| *n >= now + 4)).await;
        assert!(more.is_ok_and(|r| r.is_ok()), "the players stopped playing");
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut seen = std::collections::HashSet::new();
    for p in players {
        let (id, turns, failures) = p.await.unwrap();
        assert!(failures.is_empty(), "failed turns: {failures:?}");
        for (version, first, second) in &turns {
            let marker = marker_of.get(version).unwrap_or_else(|| panic!("a turn on unknown version {version}"));
            assert_eq!((first, second), (&json!(marker), &json!(marker)), "a turn saw one version only");
            seen.insert(version.clone());
        }
        let recorded = engine.checkpoints(&id).await.unwrap();
        assert_eq!(recorded.len(), turns.len() + 1);
        assert!(recorded.iter().all(|c| marker_of.contains_key(&c.pack_version)));
        total += turns.len();
    }
    assert!(total > 100, "only {total} turns ran");
    assert!(seen.len() > 10, "turns ran on only {} versions", seen.len());
}

/// A pack's JSON Schemas and data tables are its files too: editing one reloads that pack (and a
/// broken one is refused, the last good version serving on).
#[test]
fn schema_and_data_files_belong_to_their_pack() {
    let root = support::copy_of(&[
        "config/designer.yaml",
        "scripts/designer",
        "prompts/designer",
        "schemas/designer",
        "config/party.yaml",
        "scripts/party",
        "prompts/party",
        "data/party",
    ]);
    let engine = Engine::builder(root.path()).build();
    let before = engine.packs().get("designer").unwrap().version().to_owned();
    edit(root.path(), "schemas/designer/zones.yaml", "maxItems: 100", "maxItems: 50");
    let events = engine.packs().reload_files(&["schemas/designer/zones.yaml".to_owned()]);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].pack.as_str(), events[0].status), ("designer", ReloadStatus::Reloaded));
    assert_ne!(engine.packs().get("designer").unwrap().version(), before);

    edit(root.path(), "schemas/designer/zones.yaml", "type: object", "type: objekt");
    let events = engine.packs().reload_files(&["schemas/designer/zones.yaml".to_owned()]);
    assert_eq!((events[0].pack.as_str(), events[0].status), ("designer", ReloadStatus::Rejected));

    edit(root.path(), "data/party/questions.yaml", "Never have I ever", "Never have I ever really");
    let events = engine.packs().reload_files(&["data/party/questions.yaml".to_owned()]);
    assert_eq!((events[0].pack.as_str(), events[0].status), ("party", ReloadStatus::Reloaded));
}
