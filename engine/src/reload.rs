//! Hot reload: a watcher over a root's `config/`, `scripts/`, `prompts/`, `data/` and `schemas/`
//! that rebuilds the packs an edit touches, off to the side, and swaps each one in only when it
//! validates.
//!
//! A broken edit never reaches a session: the pack keeps serving its last good version and the
//! error (with `file:line:col`) is kept until a later save fixes it. Sessions move to a new version
//! at the start of their next turn; a turn in flight finishes on the version it began.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[cfg(feature = "watch")]
use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
#[cfg(feature = "watch")]
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};

use crate::error::{Error, ErrorKind, Result};
use crate::packs::Packs;
pub use crate::packs::{PackEvent, PackStatus, ReloadStatus};

/// How long a file must stay quiet before its change is acted on. Editors save by writing a
/// temporary file and renaming it over the old one, several events per save; one rebuild follows.
pub const DEBOUNCE: Duration = Duration::from_millis(40);

/// The directories under a root that hold packs.
const WATCHED: [&str; 5] = ["config", "scripts", "prompts", "data", "schemas"];

#[cfg(feature = "watch")]
/// Watches a root for edits and reloads the packs they touch, until dropped.
pub struct Watcher {
    _debouncer: Debouncer<RecommendedWatcher>,
}

#[cfg(feature = "watch")]
impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

#[cfg(feature = "watch")]
impl Watcher {
    /// Starts watching `packs`' root: every edit under `config/`, `scripts/`, `prompts/`, `data/` or `schemas/`
    /// rebuilds the packs it touches (on the watcher's own thread) and swaps them in when they
    /// validate. Subscribe with [`Packs::subscribe`] to hear of each reload. Stops when dropped.
    pub fn start(packs: &Packs) -> Result<Watcher> {
        let packs = packs.clone();
        let root = packs.root().to_path_buf();
        let canonical = root.canonicalize().unwrap_or_else(|_| root.clone());
        let dirs: Vec<PathBuf> = WATCHED.iter().map(|d| root.join(d)).filter(|p| p.is_dir()).collect();
        let handler = move |result: DebounceEventResult| match result {
            Ok(events) => {
                let files: BTreeSet<String> =
                    events.iter().filter_map(|e| relative(&canonical, &root, &e.path)).collect();
                packs.reload_files(&files.into_iter().collect::<Vec<_>>());
            }
            Err(e) => tracing::warn!("the pack watcher reported an error: {e}"),
        };
        let mut debouncer = new_debouncer(DEBOUNCE, handler)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot watch for edits: {e}")))?;
        for path in dirs {
            debouncer
                .watcher()
                .watch(&path, RecursiveMode::Recursive)
                .map_err(|e| Error::new(ErrorKind::Io, format!("cannot watch {}: {e}", path.display())))?;
        }
        Ok(Watcher { _debouncer: debouncer })
    }
}

/// `path` relative to the root, with `/` separators; `None` outside it (or for an editor's
/// swap and backup files, which are not part of any pack).
fn relative(canonical: &Path, root: &Path, path: &Path) -> Option<String> {
    let rel: PathBuf = path.strip_prefix(canonical).or_else(|_| path.strip_prefix(root)).ok()?.to_path_buf();
    let name = rel.file_name()?.to_string_lossy();
    if name.starts_with('.') || name.ends_with('~') || name.ends_with(".swp") {
        return None;
    }
    Some(rel.to_string_lossy().replace('\\', "/"))
}
