//! Hot reload: a watcher over a root's `config/`, `scripts/`, `prompts/`, `data/` and `schemas/`
//! that rebuilds the packs an edit touches, off to the side, and swaps each one in only when it
//! validates.
//!
//! A broken edit never reaches a session: the pack keeps serving its last good version and the
//! error (with `file:line:col`) is kept until a later save fixes it. Sessions move to a new version
//! at the start of their next turn; a turn in flight finishes on the version it began.

use std::time::Duration;

#[cfg(feature = "watch")]
use std::collections::BTreeSet;
#[cfg(feature = "watch")]
use std::path::{Path, PathBuf};

#[cfg(feature = "watch")]
use crate::error::{Error, ErrorKind, Result};
#[cfg(feature = "watch")]
use crate::packs::Packs;
pub use crate::packs::{PackEvent, PackStatus, ReloadStatus};

/// How long a file must stay quiet before its change is acted on. Editors save by writing a
/// temporary file and renaming it over the old one, several events per save; one rebuild follows.
pub const DEBOUNCE: Duration = Duration::from_millis(40);

/// The longest a stream of edits holds back a rebuild: a file written without pause still
/// reloads this often.
#[cfg(feature = "watch")]
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// The directories under a root that hold packs.
#[cfg(feature = "watch")]
const WATCHED: [&str; 5] = ["config", "scripts", "prompts", "data", "schemas"];

/// Watches a root for edits and reloads the packs they touch, until dropped.
///
/// Only what changes a file's contents or its place wakes it: writes, creates, removes and
/// renames. Opening, reading and closing a file unwritten, and metadata alone (access times,
/// permissions), are dropped as they arrive, so rebuilding a pack (which reads every one of its
/// files) never sets off another rebuild, and a watcher with no edits costs no CPU: its
/// threads sleep on the kernel and on a channel. notify's own debouncers are not used for this:
/// the mini one reports every event as `Any`, so a read looks like an edit, and both wake on a
/// timer for as long as they run.
#[cfg(feature = "watch")]
pub struct Watcher {
    /// Dropping it ends notify's thread and closes the channel, which ends the rebuilding thread.
    _watcher: notify::RecommendedWatcher,
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
        Watcher::start_except(packs, &[])
    }

    /// [`Watcher::start`], leaving alone the files named in `ignored` and the journals SQLite
    /// keeps beside them (`-wal`, `-shm`, `-journal`): a store's database kept under the root
    /// (see [`crate::store::Store::file`]) is written every turn and is no part of a pack.
    pub fn start_except(packs: &Packs, ignored: &[&Path]) -> Result<Watcher> {
        use notify::Watcher as _;
        let packs = packs.clone();
        let root = packs.root().canonicalize().unwrap_or_else(|_| packs.root().to_path_buf());
        let ignored: Vec<PathBuf> = ignored.iter().map(|p| canonical_file(p)).collect();
        let dirs: Vec<PathBuf> = WATCHED.iter().map(|d| root.join(d)).filter(|p| p.is_dir()).collect();
        let (edits, edited) = std::sync::mpsc::channel::<Edit>();
        let filter_root = root.clone();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let edit = match event {
                Ok(e) if e.need_rescan() => Edit::Rescan,
                Ok(e) if changes_files(&e.kind) => {
                    let files: Vec<String> = e
                        .paths
                        .iter()
                        .filter(|p| !ignored.iter().any(|i| is_store_file(i, p)))
                        .filter_map(|p| relative(&filter_root, p))
                        .collect();
                    if files.is_empty() {
                        return;
                    }
                    Edit::Files(files)
                }
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!("the pack watcher reported an error: {e}");
                    return;
                }
            };
            let _ = edits.send(edit);
        })
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot watch for edits: {e}")))?;
        for path in dirs {
            watcher
                .watch(&path, notify::RecursiveMode::Recursive)
                .map_err(|e| Error::new(ErrorKind::Io, format!("cannot watch {}: {e}", path.display())))?;
        }
        std::thread::Builder::new()
            .name("ruleweave-reload".into())
            .spawn(move || rebuild_on_edits(&packs, &edited))
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the reloading thread: {e}")))?;
        Ok(Watcher { _watcher: watcher })
    }
}

/// What the watcher passes on: files edited, or word that events were lost (the kernel's queue
/// overflowed) and every pack must be looked at again.
#[cfg(feature = "watch")]
enum Edit {
    Files(Vec<String>),
    Rescan,
}

/// Waits for an edit, gathers the ones that follow it until the files have been quiet for
/// [`DEBOUNCE`] (or [`LONGEST_WAIT`] has passed), and reloads the packs they touch; until the
/// watcher is dropped.
#[cfg(feature = "watch")]
fn rebuild_on_edits(packs: &Packs, edited: &std::sync::mpsc::Receiver<Edit>) {
    use std::sync::mpsc::RecvTimeoutError;
    while let Ok(first) = edited.recv() {
        let mut files = BTreeSet::new();
        let mut rescan = false;
        let mut take = |edit: Edit| match edit {
            Edit::Files(f) => files.extend(f),
            Edit::Rescan => rescan = true,
        };
        take(first);
        let until = std::time::Instant::now() + LONGEST_WAIT;
        let closed = loop {
            let wait = DEBOUNCE.min(until.saturating_duration_since(std::time::Instant::now()));
            match edited.recv_timeout(wait) {
                Ok(edit) => take(edit),
                Err(RecvTimeoutError::Timeout) => break false,
                Err(RecvTimeoutError::Disconnected) => break true,
            }
        };
        if rescan {
            let manifests = packs.names().unwrap_or_default().into_iter().map(|n| format!("config/{n}.yaml"));
            files.extend(manifests);
        }
        packs.reload_files(&files.into_iter().collect::<Vec<_>>());
        if closed {
            return;
        }
    }
}

/// Whether an event says a file's contents or its place changed. Opens, reads, closes without a
/// write and metadata changes say neither.
#[cfg(feature = "watch")]
fn changes_files(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Any | EventKind::Other => false,
    }
}

/// `path` made absolute and free of symbolic links, through its directory when the file itself
/// does not exist yet.
#[cfg(feature = "watch")]
fn canonical_file(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => {
            dir.canonicalize().map(|d| d.join(name)).unwrap_or_else(|_| path.to_path_buf())
        }
        (_, Some(name)) => std::env::current_dir().map(|d| d.join(name)).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// Whether `path` is the database `db` or one of the files SQLite keeps beside it.
#[cfg(feature = "watch")]
fn is_store_file(db: &Path, path: &Path) -> bool {
    let (Some(name), Some(db_name)) = (path.file_name(), db.file_name()) else { return false };
    if path.parent() != db.parent() {
        return false;
    }
    let (name, db_name) = (name.to_string_lossy(), db_name.to_string_lossy());
    name.strip_prefix(db_name.as_ref()).is_some_and(|rest| ["", "-wal", "-shm", "-journal"].contains(&rest))
}

/// `path` relative to the root, with `/` separators; `None` outside it (or for an editor's
/// swap and backup files, which are not part of any pack).
#[cfg(feature = "watch")]
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel: PathBuf = path.strip_prefix(root).ok()?.to_path_buf();
    let name = rel.file_name()?.to_string_lossy();
    if name.starts_with('.') || name.ends_with('~') || name.ends_with(".swp") {
        return None;
    }
    Some(rel.to_string_lossy().replace('\\', "/"))
}
