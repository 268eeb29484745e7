//! One suite every store passes: memory and SQLite always, PostgreSQL when
//! `RULEWEAVE_TEST_POSTGRES` names a database (CI starts one).

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::event::Updates;
use crate::value::from_json;

fn updates(node: &str, v: serde_json::Value) -> (String, Updates) {
    (node.to_owned(), Updates(Arc::new(from_json(&v).cast())))
}

pub(super) fn session(id: &str) -> SessionInfo {
    SessionInfo {
        id: id.to_owned(),
        pack: "p".into(),
        pack_version: "v1".into(),
        options: json!({"difficulty": "easy"}),
        seed: u64::MAX - 7,
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
        variant: Some("lenient".into()),
        player: Some("5c8e8ba1d13b4b1e".into()),
    }
}

pub(super) fn start() -> Checkpoint {
    Checkpoint {
        seq: 0,
        turn: 0,
        kind: CheckpointKind::Start,
        step: None,
        pack_version: "v1".into(),
        input: None,
        updates: vec![updates("init", json!({"n": 0}))],
        snapshot: Some(json!({"n": 0, "log": []})),
        exchanges: Arc::new(Vec::new()),
        resume: None,
        finished: false,
        created_at: 1_000,
        bumps: Vec::new(),
        by: None,
    }
}

pub(super) fn turn(seq: u64, n: u64) -> Checkpoint {
    Checkpoint {
        seq,
        turn: n,
        kind: CheckpointKind::Turn,
        input: Some(json!({"message": format!("m{n}")})),
        updates: vec![updates("a", json!({"n": n, "log": format!("m{n}")})), updates("b", json!({}))],
        snapshot: None,
        created_at: 1_000 + seq as i64,
        ..start()
    }
}

fn id(tag: &str) -> String {
    format!("{tag}-{}", crate::session::new_id())
}

/// The core: sessions created once, checkpoints appended in order, loaded from the newest
/// snapshot, listed, resumed after a step, deleted.
async fn core(store: Arc<dyn Store>) {
    let s = id("suite");
    store.create(&session(&s), &start()).await.unwrap();
    assert_eq!(store.create(&session(&s), &start()).await.unwrap_err().kind(), ErrorKind::Conflict);
    let info = store.info(&s).await.unwrap().unwrap();
    assert_eq!((info.turns, info.head, info.head_kind, info.seed), (0, 0, CheckpointKind::Start, u64::MAX - 7));
    assert_eq!(info.options, json!({"difficulty": "easy"}));
    assert_eq!((info.variant.as_deref(), info.player.as_deref()), (Some("lenient"), Some("5c8e8ba1d13b4b1e")));

    // Turns append in order; a repeated or skipped number is a conflict, never an overwrite.
    store.append(&s, &turn(1, 1)).await.unwrap();
    assert_eq!(store.append(&s, &turn(1, 1)).await.unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(store.append(&s, &turn(3, 3)).await.unwrap_err().kind(), ErrorKind::Conflict);
    store.append(&s, &turn(2, 2)).await.unwrap();
    let mut third = turn(3, 3);
    third.snapshot = Some(json!({"n": 3, "log": ["m1", "m2", "m3"]}));
    store.append(&s, &third).await.unwrap();
    store.append(&s, &turn(4, 4)).await.unwrap();
    let info = store.info(&s).await.unwrap().unwrap();
    assert_eq!((info.turns, info.head, info.snapshot_seq), (4, 4, 3));

    // Loading starts from the newest snapshot.
    let loaded = store.load(&s).await.unwrap().unwrap();
    assert_eq!(loaded.snapshot, json!({"n": 3, "log": ["m1", "m2", "m3"]}));
    assert_eq!(loaded.after.iter().map(|c| c.seq).collect::<Vec<_>>(), [4]);
    let c = &loaded.after[0];
    assert_eq!(c.input, Some(json!({"message": "m4"})));
    assert_eq!(c.updates[0].0, "a");
    assert_eq!(c.updates[0].1.to_json(), json!({"n": 4, "log": "m4"}));

    // A history starts from the start snapshot.
    let h = store.history(&s, 2).await.unwrap().unwrap();
    assert_eq!(h.snapshot, json!({"n": 0, "log": []}));
    assert_eq!(h.after.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2]);

    let list = store.checkpoints(&s).await.unwrap();
    assert_eq!(
        list.iter().map(|c| (c.seq, c.kind, c.snapshot)).collect::<Vec<_>>(),
        [
            (0, CheckpointKind::Start, true),
            (1, CheckpointKind::Turn, false),
            (2, CheckpointKind::Turn, false),
            (3, CheckpointKind::Turn, true),
            (4, CheckpointKind::Turn, false),
        ]
    );
    assert_eq!(list[1].nodes, ["a", "b"]);

    // A step checkpoint leaves the turn pending until its turn checkpoint.
    let mut step = turn(5, 5);
    step.kind = CheckpointKind::Step;
    step.step = Some(2);
    let point = crate::store::ResumePoint {
        step: 2,
        next: vec!["c".into()],
        joins: vec![vec!["a".into()]],
        random: u128::MAX.to_string(),
        paused_after: None,
        held: None,
    };
    step.resume = Some(point.clone());
    store.append(&s, &step).await.unwrap();
    assert!(store.pending().await.unwrap().contains(&s));
    assert_eq!(store.info(&s).await.unwrap().unwrap().turns, 4, "a step does not finish a turn");
    let resumed = store.load(&s).await.unwrap().unwrap();
    assert_eq!(resumed.after.last().unwrap().resume, Some(point.clone()));
    store.append(&s, &turn(6, 5)).await.unwrap();
    assert!(!store.pending().await.unwrap().contains(&s));

    // A turn held at a breakpoint is no interrupted turn, and neither it nor an edit finishes one.
    let mut held = turn(7, 6);
    held.kind = CheckpointKind::Break;
    let stop = crate::store::ResumePoint { held: Some(crate::store::Stop::Before("c".into())), ..point.clone() };
    held.resume = Some(stop.clone());
    store.append(&s, &held).await.unwrap();
    let mut edit = turn(8, 6);
    edit.kind = CheckpointKind::Edit;
    edit.by = Some("key_designer".into());
    store.append(&s, &edit).await.unwrap();
    assert!(!store.pending().await.unwrap().contains(&s), "a held turn waits to be resumed");
    let info = store.info(&s).await.unwrap().unwrap();
    assert_eq!((info.turns, info.head, info.head_kind), (5, 8, CheckpointKind::Edit));
    let kinds: Vec<CheckpointKind> = store.load(&s).await.unwrap().unwrap().after.iter().map(|c| c.kind).collect();
    assert_eq!(kinds[kinds.len() - 2..], [CheckpointKind::Break, CheckpointKind::Edit]);
    // Who made each is kept where they were named, and read as nobody where not.
    let by: Vec<Option<String>> = store.checkpoints(&s).await.unwrap().into_iter().map(|c| c.by).collect();
    assert_eq!(by[by.len() - 2..], [None, Some("key_designer".to_owned())]);
    assert_eq!(store.history(&s, 8).await.unwrap().unwrap().after.last().unwrap().by.as_deref(), Some("key_designer"));
    assert_eq!(store.history(&s, 7).await.unwrap().unwrap().after.last().unwrap().resume, Some(stop));
    store.truncate(&s, 6).await.unwrap();

    let other = id("other");
    store.create(&session(&other), &start()).await.unwrap();
    let mut last = turn(7, 6);
    last.finished = true;
    store.append(&s, &last).await.unwrap();
    let info = store.info(&s).await.unwrap().unwrap();
    assert!(info.finished);
    assert_eq!(info.finished_at, Some(1_007));

    assert!(store.delete(&other).await.unwrap());
    assert!(!store.delete(&other).await.unwrap());
    assert!(store.load(&other).await.unwrap().is_none());
    assert_eq!(store.append(&other, &turn(1, 1)).await.unwrap_err().kind(), ErrorKind::NotFound);
    drop(store.lock(&other).await.unwrap());
}

/// Expiry: finished sessions go after their time, by pack; unfinished ones stay until idle.
async fn expiry(store: Arc<dyn Store>) {
    let index = store.index().expect("a session index");
    let s = id("expiry");
    store.create(&session(&s), &start()).await.unwrap();
    let mut last = turn(1, 1);
    last.finished = true;
    last.created_at = 1_007;
    store.append(&s, &last).await.unwrap();
    let other = id("other");
    store.create(&session(&other), &start()).await.unwrap();
    assert_eq!(store.info(&s).await.unwrap().unwrap().finished_at, Some(1_007));
    index.expire(1_007, Expiry::Pack("p")).await.unwrap();
    assert!(store.info(&s).await.unwrap().is_some(), "finished at the bound: not before it");
    // A pack keeping its own retention is left to it.
    index.expire(1_008, Expiry::AllBut(&["p".to_owned()])).await.unwrap();
    index.expire(1_008, Expiry::Pack("another")).await.unwrap();
    assert!(store.info(&s).await.unwrap().is_some(), "only other packs' sessions expired");
    assert!(index.expire(1_008, Expiry::Pack("p")).await.unwrap() >= 1);
    assert!(store.info(&s).await.unwrap().is_none(), "expired");
    assert!(store.info(&other).await.unwrap().is_some(), "unfinished sessions stay");
    // Idle: unfinished sessions not played since the bound go; finished ones are not idle.
    index.expire_idle(1_000).await.unwrap();
    assert!(store.info(&other).await.unwrap().is_some(), "played at the bound: not idle before it");
    assert!(index.expire_idle(1_001).await.unwrap() >= 1);
    assert!(store.info(&other).await.unwrap().is_none(), "idle past the bound");
}

/// Counters: a checkpoint's bumps are added with it, per pack, table and row; a refused
/// checkpoint adds nothing.
async fn counters(store: Arc<dyn Store>) {
    let counters = store.counters().expect("shared counters");
    let pack = id("counting");
    let (a, b) = (id("count"), id("count"));
    for s in [&a, &b] {
        let mut info = session(s);
        info.pack = pack.clone();
        store.create(&info, &start()).await.unwrap();
    }
    let bump = |key: &str, by| Bump { table: "questions".into(), counter: "times_used".into(), key: key.into(), by };
    let mut first = turn(1, 1);
    first.bumps = vec![bump("q1", 1), bump("q2", 1)];
    store.append(&a, &first).await.unwrap();
    let mut again = turn(1, 1);
    again.bumps = vec![bump("q1", 5)];
    assert!(store.append(&a, &again).await.is_err(), "the same checkpoint twice");
    let mut other = turn(1, 1);
    other.bumps = vec![bump("q1", 2)];
    store.append(&b, &other).await.unwrap();
    let mut counted = counters.counts(&pack, "questions").await.unwrap();
    counted.sort();
    assert_eq!(counted, [("q1".into(), "times_used".into(), 3), ("q2".into(), "times_used".into(), 1)]);
    assert!(counters.counts(&pack, "other").await.unwrap().is_empty());
    assert!(counters.counts("another-pack", "questions").await.unwrap().is_empty());
}

/// Lobby inputs: recorded once per player, kind and round, listed, cleared by the next turn,
/// and told to subscribers with the turns.
async fn lobby(store: Arc<dyn Store>) {
    let lobby = store.lobby().expect("lobby inputs");
    let s = id("lobby");
    let mut events = store.subscribe();
    store.create(&SessionInfo { lobby: true, ..session(&s) }, &start()).await.unwrap();
    let answer = |player: &str, at: i64| LobbyInput {
        round: 1,
        player: player.to_owned(),
        kind: InputKind::Answer,
        input: json!("have"),
        created_at: at,
    };
    assert!(lobby.add_input(&s, &answer("ana", 2_000)).await.unwrap());
    assert!(!lobby.add_input(&s, &answer("ana", 2_001)).await.unwrap(), "one answer per player and round");
    let leave = LobbyInput { kind: InputKind::Leave, input: json!(null), ..answer("ana", 2_002) };
    assert!(lobby.add_input(&s, &leave).await.unwrap(), "another kind of input from the same player");
    assert!(lobby.add_input(&s, &answer("bo", 2_003)).await.unwrap());
    let listed = lobby.inputs(&s).await.unwrap();
    assert_eq!(listed, vec![answer("ana", 2_000), leave, answer("bo", 2_003)]);
    store.append(&s, &turn(1, 1)).await.unwrap();
    assert!(lobby.inputs(&s).await.unwrap().is_empty(), "the turn closed the round");
    let asked_at = store.info(&s).await.unwrap().unwrap().updated_at;
    // The round is open from its question on: due once its timeout (here, before) has passed.
    let open = lobby.open_rounds(&[("p".into(), asked_at)]).await.unwrap();
    let mine: Vec<&OpenRound> = open.iter().filter(|o| o.session == s).collect();
    assert_eq!(mine, [&OpenRound { session: s.clone(), pack: "p".into(), asked_at }]);
    let early = lobby.open_rounds(&[("p".into(), asked_at - 1)]).await.unwrap();
    assert!(!early.iter().any(|o| o.session == s), "not due before its timeout");
    let other = lobby.open_rounds(&[("q".into(), asked_at)]).await.unwrap();
    assert!(!other.iter().any(|o| o.session == s), "another pack's sweep");

    let mut heard = Vec::new();
    while heard.len() < 4 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv()).await.unwrap().unwrap();
        if e.session == s {
            heard.push(e.what);
        }
    }
    let input = |player: &str, kind| Happened::Input { round: 1, player: player.to_owned(), kind };
    assert_eq!(
        heard,
        [
            input("ana", InputKind::Answer),
            input("ana", InputKind::Leave),
            input("bo", InputKind::Answer),
            Happened::Turn { turn: 1, checkpoint: 1, finished: false },
        ]
    );
    assert!(lobby.add_input(&s, &answer("cy", 2_004)).await.unwrap());
    store.delete(&s).await.unwrap();
    assert!(lobby.inputs(&s).await.unwrap().is_empty(), "deleting a session deletes its inputs");
}

/// Listing: newest first, by pack, a page at a time after a cursor.
async fn listing(store: Arc<dyn Store>) {
    let index = store.index().expect("a session index");
    let pack = id("pack");
    let mut made = Vec::new();
    for (i, at) in [5_000, 7_000, 7_000, 6_000].into_iter().enumerate() {
        let mut info = session(&format!("{pack}-{i}"));
        info.pack = pack.clone();
        info.created_at = at;
        store.create(&info, &start()).await.unwrap();
        made.push(info.id);
    }
    let page = |before: Option<(i64, &str)>| {
        let store = store.clone();
        let pack = pack.clone();
        let before = before.map(|(t, id)| (t, id.to_owned()));
        async move {
            let before = before.as_ref().map(|(t, id)| (*t, id.as_str()));
            let q = SessionQuery { pack: Some(&pack), limit: 2, before, only: None };
            store.index().unwrap().list(q).await.unwrap().into_iter().map(|i| (i.created_at, i.id)).collect::<Vec<_>>()
        }
    };
    let first = page(None).await;
    assert_eq!(first, [(7_000, made[2].clone()), (7_000, made[1].clone())]);
    let second = page(Some((7_000, &made[1]))).await;
    assert_eq!(second, [(6_000, made[3].clone()), (5_000, made[0].clone())]);
    assert!(page(Some((5_000, &made[0]))).await.is_empty());
    // Every pack's sessions, from just after these (a shared database holds newer ones of other
    // tests, more than a page of them).
    let after_these = Some((7_001, ""));
    let all = index.list(SessionQuery { pack: None, limit: 1000, before: after_these, only: None }).await.unwrap();
    assert!(made.iter().all(|id| all.iter().any(|i| &i.id == id)), "no pack: every pack's sessions");
    let few = [made[0].clone(), made[2].clone(), "no-such-session".to_owned()];
    let listed = index.list(SessionQuery { pack: None, limit: 1000, before: None, only: Some(&few) }).await.unwrap();
    let listed: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(listed, [made[2].as_str(), made[0].as_str()], "only the sessions named, newest first");
    let none = index.list(SessionQuery { pack: None, limit: 1000, before: None, only: Some(&[]) }).await.unwrap();
    assert!(none.is_empty(), "an empty list names no session");
}

/// What sessions take: more as they write, nothing for sessions that are not there.
async fn bytes(store: Arc<dyn Store>) {
    let index = store.index().expect("a session index");
    let (a, b) = (id("bytes"), id("bytes"));
    store.create(&session(&a), &start()).await.unwrap();
    store.create(&session(&b), &start()).await.unwrap();
    let both = [a.clone(), b.clone()];
    let before = index.bytes(&both).await.unwrap();
    assert!(before > 0, "two sessions' start checkpoints take some bytes");
    assert!(index.bytes(std::slice::from_ref(&a)).await.unwrap() < before, "one takes less than two");
    store.append(&b, &Checkpoint { input: Some(json!({"message": "x".repeat(4000)})), ..turn(1, 1) }).await.unwrap();
    let after = index.bytes(&both).await.unwrap();
    assert!(after > before, "{before} then {after} bytes (as stored: compressed where the store compresses)");
    assert_eq!(index.bytes(&["no-such-session".to_owned()]).await.unwrap(), 0);
    assert_eq!(index.bytes(&[]).await.unwrap(), 0);
    store.delete(&a).await.unwrap();
    store.delete(&b).await.unwrap();
}

/// Transcript links: found by key among many, replaced by a later link of the same key, refused
/// for a session that does not exist, gone with their session.
async fn transcripts(store: Arc<dyn Store>) {
    let links = store.transcripts().expect("transcript links");
    let a = id("chat");
    let b = id("chat");
    store.create(&session(&a), &start()).await.unwrap();
    store.create(&session(&b), &start()).await.unwrap();
    let key = |n: u32| format!("{a}-key-{n}");
    links.link_transcript(&key(1), &a, 0).await.unwrap();
    links.link_transcript(&key(2), &a, 1).await.unwrap();
    links.link_transcript(&key(3), &b, 0).await.unwrap();
    let asked: Vec<String> = (0..250).map(key).collect();
    let mut found = links.find_transcripts(&asked).await.unwrap();
    found.sort_by(|x, y| x.key.cmp(&y.key));
    let link =
        |k: u32, session: &str, seq| TranscriptLink { key: key(k), session: session.to_owned(), seq, shared: false };
    assert_eq!(found, [link(1, &a, 0), link(2, &a, 1), link(3, &b, 0)]);

    links.link_transcript(&key(1), &a, 0).await.unwrap();
    assert_eq!(links.find_transcripts(&[key(1)]).await.unwrap(), [link(1, &a, 0)], "linked again to the same place");
    links.link_transcript(&key(2), &b, 4).await.unwrap();
    let shared = TranscriptLink { shared: true, ..link(2, &a, 1) };
    assert_eq!(
        links.find_transcripts(&[key(2)]).await.unwrap(),
        std::slice::from_ref(&shared),
        "the first link stays, shared"
    );
    assert!(links.link_transcript(&key(9), "no-such-session", 1).await.is_err());

    store.delete(&b).await.unwrap();
    let mut found = links.find_transcripts(&asked).await.unwrap();
    found.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(found, [link(1, &a, 0), shared], "a deleted session's links go");
    assert!(links.find_transcripts(&[]).await.unwrap().is_empty());
}

/// Pack schemas: recorded once per (pack, version), the first kept; a load names the version its
/// snapshot was written on.
async fn versions(store: Arc<dyn Store>) {
    let versions = store.versions().expect("pack versions");
    let pack = id("schemas");
    let first =
        serde_json::json!({"fields": [{"name": "history", "type": "list", "reducer": "append", "default": []}]});
    let later = serde_json::json!({"fields": []});
    versions.save_schema(&pack, "v1", &first).await.unwrap();
    versions.save_schema(&pack, "v1", &later).await.unwrap();
    versions.save_schema(&pack, "v2", &later).await.unwrap();
    assert_eq!(versions.schema(&pack, "v1").await.unwrap(), Some(first), "the first record stays");
    assert_eq!(versions.schema(&pack, "v2").await.unwrap(), Some(later));
    assert_eq!(versions.schema(&pack, "v3").await.unwrap(), None);
    assert_eq!(versions.schema("another-pack", "v1").await.unwrap(), None);

    let s = id("schemas");
    store.create(&session(&s), &start()).await.unwrap();
    let stored = store.load(&s).await.unwrap().unwrap();
    assert_eq!(stored.snapshot_version, start().pack_version);
}

/// Lobby sweeps at scale: among a thousand open lobby sessions and the sessions of packs without
/// rounds (whose turns leave the round clock alone), a sweep finds exactly the rounds that are
/// due, each with the time its round was asked; an edit moves no round's clock.
async fn lobby_at_scale(store: Arc<dyn Store>) {
    let lobby = store.lobby().expect("lobby inputs");
    let pack = id("party");
    let (mut due, mut later) = (Vec::new(), Vec::new());
    for k in 0..1_500i64 {
        let s = id("round");
        let info = SessionInfo { pack: pack.clone(), lobby: k % 3 != 2, ..session(&s) };
        store.create(&info, &start()).await.unwrap();
        // A round asked at 10_000 + k.
        store.append(&s, &Checkpoint { created_at: 10_000 + k, ..turn(1, 1) }).await.unwrap();
        match (info.lobby, k < 600) {
            (true, true) => due.push(s),
            (true, false) => later.push(s),
            (false, _) => {}
        }
    }
    // An edit of a due round's session: its round stays due, asked when it was.
    let edit = Checkpoint { kind: CheckpointKind::Edit, created_at: 90_000, ..turn(2, 1) };
    store.append(&due[0], &edit).await.unwrap();
    let open = lobby.open_rounds(&[(pack.clone(), 10_599)]).await.unwrap();
    let mut found: Vec<&str> = open.iter().map(|o| o.session.as_str()).collect();
    found.sort_unstable();
    let mut want: Vec<&str> = due.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(found.len(), 400, "every due round, and only those");
    assert_eq!(found, want);
    let first = open.iter().find(|o| o.session == due[0]).unwrap();
    assert_eq!(first.asked_at, 10_000, "asked by its turn; an edit asks nothing");
    assert!(later.iter().all(|s| !found.contains(&s.as_str())));
}

type Check = fn(Arc<dyn Store>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// The suite, capability by capability: every store passes each.
/// The turn a state was first set by hand: the first edit's, kept through later edits and
/// turns; a session made with one (a fork of an edited state) keeps it.
async fn edited(store: Arc<dyn Store>) {
    let s = id("edited");
    store.create(&session(&s), &start()).await.unwrap();
    store.append(&s, &turn(1, 1)).await.unwrap();
    assert_eq!(store.info(&s).await.unwrap().unwrap().edited_turn, None, "turns alone edit nothing");
    let edit = |seq: u64, n: u64| Checkpoint {
        kind: CheckpointKind::Edit,
        input: None,
        updates: vec![updates("edit", json!({"n": 50}))],
        ..turn(seq, n)
    };
    store.append(&s, &edit(2, 1)).await.unwrap();
    store.append(&s, &turn(3, 2)).await.unwrap();
    store.append(&s, &edit(4, 2)).await.unwrap();
    assert_eq!(store.info(&s).await.unwrap().unwrap().edited_turn, Some(1), "the first edit's turn");
    let fork = id("edited-fork");
    store.create(&SessionInfo { edited_turn: Some(1), ..session(&fork) }, &start()).await.unwrap();
    assert_eq!(store.info(&fork).await.unwrap().unwrap().edited_turn, Some(1));
    store.delete(&s).await.unwrap();
    store.delete(&fork).await.unwrap();
}

/// Outcome rows: written as a game opens, completed once as it ends (a second ending, and the
/// ending of a session without a row, change nothing), dropped when discarded, read and counted
/// by pack, time range and version, and erased by player.
async fn outcomes(store: Arc<dyn Store>) {
    use super::{Ending, FieldSpread, OutcomeCount, OutcomeQuery, OutcomeRow};
    let o = store.outcomes().expect("every store keeps outcome rows");
    let pack = id("outcome-pack");
    let row = |n: usize, variant: &str, player: &str| OutcomeRow {
        session: id(&format!("outcome-{n}")),
        pack: pack.clone(),
        version: if n < 5 { "v1".into() } else { "v2".into() },
        variant: Some(variant.into()),
        player: Some(player.into()),
        outcome: None,
        tracked: Default::default(),
        turns: 0,
        created_at: 1_000 + n as i64,
        finished_at: None,
    };
    let (ada, eve) = (id("ada"), id("eve"));
    let rows: Vec<OutcomeRow> = (0..6)
        .map(|n| row(n, if n % 2 == 0 { "strict" } else { "lenient" }, if n == 5 { &eve } else { &ada }))
        .collect();
    for r in &rows {
        o.opened(r).await.unwrap();
    }
    o.opened(&rows[0]).await.unwrap();
    let ending = |outcome: &str, merit: i64| Ending {
        outcome: outcome.into(),
        tracked: json!({"merit": merit}).as_object().unwrap().clone(),
        turns: 7,
        at: 5_000,
    };
    o.ended(&rows[0].session, &ending("won", 70)).await.unwrap();
    o.ended(&rows[0].session, &ending("lost", 1)).await.unwrap();
    o.ended(&rows[1].session, &ending("lost", 20)).await.unwrap();
    o.ended(&rows[2].session, &ending("won", 65)).await.unwrap();
    o.ended(&id("no-such-game"), &ending("won", 1)).await.unwrap();
    o.discard(&rows[3].session).await.unwrap();
    let all = OutcomeQuery { pack: &pack, since: None, until: None, version: None };
    let read = o.outcome_rows(all).await.unwrap();
    assert_eq!(
        read.iter().map(|r| r.session.clone()).collect::<Vec<_>>(),
        [0, 1, 2, 4, 5].map(|n| rows[n].session.clone())
    );
    assert_eq!(
        (&read[0].outcome, &read[0].tracked, read[0].turns, read[0].finished_at),
        (&Some("won".to_owned()), json!({"merit": 70}).as_object().unwrap(), 7, Some(5_000)),
        "the first ending stands"
    );
    let count = |variant: &str, outcome: Option<&str>, games| OutcomeCount {
        variant: Some(variant.into()),
        outcome: outcome.map(str::to_owned),
        games,
    };
    let mut counted = o.outcome_counts(all).await.unwrap();
    counted.sort_by(|a, b| (&a.variant, &a.outcome).cmp(&(&b.variant, &b.outcome)));
    assert_eq!(
        counted,
        [
            count("lenient", None, 1),
            count("lenient", Some("lost"), 1),
            count("strict", None, 1),
            count("strict", Some("won"), 2)
        ]
    );
    // The tracked field ranked in each variant's finished games: strict's two (65, 70), lenient's
    // one (20); a field no row has, nothing.
    let spread =
        |variant: &str, games, median, p10, p90| FieldSpread { variant: Some(variant.into()), games, median, p10, p90 };
    assert_eq!(
        o.outcome_spreads(all, "merit").await.unwrap(),
        [spread("lenient", 1, 20.0, 20.0, 20.0), spread("strict", 2, 65.0, 65.0, 70.0)]
    );
    assert_eq!(o.outcome_spreads(all, "luck").await.unwrap(), []);
    let later = OutcomeQuery { since: Some(1_002), until: Some(1_005), ..all };
    assert_eq!(o.outcome_rows(later).await.unwrap().len(), 2, "opened at 1,002 and 1,004");
    let v2 = OutcomeQuery { version: Some("v2"), ..all };
    assert_eq!(o.outcome_rows(v2).await.unwrap().iter().map(|r| &r.session).collect::<Vec<_>>(), [&rows[5].session]);
    assert_eq!(o.erase_player_outcomes(&eve).await.unwrap(), 1);
    assert_eq!(o.outcome_rows(all).await.unwrap().len(), 4);
    assert_eq!(o.erase_player_outcomes(&ada).await.unwrap(), 4);
    // Ten games scored 10 down to 1, and two whose score is no number (a string, a boolean): ranks
    // 5, 1 and 9 of the ten.
    let ranked = id("ranked-pack");
    for n in 0..12 {
        let r =
            OutcomeRow { pack: ranked.clone(), variant: None, session: id(&format!("ranked-{n}")), ..row(n, "", &ada) };
        o.opened(&r).await.unwrap();
        let score = match n {
            10 => json!("high"),
            11 => json!(true),
            n => json!(10 - n),
        };
        let e = Ending { tracked: json!({"the score": score}).as_object().unwrap().clone(), ..ending("won", 0) };
        o.ended(&r.session, &e).await.unwrap();
    }
    let of_ranked = OutcomeQuery { pack: &ranked, ..all };
    assert_eq!(
        o.outcome_spreads(of_ranked, "the score").await.unwrap(),
        [FieldSpread { variant: None, games: 10, median: 5.0, p10: 1.0, p90: 9.0 }]
    );
    assert_eq!(o.erase_player_outcomes(&ada).await.unwrap(), 12);
}

const CAPABILITIES: [(&str, Check); 11] = [
    ("core", |s| Box::pin(core(s))),
    ("edited", |s| Box::pin(edited(s))),
    ("lobby inputs", |s| Box::pin(lobby(s))),
    ("lobby rounds at scale", |s| Box::pin(lobby_at_scale(s))),
    ("counters", |s| Box::pin(counters(s))),
    ("transcript links", |s| Box::pin(transcripts(s))),
    ("session index: listing", |s| Box::pin(listing(s))),
    ("session index: expiry", |s| Box::pin(expiry(s))),
    ("pack versions", |s| Box::pin(versions(s))),
    ("session index: bytes", |s| Box::pin(bytes(s))),
    ("outcomes", |s| Box::pin(outcomes(s))),
];

#[tokio::test]
async fn memory_store() {
    for (capability, check) in CAPABILITIES {
        eprintln!("memory: {capability}");
        check(Arc::new(MemoryStore::new())).await;
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    for (capability, check) in CAPABILITIES {
        eprintln!("{url}: {capability}");
        check(open(&url).await.unwrap()).await;
    }
    // Reopening migrates nothing twice and finds what was written.
    let store = open(&url).await.unwrap();
    let s = id("again");
    store.create(&session(&s), &start()).await.unwrap();
    assert!(open(&url).await.unwrap().info(&s).await.unwrap().is_some());
}

#[cfg(feature = "postgres")]
use ruleweave_testkit::postgres;

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_store() {
    let Some(url) = postgres() else { return };
    for (capability, check) in CAPABILITIES {
        eprintln!("{url}: {capability}");
        check(open(&url).await.unwrap()).await;
    }
}

#[tokio::test]
async fn store_urls_are_checked() {
    assert_eq!(open("redis://x").await.err().unwrap().kind(), ErrorKind::Input);
    assert_eq!(open("memory").await.unwrap().kind(), "memory");
}

/// Turns that find the SQLite connection busy queue for the writer thread, which commits them in
/// one transaction once it is free: each learns its own outcome (the second of two writes of the
/// same checkpoint is a conflict), and what went in is there.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_commits_what_waited_for_a_busy_connection_together() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let dir = tempfile::tempdir().unwrap();
    let store =
        super::sqlite::SqliteStore::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.unwrap();
    let (a, b) = (id("busy"), id("busy"));
    store.create(&session(&a), &start()).await.unwrap();
    store.create(&session(&b), &start()).await.unwrap();
    let (a1, b1, b1_again) = (turn(1, 1), turn(1, 1), turn(1, 1));
    // New sessions queue beside the turns: a second one with the same id is refused.
    let (c, c_info, c_start) = (id("busy"), session(&a), start());
    let c_info = SessionInfo { id: c.clone(), ..c_info };
    let busy = store.conn.lock().unwrap();
    let mut waiting = vec![
        Box::pin(store.append(&a, &a1)),
        Box::pin(store.append(&b, &b1)),
        Box::pin(store.append(&b, &b1_again)),
        Box::pin(store.create(&c_info, &c_start)),
        Box::pin(store.create(&c_info, &c_start)),
    ];
    // A deletion queues too, and says whether there was a session.
    let (deleted, not_there) = (store.delete(&a), store.delete("no-such-session"));
    for w in &mut waiting {
        // Each finds the connection busy and queues (the first poll ends waiting for the writer).
        assert!(w.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
    }
    let (mut deleted, mut not_there) = (Box::pin(deleted), Box::pin(not_there));
    assert!(deleted.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
    assert!(not_there.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
    drop(busy);
    let mut outcomes = Vec::new();
    for w in waiting {
        outcomes.push(w.await.map_err(|e| e.kind()));
    }
    assert_eq!((deleted.await.unwrap(), not_there.await.unwrap()), (true, false));
    assert!(store.info(&a).await.unwrap().is_none(), "a is deleted, its turn with it");
    assert_eq!(outcomes, [Ok(()), Ok(()), Err(ErrorKind::Conflict), Ok(()), Err(ErrorKind::Conflict)]);
    assert_eq!(store.info(&c).await.unwrap().unwrap().options, json!({"difficulty": "easy"}));
    assert_eq!(store.load(&b).await.unwrap().unwrap().after.len(), 1);
}
