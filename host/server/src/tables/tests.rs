//! The server's tables beside each store: memory and SQLite always, PostgreSQL when
//! `RULEWEAVE_TEST_POSTGRES` names a database (CI starts one).

use std::sync::Arc;

use ruleweave::ErrorKind;
use ruleweave::store::{Checkpoint, CheckpointKind, SessionInfo, Store, open};
use serde_json::json;

use super::*;

/// A session of pack `p` as a store takes it: the conformance suite's, and the other tests' of the
/// server's tables.
pub(crate) fn session(id: &str) -> SessionInfo {
    SessionInfo {
        id: id.to_owned(),
        pack: "p".into(),
        pack_version: "v1".into(),
        options: json!({}),
        seed: 7,
        turns: 0,
        head: 0,
        head_kind: CheckpointKind::Start,
        snapshot_seq: 0,
        finished: false,
        finished_at: None,
        edited_turn: None,
        created_at: 1_000,
        updated_at: 1_000,
        lobby: false,
        parent: None,
        variant: None,
        player: None,
    }
}

/// Its start checkpoint.
pub(crate) fn start() -> Checkpoint {
    Checkpoint {
        seq: 0,
        turn: 0,
        kind: CheckpointKind::Start,
        step: None,
        pack_version: "v1".into(),
        input: None,
        updates: Vec::new(),
        snapshot: Some(json!({"n": 0})),
        exchanges: Arc::new(Vec::new()),
        resume: None,
        finished: false,
        created_at: 1_000,
        bumps: Vec::new(),
        by: None,
    }
}

/// A fresh id: the PostgreSQL database outlives a run.
fn id(tag: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    format!("{tag}-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// Keys: found by their hash, a player's new key replacing the old, issued keys listed and
/// revoked, owners listing what they made; a session's keys and owner go with it.
async fn keys(store: Arc<dyn Store>) {
    let tables = Tables::open(&store).await.unwrap().expect("tables");
    let keys = &*tables.keys;
    let (a, b) = (id("keyed"), id("keyed"));
    store.create(&session(&a), &start()).await.unwrap();
    store.create(&session(&b), &start()).await.unwrap();
    let h = |secret: &str| key_hash(&format!("{a}-{secret}"));
    keys.add_key(&h("s"), &Grant::Session { session: a.clone(), debug: false }).await.unwrap();
    let ana = Grant::Player { session: a.clone(), player: "ana".into() };
    keys.add_key(&h("p1"), &ana).await.unwrap();
    keys.add_key(&h("p2"), &ana).await.unwrap();
    let issued = IssuedKey {
        id: format!("{a}-k"),
        label: "a client".into(),
        packs: Some(vec!["p".into()]),
        rights: vec!["debug".into()],
        expires_at: None,
        created_at: 5,
        spend_limit_usd: None,
        spent_usd: 0.0,
    };
    // A key past its end opens nothing; one before it does.
    let now = now_ms();
    for (tag, end, opens) in [("old", now - 1, false), ("new", now + 3_600_000, true)] {
        let k = IssuedKey {
            id: format!("{a}-{tag}"),
            label: tag.into(),
            packs: None,
            rights: Vec::new(),
            expires_at: Some(end),
            created_at: 1,
            spend_limit_usd: None,
            spent_usd: 0.0,
        };
        keys.add_key(&h(tag), &Grant::Issued(k.clone())).await.unwrap();
        assert_eq!(keys.find_key(&h(tag)).await.unwrap(), opens.then_some(Grant::Issued(k)), "{tag}");
        keys.revoke_key(&format!("{a}-{tag}")).await.unwrap();
    }
    keys.add_key(&h("k"), &Grant::Issued(issued.clone())).await.unwrap();
    assert_eq!(keys.find_key(&h("s")).await.unwrap(), Some(Grant::Session { session: a.clone(), debug: false }));
    assert_eq!(keys.find_key(&h("p1")).await.unwrap(), None, "a player's new key replaces the old");
    assert_eq!(keys.find_key(&h("p2")).await.unwrap(), Some(ana));
    assert_eq!(keys.find_key(&h("k")).await.unwrap(), Some(Grant::Issued(issued.clone())));
    assert_eq!(keys.find_key(&h("nothing")).await.unwrap(), None);
    assert!(keys.issued_keys().await.unwrap().contains(&issued));

    // What a key may spend: held for a job up to its cap, given back when it spent less; a key
    // without a cap holds any amount, and no key holds nothing.
    let capped = IssuedKey { id: format!("{a}-capped"), spend_limit_usd: Some(1.0), ..issued.clone() };
    keys.add_key(&h("capped"), &Grant::Issued(capped.clone())).await.unwrap();
    assert!(keys.hold_spend(&capped.id, 0.6).await.unwrap());
    assert!(!keys.hold_spend(&capped.id, 0.6).await.unwrap(), "0.6 held of 1.0: 0.6 more is past the cap");
    keys.release_spend(&capped.id, 0.4).await.unwrap();
    assert!(keys.hold_spend(&capped.id, 0.6).await.unwrap(), "0.2 spent: 0.6 more fits");
    let listed = keys.issued_keys().await.unwrap().into_iter().find(|k| k.id == capped.id).unwrap();
    assert!((listed.spent_usd - 0.8).abs() < 1e-9, "{listed:?}");
    assert!(keys.hold_spend(&issued.id, 1e6).await.unwrap(), "no cap");
    keys.release_spend(&issued.id, 1e6).await.unwrap();
    assert!(!keys.hold_spend("no-such-key", 0.1).await.unwrap());
    keys.revoke_key(&capped.id).await.unwrap();
    let missing =
        keys.add_key(&h("x"), &Grant::Session { session: "no-such-session".into(), debug: false }).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");

    let owner = format!("key:{}", issued.id);
    keys.set_owner(&b, &owner).await.unwrap();
    assert_eq!(keys.owner(&b).await.unwrap().as_deref(), Some(owner.as_str()));
    assert_eq!(keys.owner(&a).await.unwrap(), None);
    assert_eq!(keys.owned(&owner).await.unwrap(), std::slice::from_ref(&b), "an owner lists what it made");

    keys.drop_player_key(&a, "ana").await.unwrap();
    assert_eq!(keys.find_key(&h("p2")).await.unwrap(), None, "a player who left has no key");
    let (bo, cy) = (
        Grant::Player { session: a.clone(), player: "bo".into() },
        Grant::Player { session: a.clone(), player: "cy".into() },
    );
    keys.add_key(&h("bo"), &bo).await.unwrap();
    keys.add_key(&h("cy"), &cy).await.unwrap();
    keys.keep_player_keys(&a, &["bo".to_owned()]).await.unwrap();
    assert_eq!((keys.find_key(&h("bo")).await.unwrap(), keys.find_key(&h("cy")).await.unwrap()), (Some(bo), None));
    assert!(keys.find_key(&h("s")).await.unwrap().is_some(), "the session's own key stays");

    // Revoking an issued key revokes what it handed out: the keys of the sessions it made, of
    // the forks made with those (and theirs), and of their players; other sessions keep theirs.
    let c = id("keyed");
    store.create(&session(&c), &start()).await.unwrap();
    keys.set_owner(&c, &format!("session:{b}")).await.unwrap();
    keys.add_key(&h("b"), &Grant::Session { session: b.clone(), debug: false }).await.unwrap();
    keys.add_key(&h("c"), &Grant::Session { session: c.clone(), debug: false }).await.unwrap();
    keys.add_key(&h("c-ana"), &Grant::Player { session: c.clone(), player: "ana".into() }).await.unwrap();
    assert!(keys.revoke_key(&issued.id).await.unwrap());
    assert!(!keys.revoke_key(&issued.id).await.unwrap());
    assert_eq!(keys.find_key(&h("k")).await.unwrap(), None, "a revoked key opens nothing");
    for handed in ["b", "c", "c-ana"] {
        assert_eq!(keys.find_key(&h(handed)).await.unwrap(), None, "{handed}: what the key handed out goes with it");
    }
    assert!(keys.find_key(&h("s")).await.unwrap().is_some(), "a session it did not make keeps its key");

    // Where a session comes from is kept with it: a fork of a fork goes back to the issued key
    // and names the sessions whose keys made it, and deleting its parent cuts neither its reach
    // nor its revocation.
    let lineage = keys.lineage(&c).await.unwrap().expect("a fork made with a key has a lineage");
    assert_eq!((lineage.issuer.as_deref(), lineage.sessions.clone()), (Some(issued.id.as_str()), vec![b.clone()]));
    let k2 = IssuedKey {
        id: format!("{a}-k2"),
        label: "another".into(),
        packs: None,
        rights: Vec::new(),
        expires_at: None,
        created_at: 6,
        spend_limit_usd: None,
        spent_usd: 0.0,
    };
    keys.add_key(&h("k2"), &Grant::Issued(k2.clone())).await.unwrap();
    let (p, f, g) = (id("parent"), id("fork"), id("fork"));
    for s in [&p, &f, &g] {
        store.create(&session(s), &start()).await.unwrap();
    }
    keys.set_owner(&p, &format!("key:{}", k2.id)).await.unwrap();
    keys.set_owner(&f, &format!("session:{p}")).await.unwrap();
    keys.set_owner(&g, &format!("session:{f}")).await.unwrap();
    keys.add_key(&h("f"), &Grant::Session { session: f.clone(), debug: false }).await.unwrap();
    keys.add_key(&h("g"), &Grant::Session { session: g.clone(), debug: true }).await.unwrap();
    assert_eq!(keys.find_key(&h("g")).await.unwrap(), Some(Grant::Session { session: g.clone(), debug: true }));
    store.delete(&p).await.unwrap();
    let lineage = keys.lineage(&g).await.unwrap().unwrap();
    assert_eq!((lineage.issuer.as_deref(), lineage.sessions), (Some(k2.id.as_str()), vec![p.clone(), f.clone()]));
    assert_eq!(keys.sessions_of(&k2.id, 0).await.unwrap(), (2, 2), "the forks still go back to it");
    assert_eq!(keys.sessions_of(&k2.id, i64::MAX).await.unwrap(), (0, 2), "none made since");
    // What it costs the disk is what those sessions take.
    let mut issued_sessions = keys.issued_sessions(&k2.id).await.unwrap();
    issued_sessions.retain(|s| s != &p);
    issued_sessions.sort();
    let mut forks = vec![f.clone(), g.clone()];
    forks.sort();
    assert_eq!(issued_sessions, forks);
    assert!(keys.issued_sessions("no-such-key").await.unwrap().is_empty());
    assert!(keys.revoke_key(&k2.id).await.unwrap());
    for handed in ["f", "g"] {
        assert_eq!(keys.find_key(&h(handed)).await.unwrap(), None, "{handed}: revoked though its parent is gone");
    }
    assert_eq!(keys.lineage("no-such-session").await.unwrap(), None);
    store.delete(&f).await.unwrap();
    store.delete(&g).await.unwrap();
    store.delete(&c).await.unwrap();
    store.delete(&a).await.unwrap();
    store.delete(&b).await.unwrap();
    assert_eq!(keys.find_key(&h("s")).await.unwrap(), None, "a deleted session's keys go");
    assert_eq!(keys.owner(&b).await.unwrap(), None);
}

/// Jobs: recorded running, their progress written while nobody asked them to stop; a stop asked
/// by a client, or by the last watcher leaving, read back by the runner's next write; ended
/// once; forgotten a day after they last wrote.
async fn jobs(store: Arc<dyn Store>) {
    let tables = Tables::open(&store).await.unwrap().expect("tables");
    let jobs = &*tables.jobs;
    let now = now_ms();
    let job = |id: &str, at: i64| Job {
        id: id.to_owned(),
        kind: "tune".into(),
        pack: "coin".into(),
        owner: Some("key:k1".into()),
        state: JobState::Running,
        request: json!({"vary": "chance=0..100"}),
        progress: json!({}),
        result: None,
        stop: false,
        watchers: 0,
        created_at: at,
        updated_at: at,
    };
    let (a, b, old) = (id("job"), id("job"), id("job"));
    jobs.create_job(&job(&old, now - JOB_KEPT_MS - 1)).await.unwrap();
    assert!(jobs.job(&old).await.unwrap().is_some());
    jobs.create_job(&job(&a, now)).await.unwrap();
    assert_eq!(jobs.job(&old).await.unwrap(), None, "a job a day old is forgotten");
    assert_eq!(jobs.job(&a).await.unwrap().unwrap().request, json!({"vary": "chance=0..100"}));

    assert!(!jobs.job_progress(&a, &json!({"value": 40})).await.unwrap(), "nobody asked it to stop");
    assert_eq!(jobs.job(&a).await.unwrap().unwrap().progress, json!({"value": 40}));
    assert!(jobs.stop_job(&a).await.unwrap());
    assert!(!jobs.stop_job("no-such-job").await.unwrap());
    assert!(jobs.job_progress(&a, &json!({"value": 41})).await.unwrap(), "its runner learns it was asked to stop");
    jobs.finish_job(&a, JobState::Cancelled, &json!({"error": "stopped"})).await.unwrap();
    jobs.finish_job(&a, JobState::Done, &json!({"value": 41})).await.unwrap();
    let ended = jobs.job(&a).await.unwrap().unwrap();
    assert_eq!((ended.state, ended.result), (JobState::Cancelled, Some(json!({"error": "stopped"}))), "ended once");
    jobs.job_progress(&a, &json!({"value": 99})).await.unwrap();
    assert_eq!(jobs.job(&a).await.unwrap().unwrap().progress, json!({"value": 41}), "an ended job's progress stays");

    jobs.create_job(&job(&b, now)).await.unwrap();
    jobs.watch_job(&b, 1).await.unwrap();
    jobs.watch_job(&b, 1).await.unwrap();
    jobs.watch_job(&b, -1).await.unwrap();
    assert!(!jobs.job_progress(&b, &json!({})).await.unwrap(), "one watcher is still there");
    jobs.watch_job(&b, -1).await.unwrap();
    let left = jobs.job(&b).await.unwrap().unwrap();
    assert_eq!((left.watchers, left.stop), (0, true), "the last watcher left: nobody waits for it");
    assert!(jobs.job_progress("no-such-job", &json!({})).await.unwrap(), "a job that is gone stops");

    // A revoked key's running jobs are asked to stop; another key's and an ended one are not.
    let owner = format!("key:{}", id("owner"));
    let (mine, ended, theirs) = (id("job"), id("job"), id("job"));
    jobs.create_job(&Job { owner: Some(owner.clone()), ..job(&mine, now) }).await.unwrap();
    jobs.create_job(&Job { owner: Some(owner.clone()), ..job(&ended, now) }).await.unwrap();
    jobs.finish_job(&ended, JobState::Done, &json!({})).await.unwrap();
    jobs.create_job(&job(&theirs, now)).await.unwrap();
    assert_eq!(jobs.stop_jobs_of(&owner).await.unwrap(), std::slice::from_ref(&mine));
    assert_eq!(jobs.jobs_since(&owner, now - 1).await.unwrap(), 2, "both of the key's jobs, ended or not");
    assert_eq!(jobs.jobs_since(&owner, now + 1).await.unwrap(), 0);
    assert!(jobs.job(&mine).await.unwrap().unwrap().stop);
    assert!(!jobs.job(&theirs).await.unwrap().unwrap().stop);
}

type Check = fn(Arc<dyn Store>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// Calibrations: kept by pack and version, a later one replacing the earlier, none for another
/// version.
async fn calibrations(store: Arc<dyn Store>) {
    let tables = Tables::open(&store).await.unwrap().expect("tables");
    let kept = &*tables.calibrations;
    let pack = id("pack");
    assert_eq!(kept.calibration(&pack, "v1").await.unwrap(), None);
    kept.keep_calibration(&pack, "v1", &json!({"sessions": 3})).await.unwrap();
    kept.keep_calibration(&pack, "v1", &json!({"sessions": 5})).await.unwrap();
    assert_eq!(kept.calibration(&pack, "v1").await.unwrap(), Some(json!({"sessions": 5})));
    assert_eq!(kept.calibration(&pack, "v2").await.unwrap(), None);
}

const TABLES: [(&str, Check); 3] =
    [("keys", |s| Box::pin(keys(s))), ("jobs", |s| Box::pin(jobs(s))), ("calibrations", |s| Box::pin(calibrations(s)))];

#[tokio::test]
async fn beside_a_memory_store() {
    for (table, check) in TABLES {
        eprintln!("memory: {table}");
        check(open("memory").await.unwrap()).await;
    }
}

#[tokio::test]
async fn in_a_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    for (table, check) in TABLES {
        eprintln!("{url}: {table}");
        check(open(&url).await.unwrap()).await;
    }
}

#[tokio::test]
async fn in_a_postgres_store() {
    let Some(url) = ruleweave_testkit::postgres() else { return };
    for (table, check) in TABLES {
        eprintln!("{url}: {table}");
        check(open(&url).await.unwrap()).await;
    }
}
