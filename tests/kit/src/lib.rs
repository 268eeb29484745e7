//! What the workspace's tests and benches share, written once: where the repository (and its
//! shipped packs) is, copying packs into a fresh root and editing them as editors save, reading
//! server-sent events, and a service or tool a test needs that CI installs.

#![warn(unreachable_pub)]

#[cfg(feature = "browser")]
pub mod browser;
pub mod sse;

use std::path::{Path, PathBuf};

/// The repository root, where the shipped packs live.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| {
        // Without the folder on disk nothing below would work either; say where it was looked for.
        panic!("the repository is not at {}/../..", env!("CARGO_MANIFEST_DIR"))
    })
}

/// What `var` names: a service or tool a test needs that `.ci/run` installs. Unset, the test is
/// skipped and says what did not run (`skipped`); under CI (`CI=true`) it fails instead, saying
/// why CI needs it (`ci`).
pub fn needed(var: &str, ci: &str, skipped: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            lacking(&format!("{var} is not set"), ci, skipped);
            None
        }
    }
}

/// The one rule for a test whose service this machine lacks (`what`): on CI (`CI=true`), which
/// installs every one, it fails saying `ci`; elsewhere it says it skipped, and `skipped`.
pub fn lacking(what: &str, ci: &str, skipped: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{what}, and {ci}");
    eprintln!("SKIPPED: {what}, so {skipped}");
}

/// The PostgreSQL database the tests may use (`RULEWEAVE_TEST_POSTGRES`), as [`needed`] says.
pub fn postgres() -> Option<String> {
    needed("RULEWEAVE_TEST_POSTGRES", "CI must test PostgreSQL", "this PostgreSQL test did not run")
}

/// Copies a file, or a folder and everything in it.
pub fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("cannot copy {}: {e}", from.display()));
    }
}

/// A fresh root holding copies of the repository's files and folders at `paths`.
pub fn copy_of(paths: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in paths {
        copy_tree(&repo_root().join(p), &dir.path().join(p));
    }
    dir
}

/// Replaces `from` by `to` in `file` under `root`, saving as editors do (write aside, rename over).
pub fn edit(root: &Path, file: &str, from: &str, to: &str) {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no `{from}`");
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, text.replacen(from, to, 1)).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_root_holds_the_packs() {
        assert!(super::repo_root().join("config/pirate.yaml").is_file());
    }

    #[test]
    fn an_edit_replaces_once_and_leaves_nothing_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), "x: 1\nx: 1\n").unwrap();
        super::edit(dir.path(), "a.yaml", "x: 1", "x: 2");
        assert_eq!(std::fs::read_to_string(dir.path().join("a.yaml")).unwrap(), "x: 2\nx: 1\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
