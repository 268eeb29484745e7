//! Live variants: an experiment in a pack's manifest (`experiment:`), variants of its `params:`
//! numbers given to shares of its players: what `check` says of one (the shares and what each
//! variant sets, every mistake at its place), sessions playing their player's variant, the
//! report of how live games ended, and the console's Variants panel in a real browser.

use serde_json::{Value, json};

use crate::support::{ruleweave, stderr, stdout};

/// The coin pack, copied, with `experiment` appended to its manifest.
fn coin_with(experiment: &str) -> tempfile::TempDir {
    let copy = crate::support::copy_of(&["tests/packs/coin"]);
    let manifest = copy.path().join("tests/packs/coin/config/coin.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}{experiment}")).unwrap();
    copy
}

fn check(copy: &tempfile::TempDir) -> (i32, String, String) {
    let out = ruleweave(&copy.path().join("tests/packs/coin")).arg("check").output().unwrap();
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

/// A good experiment loads, and `check` says how new players split and what each variant sets.
#[test]
fn check_shows_an_experiments_shares() {
    let copy = coin_with(
        "experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 60}\n    \
         kind: {weight: 20, params: {chance: 60}}\n    kinder: {weight: 20, params: {chance: 70, bias: 0.05}}\n",
    );
    let (code, out, err) = check(&copy);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "\n        experiment `kinder-coin`: fair 60% (the control), kind 20% (chance=60), \
             kinder 20% (bias=0.05, chance=70)\n"
        ),
        "{out}"
    );
}

/// Each mistake is named at its place in the manifest: an unknown number (with the nearest),
/// one outside its bounds, one that is no number, a negative weight, a bad name, weights that sum
/// to 0, and not exactly one control.
#[test]
fn an_experiment_is_checked_where_it_is_written() {
    let copy = coin_with(
        "experiment:\n  name: kinder coin\n  variants:\n    fair: {weight: 0}\n    \
         kind: {weight: 0, params: {chanse: 60}}\n    kinder: {weight: 0, params: {chance: 170}}\n    \
         odd: {weight: 0, params: {bias: high}}\n",
    );
    let (code, _, err) = check(&copy);
    assert_eq!(code, 1, "{err}");
    for said in [
        "error: experiment `kinder coin` is no name: letters, digits, `_` and `-`, at most 64",
        "error: variant `kind` sets `chanse`, which is no number in params (did you mean `chance`?)",
        "error: variant `kinder`: parameter `chance` is 0 to 100 (param_bounds), not 170",
        "error: variant `odd`: `bias` is a number, not \"high\"",
        "error: the experiment's weights sum to 0: no new session would have a variant",
    ] {
        assert!(err.contains(said), "{said}\n{err}");
    }
    // The unknown number is named on its own line, where the variant sets it.
    let at = err.find("sets `chanse`").unwrap();
    assert!(err[at..].contains("--> config/coin.yaml:37:"), "{err}");

    let copy =
        coin_with("experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 1}\n    plain: {weight: -1}\n");
    let (code, _, err) = check(&copy);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: variant `plain`: a weight is a number of 0 or more, not -1"), "{err}");
    assert!(
        err.contains("error: an experiment has one control, the variant that sets no params: fair, plain do"),
        "{err}"
    );
    let copy = coin_with("experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 1}\n");
    let (code, _, err) = check(&copy);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("an experiment has two variants or more: a control, and what it is compared with"), "{err}");
}

/// The coin's share of the point of `key`: the documented hash, worked out here on its own.
fn point(pack: &str, experiment: &str, key: &str) -> f64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{pack}\0{experiment}\0{key}\0").as_bytes());
    (u64::from_be_bytes(digest[..8].try_into().unwrap()) >> 11) as f64 / (1u64 << 53) as f64
}

/// A coin that always loses on its own rules (chance 0), with a variant that always wins
/// (chance 100) for a quarter of the players.
fn two_way_coin() -> tempfile::TempDir {
    let copy = coin_with(
        "experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 75}\n    sure: {weight: 25, params: {chance: 100}}\n",
    );
    let root = copy.path().join("tests/packs/coin");
    crate::support::edit(&root, "config/coin.yaml", "  chance: 50\n", "  chance: 0\n");
    copy
}

/// Sessions play their player's variant, on two replicas of one PostgreSQL when there is one:
/// the variant is the one the documented hash gives, the same on either replica and for every
/// session of the player; a turn plays the variant's rules (the sure coin wins, the fair one
/// loses) whichever replica runs it; the answers say the variant; a fork keeps it. A player of
/// 10 KB or with a control character is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_play_their_players_variant_on_any_replica() {
    let copy = two_way_coin();
    let root = copy.path().join("tests/packs/coin");
    let replicas = crate::support::replicas(&root, &[]);
    let (a, b) = (&replicas[0].url, &replicas.last().unwrap().url);
    let http = crate::support::http();
    let post = |url: String, body: Value| {
        let http = http.clone();
        async move {
            let r = http.post(url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let mut seen = std::collections::BTreeMap::new();
    for i in 0..24 {
        let player = format!("player-{i}");
        let expected = if point("coin", "kinder-coin", &player) < 0.75 { "fair" } else { "sure" };
        let (status, first) = post(format!("{a}/v1/sessions"), json!({"pack": "coin", "player": player})).await;
        assert_eq!(status, 201, "{first}");
        assert_eq!(first["variant"], expected, "{player}: {first}");
        // The same player on the other replica: the same variant.
        let (_, again) = post(format!("{b}/v1/sessions"), json!({"pack": "coin", "player": player})).await;
        assert_eq!(again["variant"], expected, "{player}: {again}");
        // A turn on the other replica than the one that made the session plays its variant's rules.
        let id = first["id"].as_str().unwrap();
        let (status, turn) = post(format!("{b}/v1/sessions/{id}/turns"), json!({"input": {"side": "heads"}})).await;
        assert_eq!(status, 200, "{turn}");
        let won = if expected == "sure" { "won" } else { "lost" };
        assert_eq!((&turn["state"]["outcome"], &turn["variant"]), (&json!(won), &json!(expected)), "{turn}");
        let shown: Value = http.get(format!("{a}/v1/sessions/{id}")).send().await.unwrap().json().await.unwrap();
        assert_eq!(shown["variant"], expected, "{shown}");
        *seen.entry(expected).or_insert(0) += 1;
        if i == 0 {
            let (status, fork) = post(format!("{b}/v1/sessions/{id}/fork"), json!({"checkpoint": 0})).await;
            assert_eq!((status, &fork["variant"]), (201, &json!(expected)), "a fork keeps its variant: {fork}");
        }
    }
    assert!(seen.len() == 2, "both variants were played: {seen:?}");

    let (status, refused) =
        post(format!("{a}/v1/sessions"), json!({"pack": "coin", "player": "x".repeat(10_240)})).await;
    assert_eq!(
        (status, &refused["error"]["message"]),
        (422, &json!("`player`: a player is 1 to 128 characters, not 10240")),
        "{refused}"
    );
    let (status, refused) = post(format!("{a}/v1/sessions"), json!({"pack": "coin", "player": "ada\nlovelace"})).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("control character '\\n'"), "{refused}");
}

/// The coin as a pack of another name (`tally`), so its live games are counted apart from the
/// other tests' coins: a fair coin (chance 50) and, for about half of the players, a kind one
/// (chance 70).
fn tally() -> tempfile::TempDir {
    let copy = coin_with(
        "experiment:\n  name: kind-coin\n  variants:\n    fair: {weight: 50}\n    kind: {weight: 50, params: {chance: 70}}\n",
    );
    let root = copy.path().join("tests/packs/coin");
    std::fs::rename(root.join("config/coin.yaml"), root.join("config/tally.yaml")).unwrap();
    std::fs::rename(root.join("scripts/coin"), root.join("scripts/tally")).unwrap();
    copy
}

/// The 95% Wilson interval of `k` in `n`, worked out here on its own.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    let z = 1.959_963_985_f64;
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    (if k == 0.0 { 0.0 } else { centre - half }, if k == n { 1.0 } else { centre + half })
}

/// A few hundred live games over HTTP, on two replicas of one PostgreSQL when there is one: the
/// outcomes report counts each variant's games made and finished and each outcome's share, and
/// the difference from the control with its interval, all as this test counts them from the
/// turns it played; debug, edited and forked sessions and simulated games count for nothing;
/// erasing a player takes their sessions and rows; a malformed time is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outcomes_report_counts_what_live_games_did() {
    let copy = tally();
    let root = copy.path().join("tests/packs/coin");
    let replicas = crate::support::replicas(&root, &[]);
    let (a, b) = (&replicas[0].url, &replicas.last().unwrap().url);
    let http = crate::support::http();
    let call = |method: reqwest::Method, url: String, body: Option<Value>| {
        let http = http.clone();
        async move {
            let mut asked = http.request(method, url);
            if let Some(body) = body {
                asked = asked.json(&body);
            }
            let r = asked.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    use reqwest::Method;
    // Games opened from now on are this run's (the store may hold earlier runs').
    let since = ruleweave::store::now_ms();
    let since_text =
        humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(since as u64));
    // (made, won, lost) by variant, as the turns said.
    let mut counted: std::collections::BTreeMap<String, (u64, u64, u64)> = Default::default();
    for i in 0..300 {
        let server = if i % 2 == 0 { a } else { b };
        let (_, opened) = call(
            Method::POST,
            format!("{server}/v1/sessions"),
            Some(json!({"pack": "tally", "player": format!("p{i}")})),
        )
        .await;
        let variant = opened["variant"].as_str().unwrap().to_owned();
        let entry = counted.entry(variant).or_default();
        entry.0 += 1;
        // Every tenth game is left unfinished.
        if i % 10 == 9 {
            continue;
        }
        let id = opened["id"].as_str().unwrap();
        let other = if i % 2 == 0 { b } else { a };
        let (status, turn) =
            call(Method::POST, format!("{other}/v1/sessions/{id}/turns"), Some(json!({"input": {"side": "heads"}})))
                .await;
        assert_eq!(status, 200, "{turn}");
        match turn["state"]["outcome"].as_str() {
            Some("won") => entry.1 += 1,
            Some("lost") => entry.2 += 1,
            other => panic!("a toss ends won or lost, not {other:?}"),
        }
    }
    // Games that count for nothing: a debug session, one edited by hand, a fork, simulated ones.
    let played = |id: String| async move {
        call(Method::POST, format!("{a}/v1/sessions/{id}/turns"), Some(json!({"input": {"side": "tails"}}))).await
    };
    let (_, debug) =
        call(Method::POST, format!("{a}/v1/sessions"), Some(json!({"pack": "tally", "debug": true}))).await;
    played(debug["id"].as_str().unwrap().to_owned()).await;
    let (_, edited) =
        call(Method::POST, format!("{a}/v1/sessions"), Some(json!({"pack": "tally", "player": "ed"}))).await;
    let edited_id = edited["id"].as_str().unwrap().to_owned();
    let (status, _) =
        call(Method::PATCH, format!("{a}/v1/sessions/{edited_id}/state"), Some(json!({"set": {"outcome": "won"}})))
            .await;
    assert_eq!(status, 200);
    played(edited_id.clone()).await;
    let (_, fork) =
        call(Method::POST, format!("{b}/v1/sessions/{edited_id}/fork"), Some(json!({"checkpoint": 0}))).await;
    played(fork["id"].as_str().unwrap().to_owned()).await;
    let (status, _) = call(Method::POST, format!("{b}/v1/packs/tally/simulate"), Some(json!({"games": 20}))).await;
    assert_eq!(status, 200);

    let report = |server: String| {
        let since_text = since_text.clone();
        async move {
            let (status, report) =
                call(Method::GET, format!("{server}/v1/packs/tally/outcomes?since={since_text}"), None).await;
            assert_eq!(status, 200, "{report}");
            report
        }
    };
    let here = report(a.clone()).await;
    assert_eq!(report(b.clone()).await, here, "every replica reports the same");
    assert_eq!((&here["experiment"], &here["control"]), (&json!("kind-coin"), &json!("fair")), "{here}");
    for v in here["variants"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let (made, won, lost) = counted[name];
        assert_eq!((v["made"].as_u64(), v["finished"].as_u64()), (Some(made), Some(won + lost)), "{name}: {v}");
        let finished = (won + lost) as f64;
        let (low, high) = wilson(won as f64, finished);
        let share = &v["outcomes"]["won"];
        assert!((share["share"].as_f64().unwrap() - won as f64 / finished).abs() < 1e-12, "{v}");
        assert!(
            (share["low"].as_f64().unwrap() - low).abs() < 1e-12
                && (share["high"].as_f64().unwrap() - high).abs() < 1e-12
        );
    }
    let kind = here["variants"].as_array().unwrap().iter().find(|v| v["name"] == "kind").unwrap();
    let won = kind["against_control"].as_array().unwrap().iter().find(|d| d["outcome"] == "won").unwrap();
    let ((_, kw, kl), (_, fw, fl)) = (counted["kind"], counted["fair"]);
    let (pk, pf) = (kw as f64 / (kw + kl) as f64, fw as f64 / (fw + fl) as f64);
    let ((lk, uk), (lf, uf)) = (wilson(kw as f64, (kw + kl) as f64), wilson(fw as f64, (fw + fl) as f64));
    let (low, high) = (
        pk - pf - ((pk - lk).powi(2) + (uf - pf).powi(2)).sqrt(),
        pk - pf + ((uk - pk).powi(2) + (pf - lf).powi(2)).sqrt(),
    );
    assert!((won["delta"].as_f64().unwrap() - (pk - pf)).abs() < 1e-12, "{won}");
    assert!(
        (won["low"].as_f64().unwrap() - low).abs() < 1e-12 && (won["high"].as_f64().unwrap() - high).abs() < 1e-12,
        "{won}"
    );
    assert_eq!(won["beyond_noise"], json!(low > 0.0 || high < 0.0));
    assert!(won["more_games"].as_u64().unwrap() > 0, "a few hundred games cannot tell 5 points: {won}");

    // A player erased: their sessions and their row go, on either replica.
    let (status, erased) = call(Method::DELETE, format!("{b}/v1/players/p0"), None).await;
    assert_eq!((status, &erased), (200, &json!({"sessions": 1, "outcomes": 1})), "{erased}");
    let after = report(a.clone()).await;
    let made: u64 = after["variants"].as_array().unwrap().iter().map(|v| v["made"].as_u64().unwrap()).sum();
    assert_eq!(made, 299);

    // The prediction: the scripted caller's games on each variant's rules, the same games the
    // simulate route plays at those params.
    let (status, predicted) =
        call(Method::GET, format!("{b}/v1/packs/tally/outcomes?since={since_text}&predicted=true"), None).await;
    assert_eq!(status, 200, "{predicted}");
    let effect = predicted["predicted"]["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["variant"] == "kind" && e["player"] == "caller" && e["outcome"] == "won")
        .unwrap()
        .clone();
    let share = |params: Value| async move {
        let (_, r) =
            call(Method::POST, format!("{a}/v1/packs/tally/simulate"), Some(json!({"games": 20, "params": params})))
                .await;
        r["players"][0]["outcomes"]["won"]["share"].as_f64().unwrap_or(0.0)
    };
    let simulated = share(json!({"chance": 70})).await - share(json!({})).await;
    assert!((effect["delta"].as_f64().unwrap() - simulated).abs() < 1e-12, "{effect} vs {simulated}");
    assert_eq!(predicted["predicted"]["games"], 20);

    let (status, refused) = call(Method::GET, format!("{a}/v1/packs/tally/outcomes?since=last-tuesday"), None).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "`since`: `last-tuesday` is no time: an RFC 3339 time (2026-12-01T09:00:00Z) or a span back (7d)"
    );
}

/// The version leaves the weights out: editing them keeps it, editing a variant's numbers
/// changes it.
#[test]
fn weights_are_not_part_of_the_version_and_params_are() {
    let experiment = |w: u32, chance: u32| {
        format!(
            "experiment:\n  name: kinder-coin\n  variants:\n    fair: {{weight: {w}}}\n    kind: {{weight: 20, params: {{chance: {chance}}}}}\n"
        )
    };
    let version = |copy: &tempfile::TempDir| {
        let (code, out, err) = check(copy);
        assert_eq!(code, 0, "{err}");
        out.split("(version ").nth(1).unwrap().split(',').next().unwrap().to_owned()
    };
    let base = version(&coin_with(&experiment(80, 60)));
    assert_eq!(version(&coin_with(&experiment(35, 60))), base, "a weight edit keeps the version");
    assert_ne!(version(&coin_with(&experiment(80, 61))), base, "a variant's numbers are the rules");
}

/// A session of the coin opened for `player` on `server`, as the API answers it.
async fn open_coin(http: &reqwest::Client, server: &str, player: &str) -> Value {
    let r = http.post(format!("{server}/v1/sessions")).json(&json!({"pack": "coin", "player": player}));
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 201);
    r.json().await.unwrap()
}

/// `PUT /v1/packs/{pack}/variants` writes weights into the manifest in place: the pack keeps its
/// version, a session already made keeps its variant and its rules, a new session is assigned
/// by the new weights (weight 0 takes no one), and exactly the players whose point the new
/// ranges give to another variant move. Bad weights are refused by name, and nothing is written.
/// On two replicas of one PostgreSQL watching one tree (when there is one), weights written
/// through one place the next players on the other once it has reloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_edited_over_http_move_only_new_sessions() {
    let copy = two_way_coin();
    let root = copy.path().join("tests/packs/coin");
    let servers: Vec<_> = match crate::support::postgres() {
        Some(db) => (0..2).map(|_| crate::support::start_with(&root, &db, &[], &["--watch"])).collect(),
        None => vec![crate::support::start(&root, "memory", &[])],
    };
    let (url, other) = (&servers[0].url, &servers.last().unwrap().url);
    let http = crate::support::http();
    let send = |method: reqwest::Method, path: String, body: Value| {
        let http = http.clone();
        async move {
            let r = http.request(method, format!("{url}{path}")).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    use reqwest::Method;
    let open_on = |server: &str, player: String| {
        let (http, server) = (http.clone(), server.to_owned());
        async move { open_coin(&http, &server, &player).await }
    };
    let open = |player: String| open_on(url, player);
    let expected = |player: &str, fair: f64| if point("coin", "kinder-coin", player) < fair { "fair" } else { "sure" };
    let mut before = Vec::new();
    for i in 0..40 {
        let player = format!("player-{i}");
        let opened = open(player.clone()).await;
        assert_eq!(opened["variant"], expected(&player, 0.75));
        before.push(opened);
    }
    let manifest = std::fs::read_to_string(root.join("config/coin.yaml")).unwrap();

    for (body, said) in [
        (
            json!({"weights": {"lenient": 10}}),
            "`weights`: the experiment has no variant `lenient` (its variants: fair, sure)",
        ),
        (
            json!({"weights": {"fair": 0, "sure": 0}}),
            "`weights`: the weights would sum to 0, and no new session would have a variant",
        ),
        (json!({"weights": {"fair": -1}}), "`weights`: `fair` is a weight of 0 or more, not -1"),
    ] {
        let (status, refused) = send(Method::PUT, "/v1/packs/coin/variants".into(), body).await;
        assert_eq!((status, &refused["error"]["message"]), (422, &json!(said)), "{refused}");
    }
    assert_eq!(std::fs::read_to_string(root.join("config/coin.yaml")).unwrap(), manifest, "nothing was written");

    let (_, packs) = send(Method::GET, "/v1/packs".into(), Value::Null).await;
    let version = packs["packs"].as_array().unwrap().iter().find(|p| p["name"] == "coin").unwrap()["version"].clone();
    // The other replica's reloads, followed from before the write.
    let mut reloads = http.get(format!("{other}/v1/events")).send().await.unwrap();
    let (status, written) =
        send(Method::PUT, "/v1/packs/coin/variants".into(), json!({"weights": {"fair": 50, "sure": 50}})).await;
    assert_eq!(status, 200, "{written}");
    assert_eq!(
        (&written["weights"], &written["version"]),
        (&json!({"fair": 50.0, "sure": 50.0}), &version),
        "{written}"
    );
    let edited = std::fs::read_to_string(root.join("config/coin.yaml")).unwrap();
    assert_eq!(
        edited,
        manifest
            .replace("fair: {weight: 75}", "fair: {weight: 50}")
            .replace("sure: {weight: 25,", "sure: {weight: 50,")
    );
    // Sessions made before keep their variant and its rules.
    for old in &before {
        let id = old["id"].as_str().unwrap();
        let (_, turn) =
            send(Method::POST, format!("/v1/sessions/{id}/turns"), json!({"input": {"side": "heads"}})).await;
        let won = if old["variant"] == "sure" { "won" } else { "lost" };
        assert_eq!((&turn["variant"], &turn["state"]["outcome"]), (&old["variant"], &json!(won)), "{turn}");
    }
    // The other replica has the new weights once it has reloaded the manifest (at once for one
    // server: the write reloaded it).
    if other != url {
        let mut parser = ruleweave_testkit::sse::Parser::default();
        let reloaded = loop {
            if let Some(e) = parser.next() {
                if e.name == "reload" {
                    break serde_json::from_str::<Value>(&e.data).unwrap();
                }
                continue;
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), reloads.chunk()).await;
            parser.feed(&chunk.expect("the other replica reloads within 30 s").unwrap().expect("a stream"));
        };
        assert_eq!((&reloaded["pack"], &reloaded["version"]), (&json!("coin"), &version), "{reloaded}");
    }
    let packs: Value = http.get(format!("{other}/v1/packs")).send().await.unwrap().json().await.unwrap();
    let coin = packs["packs"].as_array().unwrap().iter().find(|p| p["name"] == "coin").unwrap().clone();
    assert_eq!(
        coin["experiment"]["variants"],
        json!([{"name": "fair", "weight": 50.0, "params": {}}, {"name": "sure", "weight": 50.0, "params": {"chance": 100}}]),
        "the pack as every replica declares it: {coin}"
    );
    // New sessions, on the other replica: exactly the players between 0.5 and 0.75 move, from
    // fair to sure.
    let mut moved = 0;
    for (i, old) in before.iter().enumerate() {
        let player = format!("player-{i}");
        let now = open_on(other, player.clone()).await;
        assert_eq!(now["variant"], expected(&player, 0.5), "{player}");
        moved += usize::from(now["variant"] != old["variant"]);
    }
    let between =
        (0..40).filter(|i| (0.5..0.75).contains(&point("coin", "kinder-coin", &format!("player-{i}")))).count();
    assert_eq!(moved, between);
    // Weight 0 takes no new player.
    send(Method::PUT, "/v1/packs/coin/variants".into(), json!({"weights": {"sure": 0}})).await;
    for i in 0..10 {
        assert_eq!(open(format!("player-{i}")).await["variant"], "fair");
    }
}

/// `ruleweave outcomes`: games played with `run --player-id` into a SQLite store are counted by
/// variant, and `--predicted` sets the scripted players' effect beside the live one (the coin
/// that always loses on its own rules and always wins in `sure`: every figure is certain).
#[test]
fn outcomes_on_the_command_line_with_the_prediction() {
    let copy = two_way_coin();
    let root = copy.path().join("tests/packs/coin");
    let store = format!("sqlite://{}", copy.path().join("live.db").display());
    std::fs::write(root.join("one-toss.yaml"), "- {side: heads}\n").unwrap();
    let mut variants = Vec::new();
    for i in 0..12 {
        let player = format!("player-{i}");
        let out = ruleweave(&root)
            .args(["run", "coin", "--input", "one-toss.yaml", "--store", &store, "--player-id", &player])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let variant = if point("coin", "kinder-coin", &player) < 0.75 { "fair" } else { "sure" };
        assert!(stderr(&out).contains(&format!(", variant {variant}, on ")), "{}", stderr(&out));
        variants.push(variant);
    }
    let sure = variants.iter().filter(|v| **v == "sure").count();
    let out = ruleweave(&root)
        .args(["outcomes", "coin", "--store", &store, "--predicted", "--predicted-games", "50", "--html", "live.html"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.ends_with("\nthe report with its charts: live.html\n"), "{text}");
    // The page says what the command line printed, beside its charts.
    let page = std::fs::read_to_string(root.join("live.html")).unwrap();
    for said in [
        "<h1>coin: live games by variant</h1>",
        "experiment <code>kinder-coin</code>, control <b>fair</b> · every game kept",
        &format!(
            "<tr><td>sure</td><td>25 (25% of new players)</td><td>chance=100</td><td>{sure}</td><td>{sure}</td></tr>"
        ),
        "<h2>sure against fair</h2>",
        "<tr><td>won</td><td>+100 points</td>",
        "<td class=beyond>beyond noise</td><td>+100 (caller)</td></tr>",
        "Predicted: each scripted player's 50 games",
    ] {
        assert!(page.contains(said), "{said}\n---\n{page}");
    }
    for said in [
        "coin: experiment `kinder-coin`, control `fair`\n".to_owned(),
        format!("fair, weight 75: {} made, {} finished\n  lost                100%  (95%: ", 12 - sure, 12 - sure),
        format!("sure, weight 25: {sure} made, {sure} finished\n  won                 100%  (95%: "),
        "  against fair:\n    lost             -100 points (95%: -100 points to ".to_owned(),
        "                     predicted -100 points (caller)\n".to_owned(),
        "    won              +100 points".to_owned(),
        "                     predicted +100 points (caller)\n".to_owned(),
    ] {
        assert!(text.contains(&said), "{said}\n---\n{text}");
    }
    let (code, _, err) = {
        let out =
            ruleweave(&root).args(["outcomes", "coin", "--store", &store, "--since", "a while"]).output().unwrap();
        (out.status.code(), stdout(&out), stderr(&out))
    };
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--since a while: give an RFC 3339 time"), "{err}");
}

/// The chat face: a new conversation's `user` is its player, so an OpenAI client's end-user id
/// keeps a player on their variant; the session it opened (its id in `x-ruleweave-session`)
/// says so, and a `user` with a control character is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_clients_user_is_the_player() {
    let copy = two_way_coin();
    let root = copy.path().join("tests/packs/coin");
    let server = crate::support::start(&root, "memory", &[]);
    let http = crate::support::http();
    for i in 0..8 {
        let player = format!("player-{i}");
        let body = json!({"model": "coin", "messages": [{"role": "user", "content": format!("heads, says {player}")}], "user": player});
        let r = http.post(format!("{}/v1/chat/completions", server.url)).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let id = r.headers()["x-ruleweave-session"].to_str().unwrap().to_owned();
        let session: Value =
            http.get(format!("{}/v1/sessions/{id}", server.url)).send().await.unwrap().json().await.unwrap();
        let expected = if point("coin", "kinder-coin", &player) < 0.75 { "fair" } else { "sure" };
        assert_eq!(session["variant"], expected, "{player}: {session}");
    }
    let body = json!({"model": "coin", "messages": [{"role": "user", "content": "heads"}], "user": "ada\u{7}"});
    let r = http.post(format!("{}/v1/chat/completions", server.url)).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let refused: Value = r.json().await.unwrap();
    assert!(
        refused["error"]["message"].as_str().unwrap().starts_with("`user`: a player is printable characters"),
        "{refused}"
    );
}

/// The console's Variants panel in a real browser (headless Chromium), as a designer reads it:
/// each variant, what it sets, its weight and its share of new players; the live games' report
/// under them, its figures the games played here; a weight edited, saved into the manifest and
/// the report drawn again with it; the prediction ticked in; a weight left blank or below 0
/// refused beside the button, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_designer_reads_and_weighs_variants_in_the_console() {
    use crate::console::Console as _;
    let Some(exe) = ruleweave_testkit::browser::chromium() else { return };
    let copy = two_way_coin();
    let root = copy.path().join("tests/packs/coin");
    let server = crate::support::start(&root, "memory", &[]);
    let http = crate::support::http();
    // Live games: the sure coin always wins, the fair one (on the pack's chance of 0) never does.
    let mut sure = 0;
    for i in 0..24 {
        let opened = open_coin(&http, &server.url, &format!("player-{i}")).await;
        let id = opened["id"].as_str().unwrap();
        let turn = json!({"input": {"side": "heads"}});
        let r = http.post(format!("{}/v1/sessions/{id}/turns", server.url)).json(&turn).send().await.unwrap();
        assert_eq!(r.status(), 200);
        sure += usize::from(opened["variant"] == "sure");
    }
    let fair = 24 - sure;
    assert!(sure > 0 && fair > 0, "both variants have games: {sure} sure");

    let mut b = ruleweave_testkit::browser::Browser::launch(&exe).await;
    b.size(1400, 1100).await;
    b.call("Page.navigate", json!({"url": format!("{}/", server.url)})).await;
    b.click("button.pack[data-pack='coin']").await;
    // The report, as the page reads: read in the one moment the panel says it is drawn and
    // `holds` of it (a redraw that follows blanks the frame while it loads).
    let frame = "document.getElementById('variants-frame').contentDocument";
    let table = |selector: &str| {
        format!(
            "[...{frame}.querySelectorAll('{selector} tr')].slice(1).map((r) => [...r.children].map((c) => c.textContent))"
        )
    };
    let (games, against) = (table("table.games"), table("table.against"));
    let report_when = |holds: &str| {
        format!(
            "document.getElementById('variants-status').textContent.startsWith('the live games as of ') && \
             {frame}.querySelector('table.against') && ({holds}) && \
             ({{h1: {frame}.querySelector('h1').textContent, games: {games}, against: {against}}})"
        )
    };
    let report = b.wait_for(&report_when("true")).await;
    assert_eq!(
        b.text("#variants-about").await,
        "experiment kinder-coin: each new player gets a variant by these weights, and keeps it"
    );
    let rows = "[...document.querySelectorAll('#variants-rows tr')].map((r) => [...r.children].map((c) => \
                c.querySelector('input') ? c.querySelector('input').value : c.textContent))";
    assert_eq!(
        b.eval(rows).await,
        json!([["fair", "the pack's own numbers (the control)", "75", "75%"], ["sure", "chance = 100", "25", "25%"]])
    );
    // Each variant's games, and sure against fair.
    assert_eq!(report["h1"], json!("coin: live games by variant"));
    assert_eq!(
        report["games"],
        json!([
            ["fair", "75 (75% of new players)", "the pack's own numbers", fair.to_string(), fair.to_string()],
            ["sure", "25 (25% of new players)", "chance=100", sure.to_string(), sure.to_string()]
        ])
    );
    let rows_of = |v: Value| -> Vec<Vec<String>> { serde_json::from_value(v).unwrap() };
    let against = rows_of(report["against"].clone());
    assert_eq!(against[0][..2], ["lost", "-100 points"], "{against:?}");
    assert_eq!(against[1][..2], ["won", "+100 points"], "{against:?}");
    assert_eq!((against[0][3].as_str(), against[1][3].as_str()), ("beyond noise", "beyond noise"), "{against:?}");
    assert_eq!(b.eval("document.getElementById('problem').hidden").await, json!(true), "{}", b.text("#problem").await);
    b.eval("document.getElementById('variants-box').scrollIntoView()").await;
    b.shot("variants-1-report").await;

    // Half to each: the shares follow the boxes as they are typed; saved, the manifest says so
    // and the report is drawn again with the new weights.
    let weigh = |variant: &str, value: &str| {
        format!(
            "{{ const w = document.querySelector('#variants-rows tr[data-variant={variant}] input'); \
             w.value = {value:?}; w.dispatchEvent(new Event('input')) }}"
        )
    };
    b.eval(&weigh("fair", "50")).await;
    assert_eq!(b.eval(rows).await[0][3], json!("66.7%"));
    b.eval(&weigh("sure", "50")).await;
    assert_eq!(
        b.eval(rows).await,
        json!([["fair", "the pack's own numbers (the control)", "50", "50%"], ["sure", "chance = 100", "50", "50%"]])
    );
    b.click("#variants-save").await;
    let report = b
        .wait_for(&report_when(&format!("{frame}.querySelector('table.games').textContent.includes('50 (50%')")))
        .await;
    assert_eq!(report["games"][1][1], json!("50 (50% of new players)"));
    assert_eq!(
        b.text("#variants-said").await,
        "config/coin.yaml now weighs fair 50, sure 50: the next new player is placed by them; sessions already made keep their variant."
    );
    let manifest = std::fs::read_to_string(root.join("config/coin.yaml")).unwrap();
    assert!(manifest.contains("fair: {weight: 50}") && manifest.contains("sure: {weight: 50,"), "{manifest}");

    // The prediction beside the live effect: the scripted caller's games on each variant's rules.
    b.click("#variants-predicted").await;
    let predicted =
        "document.getElementById('variants-status').textContent.endsWith(', with what the scripted players predict')";
    let report = b.wait_for_within(&report_when(predicted), 120).await;
    let against = rows_of(report["against"].clone());
    assert_eq!(against[1][..2], ["won", "+100 points"], "{against:?}");
    assert_eq!(against[1][3..], ["beyond noise", "+100 (caller)"], "{against:?}");
    b.eval("document.getElementById('variants-box').scrollIntoView()").await;
    b.shot("variants-2-weighed-and-predicted").await;

    // Saved again with the prediction ticked: the save and the reload it causes each ask for the
    // report, and the page asks the server once at a time (a prediction holds the server's one
    // place for a batch), so the report is drawn, not refused.
    b.eval(&weigh("fair", "75")).await;
    b.eval(&weigh("sure", "25")).await;
    b.click("#variants-save").await;
    let again = format!("{predicted} && {frame}.querySelector('table.games').textContent.includes('75 (75%')");
    b.wait_for_within(&report_when(&again), 120).await;
    assert_eq!(b.eval("document.getElementById('variants-status').className").await, json!("dim"));
    let manifest = std::fs::read_to_string(root.join("config/coin.yaml")).unwrap();
    assert!(manifest.contains("fair: {weight: 75}") && manifest.contains("sure: {weight: 25,"), "{manifest}");

    // A weight left blank, or below 0: refused beside the button, the manifest as it was.
    for (value, said) in [
        ("", "give every variant a weight (0 gives it no new player)"),
        ("-1", "invalid_input: `weights`: `fair` is a weight of 0 or more, not -1"),
    ] {
        b.eval(&weigh("fair", value)).await;
        b.click("#variants-save").await;
        let shown = b
            .wait_for("document.getElementById('variants-said').className == 'err' && document.getElementById('variants-said').textContent")
            .await;
        assert_eq!(shown, json!(said));
        b.eval("document.getElementById('variants-said').className = 'dim'").await;
    }
    assert_eq!(std::fs::read_to_string(root.join("config/coin.yaml")).unwrap(), manifest, "nothing was written");
}
