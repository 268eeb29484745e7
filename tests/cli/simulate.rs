//! `ruleweave simulate`: reports, another copy of the rules compared, recorded games, tokens and prices, model players, failing players.

use super::*;

fn simulate(root: &std::path::Path, args: &[&str]) -> (std::process::Output, Value) {
    let out = ruleweave(root).args(["simulate"]).args(args).arg("--json").output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, report)
}

/// `simulate pirate ARGS --json` in `root` against the model server, with `prices` as the
/// root's `ruleweave.toml`: the report.
fn simulate_priced(root: &std::path::Path, mock: &MockLlm, prices: &str, args: &[&str]) -> Value {
    std::fs::write(root.join("ruleweave.toml"), prices).unwrap();
    let out = ruleweave(root)
        .args(["simulate", "pirate", "--json"])
        .args(args)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn share(report: &Value, player: &str, outcome: &str) -> f64 {
    let p = report["players"].as_array().unwrap().iter().find(|p| p["name"] == player).unwrap();
    p["outcomes"][outcome]["share"].as_f64().unwrap_or(0.0)
}

/// The pack's scripted players play, and the report says how their games ended in the
/// contract's shape; the same seed gives the same report, a harder captain fewer wins.
#[test]
fn simulate_reports_how_the_players_games_end() {
    let (out, easy) = simulate(&repo_root(), &["pirate", "--games", "12", "--set", "difficulty=easy", "--seed", "s1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        (&easy["pack"], &easy["games"], &easy["seed"], &easy["max_turns"], &easy["against"]),
        (&json!("pirate"), &json!(12), &json!("s1"), &json!(20), &Value::Null)
    );
    let names: Vec<&str> = easy["players"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["flatterer", "liar", "rambler"]);
    // The flatterer never wins the easy captain over: every game is stopped by the cap, and is
    // unfinished, not the pack's `continue`; no game finished, so no turns to finish.
    let flatterer = &easy["players"][0];
    assert_eq!(flatterer["outcomes"].as_object().unwrap().keys().collect::<Vec<_>>(), ["unfinished"], "{flatterer}");
    assert_eq!((&flatterer["turns"]["median"], &flatterer["turns_histogram"]), (&Value::Null, &json!([])));
    let liar = &easy["players"][1];
    // How many finished games took each number of turns: the unfinished left out, the longest
    // the last entry.
    let histogram: Vec<u64> = liar["turns_histogram"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    let finished = 12.0 * (1.0 - share(&easy, "liar", "unfinished"));
    assert_eq!(histogram.iter().sum::<u64>() as f64, finished.round(), "{liar}");
    assert!(histogram.last() > Some(&0) && histogram.len() as f64 >= liar["turns"]["p90"].as_f64().unwrap(), "{liar}");
    let total: f64 = liar["outcomes"].as_object().unwrap().values().map(|o| o["share"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-9, "{liar}");
    for o in liar["outcomes"].as_object().unwrap().values() {
        assert!(
            o["low"].as_f64().unwrap() <= o["share"].as_f64().unwrap()
                && o["share"].as_f64().unwrap() <= o["high"].as_f64().unwrap()
        );
    }
    assert!(
        liar["turns"]["median"].as_f64().is_some() && liar["track"]["merit_score"]["p90"].as_f64().is_some(),
        "{liar}"
    );
    let (_, again) = simulate(&repo_root(), &["pirate", "--games", "12", "--set", "difficulty=easy", "--seed", "s1"]);
    assert_eq!(again, easy, "the same seed, the same report");
    // The table says the cap where the games stopped at it.
    let out = ruleweave(&repo_root())
        .args(["simulate", "pirate", "--games", "12", "--set", "difficulty=easy", "--seed", "s1"])
        .output()
        .unwrap();
    let table = support::stdout(&out);
    let flatterer = table.split("liar (12 games)").next().unwrap();
    let row = |label: &str, rest: &str| format!("\n  {label:<26} {rest}");
    assert!(flatterer.contains(&row("unfinished (cap 20 turns)", "   100%")), "{table}");
    assert!(flatterer.contains(&row("turns to finish", "median -, p10 -, p90 -")), "{table}");
    assert!(table.contains(&row("cost per game", "free (stand-in)")), "{table}");
    let (_, hard) = simulate(&repo_root(), &["pirate", "--games", "12", "--set", "difficulty=hard", "--seed", "s1"]);
    let won = |r: &Value| 1.0 - share(r, "liar", "unfinished");
    assert!(won(&easy) > won(&hard), "easy {} against hard {}", won(&easy), won(&hard));
    assert!(won(&easy) > 0.5, "the varied liar beats an easy captain: {}", won(&easy));
}

/// `--against DIR` plays the same games on a second copy of the rules: a captain who asks more
/// of the liar (the easy threshold raised from 40 to 60) gives in less often, and the report
/// says the difference is beyond noise; the same rules on both sides differ by nothing.
#[test]
fn simulate_against_another_copy_says_what_a_rule_change_did() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let manifest = root.path().join("config/pirate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let raised = text.replace("thresholds: {easy: 40,", "thresholds: {easy: 60,");
    assert_ne!(raised, text, "the pirate's thresholds moved: update this test");
    std::fs::write(&manifest, raised).unwrap();
    let shipped = repo_root();
    let args = ["pirate", "--games", "12", "--player", "liar", "--set", "difficulty=easy", "--against"];
    let page = root.path().join("report.html");
    let html = ["--html", page.to_str().unwrap()];
    let (out, report) = simulate(root.path(), &[&args[..], &[shipped.to_str().unwrap()], &html].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let against = &report["against"];
    assert_eq!(against["root"], json!(shipped.display().to_string()));
    assert_eq!(against["players"][0]["name"], "liar");
    assert_eq!(against["players"][0]["games"], 12);
    let won = |r: &Value| share(r, "liar", "won_agreement");
    assert!(won(&report) < won(against), "raised {} against shipped {}", won(&report), won(against));
    let diff = against["differences"].as_array().unwrap();
    let agreement = diff.iter().find(|d| d["outcome"] == "won_agreement").expect("a difference for the wins");
    assert_eq!(agreement["player"], "liar");
    assert!((agreement["delta"].as_f64().unwrap() - (won(&report) - won(against))).abs() < 1e-9, "{agreement}");
    assert!(agreement["high"].as_f64().unwrap() < 0.0, "{agreement}");
    assert_eq!(agreement["beyond_noise"], true, "{agreement}");
    // What differs between the copies: the one value edited, nothing else.
    assert_eq!(
        against["changes"],
        json!([{"file": "config/pirate.yaml", "key": "params.thresholds.easy", "ours": 60, "theirs": 40}])
    );
    // And every changed line, as a unified diff per file.
    let diffs = against["diff"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert_eq!(diffs[0]["file"], "config/pirate.yaml");
    let unified = diffs[0]["unified"].as_str().unwrap();
    let header = format!("--- config/pirate.yaml (these rules)\n+++ config/pirate.yaml ({})\n@@ ", shipped.display());
    assert!(unified.starts_with(&header), "{unified}");
    let changed = "-  thresholds: {easy: 60, medium: 60, hard: 80}\n+  thresholds: {easy: 40, medium: 60, hard: 80}\n";
    assert!(unified.contains(changed), "{unified}");
    assert_eq!(unified.lines().filter(|l| l.starts_with(['-', '+'])).count(), 4, "two headers, one line each way");
    // The merit the games end on, game by game (the same moves on both): the median difference
    // with the sign test's interval; a captain who gives in later lets the liar climb higher.
    let tracked = against["tracked"].as_array().unwrap();
    let merit = tracked.iter().find(|t| t["field"] == "merit_score").expect("a merit difference");
    assert_eq!((&merit["player"], &merit["games"]), (&json!("liar"), &json!(12)), "{merit}");
    let (delta, low, high) =
        (merit["delta"].as_f64().unwrap(), merit["low"].as_f64().unwrap(), merit["high"].as_f64().unwrap());
    assert!(low <= delta && delta <= high && delta > 0.0, "{merit}");
    assert!(tracked.iter().any(|t| t["field"] == "turns"), "{tracked:?}");

    // Per turn, over the games still going: the liar's merit climbs from where turn 1 left it.
    let per_turn = report["players"][0]["track"]["merit_score"]["per_turn"].as_array().unwrap();
    let most = report["players"][0]["turns"]["p90"].as_f64().unwrap();
    assert!(per_turn.len() as f64 >= most && !per_turn.is_empty(), "{per_turn:?}");
    for t in per_turn {
        assert!(t["p10"].as_f64() <= t["median"].as_f64() && t["median"].as_f64() <= t["p90"].as_f64(), "{t}");
    }
    assert!(per_turn[0]["median"].as_f64() < per_turn.last().unwrap()["median"].as_f64(), "{per_turn:?}");

    // The same report as one page a designer opens: both copies' charts, the difference, nothing fetched.
    let page = std::fs::read_to_string(&page).expect("the HTML report");
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(page.contains("<h1>pirate: 12 games per player</h1>"), "{page}");
    assert!(page.contains(&format!(
        "these rules · <span class=key style=\"background:#ea580c\"></span> {}",
        shipped.display()
    )));
    assert!(page.contains("<h2>liar <small>(12 games)</small></h2>"));
    assert!(page.contains("<h3>merit_score by turn (median, p10–p90)</h3>"));
    let row = format!("<tr><td>won_agreement</td><td>{:+.1} points</td>", agreement["delta"].as_f64().unwrap() * 100.0);
    assert!(page.contains(&row) && page.contains("<td class=beyond>beyond noise</td>"), "{page}");
    assert_eq!(page.matches("<svg ").count(), 3, "outcomes, turns and merit_score");
    assert!(page.contains("<td>params.thresholds.easy</td><td><code>60</code></td><td><code>40</code></td>"), "{page}");
    assert!(page.contains("<tr><td>merit_score (median)</td>"), "{page}");
    // The merit chart draws the easy captain's threshold on these rules, 60.
    assert!(page.contains("threshold 60</text>"), "{page}");
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="), "self-contained");

    // The table a person reads says the same: the value that differs, the cap, the merit's
    // difference with its interval.
    let out = ruleweave(root.path()).args(["simulate"]).args(args).arg(&shipped).output().unwrap();
    let table = support::stdout(&out);
    assert!(table.contains("12 games per player, each played to its end or 20 turns"), "{table}");
    assert!(table.contains("\n  config/pirate.yaml params.thresholds.easy: 60 → 40\n"), "{table}");
    assert!(table.contains(&format!("\n\n{unified}")), "the diff under what differs: {table}");
    let row = table.lines().find(|l| l.contains("merit_score (median)")).expect(&table);
    let num = |x: f64| ruleweave::text::decimals(x, 2);
    assert!(
        row.contains(&format!("+{}", num(delta))) && row.contains(&format!("({}–{})", num(low), num(high))),
        "{row}"
    );

    // The same rules on both sides: every difference is zero and within noise.
    let (_, same) = simulate(&shipped, &[&args[..], &[shipped.to_str().unwrap()]].concat());
    for d in same["against"]["differences"].as_array().unwrap() {
        assert_eq!((&d["delta"], &d["beyond_noise"]), (&json!(0.0), &json!(false)), "{d}");
    }
}

/// Games played at once give the report a game at a time gives; `--record` keeps each game in
/// the store under its id, to open with `replay`, and a second run with the seed replaces them.
#[test]
fn simulate_records_its_games_and_reports_the_same_at_any_jobs() {
    let args = ["pirate", "--games", "6", "--player", "liar", "--set", "difficulty=easy", "--seed", "j"];
    let (_, one) = simulate(&repo_root(), &[&args[..], &["--jobs", "1"]].concat());
    let (out, three) = simulate(&repo_root(), &[&args[..], &["--jobs", "3"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(one, three, "the same games, however many at once");

    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("sim.db").display());
    for _ in 0..2 {
        let out = ruleweave(&repo_root())
            .args(["simulate"])
            .args(args)
            .arg("--record")
            .env("RULEWEAVE_STORE", &store)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains("ruleweave replay --session sim-j-liar-0"), "{}", stdout(&out));
    }
    let out =
        ruleweave(&repo_root()).args(["replay", "--session", "sim-j-liar-5", "--store", &store]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("0 of ") && last.ends_with(" turn(s) changed"), "{text}");
    let played: f64 = last["0 of ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!((1.0..=20.0).contains(&played), "a game of the pack's 20 turns at most: {text}");
}

/// Tokens come from what the model server reported; with `[prices]` for every model called,
/// the report says what a game cost, and without a price for one, which model lacks it.
#[test]
fn simulate_counts_the_tokens_a_game_spent_and_prices_them() {
    let mock = MockLlm::start();
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let args = ["--games", "2", "--player", "liar", "--set", "difficulty=easy"];
    let run = |prices: &str| simulate_priced(root.path(), &mock, prices, &args)["players"][0].clone();
    // The judge (gpt-4o-mini) and the easy captain (gpt-3.5-turbo) each get 11 prompt and 7
    // completion tokens a call from this server, one call each a turn; the judge's 10 never
    // lets the liar win, so every game runs its 20 turns.
    let liar = run("[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n");
    assert_eq!(liar["outcomes"]["unfinished"]["share"], 1.0, "{liar}");
    assert_eq!(liar["track"]["merit_score"]["per_turn"].as_array().unwrap().len(), 20, "{liar}");
    assert_eq!(liar["tokens"], json!({"median": 720.0, "p10": 720.0, "p90": 720.0}), "{liar}");
    assert_eq!((&liar["cost"], &liar["unpriced"]), (&Value::Null, &json!(["gpt-3.5-turbo"])), "{liar}");
    let liar = run(
        "[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n\"gpt-3.5-turbo\" = { input = 0.5, output = 1.5 }\n",
    );
    let per_turn = (11.0 * 0.15 + 7.0 * 0.60 + 11.0 * 0.5 + 7.0 * 1.5) / 1e6;
    let cost = liar["cost"]["median"].as_f64().unwrap();
    assert!((cost - 20.0 * per_turn).abs() < 1e-12, "{liar}");
    assert!(liar.get("unpriced").is_none(), "{liar}");
}

/// `--player model:smuggler`: the pack's `smuggler` profile plays, its persona as the system
/// message and the captain's last words as the user's; its answer is the move, and its calls
/// are counted in what a game cost.
#[test]
fn simulate_lets_a_model_play_through_its_persona() {
    let mock = MockLlm::start();
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let prices = "[prices]\n\"gpt-4o-mini\" = { input = 0.15, output = 0.60 }\n";
    let report = simulate_priced(root.path(), &mock, prices, &["--games", "1", "--player", "model:smuggler"]);
    let smuggler = &report["players"][0];
    assert_eq!((&smuggler["name"], &smuggler["games"]), (&json!("model:smuggler"), &json!(1)), "{report}");
    // The player's requests: its profile's model and temperature, its persona, the captain's words.
    let asked: Vec<Value> = mock
        .seen_kind("chat")
        .into_iter()
        .filter(|b| b["messages"][0]["content"].as_str().unwrap_or("").starts_with("You are a smooth-talking smuggler"))
        .collect();
    assert_eq!(asked.len(), 20, "one move a turn, 20 turns (the judge's 10 never lets it win)");
    assert_eq!((&asked[0]["model"], &asked[0]["temperature"]), (&json!("gpt-4o-mini"), &json!(0.9)));
    assert_eq!(asked[1]["messages"][1], json!({"role": "user", "content": "Arrr, no."}), "the captain's reply");
    let persona = asked[1]["messages"][0]["content"].as_str().unwrap();
    assert!(persona.contains("You: Arrr, no.\nCaptain: Arrr, no."), "the conversation so far: {persona}");
    // Judge, captain and player: three calls a turn of 11 + 7 tokens, all priced.
    assert_eq!(smuggler["tokens"]["median"], 20.0 * 3.0 * 18.0, "{smuggler}");
    let cost = smuggler["cost"]["median"].as_f64().unwrap();
    assert!((cost - 60.0 * (11.0 * 0.15 + 7.0 * 0.60) / 1e6).abs() < 1e-12, "{smuggler}");

    let (out, _) = simulate(&repo_root(), &["pirate", "--games", "1", "--player", "model:judge"]);
    assert!(
        stderr(&out).contains("`model:judge` needs its persona: write prompts/pirate/players/judge.j2"),
        "{}",
        stderr(&out)
    );
    let (out, _) = simulate(&repo_root(), &["pirate", "--games", "1", "--player", "model:nobody"]);
    assert!(stderr(&out).contains("pack `pirate` has no `llm:` profile `nobody`"), "{}", stderr(&out));
}

/// A brave table reaches the party's top tone only when NSFW is on.
#[test]
fn a_brave_table_reaches_the_top_tone_only_with_nsfw() {
    let (out, off) = simulate(&repo_root(), &["party", "--games", "4", "--player", "brave", "--set", "max_rounds=12"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(share(&off, "brave", "freaky"), 0.0, "{off}");
    let (_, on) = simulate(
        &repo_root(),
        &["party", "--games", "4", "--player", "brave", "--set", "max_rounds=12", "--set", "nsfw=true"],
    );
    assert!(share(&on, "brave", "freaky") > 0.0, "{on}");
}

/// A player script that fails stops its own games with a clear message; the others play on.
#[test]
fn a_failing_player_stops_its_games_and_the_others_go_on() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    std::fs::write(
        root.path().join("scripts/pirate/players/broken.rhai"),
        "fn play(view, state) { throw \"no idea what to say\"; }",
    )
    .unwrap();
    let (out, report) = simulate(root.path(), &["pirate", "--games", "3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let broken = &report["players"][0];
    assert_eq!(broken["name"], "broken");
    assert!(broken["error"].as_str().unwrap().contains("player `broken` failed in game 0"), "{broken}");
    assert!(broken["error"].as_str().unwrap().contains("no idea what to say"), "{broken}");
    assert_eq!(report["players"][1]["games"], 3, "the flatterer played on");
    // A player whose move is no input the pack reads stops too, saying so.
    std::fs::write(root.path().join("scripts/pirate/players/broken.rhai"), "fn play(view, state) { 42 }").unwrap();
    let (out, report) = simulate(root.path(), &["pirate", "--games", "2", "--player", "broken", "--player", "liar"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(report["players"][0]["error"].as_str().unwrap().contains("gave no input the pack reads"), "{report}");
    assert_eq!(report["players"][1]["games"], 2);
    for games in ["0", "100001"] {
        let (out, _) = simulate(&repo_root(), &["pirate", "--games", games]);
        assert!(stderr(&out).contains(&format!("--games is 1 to 100000 per player, not {games}")), "{}", stderr(&out));
    }
    let (out, _) = simulate(&repo_root(), &["pirate", "--games", "1", "--player", "nobody"]);
    assert!(
        stderr(&out).contains("pack `pirate` has no player `nobody` (players: flatterer, liar, rambler)"),
        "{}",
        stderr(&out)
    );
}

/// `simulate ARGS --json` of the pirate in `root` (with `toml` as its `ruleweave.toml`) against
/// the model server: the process's output and the report.
fn simulate_on(root: &std::path::Path, mock: &MockLlm, toml: &str, args: &[&str]) -> (std::process::Output, Value) {
    std::fs::write(root.join("ruleweave.toml"), toml).unwrap();
    let out = ruleweave(root)
        .args(["simulate", "pirate", "--json", "--set", "difficulty=easy"])
        .args(args)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, report)
}

fn pirate_root() -> tempfile::TempDir {
    support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"])
}

/// `--model judge=openai`: the judge's calls go to the model server and nothing else does (the
/// captain stays on the stand-in); the report names what played each profile and counts the
/// calls the server saw; an estimate from the same games on the stand-ins comes first.
#[test]
fn a_real_model_plays_the_profiles_named_and_the_stand_in_the_rest() {
    let mock = MockLlm::start();
    let root = pirate_root();
    let (out, report) =
        simulate_on(root.path(), &mock, "", &["--games", "3", "--player", "liar", "--model", "judge=openai"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["models"], json!({"judge": "openai", "pirate": "stand-in", "smuggler": "stand-in"}), "{report}");
    let judged = mock.seen_kind("judge").len() as u64;
    assert_eq!(mock.seen_kind("chat").len(), 0, "the captain plays on the stand-in");
    // The judge's 10 never lets the liar win: 3 games of 20 turns, one judge call a turn.
    assert_eq!((judged, &report["spent"]["calls"]), (60, &json!(60)), "{report}");
    // The estimate: the judge's calls in the same games on the stand-ins, one a turn (the
    // stand-in judge lets the liar win sooner).
    let (_, standin) =
        simulate(root.path(), &["pirate", "--games", "3", "--player", "liar", "--set", "difficulty=easy"]);
    let liar = &standin["players"][0];
    let histogram = liar["turns_histogram"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap());
    let finished: u64 = histogram.clone().sum();
    let turns = histogram.enumerate().map(|(i, n)| (i as u64 + 1) * n).sum::<u64>() + (3 - finished) * 20;
    let said = stderr(&out);
    assert!(said.contains(&format!("estimate for judge on openai: {turns} calls")), "{turns} turns: {said}");
    assert!(report.get("stopped").is_none(), "{report}");

    let (out, _) = simulate_on(root.path(), &mock, "", &["--model", "juge=openai"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("pack `pirate` has no profile `juge` (profiles: judge, pirate, smuggler)"),
        "{}",
        stderr(&out)
    );
}

/// `--budget-usd`: each call holds the most it may cost before it is sent, so the run never
/// spends past its budget; when the next call would, its games stop at a turn boundary, listed
/// apart and uncounted, and the run exits 3. Every call the server saw is counted and priced.
#[test]
fn a_budget_stops_the_run_at_a_turn_boundary_without_passing_it() {
    let mock = MockLlm::start();
    let root = pirate_root();
    // Dear tokens: a judge call (11 + 7 tokens from this server) costs 0.018; one may cost its
    // prompt's bytes and its 500 tokens of reply, some 4 to 5.
    let toml = "[prices]\n\"gpt-4o-mini\" = { input = 1000.0, output = 1000.0 }\n";
    let args = ["--games", "4", "--player", "liar", "--model", "judge=openai", "--budget-usd", "5", "--yes"];
    let (out, report) = simulate_on(root.path(), &mock, toml, &args);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(report["stopped"], "budget_usd", "{report}");
    let spent = &report["spent"];
    let calls = spent["calls"].as_u64().unwrap();
    assert_eq!(calls, mock.seen_kind("judge").len() as u64, "every call sent is counted: {spent}");
    let usd = spent["usd"].as_f64().unwrap();
    assert!((usd - calls as f64 * 0.018).abs() < 1e-9, "priced as the server counted: {spent}");
    assert!(usd <= 5.0 && calls < 80, "within its budget, short of the 80 calls of 4 whole games: {spent}");
    let liar = &report["players"][0];
    let (counted, stopped) = (liar["games"].as_u64().unwrap(), liar["stopped"].as_array().unwrap().len() as u64);
    assert!(stopped >= 1 && counted + stopped == 4, "every game counted or listed stopped: {liar}");
    // A counted game is a whole one: the judge's 10 keeps the liar at it for all 20 turns.
    if counted > 0 {
        assert_eq!(liar["outcomes"]["unfinished"]["share"], 1.0, "{liar}");
        assert_eq!(liar["track"]["merit_score"]["per_turn"].as_array().map(Vec::len), Some(20), "{liar}");
    }
}

/// `--max-calls`: exactly that many calls reach the server, then the run stops as a budget does.
#[test]
fn a_cap_on_calls_sends_exactly_that_many() {
    let mock = MockLlm::start();
    let root = pirate_root();
    let (out, report) = simulate_on(
        root.path(),
        &mock,
        "",
        &["--games", "2", "--player", "liar", "--model", "judge=openai", "--max-calls", "7"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(
        (mock.seen_kind("judge").len(), &report["stopped"], &report["spent"]["calls"]),
        (7, &json!("max_calls"), &json!(7))
    );
    let liar = &report["players"][0];
    assert_eq!((&liar["games"], liar["stopped"].as_array().map(Vec::len)), (&json!(0), Some(2)), "{liar}");
}

/// A budget needs every real model priced, and a run whose estimate is over its budget waits
/// for `--yes`: both refused before a call is sent, with exit 2 and the reason.
#[test]
fn a_budget_refuses_an_unpriced_model_and_an_estimate_over_it() {
    let mock = MockLlm::start();
    let root = pirate_root();
    let (out, _) =
        simulate_on(root.path(), &mock, "", &["--games", "1", "--model", "judge=openai", "--budget-usd", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("profile `judge` calls model `gpt-4o-mini`, which has no price"), "{}", stderr(&out));
    let toml = "[prices]\n\"gpt-4o-mini\" = { input = 1000.0, output = 1000.0 }\n";
    let (out, _) =
        simulate_on(root.path(), &mock, toml, &["--games", "2", "--model", "judge=openai", "--budget-usd", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out);
    assert!(said.contains("is over --budget-usd 5: pass --yes to start anyway"), "{said}");
    assert!(mock.seen().is_empty(), "nothing was sent");
}

/// A game waiting on a model holds a thread, not a core: with `--concurrency 16`, sixteen games'
/// judge calls are at the server at once on any machine (the test holds them all until the
/// sixteenth arrives); with `--concurrency 4`, never more than four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_run_at_the_providers_concurrency_not_the_cores() {
    let mock = MockLlm::start();
    let root = pirate_root();
    std::fs::write(root.path().join("ruleweave.toml"), "").unwrap();
    let (open, gate) = tokio::sync::watch::channel(false);
    for _ in 0..16 {
        mock.judge(Reply::Until(gate.clone(), Box::new(judged(10))));
    }
    let run = |concurrency: &str| {
        ruleweave(root.path())
            .args(["simulate", "pirate", "--json", "--set", "difficulty=easy", "--games", "16", "--player", "liar"])
            .args(["--model", "judge=openai", "--concurrency", concurrency])
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_BASE_URL", &mock.base_url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let child = run("16");
    mock.wait_seen(16).await;
    assert_eq!(mock.most_in_flight(), 16, "sixteen calls held at the server at once");
    open.send(true).unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mock.seen_kind("judge").len(), 16 * 20, "16 games of 20 turns, one judge call each");

    let four = MockLlm::start();
    for _ in 0..64 {
        four.judge(Reply::Slow(std::time::Duration::from_millis(5), Box::new(judged(10))));
    }
    let out = ruleweave(root.path())
        .args(["simulate", "pirate", "--json", "--set", "difficulty=easy", "--games", "16", "--player", "liar"])
        .args(["--model", "judge=openai", "--concurrency", "4"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &four.base_url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!((1..=4).contains(&four.most_in_flight()), "{} calls in flight at once", four.most_in_flight());
}

/// A storm of 429s slows a run and loses no call: a rate-limited call waits as long as the
/// provider asks (and its neighbours with it), however often, and is answered in the end; no
/// turn falls back to the judge's rule-based score.
#[test]
fn a_storm_of_rate_limits_slows_the_run_and_loses_no_call() {
    let mock = MockLlm::start();
    for _ in 0..40 {
        mock.judge(Reply::RetryAfter("0.01".into()));
    }
    let root = pirate_root();
    let (out, report) =
        simulate_on(root.path(), &mock, "", &["--games", "4", "--player", "liar", "--model", "judge=openai"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["spent"]["calls"], 80, "4 games of 20 turns: {report}");
    assert_eq!(mock.seen_kind("judge").len(), 40 + 80, "each call answered once, after the 40 refusals");
    assert_eq!(report["players"][0]["games"], 4, "{report}");
}

/// `--max-time` bounds a run that waits out rate limits: a provider that asks for a minute's
/// wait holds every call, and once the run's second is up its games stop at a turn boundary,
/// uncounted, and it exits 3 saying why; nothing is sent again while the provider asked to wait.
#[test]
fn a_runs_time_bounds_its_wait_on_a_rate_limit() {
    let mock = MockLlm::start();
    mock.judge(Reply::RetryAfter("60".into()));
    let root = pirate_root();
    std::fs::write(root.path().join("ruleweave.toml"), "").unwrap();
    let out = ruleweave(root.path())
        .args(["simulate", "pirate", "--json", "--set", "difficulty=easy", "--games", "2", "--player", "liar"])
        .args(["--model", "judge=openai", "--max-time", "1s"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_MAX_BACKOFF_MS", "120000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["stopped"], "max_time", "{report}");
    assert_eq!((&report["players"][0]["games"], &report["players"][0]["stopped"]), (&json!(0), &json!([0, 1])));
    // Each game's first call may have gone out before the first refusal came back; none went again.
    let sent = mock.seen_kind("judge").len();
    assert!((1..=2).contains(&sent), "{sent} calls sent: none after the provider asked to wait");
    let table = ruleweave(root.path())
        .args(["simulate", "pirate", "--set", "difficulty=easy", "--games", "1", "--player", "liar"])
        .args(["--model", "judge=openai", "--max-time", "0s"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .output()
        .unwrap();
    assert_eq!(table.status.code(), Some(3), "{}", stderr(&table));
    assert!(stdout(&table).contains("stopped: its --max-time was up;"), "{}", stdout(&table));
}

/// `--cache DIR`: the same games again make no new calls (the judge's temperature is 0.3, so
/// each asking of a request is a sample of its own, kept apart) and report the same; other
/// games are not answered from it.
#[test]
fn a_cache_answers_the_same_games_again_without_a_call() {
    let mock = MockLlm::start();
    let root = pirate_root();
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_str().unwrap();
    let args = |seed: &'static str| {
        ["--games", "3", "--player", "liar", "--model", "judge=openai", "--cache", dir, "--seed", seed]
    };
    let (out, first) = simulate_on(root.path(), &mock, "", &args("c1"));
    assert!(out.status.success(), "{}", stderr(&out));
    let calls = mock.seen_kind("judge").len() as u64;
    assert_eq!(first["cache"], json!({"hits": 0, "misses": calls}), "{first}");
    let (out, again) = simulate_on(root.path(), &mock, "", &args("c1"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mock.seen_kind("judge").len() as u64, calls, "no new call");
    assert_eq!(
        (&again["cache"], &again["spent"]["calls"]),
        (&json!({"hits": calls, "misses": 0}), &json!(0)),
        "{again}"
    );
    assert_eq!(again["players"], first["players"], "the same games, the same report");
    let (out, other) = simulate_on(root.path(), &mock, "", &args("c2"));
    assert!(out.status.success(), "{}", stderr(&out));
    let missed = other["cache"]["misses"].as_u64().unwrap();
    assert!(missed > 0 && mock.seen_kind("judge").len() as u64 == calls + missed, "other games ask anew: {other}");
}

/// Tune on a judge that scores every transcript 10 above the stand-in's (give or take 1) finds
/// a threshold 10 ± 3 above the one the stand-in gives: a value tuned on the stand-in is off by
/// what the real judge disagrees by, and tuning on the real one says so. The tune's cache is on
/// by default, and every value reports its use of it.
#[test]
fn tune_on_a_judge_that_disagrees_finds_the_threshold_it_disagrees_by() {
    let root = pirate_root();
    std::fs::write(root.path().join("ruleweave.toml"), "").unwrap();
    let tune = |vary: &str, mock: Option<&MockLlm>| {
        let mut cmd = ruleweave(root.path());
        cmd.args(["tune", "pirate", "--vary", vary, "--target", "liar:won_*=0.3", "--set", "difficulty=medium"])
            .args(["--json", "--within", "0.1", "--games-max", "100", "--budget", "1000"]);
        if let Some(mock) = mock {
            cmd.args(["--model", "judge=openai"])
                .env("OPENAI_API_KEY", "sk-test")
                .env("OPENAI_BASE_URL", &mock.base_url);
        }
        // The share falls off a cliff between two neighbouring thresholds (the judge's scores are
        // whole numbers): found or not (exit 1), the answer is the value nearest the target.
        let out = cmd.output().unwrap();
        let answer = serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null);
        assert!(matches!(out.status.code(), Some(0 | 1)) && answer["value"].is_number(), "{}{answer}", stderr(&out));
        answer
    };
    // The first sweep of each tries every other value of its range.
    let standin = tune("thresholds.medium=50..66", None);
    let mock = MockLlm::start();
    mock.judge_by(support::mock_llm::shifted_judge(10));
    let real = tune("thresholds.medium=60..76", Some(&mock));
    let (a, b) = (standin["value"].as_f64().unwrap(), real["value"].as_f64().unwrap());
    assert!((b - a - 10.0).abs() <= 3.0, "the stand-in's {a}, the real judge's {b}: {real}");
    assert_eq!(real["models"]["judge"], "openai", "{real}");
    let asked = mock.seen_kind("judge").len() as u64;
    assert_eq!((&real["cache"]["misses"], &real["spent"]["calls"]), (&json!(asked), &json!(asked)), "{real}");
    assert!(root.path().join("ruleweave-cache").is_dir(), "the cache beside the store");
    let per_value: u64 =
        real["evaluations"].as_array().unwrap().iter().map(|e| e["cache"]["misses"].as_u64().unwrap()).sum();
    assert_eq!(per_value, asked, "each value's use of the cache: {real}");
}
