//! A store written by an earlier build opens with this one, and everything in it still works:
//! `tests/fixtures/store-2026-11.db` is a SQLite store `ruleweave serve` wrote with migrations 1
//! to 18, and `store-2026-11-postgres.sql` a dump of a PostgreSQL store it wrote with migrations
//! 1 to 17 (both made by `tests/fixtures/make_store.py`, whose keys and ids are in the `.json`
//! beside each). Moving a table between crates must keep its migration's version and checksum,
//! and a new migration must take these files forward. The test opens each store as a user's
//! server would, and reads and writes through every key it holds.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};

async fn ask(method: reqwest::Method, url: &str, key: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = support::http().request(method, url).bearer_auth(key);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = req.send().await.unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

fn ids_of(file: &str) -> Value {
    let text = std::fs::read_to_string(support::repo_root().join("tests/fixtures").join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_an_earlier_build_wrote_opens_and_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.db");
    std::fs::copy(support::repo_root().join("tests/fixtures/store-2026-11.db"), &file).unwrap();
    keeps_working(&format!("sqlite://{}", file.display()), &ids_of("store-2026-11.json")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_an_earlier_build_wrote_opens_and_keeps_working() {
    let Some(url) = ruleweave_testkit::postgres() else { return };
    // The dump, loaded into a schema of its own that the server's connections search.
    let schema = format!("fixture_{}", std::process::id());
    let dump = std::fs::read_to_string(support::repo_root().join("tests/fixtures/store-2026-11-postgres.sql")).unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")))
        .execute(&pool)
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET search_path TO {schema}; {dump}")))
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    let sep = if url.contains('?') { '&' } else { '?' };
    keeps_working(&format!("{url}{sep}options=-csearch_path%3D{schema}"), &ids_of("store-2026-11-postgres.json")).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE"))).execute(&pool).await.unwrap();
}

async fn keeps_working(store: &str, ids: &Value) {
    use reqwest::Method;
    let id = |k: &str| ids[k].as_str().unwrap().to_owned();
    let server = support::start(&support::repo_root(), store, &[("RULEWEAVE_TOKEN", &id("operator"))]);
    let url = &server.url;

    // The operator's issued key, with its right to debug.
    let (status, keys) = ask(Method::GET, &format!("{url}/v1/keys"), &id("operator"), None).await;
    assert_eq!(status, StatusCode::OK, "{keys}");
    let designer = &keys["keys"][0];
    assert_eq!(
        (designer["label"].as_str(), designer["rights"].clone()),
        (Some("designer"), json!(["debug"])),
        "{keys}"
    );
    let (_, who) = ask(Method::GET, &format!("{url}/v1/access"), &id("issued"), None).await;
    assert_eq!(who["rights"], json!(["debug"]), "{who}");

    // The session it made, listed as its own, with its two turns; the fork its key made.
    let (_, listed) = ask(Method::GET, &format!("{url}/v1/sessions"), &id("issued"), None).await;
    let mine: Vec<&str> = listed["sessions"].as_array().unwrap().iter().filter_map(|s| s["id"].as_str()).collect();
    assert!(mine.contains(&id("pirate").as_str()), "{listed}");
    let (status, pirate) =
        ask(Method::GET, &format!("{url}/v1/sessions/{}", id("pirate")), &id("pirate_key"), None).await;
    assert_eq!(
        (status, pirate["pack"].as_str(), pirate["turns"].as_u64()),
        (StatusCode::OK, Some("pirate"), Some(2)),
        "{pirate}"
    );
    let (status, fork) = ask(Method::GET, &format!("{url}/v1/sessions/{}", id("fork")), &id("pirate_key"), None).await;
    assert_eq!(status, StatusCode::OK, "the key that made the fork reaches it: {fork}");
    let (_, history) =
        ask(Method::GET, &format!("{url}/v1/sessions/{}/checkpoints", id("pirate")), &id("pirate_key"), None).await;
    let kinds: Vec<&str> =
        history["checkpoints"].as_array().unwrap().iter().filter_map(|c| c["kind"].as_str()).collect();
    assert_eq!(kinds, ["start", "turn", "edit", "turn"], "{history}");

    // A turn more, written where the earlier build wrote.
    let turn = json!({"input": {"message": "Here is the map, captain."}});
    let (status, played) =
        ask(Method::POST, &format!("{url}/v1/sessions/{}/turns", id("pirate")), &id("pirate_key"), Some(turn)).await;
    assert_eq!((status, played["turn"].as_u64()), (StatusCode::OK, Some(3)), "{played}");

    // The lobby's player follows the game they joined; the sweep job's answer is kept.
    for key in ["player_key", "party_key"] {
        let (status, party) = ask(Method::GET, &format!("{url}/v1/sessions/{}", id("party")), &id(key), None).await;
        assert_eq!((status, party["pack"].as_str()), (StatusCode::OK, Some("party")), "{key}: {party}");
    }
    let (status, job) = ask(Method::GET, &format!("{url}/v1/jobs/{}", id("job")), &id("operator"), None).await;
    assert_eq!(
        (status, job["kind"].as_str(), job["state"].as_str()),
        (StatusCode::OK, Some("sweep"), Some("done")),
        "{job}"
    );
    assert_eq!(job["result"]["sweep"].as_array().map(Vec::len), Some(2), "two values swept: {job}");
}
