//! Jobs on real models, served: a tune or a batch of games whose judge is a real model (a local
//! server that speaks the Chat Completions protocol), on two replicas of one PostgreSQL when
//! there is one. Who may start one, what it may spend, what it spent, and what it answers.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::jobs::JobEvents;

/// A request as a client sends it: its status and JSON body.
async fn call(method: Method, url: String, key: String, body: Option<Value>) -> (u16, Value) {
    let mut asked = crate::support::http().request(method, url).bearer_auth(key);
    if let Some(body) = body {
        asked = asked.json(&body);
    }
    let r = asked.send().await.unwrap();
    (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
}

/// A tune job on a real judge, on two replicas of one PostgreSQL when there is one: it needs the
/// `spend` right and a budget; a key's `spend_limit_usd` caps what its jobs may hold; the job's
/// progress carries `spent_usd`, its answer what played each profile and what it spent (every
/// call the model server saw, priced), and what it held and did not spend goes back to its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tune_job_on_a_real_model_spends_within_its_budget_and_its_keys_cap() {
    const OPERATOR: &str = "the-operators-token-of-spending";
    let mock = crate::support::mock_llm::MockLlm::start();
    let root = crate::support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    // A judge call costs 18 tokens x 10 per million from this server; a job gets 100 games.
    std::fs::write(
        root.path().join("ruleweave.toml"),
        "[server]\ntune_turns = 2000\n\n[prices]\n\"gpt-4o-mini\" = { input = 10.0, output = 10.0 }\n",
    )
    .unwrap();
    let env = [("RULEWEAVE_TOKEN", OPERATOR), ("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &mock.base_url)];
    let replicas = crate::support::replicas(root.path(), &env);
    let (a, b) = (&replicas[0].url, &replicas.last().unwrap().url);
    let issue = |body: Value| call(Method::POST, format!("{a}/v1/keys"), OPERATOR.into(), Some(body));
    let (_, plain) = issue(json!({"label": "plays"})).await;
    let (_, spender) = issue(json!({"label": "designer", "rights": ["spend"], "spend_limit_usd": 0.5})).await;
    let designer_id = spender["id"].clone();
    let (plain, spender) = (plain["key"].as_str().unwrap().to_owned(), spender["key"].as_str().unwrap().to_owned());
    let tune =
        json!({"vary": "thresholds.medium=55..57", "target": "liar:won_*=0.3", "options": {"difficulty": "medium"}});
    let with = |extra: Value| {
        let mut body = tune.clone();
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let start =
        |key: &str, body: Value| call(Method::POST, format!("{a}/v1/packs/pirate/tune"), key.into(), Some(body));
    let judge = json!({"models": {"judge": "openai"}});
    let (status, refused) = start(&plain, with(json!({"models": {"judge": "openai"}, "budget_usd": 0.1}))).await;
    assert_eq!((status, &refused["error"]["code"]), (403, &json!("forbidden")), "{refused}");
    let (status, refused) = start(&spender, with(judge.clone())).await;
    assert_eq!(status, 422, "a budget is required: {refused}");
    let (status, refused) = start(&spender, with(json!({"models": {"judge": "openai"}, "budget_usd": 1.0}))).await;
    assert_eq!((status, &refused["error"]["code"]), (429, &json!("quota_exceeded")), "{refused}");
    assert!(mock.seen().is_empty(), "nothing was sent");

    let (status, started) = start(&spender, with(json!({"models": {"judge": "openai"}, "budget_usd": 0.4}))).await;
    assert_eq!(status, 202, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let mut events = JobEvents::open_as(b, &job, Some(&spender)).await;
    let (progress, how, body) = events.end().await;
    assert_eq!(how, "done", "{body}");
    assert!(progress >= 1, "it said where it was");
    let result = &body["result"];
    assert_eq!(result["models"]["judge"], "openai", "{result}");
    let calls = mock.seen_kind("judge").len() as u64;
    let usd = calls as f64 * 18.0 * 10.0 / 1e6;
    assert_eq!(result["spent"]["calls"], calls, "{result}");
    assert!((result["spent"]["usd"].as_f64().unwrap() - usd).abs() < 1e-9, "{result}");
    assert!((body["progress"]["spent_usd"].as_f64().unwrap() - usd).abs() < 1e-9, "{body}");
    // What it held and did not spend went back: the key has spent what the job did.
    let (_, keys) = call(Method::GET, format!("{b}/v1/keys"), OPERATOR.into(), None).await;
    let designer = keys["keys"].as_array().unwrap().iter().find(|k| k["id"] == designer_id).unwrap().clone();
    assert!((designer["spent_usd"].as_f64().unwrap() - usd).abs() < 1e-9, "{designer}");
    assert_eq!(designer["spend_limit_usd"], 0.5);
}

/// A batch of games on a real judge is a job, on two replicas of one PostgreSQL when there is
/// one: it needs the `spend` right and a budget, takes no sweep; its answer is the report (what
/// played each profile, every call the model server saw priced), which the other replica draws
/// as the report's page; with the cache, the same batch again sends nothing; a budget smaller
/// than one call stops every game uncounted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_on_a_real_model_is_a_job_within_its_budget() {
    const OPERATOR: &str = "the-operators-token-of-batches";
    let mock = crate::support::mock_llm::MockLlm::start();
    let root = crate::support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    std::fs::write(
        root.path().join("ruleweave.toml"),
        "[server]\ntune_turns = 2000\n\n[prices]\n\"gpt-4o-mini\" = { input = 10.0, output = 10.0 }\n",
    )
    .unwrap();
    let env = [("RULEWEAVE_TOKEN", OPERATOR), ("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &mock.base_url)];
    let replicas = crate::support::replicas(root.path(), &env);
    let (a, b) = (&replicas[0].url, &replicas.last().unwrap().url);
    let (_, plain) = call(Method::POST, format!("{a}/v1/keys"), OPERATOR.into(), Some(json!({"label": "plays"}))).await;
    let plain = plain["key"].as_str().unwrap().to_owned();
    let batch = |extra: Value| {
        let mut body = json!({"games": 3, "players": ["liar"], "options": {"difficulty": "medium"}});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let start =
        |key: &str, body: Value| call(Method::POST, format!("{a}/v1/packs/pirate/simulate"), key.into(), Some(body));
    let on_judge = |usd: f64, extra: Value| {
        let mut body = batch(json!({"models": {"judge": "openai"}, "budget_usd": usd}));
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };

    let (status, refused) = start(&plain, on_judge(0.4, json!({}))).await;
    assert_eq!((status, &refused["error"]["code"]), (403, &json!("forbidden")), "{refused}");
    let (status, refused) = start(OPERATOR, on_judge(0.4, json!({"sweep": ["thresholds.medium=55..57"]}))).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("a sweep plays on the stand-ins"), "{refused}");
    let (status, refused) = start(OPERATOR, on_judge(0.4, json!({"max_seconds": 0}))).await;
    assert_eq!((status, &refused["error"]["message"]), (422, &json!("`max_seconds` is 1 to 86400, not 0")));
    let (status, refused) = start(OPERATOR, batch(json!({"cache": true}))).await;
    assert_eq!(status, 422, "the cache is for real models: {refused}");
    assert!(mock.seen().is_empty(), "nothing was sent");

    // Played, with the cache: every judge call the server saw, priced, and kept.
    let (status, started) = start(OPERATOR, on_judge(0.4, json!({"cache": true}))).await;
    assert_eq!(status, 202, "{started}");
    let job = started["job"].as_str().unwrap().to_owned();
    let (_, how, body) = JobEvents::open_as(b, &job, Some(OPERATOR)).await.end().await;
    assert_eq!((how.as_str(), &body["kind"]), ("done", &json!("simulate")), "{body}");
    let report = &body["result"];
    assert_eq!(report["models"]["judge"], "openai", "{report}");
    assert_eq!(report["players"][0]["name"], "liar", "{report}");
    assert_eq!(report["players"][0]["games"], 3, "{report}");
    assert_eq!(report["stopped"], Value::Null, "{report}");
    let calls = mock.seen_kind("judge").len() as u64;
    assert!(calls >= 3, "every game asked the judge at least once: {calls}");
    assert_eq!(report["spent"]["calls"], calls, "{report}");
    assert!((report["spent"]["usd"].as_f64().unwrap() - calls as f64 * 18.0 * 10.0 / 1e6).abs() < 1e-9, "{report}");
    assert_eq!(report["cache"]["hits"].as_u64().unwrap() + report["cache"]["misses"].as_u64().unwrap(), calls);
    // The other replica draws the answer as the report's page.
    let page = crate::support::http()
        .get(format!("{b}/v1/jobs/{job}"))
        .bearer_auth(OPERATOR)
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("liar") && page.contains("pirate"), "{page}");

    // The same batch again: answered from the cache, nothing sent.
    let (status, started) = start(OPERATOR, on_judge(0.4, json!({"cache": true}))).await;
    assert_eq!(status, 202, "{started}");
    let again = started["job"].as_str().unwrap().to_owned();
    let (_, how, body) = JobEvents::open_as(a, &again, Some(OPERATOR)).await.end().await;
    assert_eq!(how, "done", "{body}");
    assert_eq!(mock.seen_kind("judge").len() as u64, calls, "the second batch sent nothing");
    assert_eq!(body["result"]["cache"], json!({"hits": calls, "misses": 0}), "{body}");
    assert_eq!(body["result"]["players"][0]["outcomes"], report["players"][0]["outcomes"]);

    // A budget smaller than one call: no call is sent, and every game is stopped, uncounted.
    let (status, started) = start(OPERATOR, on_judge(1e-9, json!({}))).await;
    assert_eq!(status, 202, "{started}");
    let tiny = started["job"].as_str().unwrap().to_owned();
    let (_, how, body) = JobEvents::open_as(b, &tiny, Some(OPERATOR)).await.end().await;
    assert_eq!(how, "done", "{body}");
    let report = &body["result"];
    assert_eq!(report["stopped"], "budget_usd", "{report}");
    assert_eq!((&report["spent"]["calls"], &report["players"][0]["games"]), (&json!(0), &json!(0)), "{report}");
    assert_eq!(report["players"][0]["stopped"], json!([0, 1, 2]), "{report}");
    assert_eq!(mock.seen_kind("judge").len() as u64, calls, "nothing more was sent");
}
