//! The Python and Node packages' own tests, run by the README's test command: pytest against the
//! installed wheel (`python/tests/`) and `node --test` against the built package (`node/test/`),
//! each playing the conformance cases and the packages' own behaviour. `.ci/run` builds both
//! from this tree and names them (`RULEWEAVE_TEST_PYTEST`, `RULEWEAVE_TEST_NODE_PACKAGE`).

use crate::support;

use std::process::Command;

/// Runs `cmd` in the repository's root and fails with everything it printed unless it passed.
fn passes(mut cmd: Command, what: &str) {
    let out = cmd.current_dir(support::repo_root()).output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    eprintln!("{what}: {}", stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""));
}

#[test]
fn the_python_package_passes_its_tests() {
    let Some(pytest) = support::needed(
        "RULEWEAVE_TEST_PYTEST",
        "CI must test the Python package (pip install ./python)",
        "the Python package's tests did not run",
    ) else {
        return;
    };
    let mut cmd = Command::new(pytest);
    cmd.args(["-q", "-p", "no:cacheprovider", "python/tests"]);
    passes(cmd, "pytest python/tests");
}

#[test]
fn the_node_package_passes_its_tests() {
    let Some(package) = support::needed(
        "RULEWEAVE_TEST_NODE_PACKAGE",
        "CI must test the Node package (npm ci in node/)",
        "the Node package's tests did not run",
    ) else {
        return;
    };
    let mut cmd = Command::new("node");
    cmd.args(["--test", &format!("{package}/test/")]);
    passes(cmd, "node --test node/test/");
}
