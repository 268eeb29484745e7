//! The simulator's own tests: intervals, differences, and which players are sent a view and
//! the state.
use super::against::differences;
use super::stats::{histogram, sign_test_interval, spread};
use super::*;

/// A player whose script never names `view` is not sent one (the display is not rendered
/// for it), nor the state when it never names `state`; one that reads either gets it every turn.
#[test]
fn the_view_and_the_state_are_sent_to_the_players_that_read_them() {
    let root = coin();
    let looker =
        "fn play(view, state) {\n    if type_of(view) != \"map\" { throw \"no view\" }\n    #{ side: \"tails\" }\n}\n";
    std::fs::write(root.path().join("scripts/coin/players/looker.rhai"), looker).unwrap();
    // The view is the first parameter, whatever the script calls it.
    let glancer = looker.replace("view", "game");
    std::fs::write(root.path().join("scripts/coin/players/glancer.rhai"), glancer).unwrap();
    let counter = "fn play(view, s) {\n    if type_of(s) != \"map\" || !(\"done\" in s) { throw \"no state\" }\n    #{ side: \"heads\" }\n}\n";
    std::fs::write(root.path().join("scripts/coin/players/counter.rhai"), counter).unwrap();
    let engine = Engine::builder(root.path()).build();
    let pack = engine.packs().get("coin").unwrap();
    let names = ["caller", "looker", "glancer", "counter"];
    let found = players(&engine, &pack, &names.map(String::from)).unwrap();
    let reads: Vec<(&str, bool, bool)> = found.iter().map(|p| (p.name(), p.reads_view, p.reads_state)).collect();
    assert_eq!(
        reads,
        [("caller", false, false), ("looker", true, false), ("glancer", true, false), ("counter", false, true)]
    );
    let report = twenty_games(&engine, &names);
    assert!(report.players.iter().all(|p| p.games == 20 && p.error.is_none()), "{:?}", report.players);
}

/// A copy of the coin pack (`tests/packs/coin`) in a directory of its own.
fn coin() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let coin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/packs/coin");
    for dir in ["config", "scripts/coin", "scripts/coin/players"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    for file in ["config/coin.yaml", "scripts/coin/toss.rhai", "scripts/coin/players/caller.rhai"] {
        std::fs::copy(coin.join(file), root.path().join(file)).unwrap();
    }
    root
}

fn twenty_games(engine: &Engine, players: &[&str]) -> Report {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let batch = Batch {
        pack: "coin".into(),
        games: 20,
        players: players.iter().map(|p| p.to_string()).collect(),
        seed: "s".into(),
        options: Map::new(),
        jobs: Some(1),
        prices: BTreeMap::new(),
    };
    run(rt.handle(), engine, &batch).unwrap()
}

/// A player gets a copy of the state it may change at every depth (a list, a map, a field), as
/// a script's own value; the game's state does not see the change.
#[test]
fn a_player_may_change_its_copy_of_the_state() {
    let root = coin();
    let config = root.path().join("config/coin.yaml");
    let manifest = std::fs::read_to_string(&config).unwrap();
    let manifest = manifest
        .replace("  done: {type: bool}\n", "  done: {type: bool}\n  tosses: {type: list}\n  notes: {type: map}\n");
    std::fs::write(&config, manifest).unwrap();
    let toss = root.path().join("scripts/coin/toss.rhai");
    let script = std::fs::read_to_string(&toss).unwrap();
    let script = script.replace(
        "fn toss() {",
        "fn toss() {\n    if this.tosses.len() != 0 || this.notes.len() != 0 { throw \"the player's change got in\" }",
    );
    std::fs::write(&toss, script).unwrap();
    let changer = "fn play(view, state) {\n    state.tosses.push(1);\n    state.notes.seen = [true];\n    state.notes.seen.push(false);\n    state.outcome = \"mine\";\n    if state.tosses.len() != 1 || state.notes.seen.len() != 2 { throw \"unchanged\" }\n    #{ side: \"heads\" }\n}\n";
    std::fs::write(root.path().join("scripts/coin/players/changer.rhai"), changer).unwrap();
    let engine = Engine::builder(root.path()).build();
    let report = twenty_games(&engine, &["changer"]);
    let changer = &report.players[0];
    assert_eq!((changer.games, &changer.error), (20, &None), "{changer:?}");
    assert_eq!(changer.outcomes.keys().collect::<Vec<_>>(), ["lost", "won"]);
}

#[test]
fn wilson_intervals_and_percentiles() {
    let (lo, hi) = wilson(50, 100);
    assert!((lo - 0.4038).abs() < 1e-3 && (hi - 0.5962).abs() < 1e-3, "{lo} {hi}");
    assert_eq!(wilson(0, 10).0, 0.0);
    let s = spread(&[5.0, 1.0, 3.0, 2.0, 4.0]);
    assert_eq!(s, Spread { median: Some(3.0), p10: Some(1.0), p90: Some(5.0) });
}

fn games(name: &str, won: usize, lost: usize) -> Played {
    let mut p = Played::new(name, &[]);
    p.outcomes = std::iter::repeat_n("won", won).chain(std::iter::repeat_n("lost", lost)).map(String::from).collect();
    p
}

/// Newcombe's interval of a difference of two shares (his worked example 1: 56/70 against
/// 48/80 gives 0.0524 to 0.3339), and which differences are beyond noise.
#[test]
fn differences_have_newcombes_interval() {
    let d = differences(&[games("p", 56, 14)], &[games("p", 48, 32)]);
    let won = d.iter().find(|d| d.outcome == "won").unwrap();
    assert!((won.delta - 0.2).abs() < 1e-9, "{won:?}");
    assert!((won.low - 0.0524).abs() < 1e-3, "{won:?}");
    assert!((won.high - 0.3339).abs() < 1e-3, "{won:?}");
    assert!(won.beyond_noise);
    let same = differences(&[games("p", 5, 5)], &[games("p", 6, 4)]);
    assert!(same.iter().all(|d| !d.beyond_noise), "{same:?}");
}

/// The sign test's interval of a median: for 20 values, the 6th smallest to the 6th largest
/// (P(B(20, ½) ≤ 5) = 0.0207 ≤ 2.5% < P(B ≤ 6) = 0.0577); for 5 values, none at 95%.
#[test]
fn a_median_difference_has_the_sign_tests_interval() {
    let d: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(sign_test_interval(&d), Some((6.0, 15.0)));
    assert_eq!(sign_test_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
    // Six values: P(B(6, ½) = 0) = 1/64 ≤ 2.5%, so the whole range.
    assert_eq!(sign_test_interval(&[3.0, 1.0, 2.0, 6.0, 5.0, 4.0]), Some((1.0, 6.0)));
}

#[test]
fn turns_histogram_counts_games_per_number_of_turns() {
    assert_eq!(histogram(&[3.0, 1.0, 3.0, 5.0]), vec![1, 0, 2, 0, 1]);
    assert_eq!(histogram(&[]), Vec::<usize>::new());
}

#[test]
fn a_price_is_per_million_tokens() {
    let price = Price { input: 0.15, output: 0.60 };
    assert!((price.of(1_000_000, 500_000) - 0.45).abs() < 1e-12);
}
