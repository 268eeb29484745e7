//! Asking for the value: `--param`, simulate's sweeps and `tune`, on a coin whose share of wins
//! at a value is known (chance/100 + bias: `tests/packs/coin`), and on the pirate.

use serde_json::{Value, json};

use crate::support::jobs::JobEvents;
use crate::support::{repo_root, ruleweave, stderr, stdout};

fn coin() -> std::path::PathBuf {
    repo_root().join("tests/packs/coin")
}

/// `ruleweave ARGS` in `root`: its exit code, standard output, standard error.
fn run(root: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = ruleweave(root).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

/// `tune coin ARGS --json`: the answer (exit 0 when found, 1 when not).
fn tune(args: &[&str]) -> Value {
    let (code, out, err) = run(&coin(), &[&["tune", "coin", "--json"], args].concat());
    let answer: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(code, if answer["found"] == true { 0 } else { 1 }, "{err}");
    answer
}

/// Tune finds a chance whose true share of wins is within the tolerance of the target, its
/// interval lies inside the band and holds the true share, the games go where they decide
/// (more at the answer than at the first sweep's values), and the same seed gives the same
/// answer.
#[test]
fn tune_finds_the_value_that_gives_the_share_wanted() {
    let args = ["--vary", "chance=0..100", "--target", "caller:won=0.3", "--within", "0.05", "--seed", "t1"];
    let found = tune(&args);
    assert_eq!(found["found"], true, "{found:#}");
    assert_eq!(
        (&found["param"], &found["target"]),
        (&json!("chance"), &json!({"player": "caller", "outcome": "won", "share": 0.3, "within": 0.05}))
    );
    let value = found["value"].as_i64().expect("an integer parameter's answer is an integer");
    let truth = value as f64 / 100.0;
    assert!((truth - 0.3).abs() <= 0.05, "chance {value} wins {truth} of the time");
    let share = &found["share"];
    let (low, high) = (share["low"].as_f64().unwrap(), share["high"].as_f64().unwrap());
    assert!(low >= 0.25 && high <= 0.35, "{share}");
    assert!(low <= truth && truth <= high, "the interval {low}..{high} holds the true share {truth}");
    assert_eq!(share["value"], value);
    let evaluations = found["evaluations"].as_array().unwrap();
    let games = |v: i64| evaluations.iter().find(|e| e["value"] == v).map(|e| e["games"].as_u64().unwrap());
    assert_eq!(games(0), Some(100), "the first sweep gives each value 100 games");
    assert!(games(value).unwrap() > 100, "the answer got more games: {evaluations:?}");
    let total: u64 = evaluations.iter().map(|e| e["games"].as_u64().unwrap()).sum();
    assert_eq!(found["games_played"], total);

    let again = tune(&args);
    assert_eq!((&again["value"], &again["evaluations"]), (&found["value"], &found["evaluations"]));

    // The page says the answer in its heading and lists every value tried, as the table does.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("tune.html");
    let (code, out, err) = run(&coin(), &[&["tune", "coin", "--html", page.to_str().unwrap()], &args[..]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("chance = {value} gives caller won 30% ± 5%: ")), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!("<h1>coin: chance = {value} gives caller won 30% ± 5%</h1>")), "{html}");
    for e in evaluations {
        assert!(html.contains(&format!("<tr><td>{}</td>", e["value"])), "{}", e["value"]);
    }
}

/// A float parameter is tuned to a float, within its declared bounds.
#[test]
fn tune_varies_a_float_parameter() {
    let found = tune(&["--vary", "bias=-0.4..0.4", "--target", "caller:won=0.7", "--seed", "t2"]);
    assert_eq!(found["found"], true, "{found:#}");
    let bias = found["value"].as_f64().unwrap();
    assert!((0.5 + bias - 0.7).abs() <= 0.05, "bias {bias}");
}

/// A share no value in the range gives is reported as not found, with the evidence: the shares
/// at both ends, and the nearest value tried.
#[test]
fn tune_says_when_no_value_can_give_the_share() {
    let answer = tune(&["--vary", "chance=0..20", "--target", "caller:won=0.5", "--seed", "t3"]);
    assert_eq!(answer["found"], false);
    let why = answer["why"].as_str().unwrap();
    assert!(
        why.starts_with("no value in 0..20 gives 50%: the share stays below it (the share is 0% at 0 and "),
        "{why}"
    );
    assert_eq!(answer["value"], 20, "the nearest value tried");

    // As a person reads it.
    let (code, out, _) = run(&coin(), &["tune", "coin", "--vary", "chance=0..20", "--target", "caller:won=0.5"]);
    assert_eq!(code, 1, "not found fails a script that asked");
    assert!(
        out.starts_with("no value of chance found for caller won 50% ± 5%\n  no value in 0..20 gives 50%"),
        "{out}"
    );
    assert!(out.contains("\n  nearest: chance = 20: "), "{out}");
}

/// When the share jumps past the target between two neighbouring integers (a steep coin: 10%
/// below a chance of 50, 70% from it), the answer names both, with their intervals, and says
/// which parameter could land between them (the coin's float `bias`).
#[test]
fn a_cliff_names_the_neighbours_either_side() {
    let args = ["--vary", "chance=0..100", "--target", "caller:won=0.4", "--param", "steep=1", "--seed", "c"];
    let answer = tune(&args);
    assert_eq!(answer["found"], false, "{answer:#}");
    let neighbours = answer["neighbours"].as_array().expect("neighbours in the answer");
    let values: Vec<&Value> = neighbours.iter().map(|e| &e["value"]).collect();
    assert_eq!(values, [&json!(49), &json!(50)], "{answer:#}");
    let (below, above) = (&neighbours[0], &neighbours[1]);
    assert!(below["high"].as_f64().unwrap() < 0.35 && above["low"].as_f64().unwrap() > 0.45, "{neighbours:?}");
    let why = answer["why"].as_str().unwrap();
    assert!(why.starts_with("no value gives 35%–45%: the share jumps between neighbouring values"), "{why}");
    assert!(why.ends_with("; a float parameter can land between them: `bias`"), "{why}");

    // As a person reads it: both values, each with its share and interval.
    let (code, out, _) = run(&coin(), &[&["tune", "coin"], &args[..]].concat());
    assert_eq!(code, 1);
    let at = |e: &Value| {
        let pct = |x: &Value| format!("{}%", ruleweave::text::decimals(x.as_f64().unwrap() * 100.0, 1));
        format!(
            "{}: {} (95%: {}–{}, {} games)",
            e["value"],
            pct(&e["share"]),
            pct(&e["low"]),
            pct(&e["high"]),
            e["games"]
        )
    };
    let either = format!("  either side of the target:\n    chance = {}\n    chance = {}\n", at(below), at(above));
    assert!(out.contains(&either), "{either}\n{out}");
}

/// Each bad request names what is wrong, and exits 2.
#[test]
fn tune_refuses_bad_requests_by_name() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--vary", "chanse=0..100", "--target", "caller:won=0.3"],
            "error: pack `coin` has no numeric parameter `chanse`: did you mean `chance`?",
        ),
        (
            &["--vary", "chance=0..120", "--target", "caller:won=0.3"],
            "error: parameter `chance` is 0 to 100 (param_bounds), not 120",
        ),
        (
            &["--vary", "chance=80..20", "--target", "caller:won=0.3"],
            "error: the range of `chance` runs from low to high: 20..80, not 80..20",
        ),
        (
            &["--vary", "label=0..1", "--target", "caller:won=0.3"],
            "error: pack `coin` has no numeric parameter `label`",
        ),
        (
            &["--vary", "chance=0..100", "--target", "caller:draw=0.3"],
            "error: pack `coin` has no outcome `draw` (its outcomes: won, lost)",
        ),
        (
            &["--vary", "chance=0..100", "--target", "cheater:won=0.3"],
            "error: pack `coin` has no player `cheater` (players: caller)",
        ),
        (&["--vary", "chance=0..100", "--target", "caller:won"], "error: --target: a target is PLAYER:OUTCOME=SHARE"),
        (
            &["--vary", "chance=0..100:5", "--target", "caller:won=0.3"],
            "error: --vary: a tune takes NAME=LO..HI: it chooses the values itself",
        ),
    ];
    for (args, message) in cases {
        let (code, out, err) = run(&coin(), &[&["tune", "coin"], *args].concat());
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.trim_end().starts_with(message), "{args:?}:\n{err}\nwanted: {message}");
    }
}

/// A sweep plays the same games at each value as `simulate --param` does at that value: its
/// per-value reports are those runs' reports.
#[test]
fn a_sweep_is_the_same_games_as_simulate_at_each_value() {
    let (code, out, err) =
        run(&coin(), &["simulate", "coin", "--sweep", "chance=20..60:20", "--games", "40", "--seed", "s", "--json"]);
    assert_eq!(code, 0, "{err}");
    let sweep: Value = serde_json::from_str(&out).unwrap();
    let points = sweep["sweep"].as_array().unwrap();
    assert_eq!(points.iter().map(|p| p["value"].clone()).collect::<Vec<_>>(), [json!(20), json!(40), json!(60)]);
    for point in points {
        let value = format!("chance={}", point["value"]);
        let (code, out, err) =
            run(&coin(), &["simulate", "coin", "--param", &value, "--games", "40", "--seed", "s", "--json"]);
        assert_eq!(code, 0, "{err}");
        let alone: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(point["players"], alone["players"], "{value}");
    }
    // More chance, more wins, on the same games.
    let wins: Vec<f64> =
        points.iter().map(|p| p["players"][0]["outcomes"]["won"]["share"].as_f64().unwrap_or(0.0)).collect();
    assert!(wins[0] < wins[1] && wins[1] < wins[2], "{wins:?}");

    // Two ranges make a grid; the table names each value.
    let (code, out, err) = run(
        &coin(),
        &["simulate", "coin", "--sweep", "chance=0..100:100", "--sweep", "bias=0..0.2:0.2", "--games", "5", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let grid: Value = serde_json::from_str(&out).unwrap();
    let values: Vec<Value> = grid["sweep"].as_array().unwrap().iter().map(|p| p["value"].clone()).collect();
    assert_eq!(
        values,
        [
            json!({"chance": 0, "bias": 0.0}),
            json!({"chance": 0, "bias": 0.2}),
            json!({"chance": 100, "bias": 0.0}),
            json!({"chance": 100, "bias": 0.2}),
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("sweep.html");
    let (_, table, _) = run(
        &coin(),
        &["simulate", "coin", "--sweep", "chance=0..100:100", "--games", "5", "--html", page.to_str().unwrap()],
    );
    // A line per value and player first, each outcome's share and interval; then the detail.
    let summary = "5 games per player at each value, each played to its end or 3 turns\n\n\
                   chance  player  lost              won\n\
                   0       caller  100% (56.6–100%)  0% (0–43.4%)\n\
                   100     caller  0% (0–43.4%)      100% (56.6–100%)\n\n\
                   at each value\n\n";
    assert!(table.starts_with(summary), "{table}");
    assert!(table.contains("chance = 0\ncaller (5 games)\n  lost"), "{table}");
    assert!(table.contains("chance = 100\ncaller (5 games)\n  won"), "{table}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h1>coin: chance at each value</h1>"), "{html}");
    assert!(html.contains("<title>chance = 100: won 100.0% (95%: 56.6–100.0%)</title>"), "{html}");
}

/// The same seed, the same games: every value a tune tried, with the games it played there, is
/// `simulate --param` at that value with that many games and that seed, to the same share. A
/// value given more games than the first sweep (played in batches) is checked too.
#[test]
fn a_tunes_evaluation_is_simulate_at_that_value_with_the_same_seed() {
    let found = tune(&["--vary", "chance=0..100", "--target", "caller:won=0.3", "--within", "0.05", "--seed", "same"]);
    let evaluations = found["evaluations"].as_array().unwrap();
    let answer = evaluations.iter().find(|e| e["value"] == found["value"]).unwrap();
    assert!(answer["games"].as_u64().unwrap() > 100, "the answer got more than one batch: {answer}");
    let first = evaluations.iter().find(|e| e["value"] == 0).unwrap();
    for e in [answer, first] {
        let (param, games) = (format!("chance={}", e["value"]), e["games"].to_string());
        let args = ["simulate", "coin", "--param", &param, "--games", &games, "--seed", "same", "--json"];
        let (code, out, err) = run(&coin(), &args);
        assert_eq!(code, 0, "{err}");
        let alone: Value = serde_json::from_str(&out).unwrap();
        let caller = alone["players"].as_array().unwrap().iter().find(|p| p["name"] == "caller").unwrap();
        let share = caller["outcomes"]["won"]["share"].as_f64().unwrap_or(0.0);
        assert_eq!(share, e["share"].as_f64().unwrap(), "{param} with {games} games: simulate {caller}, tune {e}");
    }
}

/// A stand-in model's answers are kept and shared by a sweep's values, but by the parameters the
/// stand-in reads: on a coin the stand-in tosses (`oracle`: a roll wins below `chance`), each
/// value of a sweep wins exactly as often as `simulate --param` at that value, alone in its
/// process, and the rolls below it say.
#[test]
fn a_sweep_keeps_a_stand_ins_answers_by_the_parameters_it_reads() {
    let args = ["--games", "300", "--seed", "s", "--json"];
    let oracle = repo_root().join("tests/packs/oracle");
    let (code, out, err) = run(&oracle, &[&["simulate", "oracle", "--sweep", "chance=20..80:30"], &args[..]].concat());
    assert_eq!(code, 0, "{err}");
    let sweep: Value = serde_json::from_str(&out).unwrap();
    let won = |report: &Value| report["players"][0]["outcomes"]["won"]["share"].as_f64().unwrap_or(0.0);
    let mut shares = Vec::new();
    for point in sweep["sweep"].as_array().unwrap() {
        let value = format!("chance={}", point["value"]);
        let (code, out, err) = run(&oracle, &[&["simulate", "oracle", "--param", &value], &args[..]].concat());
        assert_eq!(code, 0, "{err}");
        let alone: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(point["players"], alone["players"], "{value}");
        shares.push(won(point));
    }
    // 300 rolls of 0-99: about a fifth, half and four fifths of them below 20, 50 and 80.
    assert!(shares[0] < 0.3 && (0.4..0.6).contains(&shares[1]) && shares[2] > 0.7, "{shares:?}");
}

/// `--param` sets a number for one run and changes what the games do; nothing on disk changes;
/// a bad one is refused by name.
#[test]
fn a_param_changes_one_run_of_the_pirate() {
    let manifest = std::fs::read_to_string(repo_root().join("config/pirate.yaml")).unwrap();
    let games = ["--games", "6", "--player", "liar", "--seed", "p"];
    let (code, out, err) =
        run(&repo_root(), &[&["simulate", "pirate", "--json", "--param", "thresholds.medium=0"], &games[..]].concat());
    assert_eq!(code, 0, "{err}");
    let easy: Value = serde_json::from_str(&out).unwrap();
    // At a threshold of 0 the captain's first agreeing reply wins.
    let won: f64 = ["won_exact_phrase", "won_agreement", "won_score"]
        .iter()
        .map(|o| easy["players"][0]["outcomes"][o]["share"].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(won, 1.0, "{easy:#}");
    assert_eq!(std::fs::read_to_string(repo_root().join("config/pirate.yaml")).unwrap(), manifest);

    for (param, message) in [
        ("thresholds.medium=101", "error: --param: parameter `thresholds.medium` is 0 to 100 (param_bounds), not 101"),
        (
            "thresholds.medum=50",
            "error: --param: the pack has no numeric parameter `thresholds.medum`: did you mean `thresholds.medium`?",
        ),
        ("thresholds.medium=5.5", "error: --param: parameter `thresholds.medium` is an integer, not 5.5"),
        ("thresholds.medium=high", "error: --param thresholds.medium: `high` is not a number"),
        ("forbidden_phrase=1", "error: --param: the pack has no numeric parameter `forbidden_phrase`"),
    ] {
        let (code, _, err) = run(&repo_root(), &["simulate", "pirate", "--games", "1", "--param", param]);
        assert_eq!(code, 2, "{param}");
        assert!(err.starts_with(message), "{param}:\n{err}");
    }
}

/// `run` and `play` take `--param` too: a turn of the coin at a chance of 0 or 100.
#[test]
fn a_param_changes_a_run() {
    let (_dir, inputs) = crate::support::temp_file("toss.yaml", "- {side: heads}\n");
    for (chance, outcome) in [("chance=0", "lost"), ("chance=100", "won")] {
        let (code, out, err) = run(&coin(), &["run", "coin", "--input", inputs.to_str().unwrap(), "--param", chance]);
        assert_eq!(code, 0, "{err}");
        let line: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(line["output"]["outcome"], outcome, "{chance}");
    }
}

/// `test` takes `--param` too: a case expecting a win passes at a chance of 100 and fails at 0,
/// naming the field; the case file and the manifest are as they were; `--param` without a pack,
/// or with `--bless`, is refused.
#[test]
fn a_param_plays_a_packs_cases_with_a_number_changed() {
    let copy = crate::support::copy_of(&["tests/packs/coin"]);
    let root = copy.path().join("tests/packs/coin");
    std::fs::create_dir_all(root.join("tests/coin")).unwrap();
    let case = "name: heads wins\nturns:\n  - input: {side: heads}\n    expect: {outcome: won}\n";
    std::fs::write(root.join("tests/coin/heads.yaml"), case).unwrap();
    let (code, out, err) = run(&root, &["test", "coin", "--param", "chance=100"]);
    assert_eq!((code, out.lines().next()), (0, Some("ok    coin/heads wins (1 turn)")), "{out}{err}");
    let (code, out, err) = run(&root, &["test", "coin", "--param", "chance=0"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.starts_with("FAIL  coin/heads wins"), "{out}");
    assert!(out.contains("outcome"), "{out}");
    assert_eq!(std::fs::read_to_string(root.join("tests/coin/heads.yaml")).unwrap(), case);
    for (args, message) in [
        (&["test", "--param", "chance=0"][..], "error: --param sets one pack's params: name the PACK"),
        (&["test", "coin", "--bless", "--param", "chance=0"][..], "error: --bless with --param would write"),
        (&["test", "coin", "--param", "chance=101"][..], "error: --param: parameter `chance` is 0 to 100"),
    ] {
        let (code, _, err) = run(&root, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.starts_with(message), "{args:?}:\n{err}");
    }
}

/// A manifest's bounds are checked as it loads: a bound on something that is no number, or one
/// its own value breaks, is named at its place.
#[test]
fn param_bounds_are_checked_where_they_are_written() {
    let copy = crate::support::copy_of(&["tests/packs/coin"]);
    let root = copy.path().join("tests/packs/coin");
    let bounds = "  chance: {min: 60, max: 100}\n  lable: {min: 0}";
    crate::support::edit(&root, "config/coin.yaml", "  chance: {min: 0, max: 100}", bounds);
    let (code, _, err) = run(&root, &["check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: `chance` is 50 in params, outside its param_bounds (60 to 100)"), "{err}");
    assert!(err.contains("error: param_bounds names `lable`, which is no number in params"), "{err}");
    assert!(err.contains("--> config/coin.yaml:12:"), "{err}");
}

/// The API's simulate takes `params` as the command line's `--param`: the games played at those
/// values, a bad one refused 422 by name, on either of two replicas of one PostgreSQL (nothing a
/// batch needs lives in one replica).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apis_simulate_takes_params() {
    let store = crate::support::postgres();
    let replicas: Vec<_> = match &store {
        Some(url) => (0..2).map(|_| crate::support::start(&coin(), url, &[])).collect(),
        None => vec![crate::support::start(&coin(), "memory", &[])],
    };
    for server in &replicas {
        let url = format!("{}/v1/packs/coin/simulate", server.url);
        let (status, report) = crate::support::post(&url, json!({"games": 20, "params": {"chance": 100}})).await;
        assert_eq!(status, 200, "{report}");
        assert_eq!(report["players"][0]["outcomes"]["won"]["share"], 1.0, "{report}");
        let (status, report) = crate::support::post(&url, json!({"games": 20, "params": {"chance": 0}})).await;
        assert_eq!((status.as_u16(), &report["players"][0]["outcomes"]["lost"]["share"]), (200, &json!(1.0)));
        let (status, body) = crate::support::post(&url, json!({"games": 5, "params": {"chance": 140}})).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["message"], "parameter `chance` is 0 to 100 (param_bounds), not 140");
        let (status, body) = crate::support::post(&url, json!({"games": 5, "params": {"chanse": 1}})).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(
            body["error"]["message"],
            "the pack has no numeric parameter `chanse`: did you mean `chance`? (its numbers: chance, bias, steep)"
        );
    }
}

/// A tune served as a job, on two replicas of one PostgreSQL when there is one: started on one,
/// followed and stopped from the other; one job at a time on a replica (429 for a second); the
/// answer the command line gives for the same seed; a job whose last follower left is stopped;
/// bad requests refused 422 by name before any job starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tune_runs_as_a_job_any_replica_follows() {
    let store = crate::support::postgres();
    // The jobs' log lines say when each ended.
    let log = [("RUST_LOG", "warn,ruleweave_server=info")];
    let replicas: Vec<_> = match &store {
        Some(url) => (0..2).map(|_| crate::support::start(&coin(), url, &log)).collect(),
        None => vec![crate::support::start(&coin(), "memory", &log)],
    };
    let (a, b) = (&replicas[0], replicas.last().unwrap());
    let start = |body: Value| {
        let url = format!("{}/v1/packs/coin/tune", a.url);
        async move { crate::support::post(&url, body).await }
    };
    // A long search (a narrow band, many games allowed), stopped from the other replica.
    let long = json!({"vary": "chance=0..100", "target": "caller:won=0.3", "within": 0.004, "games_max": 100000});
    let (status, started) = start(long.clone()).await;
    assert_eq!(status, 202, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let mut events = JobEvents::open(&b.url, &job).await;
    let (name, seen) = events.next().await;
    assert_eq!((name.as_str(), &seen["kind"], &seen["pack"]), ("progress", &json!("tune"), &json!("coin")));
    let (status, refused) = start(long.clone()).await;
    assert_eq!((status.as_u16(), &refused["error"]["code"]), (429, &json!("job_running")), "{refused}");
    let stopped = crate::support::http().delete(format!("{}/v1/jobs/{job}", b.url)).send().await.unwrap();
    assert_eq!(stopped.status(), 202);
    let (_, how, body) = events.end().await;
    assert_eq!(how, "cancelled", "{body}");
    assert_eq!(body["error"]["code"], "cancelled");
    assert!(body.get("result").is_none());

    // The answer is the command line's for the same seed, whichever replica is asked.
    let args = json!({"vary": "chance=0..100", "target": "caller:won=0.3", "within": 0.05, "seed": "t1"});
    let (status, started) = start(args).await;
    assert_eq!(status, 202, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let (progress, how, body) = JobEvents::open(&b.url, &job).await.end().await;
    assert_eq!(how, "done", "{body}");
    assert!(progress >= 1, "the job said where it was before it ended");
    let cli = tune(&["--vary", "chance=0..100", "--target", "caller:won=0.3", "--within", "0.05", "--seed", "t1"]);
    let result = &body["result"];
    assert_eq!(result["found"], true, "{result:#}");
    for field in ["value", "share", "evaluations", "games_played", "target", "param"] {
        assert_eq!(result[field], cli[field], "{field}");
    }
    assert_eq!(body["progress"]["games_played"], cli["games_played"]);
    let again = crate::support::get(&format!("{}/v1/jobs/{job}", a.url)).await;
    assert_eq!((&again["state"], &again["result"]["value"]), (&json!("done"), &cli["value"]));

    // Nobody following: the job stops.
    let (status, started) = start(long).await;
    assert_eq!(status, 202, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let (name, _) = JobEvents::open(&a.url, &job).await.next().await;
    assert_eq!(name, "progress");
    let line = tokio::task::block_in_place(|| {
        loop {
            let line = a.wait_for_line("a tune ended");
            if line.contains(&job) {
                break line;
            }
        }
    });
    assert!(line.contains("Cancelled"), "{line}");
    let left = crate::support::get(&format!("{}/v1/jobs/{job}", b.url)).await;
    assert_eq!(left["state"], "cancelled", "{left}");

    // Refused at once, by name.
    let cases = [
        (
            json!({"vary": "chanse=0..100", "target": "caller:won=0.3"}),
            "no numeric parameter `chanse`: did you mean `chance`?",
        ),
        (json!({"vary": "chance=0..140", "target": "caller:won=0.3"}), "parameter `chance` is 0 to 100"),
        (json!({"vary": "chance=80..20", "target": "caller:won=0.3"}), "runs from low to high"),
        (json!({"vary": "label=0..1", "target": "caller:won=0.3"}), "no numeric parameter `label`"),
        (json!({"vary": "chance=0..100", "target": "caller:drew=0.3"}), "has no outcome `drew`"),
        (json!({"vary": "chance=0..100", "target": "caller:won=3"}), "share is 0 to 1"),
        (json!({"vary": "chance=0..100"}), "`target` is missing"),
    ];
    for (body, words) in cases {
        let (status, refused) = start(body.clone()).await;
        assert_eq!(status, 422, "{body}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{body}: {message}");
    }
    let missing = crate::support::get(&format!("{}/v1/jobs/no-such-job", b.url)).await;
    assert_eq!(missing["error"]["code"], "not_found");
}

/// "Use this value" over HTTP: a number written into the manifest in place (its comments and
/// layout kept), the pack reloaded with it before the answer; a value the pack refuses changes
/// nothing (422 by name); a manifest the server cannot write is a 409 that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_is_written_into_the_manifest() {
    let root = tempfile::tempdir().unwrap();
    ruleweave_testkit::copy_tree(&coin(), root.path());
    let manifest = root.path().join("config/coin.yaml");
    let before = std::fs::read_to_string(&manifest).unwrap();
    let server = crate::support::start(root.path(), "memory", &[]);
    let url = format!("{}/v1/packs/coin/params", server.url);
    let put = |body: Value| {
        let url = url.clone();
        async move {
            let r = crate::support::http().put(&url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, written) = put(json!({"params": {"chance": 35}})).await;
    assert_eq!(status, 200, "{written}");
    assert_eq!((&written["file"], &written["params"]), (&json!("config/coin.yaml"), &json!({"chance": 35})));
    assert_eq!(written["stale_comments"], json!([]), "no comment says 50 there");
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before.replace("  chance: 50\n", "  chance: 35\n"));
    let packs = crate::support::get(&format!("{}/v1/packs", server.url)).await;
    let coin = packs["packs"].as_array().unwrap().iter().find(|p| p["name"] == "coin").unwrap().clone();
    assert_eq!(coin["version"], written["version"], "the answer came after the reload");
    assert_eq!(coin["params"][0], json!({"path": "chance", "value": 35.0, "integer": true, "min": 0.0, "max": 100.0}));

    for (body, words) in [
        (json!({"params": {"chance": 140}}), "parameter `chance` is 0 to 100 (param_bounds), not 140"),
        (json!({"params": {"chanse": 1}}), "did you mean `chance`?"),
        (json!({"params": {}}), "`params` names no number to write"),
    ] {
        let (status, refused) = put(body.clone()).await;
        assert_eq!(status, 422, "{body}: {refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains(words), "{refused}");
    }
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before.replace("  chance: 50\n", "  chance: 35\n"));

    // Where the new file would be written aside stands a folder: the write fails, said as such.
    std::fs::create_dir(root.path().join("config/.coin.yaml.writing")).unwrap();
    let (status, refused) = put(json!({"params": {"chance": 36}})).await;
    assert_eq!((status, &refused["error"]["code"]), (409, &json!("pack_not_writable")), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().starts_with("cannot write config/coin.yaml: "), "{refused}");
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before.replace("  chance: 50\n", "  chance: 35\n"));

    // Comments that state the old number, on the line and right above it, are named, never
    // rewritten.
    std::fs::remove_dir(root.path().join("config/.coin.yaml.writing")).unwrap();
    let commented = "  # 35 in a hundred\n  chance: 35 # was 50, now 35\n";
    crate::support::edit(root.path(), "config/coin.yaml", "  chance: 35\n", commented);
    let (status, written) = put(json!({"params": {"chance": 40}})).await;
    assert_eq!(status, 200, "{written}");
    assert_eq!(
        written["stale_comments"],
        json!([
            "config/coin.yaml:6: the comment on the line of chance still says 35",
            "config/coin.yaml:5: the comment above chance still says 35"
        ])
    );
    let now = std::fs::read_to_string(&manifest).unwrap();
    assert_eq!(now, before.replace("  chance: 50\n", "  # 35 in a hundred\n  chance: 40 # was 50, now 35\n"));
}

/// Sweeps over HTTP: a small one in a simulate request, a larger one as a job any replica
/// follows; each the command line's `simulate --sweep --json` for the same seed (the same games
/// at each value, whatever the threads), and one too large for either refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_ride_the_simulate_route_or_a_job() {
    let store = crate::support::postgres();
    let replicas: Vec<_> = match &store {
        Some(url) => (0..2).map(|_| crate::support::start(&coin(), url, &[])).collect(),
        None => vec![crate::support::start(&coin(), "memory", &[])],
    };
    let (a, b) = (&replicas[0], replicas.last().unwrap());
    let cli = |games: &str| {
        let args = ["simulate", "coin", "--sweep", "chance=20..40:10", "--games", games, "--seed", "sw", "--json"];
        let (code, out, err) = run(&coin(), &args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };

    let small = json!({"games": 30, "sweep": ["chance=20..40:10"], "seed": "sw"});
    let (status, answer) = crate::support::post(&format!("{}/v1/packs/coin/simulate", b.url), small).await;
    assert_eq!(status, 200, "{answer}");
    let expected = cli("30");
    assert_eq!(answer, expected);
    assert_eq!(answer["params"], json!(["chance"]));
    assert_eq!(answer["sweep"].as_array().unwrap().len(), 3);

    // Too many turns for a request: it says where such a sweep runs.
    let big = json!({"games": 200, "sweep": ["chance=0..100"], "seed": "sw"});
    let (status, refused) = crate::support::post(&format!("{}/v1/packs/coin/simulate", a.url), big).await;
    assert_eq!(status, 422, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("runs as a job (POST /v1/packs/coin/sweep)"), "{message}");

    let (status, started) = crate::support::post(
        &format!("{}/v1/packs/coin/sweep", a.url),
        json!({"games": 150, "sweep": ["chance=20..40:10"], "seed": "sw"}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let (_, how, body) = JobEvents::open(&b.url, &job).await.end().await;
    assert_eq!((how.as_str(), &body["kind"]), ("done", &json!("sweep")), "{body}");
    assert_eq!(body["result"], cli("150"));
    assert_eq!((&body["progress"]["games_played"], &body["progress"]["budget"]), (&json!(450), &json!(450)));
    // The chart a person opens: the sweep's page.
    let page = crate::support::http()
        .get(format!("{}/v1/jobs/{job}", b.url))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<h1>coin: chance at each value</h1>"), "{page}");

    let (status, refused) = crate::support::post(
        &format!("{}/v1/packs/coin/sweep", a.url),
        json!({"games": 100000, "sweep": ["chance=0..100"]}),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("is more than a job plays (400000 turns, tune_turns)")
    );
}
