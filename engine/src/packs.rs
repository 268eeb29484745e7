//! The packs of a root: loading each on first use, the version each serves, reloading them as
//! their files change (a new version swapped in only when it validates), and what happened to
//! each (for `GET /v1/packs` and the reload events). An engine has one; clones share it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};
use crate::native::NativeNodes;
use crate::pack::{self, Pack};
use crate::script::standin::Answers;

/// The packs under a root.
#[derive(Clone)]
pub struct Packs {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    natives: NativeNodes,
    /// Parameter values set in place of the manifests', by pack.
    params: HashMap<String, pack::ParamValues>,
    slots: RwLock<HashMap<String, Slot>>,
    /// Held while a pack rebuilds, so two saves in a row swap in in the order they were made.
    rebuilding: Mutex<()>,
    events: tokio::sync::broadcast::Sender<PackEvent>,
    /// The stand-in models' answers, kept by the copies of the rules made from these packs
    /// ([`Packs::with_params`]) and shared among them; these packs themselves keep none.
    answers: Arc<Answers>,
    /// Whether these packs are such a copy.
    copy: bool,
}

/// One pack's place: the version serving and the newest refusal.
#[derive(Default)]
struct Slot {
    pack: Option<Arc<Pack>>,
    /// The serving version's variants that set params (its experiment's), by name: each the
    /// pack loaded with the variant's numbers, built when a session first asks for it.
    variants: HashMap<String, Arc<Pack>>,
    error: Option<Error>,
    reloads: u64,
}

impl std::fmt::Debug for Packs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packs").field("root", &self.inner.root).finish_non_exhaustive()
    }
}

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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

impl Packs {
    /// The packs under `root` (which holds `config/`, `scripts/`, `prompts/`), with the native
    /// nodes and scorers a host registered.
    pub(crate) fn new(root: PathBuf, natives: NativeNodes, params: HashMap<String, pack::ParamValues>) -> Self {
        Self::sharing(root, natives, params, Arc::default(), false)
    }

    fn sharing(
        root: PathBuf,
        natives: NativeNodes,
        params: HashMap<String, pack::ParamValues>,
        answers: Arc<Answers>,
        copy: bool,
    ) -> Self {
        let inner = Inner {
            root,
            natives,
            params,
            slots: RwLock::new(HashMap::new()),
            rebuilding: Mutex::new(()),
            events: tokio::sync::broadcast::channel(256).0,
            answers,
            copy,
        };
        Packs { inner: Arc::new(inner) }
    }

    /// The same packs with `params` set in place of the manifest's numbers for `pack` (and the
    /// other packs' values kept), loaded afresh: another copy of the rules, for simulate's sweeps.
    /// The copies keep their stand-in models' answers and share them (a simulation plays the
    /// same games again and again): one that reads none of the parameters set answers each
    /// request once for all of them. A served game, on the packs themselves, asks every time.
    pub(crate) fn with_params(&self, pack: &str, params: pack::ParamValues) -> Packs {
        let mut all = self.inner.params.clone();
        all.entry(pack.to_owned()).or_default().extend(params);
        Packs::sharing(self.inner.root.clone(), self.inner.natives.clone(), all, self.inner.answers.clone(), true)
    }

    /// How many stand-in answers these packs and their copies keep.
    #[cfg(test)]
    pub(crate) fn answers_kept(&self) -> usize {
        self.inner.answers.len()
    }

    /// The parameter values set for `pack` in place of its manifest's.
    pub fn params_set(&self, pack: &str) -> Option<&pack::ParamValues> {
        self.inner.params.get(pack)
    }

    /// The directory packs are read from.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The native nodes and scorers the host registered.
    pub(crate) fn natives(&self) -> &NativeNodes {
        &self.inner.natives
    }

    /// The names of every pack under the root (`config/*.yaml`), sorted.
    pub fn names(&self) -> Result<Vec<String>> {
        let dir = self.inner.root.join("config");
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot list {}: {e}", dir.display())))?;
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                let yaml = p.extension().is_some_and(|x| x == "yaml");
                yaml.then(|| p.file_stem().map(|s| s.to_string_lossy().into_owned())).flatten()
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// The pack `name` at its current version, loading it on first use.
    pub fn get(&self, name: &str) -> Result<Arc<Pack>> {
        if let Some(p) = self.current(name) {
            return Ok(p);
        }
        self.load(name)
    }

    /// Whether `name` is a pack of this engine: one it loaded (or tried to), or one whose manifest
    /// is under the root. What a client names is not a pack until this says so.
    pub fn contains(&self, name: &str) -> bool {
        is_pack_name(name)
            && (self.inner.slots.read().unwrap_or_else(|e| e.into_inner()).contains_key(name)
                || self.inner.root.join("config").join(format!("{name}.yaml")).is_file())
    }

    /// Every pack serving now (loaded at some version), in no order.
    pub fn loaded(&self) -> Vec<Arc<Pack>> {
        self.inner.slots.read().unwrap_or_else(|e| e.into_inner()).values().filter_map(|s| s.pack.clone()).collect()
    }

    /// The version of `name` serving now, if it ever loaded.
    pub fn current(&self, name: &str) -> Option<Arc<Pack>> {
        self.inner.slots.read().unwrap_or_else(|e| e.into_inner()).get(name).and_then(|s| s.pack.clone())
    }

    /// The rules a session of `name` in variant `variant` of its experiment plays: the serving
    /// version with the variant's params set (the parameters these packs set win over them), or
    /// the serving version itself for the control, for no variant, and for a variant its
    /// experiment no longer has.
    pub fn variant(&self, name: &str, variant: Option<&str>) -> Result<Arc<Pack>> {
        self.variant_of(self.get(name)?, variant)
    }

    /// [`Packs::variant`] of `base`, the version of the pack serving now (looked up once by the
    /// caller: a turn asks this every time).
    pub(crate) fn variant_of(&self, base: Arc<Pack>, variant: Option<&str>) -> Result<Arc<Pack>> {
        let Some(wanted) = base.experiment().and_then(|e| e.variant(variant?)).filter(|v| !v.is_control()) else {
            return Ok(base);
        };
        let name = base.name.as_str();
        let slots = self.inner.slots.read().unwrap_or_else(|e| e.into_inner());
        if let Some(built) = slots.get(name).and_then(|s| s.variants.get(&wanted.name)) {
            return Ok(built.clone());
        }
        drop(slots);
        let mut params = wanted.params.clone();
        params.extend(self.inner.params.get(name).cloned().unwrap_or_default());
        let answers = self.inner.copy.then_some(&self.inner.answers);
        let built = Arc::new(pack::load(&self.inner.root, name, &self.inner.natives, &params, answers)?);
        let mut slots = self.inner.slots.write().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = slots.get_mut(name).filter(|s| s.pack.as_ref().is_some_and(|p| Arc::ptr_eq(p, &base))) else {
            // A reload swapped in another version meanwhile: this session plays that one's rules.
            drop(slots);
            return self.variant(name, variant);
        };
        Ok(slot.variants.entry(wanted.name.clone()).or_insert(built).clone())
    }

    /// [`Packs::variant`] of the version serving now, if `name` ever loaded; `None` also when
    /// the variant's rules cannot be built.
    pub fn current_variant(&self, name: &str, variant: Option<&str>) -> Option<Arc<Pack>> {
        let base = self.current(name)?;
        if variant.is_none() {
            return Some(base);
        }
        self.variant_of(base, variant).ok()
    }

    /// Loads (or reloads) the pack `name` from disk and makes it the current version. When the
    /// files do not validate, the error is returned and kept for [`Packs::status`], and the
    /// version that served before (if any) goes on serving.
    pub fn load(&self, name: &str) -> Result<Arc<Pack>> {
        self.rebuild(name, Vec::new()).0
    }

    /// Checks the pack `name` as [`Packs::load`] would load it, reading `overlay`'s texts in
    /// place of the files at their paths (an editor's unsaved buffers), and serves nothing: the
    /// pack is returned, not swapped in, and no error is kept. Every problem found is in the
    /// error ([`Error::all`]).
    pub fn check(&self, name: &str, overlay: pack::Overlay) -> Result<Pack> {
        if !is_pack_name(name) {
            let shown: String = name.chars().take(PACK_NAME_MAX).collect();
            return Err(Error::new(ErrorKind::NotFound, format!("`{shown}` is not a pack name")));
        }
        let none = pack::ParamValues::new();
        let params = self.inner.params.get(name).unwrap_or(&none);
        pack::load_with(&self.inner.root, name, &self.inner.natives, params, overlay, None)
    }

    /// Rebuilds `name` off to the side and swaps it in when it validates; reports what happened
    /// when a version was already serving or a watcher noticed the change (`files`).
    fn reload(&self, name: &str, files: Vec<String>) -> Option<PackEvent> {
        self.rebuild(name, files).1
    }

    fn rebuild(&self, name: &str, files: Vec<String>) -> (Result<Arc<Pack>>, Option<PackEvent>) {
        if !is_pack_name(name) {
            let shown: String = name.chars().take(PACK_NAME_MAX).collect();
            let more = if shown.len() < name.len() { "…" } else { "" };
            let why =
                format!("`{shown}{more}` is not a pack name (letters, digits, `_` and `-`, at most {PACK_NAME_MAX})");
            return (Err(Error::new(ErrorKind::NotFound, why)), None);
        }
        let _one_at_a_time = self.inner.rebuilding.lock().unwrap_or_else(|p| p.into_inner());
        let started = std::time::Instant::now();
        let previous = self.current(name);
        let natives = &self.inner.natives;
        let none = pack::ParamValues::new();
        let params = self.inner.params.get(name).unwrap_or(&none);
        let answers = self.inner.copy.then_some(&self.inner.answers);
        let built = pack::load(&self.inner.root, name, natives, params, answers).and_then(|new| match &previous {
            Some(old) => compatible(old, &new).map(|()| new),
            None => Ok(new),
        });
        let noticed = previous.is_some() || !files.is_empty();
        if let Err(e) = &built
            && e.kind() == ErrorKind::NotFound
            && previous.is_none()
            && files.is_empty()
        {
            // No such pack: nothing to keep (a client naming packs at random must not grow this),
            // and the answer names the packs there are rather than a file system error.
            if !self.inner.root.join("config").join(format!("{name}.yaml")).exists() {
                let names = self.names().unwrap_or_default();
                let near = crate::script::lint::nearest(name, names.iter().map(String::as_str))
                    .map(|n| format!("did you mean `{n}`? "))
                    .unwrap_or_default();
                let known = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
                let why = format!("there is no pack `{name}` ({near}packs: {known})");
                return (Err(Error::new(ErrorKind::NotFound, why)), None);
            }
            return (Err(e.clone()), None);
        }
        let mut packs = self.inner.slots.write().unwrap_or_else(|e| e.into_inner());
        let slot = packs.entry(name.to_owned()).or_default();
        let (result, status, diagnostics) = match built {
            Ok(new) => {
                let was_refused = slot.error.take().is_some();
                // The same version with other weights is swapped in (whose players get which
                // variant changed; the rules did not).
                let same = |old: &&Arc<Pack>| old.version == new.version && old.experiment == new.experiment;
                match previous.as_ref().filter(same) {
                    // The same files (an editor touched them): nothing to swap, nothing to say,
                    // unless they put back the serving version after a refused edit.
                    Some(old) if !was_refused => return (Ok(old.clone()), None),
                    Some(old) => (Ok(old.clone()), ReloadStatus::Reloaded, Vec::new()),
                    None => {
                        let new = Arc::new(new);
                        slot.pack = Some(new.clone());
                        slot.variants.clear();
                        if previous.is_some() {
                            slot.reloads += 1;
                        }
                        (Ok(new), ReloadStatus::Reloaded, Vec::new())
                    }
                }
            }
            Err(e) => {
                if slot.error.as_ref() == Some(&e) {
                    // Refused again for the same reasons (one save seen twice): said already.
                    return (Err(e), None);
                }
                slot.error = Some(e.clone());
                let diagnostics = e.all().map(Error::alone).collect();
                (Err(e), ReloadStatus::Rejected, diagnostics)
            }
        };
        let version = slot.pack.as_ref().map(|p| p.version.clone());
        // The files whose content the reload found changed (added, edited or gone), where it
        // can tell: a watcher also hears of files only read or touched.
        let files = match (&previous, slot.pack.as_ref()) {
            (Some(old), Some(new)) if old.version != new.version => {
                let changed: Vec<String> = old
                    .file_hashes
                    .keys()
                    .chain(new.file_hashes.keys())
                    .filter(|f| old.file_hashes.get(*f) != new.file_hashes.get(*f))
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if changed.is_empty() { files } else { changed }
            }
            _ => files,
        };
        drop(packs);
        let event = noticed.then(|| PackEvent {
            pack: name.to_owned(),
            status,
            version,
            previous: previous.map(|p| p.version.clone()),
            diagnostics,
            files,
            at: crate::vocab::now_ms(),
            took_us: started.elapsed().as_micros() as u64,
        });
        if let Some(e) = &event {
            // Nobody listening is fine: the event is also in the pack's status.
            let _ = self.inner.events.send(e.clone());
        }
        (result, event)
    }

    /// Every pack's standing, sorted by name: the packs under the root and any the engine has
    /// loaded, each with the version serving and the newest refusal.
    pub fn status(&self) -> Vec<PackStatus> {
        let mut names = self.names().unwrap_or_default();
        let packs = self.inner.slots.read().unwrap_or_else(|e| e.into_inner());
        names.extend(packs.keys().cloned());
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| {
                let slot = packs.get(&name);
                PackStatus {
                    pack: slot.and_then(|s| s.pack.clone()),
                    error: slot.and_then(|s| s.error.clone()),
                    reloads: slot.map_or(0, |s| s.reloads),
                    name,
                }
            })
            .collect()
    }

    /// Hears of every reload from now on: versions swapped in and edits refused.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PackEvent> {
        self.inner.events.subscribe()
    }

    /// Loads every pack, returning each one's result (for `check`).
    pub fn load_all(&self) -> Result<Vec<(String, Result<Arc<Pack>>)>> {
        Ok(self.names()?.into_iter().map(|n| (n.clone(), self.load(&n))).collect())
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
    /// `scripts/NAME/`, `prompts/NAME/`, `data/NAME/` or `schemas/NAME/`, and every pack for the
    /// shared `scripts/lib/`.
    fn packs_of(&self, file: &str) -> Vec<String> {
        let mut parts = file.split('/');
        let (Some(top), Some(second)) = (parts.next(), parts.next()) else { return Vec::new() };
        let deeper = parts.next().is_some();
        match (top, deeper) {
            ("config", false) => second.strip_suffix(".yaml").map(|n| vec![n.to_owned()]).unwrap_or_default(),
            ("scripts", true) if second == "lib" => self.names().unwrap_or_default(),
            ("scripts" | "prompts" | "data" | "schemas", true) => vec![second.to_owned()],
            _ => Vec::new(),
        }
        .into_iter()
        .filter(|n| is_pack_name(n))
        .collect()
    }
}

/// The longest pack name.
const PACK_NAME_MAX: usize = 64;

/// Whether `name` can be a pack name (a short file stem without path separators).
pub(crate) fn is_pack_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= PACK_NAME_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
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
