//! `ruleweave test`: the log kept out of the results unless asked.

use super::*;

/// `test` prints its results, not the warnings of the turns it replays; `--verbose` shows them.
#[test]
fn test_keeps_the_log_out_of_its_results_unless_asked() {
    let root = tempfile::tempdir().unwrap();
    let out = ruleweave(root.path()).args(["new", "noisy"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let script = root.path().join("scripts/noisy/noisy.rhai");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, text.replace("fn listen() {\n", "fn listen() {\n    warn(\"the listener is noisy\");\n"))
        .unwrap();
    let out = ruleweave(root.path()).args(["test", "noisy"]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(!stderr(&out).contains("the listener is noisy"), "{}", stderr(&out));
    let out = ruleweave(root.path()).args(["test", "noisy", "--verbose"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("the listener is noisy"), "{}", stderr(&out));
}
