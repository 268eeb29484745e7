//! The hostile set (`tests/hostile/`): packs a careless or hostile author might ship, run through
//! `check`, `run` and `serve` under a memory bound. Each must end as `cases.yaml` says — a clear
//! error or a bounded result — and never in a crash, a runaway process or a file read from
//! outside the root.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{get, json_lines, post, repo_root, ruleweave_bounded, start_cmd, stderr, stdout};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    load: Option<String>,
    #[serde(default)]
    turns: Vec<Turn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    input: String,
    code: Option<String>,
    says: Option<String>,
    output: Option<Value>,
}

const SECRET: &str = "a secret outside the pack root";

/// A copy of `tests/hostile/` with two links out of the root added (a manifest and a template,
/// both pointing at a file holding [`SECRET`]), and the cases, the link cases among them.
fn hostile_root() -> (tempfile::TempDir, tempfile::TempDir, BTreeMap<String, Case>) {
    let source = repo_root().join("tests/hostile");
    let root = tempfile::tempdir().unwrap();
    copy(&source, root.path());
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    std::fs::write(&secret, format!("# {SECRET}\ngraph: {{nodes: {{}}, edges: []}}\n")).unwrap();
    std::os::unix::fs::symlink(&secret, root.path().join("config/linked_manifest.yaml")).unwrap();
    let linked = root.path().join("config/linked_template.yaml");
    std::fs::copy(root.path().join("config/template_bomb.yaml"), &linked).unwrap();
    std::fs::create_dir_all(root.path().join("prompts/linked_template")).unwrap();
    std::fs::create_dir_all(root.path().join("scripts/linked_template")).unwrap();
    std::fs::copy(
        root.path().join("scripts/template_bomb/standin.rhai"),
        root.path().join("scripts/linked_template/standin.rhai"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, root.path().join("prompts/linked_template/bomb.j2")).unwrap();
    let text = std::fs::read_to_string(source.join("cases.yaml")).unwrap();
    let mut cases: BTreeMap<String, Case> = serde_saphyr::from_str(&text).unwrap();
    let outside_root = "is a link to a file outside the pack root".to_owned();
    cases.insert("linked_manifest".into(), Case { load: Some(outside_root.clone()), turns: vec![] });
    cases.insert("linked_template".into(), Case { load: Some(outside_root), turns: vec![] });
    (root, outside, cases)
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
        let target: PathBuf = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Fails the test when the process crashed rather than exited (a signal, a panic's 101).
fn ended_cleanly(out: &std::process::Output, what: &str) {
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{what} crashed ({:?}); stderr:\n{}",
        out.status,
        stderr(out).chars().take(4000).collect::<String>()
    );
}

#[test]
fn check_refuses_each_bad_pack_with_its_reason_and_reads_nothing_outside() {
    let (root, _outside, cases) = hostile_root();
    let out = ruleweave_bounded(root.path()).arg("check").output().unwrap();
    ended_cleanly(&out, "check");
    assert_eq!(out.status.code(), Some(1), "some packs are refused");
    let (summary, diagnostics) = (stdout(&out), stderr(&out));
    assert!(!diagnostics.contains(SECRET), "a diagnostic showed a file outside the root:\n{diagnostics}");
    for (name, case) in &cases {
        match &case.load {
            Some(says) => {
                assert!(summary.contains(&format!("FAILED  {name} (")), "{name} should be refused:\n{summary}");
                assert!(diagnostics.contains(says.as_str()), "{name} should say `{says}`:\n{diagnostics}");
            }
            None => assert!(summary.contains(&format!("ok      {name} (")), "{name} should load:\n{summary}"),
        }
    }
}

#[test]
fn run_ends_every_turn_with_a_clear_error_or_a_bounded_result() {
    let (root, _outside, cases) = hostile_root();
    for (name, case) in cases.iter().filter(|(_, c)| !c.turns.is_empty()) {
        let inputs: Vec<Value> = case.turns.iter().map(|t| json!(t.input)).collect();
        let file = root.path().join(format!("{name}.inputs.json"));
        std::fs::write(&file, serde_json::to_string(&inputs).unwrap()).unwrap();
        let out = ruleweave_bounded(root.path()).args(["run", name, "--input"]).arg(&file).output().unwrap();
        ended_cleanly(&out, name);
        let lines = json_lines(&out);
        assert_eq!(lines.len(), case.turns.len(), "{name}: one line per input:\n{}", stderr(&out));
        for (turn, line) in case.turns.iter().zip(&lines) {
            expect(name, turn, line.get("error"), &line["output"]);
        }
    }
}

fn expect(name: &str, turn: &Turn, error: Option<&Value>, output: &Value) {
    match (&turn.code, &turn.output) {
        (Some(code), _) => {
            let error = error.unwrap_or_else(|| panic!("{name} `{}`: expected {code}, got {output}", turn.input));
            assert_eq!(error["code"], json!(code), "{name}: {error}");
            let says = turn.says.as_deref().unwrap_or_default();
            assert!(error["message"].as_str().unwrap().contains(says), "{name} should say `{says}`: {error}");
        }
        (None, Some(want)) => {
            assert!(error.is_none(), "{name} `{}` failed: {error:?}", turn.input);
            for (k, v) in want.as_object().unwrap() {
                assert_eq!(&output[k], v, "{name} `{}`: output.{k} in {output}", turn.input);
            }
        }
        (None, None) => panic!("{name}: a turn expects a `code` or an `output`"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_survives_every_case_and_reports_the_refused_packs() {
    let (root, _outside, cases) = hostile_root();
    let mut cmd = ruleweave_bounded(root.path());
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"]);
    let server = start_cmd(cmd);
    for (name, case) in &cases {
        let (status, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": name})).await;
        if case.load.is_some() {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{name}: {created}");
            assert_eq!(created["error"]["code"], "invalid_pack", "{name}: {created}");
            assert!(!created.to_string().contains(SECRET), "{created}");
            continue;
        }
        assert_eq!(status, StatusCode::CREATED, "{name}: {created}");
        let turns = format!("{}/v1/sessions/{}/turns", server.url, created["id"].as_str().unwrap());
        for turn in &case.turns {
            let (status, body) = post(&turns, json!({"input": {"text": turn.input}})).await;
            assert_ne!(status, StatusCode::SERVICE_UNAVAILABLE, "{name}: the server went away: {body}");
            expect(name, turn, body.get("error"), &body["output"]);
        }
    }
    let health = get(&format!("{}/healthz", server.url)).await;
    assert_eq!(health["status"], "ok", "the server survived every case");
    let packs = get(&format!("{}/v1/packs", server.url)).await;
    let refused = packs["packs"].as_array().unwrap().iter().filter(|p| p["status"] == "error").count();
    assert_eq!(refused, cases.values().filter(|c| c.load.is_some()).count());
    assert!(!packs.to_string().contains(SECRET));
}
