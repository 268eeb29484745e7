//! The pack root as the editor sees it: the files it has open (their unsaved text wins over
//! disk), which pack each file belongs to, and each pack's last check, run by the engine's own
//! checker ([`ruleweave::Packs::check`], what `ruleweave check` runs) and turned into
//! diagnostics for every file a problem names.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_types::{Diagnostic, DiagnosticSeverity, Uri};
use ruleweave::{Engine, Error, Pack};
use ruleweave_lab::replay::{Fallback, Replayer};

use super::text;

/// An open document.
pub(super) struct Doc {
    pub(super) text: String,
    pub(super) version: i32,
}

/// What the last check of a pack found.
#[derive(Default)]
struct Checked {
    /// The files it read (relative to the root).
    files: Vec<String>,
    /// Its problems, by file.
    diagnostics: BTreeMap<String, Vec<Diagnostic>>,
}

pub(super) struct Workspace {
    pub(super) root: PathBuf,
    engine: Engine,
    /// Open documents by path relative to the root.
    pub(super) docs: HashMap<String, Doc>,
    checked: HashMap<String, Checked>,
    /// Each pack's last version that loaded, for completion and hover while it has errors.
    pub(super) good: HashMap<String, Arc<Pack>>,
    /// How many test cases run each node, by pack, for the pack version they were counted on.
    cases: HashMap<String, (String, BTreeMap<String, usize>)>,
    /// Plays the test cases (the replayer is async).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Workspace {
    pub(super) fn new(root: PathBuf) -> Self {
        // URIs are absolute paths: so is the root, whatever the command line said.
        let root = root.canonicalize().or_else(|_| std::path::absolute(&root)).unwrap_or(root);
        // Checking needs no model: the stand-in keeps it offline whatever the environment says.
        let engine = ruleweave_natives::register(Engine::builder(&root)).build();
        Workspace {
            root,
            engine,
            docs: HashMap::new(),
            checked: HashMap::new(),
            good: HashMap::new(),
            cases: HashMap::new(),
            runtime: tokio::runtime::Builder::new_current_thread().enable_all().build().ok(),
        }
    }

    /// The path of `uri` relative to the root, when it is a file under it.
    pub(super) fn rel(&self, uri: &Uri) -> Option<String> {
        let path = url::Url::parse(uri.as_str()).ok()?.to_file_path().ok()?;
        let path = path.canonicalize().unwrap_or(path);
        let rel = path.strip_prefix(&self.root).ok()?;
        Some(rel.to_string_lossy().replace('\\', "/"))
    }

    /// The URI of the file at `rel`.
    pub(super) fn uri(&self, rel: &str) -> Option<Uri> {
        let url = url::Url::from_file_path(self.root.join(rel)).ok()?;
        url.as_str().parse().ok()
    }

    /// The text of `rel`: the editor's when it has the file open, else the disk's, as the loader
    /// reads it: a file that is a link out of the root is no file of the packs (nothing is read
    /// through it, so no completion, hover or edit reaches what it points at).
    pub(super) fn text(&self, rel: &str) -> Option<String> {
        match self.docs.get(rel) {
            Some(d) => Some(d.text.clone()),
            None => {
                let real = self.root.join(rel).canonicalize().ok()?;
                real.starts_with(&self.root).then(|| std::fs::read_to_string(real).ok()).flatten()
            }
        }
    }

    /// The packs there are: `config/*.yaml` on disk or open.
    pub(super) fn pack_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.engine.packs().names().unwrap_or_default().into_iter().collect();
        names.extend(self.docs.keys().filter_map(|rel| manifest_pack(rel)));
        names
    }

    /// The packs `rel` belongs to: the one its path names (`config/NAME.yaml`,
    /// `scripts/NAME/…`, `prompts/NAME/…`), and every pack whose last check read it.
    pub(super) fn packs_of(&self, rel: &str) -> Vec<String> {
        let names = self.pack_names();
        let mut out: Vec<String> = Vec::new();
        let named = manifest_pack(rel).or_else(|| {
            let mut parts = rel.split('/');
            let top = parts.next()?;
            let name = parts.next()?;
            (matches!(top, "scripts" | "prompts" | "data" | "schemas") && parts.next().is_some())
                .then(|| name.to_owned())
        });
        if let Some(n) = named.filter(|n| names.contains(n)) {
            out.push(n);
        }
        // Then, in name order, every pack whose last check read it (a shared library).
        let mut readers: Vec<String> = self
            .checked
            .iter()
            .filter(|(p, c)| c.files.iter().any(|f| f == rel) && !out.contains(p))
            .map(|(p, _)| p.clone())
            .collect();
        readers.sort();
        out.extend(readers);
        out
    }

    /// The pack a feature should answer from for `rel` (its first), with its last good version.
    pub(super) fn pack_for(&self, rel: &str) -> Option<(String, Option<Arc<Pack>>)> {
        let name = self.packs_of(rel).into_iter().next()?;
        let good = self.good.get(&name).cloned();
        Some((name, good))
    }

    /// Checks `pack` on the open buffers; the files to tell (those whose problems changed, and
    /// the pack's open files), with what each now shows (an empty list clears a file).
    pub(super) fn check(&mut self, pack: &str) -> Vec<(String, Vec<Diagnostic>)> {
        let overlay: ruleweave::Overlay =
            Arc::new(self.docs.iter().map(|(k, d)| (k.clone(), d.text.clone())).collect());
        let manifest = format!("config/{pack}.yaml");
        let mut found: BTreeMap<String, Vec<Diagnostic>> = BTreeMap::new();
        let files = match self.engine.packs().check(pack, overlay) {
            Ok(p) => {
                for w in p.warnings() {
                    self.add(&mut found, w, &manifest, DiagnosticSeverity::WARNING);
                }
                let files = p.files().to_vec();
                self.good.insert(pack.to_owned(), Arc::new(p));
                files
            }
            Err(e) => {
                // Mid-edit, the buffers may never have loaded: what is on disk answers completion
                // and hover meanwhile.
                if !self.good.contains_key(pack)
                    && let Ok(p) = self.engine.packs().check(pack, ruleweave::Overlay::default())
                {
                    self.good.insert(pack.to_owned(), Arc::new(p));
                }
                for one in e.all() {
                    self.add(&mut found, one, &manifest, DiagnosticSeverity::ERROR);
                }
                // A failed load says which files it reached only through its problems: keep what
                // the last good one read, so a fixed file is still cleared.
                let mut files = self.good.get(pack).map(|p| p.files().to_vec()).unwrap_or_default();
                files.extend(found.keys().cloned());
                files
            }
        };
        let before = self.checked.insert(pack.to_owned(), Checked { files, diagnostics: found }).unwrap_or_default();
        let mut touched: BTreeSet<String> = before.diagnostics.keys().cloned().collect();
        touched.extend(self.checked[pack].diagnostics.keys().cloned());
        // An open file hears from every check of its pack, clean or not.
        let open: Vec<String> =
            self.docs.keys().filter(|f| self.packs_of(f).iter().any(|p| p == pack)).cloned().collect();
        touched.extend(open);
        touched.into_iter().map(|rel| (rel.clone(), self.shown_for(&rel))).collect()
    }

    /// How many of `pack`'s test cases (`tests/<pack>/*.yaml`) run each node: every case played
    /// offline, as `ruleweave test` plays it, on the pack as saved. Counted again when the saved
    /// pack changes; none when it does not load.
    pub(super) fn cases_per_node(&mut self, pack: &str) -> BTreeMap<String, usize> {
        let Ok(saved) = self.engine.packs().load(pack) else { return BTreeMap::new() };
        // The pack's version and the cases' own text: an edited or added case counts again.
        let files = ruleweave_lab::cases::case_files(&self.root, pack);
        let mut version = saved.version().to_owned();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            version.push_str(&format!(" {}:{:x}", f.display(), text_hash(&text)));
        }
        if let Some((seen, counts)) = self.cases.get(pack)
            && *seen == version
        {
            return counts.clone();
        }
        let Some(rt) = self.runtime.as_ref() else { return BTreeMap::new() };
        let mut counts: BTreeMap<String, usize> = saved.nodes().map(|n| (n.to_owned(), 0)).collect();
        let Ok(replayer) = Replayer::new(&self.engine, pack, Fallback::Standin) else { return BTreeMap::new() };
        for file in files {
            let Ok(case) = ruleweave_lab::cases::read_case(&file) else { continue };
            let Ok(turns) = rt.block_on(replayer.replay(&case.recording(pack))) else { continue };
            let ran: BTreeSet<&String> = turns.iter().flat_map(|t| &t.ran).collect();
            for node in ran {
                *counts.entry(node.clone()).or_default() += 1;
            }
        }
        self.cases.insert(pack.to_owned(), (version, counts.clone()));
        counts
    }

    /// Every pack's problems in `rel`, once each.
    fn shown_for(&self, rel: &str) -> Vec<Diagnostic> {
        let mut all: Vec<Diagnostic> = Vec::new();
        for c in self.checked.values() {
            for d in c.diagnostics.get(rel).into_iter().flatten() {
                if !all.iter().any(|a| a.range == d.range && a.message == d.message) {
                    all.push(d.clone());
                }
            }
        }
        all
    }

    fn add(
        &self,
        found: &mut BTreeMap<String, Vec<Diagnostic>>,
        e: &Error,
        manifest: &str,
        severity: DiagnosticSeverity,
    ) {
        let (file, line, column) = match e.origin() {
            Some(o) => (relative(&self.root, &o.file), o.line, o.column),
            None => (manifest.to_owned(), 0, 0),
        };
        let text = self.text(&file).unwrap_or_default();
        let mut message = e.detail().to_owned();
        if let Some(node) = e.node() {
            message.push_str(&format!(" (node {node})"));
        }
        let d = Diagnostic {
            range: text::problem_range(&text, line, column),
            severity: Some(severity),
            source: Some("ruleweave".into()),
            message,
            ..Default::default()
        };
        found.entry(file).or_default().push(d);
    }
}

/// A hash of a text, to tell whether it changed.
fn text_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// `pack` for `config/pack.yaml`.
fn manifest_pack(rel: &str) -> Option<String> {
    let name = rel.strip_prefix("config/")?.strip_suffix(".yaml")?;
    (!name.contains('/')).then(|| name.to_owned())
}

/// An origin's file relative to the root (origins are; an absolute one is made so).
fn relative(root: &Path, file: &str) -> String {
    Path::new(file).strip_prefix(root).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| file.to_owned())
}
