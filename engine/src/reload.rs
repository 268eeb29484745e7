//! Hot reload: a watcher over a root's `config/`, `scripts/` and `prompts/` that rebuilds the packs
//! an edit touches, off to the side, and swaps each one in only when it validates.
//!
//! A broken edit never reaches a session: the pack keeps serving its last good version and the
//! error (with `file:line:col`) is kept until a later save fixes it. Sessions move to a new version
//! at the start of their next turn; a turn in flight finishes on the version it began.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};
use serde::Serialize;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::pack::Pack;

/// How long a file must stay quiet before its change is acted on. Editors save by writing a
/// temporary file and renaming it over the old one, several events per save; one rebuild follows.
pub const DEBOUNCE: Duration = Duration::from_millis(40);

/// The directories under a root that hold packs.
const WATCHED: [&str; 3] = ["config", "scripts", "prompts"];

/// What one reload did: `serve` streams these at `GET /v1/events`, `play` prints them.
#[derive(Debug, Clone, Serialize)]
pub struct PackEvent {
    /// The pack.
    pub pack: String,
    /// Whether a new version serves now, or the edit was refused.
    pub status: ReloadStatus,
    /// The version serving now (`None` while the pack has never loaded).
    pub version: Option<String>,
    /// The version that served before.
    pub previous: Option<String>,
    /// Why the edit was refused, each naming `file:line:col` where it can.
    pub diagnostics: Vec<Error>,
    /// The changed files that set the reload off, relative to the root.
    pub files: Vec<String>,
    /// When the reload finished, in milliseconds since the Unix epoch.
    pub at: i64,
    /// How long the rebuild took, in microseconds.
    pub took_us: u64,
}

/// How a reload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReloadStatus {
    /// The new version validated and serves.
    Reloaded,
    /// The edit is broken; the last good version keeps serving.
    Rejected,
}

/// A pack's standing in an engine: the version that serves and the newest error, if the newest
/// edit was refused.
#[derive(Debug, Clone)]
pub struct PackStatus {
    /// The pack's name.
    pub name: String,
    /// The version serving, when one ever loaded.
    pub pack: Option<Arc<Pack>>,
    /// Why the newest edit (or the first load) was refused; `None` when the files on disk serve.
    pub error: Option<Error>,
    /// How many times a new version was swapped in since the engine started.
    pub reloads: u64,
}

/// Watches a root for edits and reloads the packs they touch, until dropped.
pub struct Watcher {
    _debouncer: Debouncer<RecommendedWatcher>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

impl Engine {
    /// Starts watching the engine's root: every edit under `config/`, `scripts/` or `prompts/`
    /// rebuilds the packs it touches (on the watcher's own thread) and swaps them in when they
    /// validate. Subscribe with [`Engine::subscribe`] to hear of each reload. Stops when the
    /// returned watcher is dropped.
    pub fn watch(&self) -> Result<Watcher> {
        let engine = self.clone();
        let root = self.root().to_path_buf();
        let canonical = root.canonicalize().unwrap_or_else(|_| root.clone());
        let handler = move |result: DebounceEventResult| match result {
            Ok(events) => {
                let files: BTreeSet<String> =
                    events.iter().filter_map(|e| relative(&canonical, &root, &e.path)).collect();
                engine.reload_files(&files.into_iter().collect::<Vec<_>>());
            }
            Err(e) => tracing::warn!("the pack watcher reported an error: {e}"),
        };
        let mut debouncer = new_debouncer(DEBOUNCE, handler)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot watch for edits: {e}")))?;
        for dir in WATCHED {
            let path = self.root().join(dir);
            if path.is_dir() {
                debouncer
                    .watcher()
                    .watch(&path, RecursiveMode::Recursive)
                    .map_err(|e| Error::new(ErrorKind::Io, format!("cannot watch {}: {e}", path.display())))?;
            }
        }
        Ok(Watcher { _debouncer: debouncer })
    }

    /// Reloads every pack that `files` (paths relative to the root) belong to; returns what each
    /// reload did. A pack whose files did not really change (its version is the same) is left
    /// alone and reports nothing.
    pub fn reload_files(&self, files: &[String]) -> Vec<PackEvent> {
        // Which packs each file belongs to, worked out once (`scripts/lib/` lists the packs).
        let owners: Vec<(&String, Vec<String>)> = files.iter().map(|f| (f, self.packs_of(f))).collect();
        let packs: BTreeSet<&String> = owners.iter().flat_map(|(_, p)| p).collect();
        let mut out = Vec::new();
        for pack in packs {
            let mine: Vec<String> =
                owners.iter().filter(|(_, p)| p.contains(pack)).map(|(f, _)| (*f).clone()).collect();
            if let Some(event) = self.reload(pack, mine) {
                match event.status {
                    ReloadStatus::Reloaded => tracing::info!(
                        pack = %event.pack,
                        version = event.version.as_deref().unwrap_or(""),
                        previous = event.previous.as_deref().unwrap_or(""),
                        took_us = event.took_us,
                        "pack reloaded"
                    ),
                    ReloadStatus::Rejected => {
                        let why: Vec<String> = event.diagnostics.iter().map(|e| e.to_string()).collect();
                        tracing::warn!(pack = %event.pack, "edit refused, the last good version serves: {}", why.join("; "))
                    }
                }
                out.push(event);
            }
        }
        out
    }

    /// The packs a file (relative to the root) belongs to: `config/NAME.yaml`, anything under
    /// `scripts/NAME/` or `prompts/NAME/`, and every pack for the shared `scripts/lib/`.
    fn packs_of(&self, file: &str) -> Vec<String> {
        let mut parts = file.split('/');
        let (Some(top), Some(second)) = (parts.next(), parts.next()) else { return Vec::new() };
        let deeper = parts.next().is_some();
        match (top, deeper) {
            ("config", false) => second.strip_suffix(".yaml").map(|n| vec![n.to_owned()]).unwrap_or_default(),
            ("scripts", true) if second == "lib" => self.pack_names().unwrap_or_default(),
            ("scripts" | "prompts", true) => vec![second.to_owned()],
            _ => Vec::new(),
        }
        .into_iter()
        .filter(|n| crate::engine::is_pack_name(n))
        .collect()
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

/// Whether live sessions on `old` can move to `new`. A state field whose type changed so that the
/// values sessions hold no longer fit is refused, unless the new version has a `migrate` script
/// to convert them.
pub(crate) fn compatible(old: &Pack, new: &Pack) -> Result<()> {
    if new.migrate.is_some() {
        return Ok(());
    }
    let errors: Vec<Error> = new
        .schema
        .fields
        .iter()
        .filter_map(|(name, field)| {
            let was = old.schema.fields.get(name)?;
            (!was.ty.fits_in(field.ty)).then(|| {
                Error::pack(
                    format!(
                        "state field `{name}` changed from {} to {}: live sessions (version {}) hold {} values; \
                         convert them in a `migrate` script, or give the field a new name",
                        was.ty, field.ty, old.version, was.ty
                    ),
                    field.origin.clone(),
                )
            })
        })
        .collect();
    Error::collect(errors).map_or(Ok(()), Err)
}
