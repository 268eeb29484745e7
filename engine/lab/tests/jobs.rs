//! A tune or a sweep asked for in words is refused the same way on every face: the field it is
//! about, and why, written as each face writes a field.

use std::collections::BTreeMap;

use ruleweave::Engine;
use ruleweave_lab::jobs::{JobKind, JobSpec, Refused, SweepAsked, TuneAsked};
use ruleweave_testkit::repo_root;

fn coin() -> Engine {
    Engine::builder(repo_root().join("tests/packs/coin")).build()
}

fn tune<'a>(vary: &'a str, target: &'a str) -> TuneAsked<'a> {
    TuneAsked {
        pack: "coin",
        vary,
        target,
        within: 0.05,
        seed: "s",
        options: Default::default(),
        games_max: 3200,
        budget: 10_000,
        jobs: Some(1),
    }
}

fn sweep(ranges: &[String], games: u32) -> SweepAsked<'_> {
    SweepAsked {
        pack: "coin",
        ranges,
        games,
        players: &[],
        seed: "s",
        options: Default::default(),
        jobs: Some(1),
        prices: BTreeMap::new(),
    }
}

fn flag(r: &Refused) -> String {
    r.message(|f| format!("--{}", f.replace('_', "-")))
}

fn body(r: &Refused) -> String {
    r.message(|f| format!("`{f}`"))
}

#[test]
fn a_tune_is_refused_naming_its_field() {
    let engine = coin();
    let stepped = tune("chance=0..100:10", "caller:won=0.5").check(&engine).unwrap_err();
    assert_eq!(
        flag(&stepped),
        "--vary: a tune takes NAME=LO..HI: it chooses the values itself (a step is for a sweep)"
    );
    assert!(!stepped.shape);
    let target = tune("chance=0..100", "caller:won").check(&engine).unwrap_err();
    assert_eq!(body(&target), "`target`: a target is PLAYER:OUTCOME=SHARE (liar:won_*=0.3), not `caller:won`");
    let few = TuneAsked { games_max: 5, ..tune("chance=0..100", "caller:won=0.5") }.check(&engine).unwrap_err();
    assert_eq!((flag(&few), few.shape), ("--games-max is at least 100, not 5".into(), true));
    let seed = "x".repeat(201);
    let long = TuneAsked { seed: &seed, ..tune("chance=0..100", "caller:won=0.5") }.check(&engine).unwrap_err();
    assert_eq!(body(&long), "`seed` is at most 200 characters");
    // What the pack does not have is the engine's own error, about no one field.
    let outcome = tune("chance=0..100", "caller:drawn=0.5").check(&engine).unwrap_err();
    assert_eq!(
        (outcome.field, body(&outcome)),
        (None, "pack `coin` has no outcome `drawn` (its outcomes: won, lost)".into())
    );
    let ok = tune("chance=0..100", "caller:won=0.5").check(&engine).unwrap();
    assert_eq!((ok.vary.param.as_str(), ok.target.share), ("chance", 0.5));
    assert_eq!(JobSpec::Tune(ok).kind(), JobKind::Tune);
}

#[test]
fn a_sweep_is_refused_naming_its_field() {
    let three: Vec<String> = ["chance=0..10", "bias=0..0.1", "steep=0..1"].map(String::from).to_vec();
    assert_eq!(body(&sweep(&three, 10).check().unwrap_err()), "`sweep` varies one parameter, or two (a grid), not 3");
    assert_eq!(flag(&sweep(&[], 10).check().unwrap_err()), "--sweep names no range to play");
    let one = ["chance=0..10:5".to_owned()];
    let none = sweep(&one, 0).check().unwrap_err();
    assert_eq!((flag(&none), none.shape), ("--games is 1 to 100000 per player, not 0".into(), true));
    let bad = ["chance".to_owned()];
    let refused = sweep(&bad, 10).check().unwrap_err();
    assert_eq!((refused.field, refused.shape), (Some("sweep"), false));
    let ok = sweep(&one, 10).check().unwrap();
    assert_eq!(ok.values(&coin()).unwrap(), 3, "0, 5 and 10");
    assert_eq!(JobKind::named(JobSpec::Sweep(ok).kind().name()), Some(JobKind::Sweep));
    assert_eq!(JobKind::named("bake"), None);
}
