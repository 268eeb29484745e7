//! The HTTP API held to its OpenAPI document by Schemathesis (a virtualenv `.ci/run` makes;
//! `RULEWEAVE_TEST_SCHEMATHESIS` names its command), run against a real `ruleweave serve` with
//! every shipped pack: its coverage, fuzzing and stateful phases (a new session's links to its
//! turns, checkpoints, fork, replay), checking for server errors and for responses whose schema,
//! status code or content type the document does not name. Bounded and seeded, so a run is
//! reproducible and fits CI's time.

use crate::support::{self, start};

/// The checks Schemathesis runs: no 5xx the document does not name, and every response as
/// documented.
const CHECKS: &str = "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance";

fn schemathesis() -> Option<String> {
    support::needed("RULEWEAVE_TEST_SCHEMATHESIS", "CI must hold the API to its document", "Schemathesis did not run")
}

/// `Tested: N` for every operation of the committed document but `GET /openapi.json`, which
/// Schemathesis reads the document from and does not test.
fn every_operation() -> String {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(support::repo_root().join("docs/openapi.json")).unwrap())
            .unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let n: usize =
        paths.iter().filter(|(p, _)| *p != "/openapi.json").map(|(_, ops)| ops.as_object().unwrap().len()).sum();
    format!("Tested: {n}")
}

/// Runs Schemathesis on the server at `url` with `args`; its report when it found nothing.
fn run(command: &str, url: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(command)
        .current_dir(dir.path())
        .args(["run", &format!("{url}/openapi.json"), "--checks", CHECKS, "--seed", "20261126", "--no-color"])
        .args(args)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "Schemathesis found a problem:\n{report}\n{}", String::from_utf8_lossy(&out.stderr));
    report
}

/// Batches of simulated games no bigger than an unoptimised build plays well within
/// Schemathesis's 10 s wait for an answer (the default, 4,000 turns, is a release build's second),
/// and tune jobs that end soon after the fuzzer starts one.
const BATCH: (&str, &str) = ("RULEWEAVE_SIMULATE_TURNS", "100");
const JOBS: (&str, &str) = ("RULEWEAVE_TUNE_TURNS", "2000");

/// A copy of the packs for a fuzzer's server: what it writes (`PUT /v1/packs/{pack}/params`)
/// lands in the copy, never in the repository.
fn packs() -> tempfile::TempDir {
    support::copy_of(&["config", "scripts", "prompts", "data", "schemas"])
}

#[test]
fn schemathesis_finds_the_api_as_documented() {
    let Some(command) = schemathesis() else { return };
    let root = packs();
    let server = start(root.path(), "memory", &[BATCH, JOBS]);
    let report = run(&command, &server.url, &["--max-examples", "12"]);
    assert!(report.contains(&every_operation()), "every operation is tested:\n{report}");
    assert!(report.contains("Stateful"), "the stateful phase ran:\n{report}");
}

#[test]
fn schemathesis_finds_the_api_as_documented_behind_a_token() {
    let Some(command) = schemathesis() else { return };
    let root = packs();
    let server = start(root.path(), "memory", &[("RULEWEAVE_TOKEN", "a-token-for-the-fuzzer"), BATCH, JOBS]);
    // With the token, as a client would call it.
    let report =
        run(&command, &server.url, &["--max-examples", "4", "-H", "Authorization: Bearer a-token-for-the-fuzzer"]);
    assert!(report.contains(&every_operation()), "{report}");
    // Without it: every guarded operation answers 401 with the error body, as documented.
    let report = run(&command, &server.url, &["--max-examples", "2", "--phases", "coverage,fuzzing"]);
    assert!(report.contains(&every_operation()), "{report}");
}

/// A Python client generated from the committed document (openapi-python-client, in the same
/// virtualenv) opens a pirate session, plays a turn, reads it, lists its checkpoints, forks it
/// and reads the error body of a session that is not there, using only what the generator made.
#[test]
fn a_client_generated_from_the_document_plays_a_turn() {
    let Some(command) = schemathesis() else { return };
    let bin = std::path::Path::new(&command).parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let generated = std::process::Command::new(bin.join("openapi-python-client"))
        .current_dir(dir.path())
        .args(["generate", "--meta", "none", "--path"])
        .arg(support::repo_root().join("docs/openapi.json"))
        .output()
        .unwrap();
    assert!(dir.path().join("ruleweave_client/api/sessions/play_turn.py").exists(), "{generated:?}");
    let server = start(&support::repo_root(), "memory", &[]);
    let out = std::process::Command::new(bin.join("python"))
        .arg(support::repo_root().join("tests/openapi/client.py"))
        .arg(dir.path())
        .arg(&server.url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("the generated client played a turn: '"), "{stdout}");
}
