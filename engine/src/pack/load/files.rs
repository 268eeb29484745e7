//! Reading a pack's files: only from inside the root (links resolved), each file once, and what
//! was read is what the version hashes — an edit saved while a pack loads cannot stamp the files
//! it did not see with its version. An editor's unsaved buffers (an [`Overlay`]) are read in place
//! of the files they stand for.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind, Origin};
use crate::pack::Overlay;

/// The files one load read, relative to the root.
pub(super) struct Files {
    root: PathBuf,
    /// The root with its links resolved: every file read must resolve to a path under it.
    real_root: PathBuf,
    read: Vec<(String, Vec<u8>)>,
    /// Texts read in place of the files at their paths (an editor's unsaved buffers).
    overlay: Overlay,
    /// Byte ranges of a file the version does not cover (an experiment's weights), by path.
    unversioned: Vec<(String, std::ops::Range<usize>)>,
}

impl Files {
    #[cfg(test)]
    fn new(root: &Path) -> Self {
        Files::with_overlay(root, Overlay::default())
    }

    /// Files read from `overlay` where it has a text for the path, else from disk.
    pub(super) fn with_overlay(root: &Path, overlay: Overlay) -> Self {
        let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        Files { root: root.to_path_buf(), real_root, read: Vec::new(), overlay, unversioned: Vec::new() }
    }

    /// Reads the file at `rel` (relative to the root; `what` names it in errors) and records it
    /// for the version. A file whose real path (links resolved) lies outside the root is
    /// refused, unread.
    pub(super) fn read(&mut self, rel: &str, what: &str) -> Result<Vec<u8>, Error> {
        if let Some(text) = self.overlay.get(rel) {
            // A buffer stands for its file: one that is a link out of the root is refused as the
            // file is (a buffer not yet saved has no file to check).
            let path = self.root.join(rel);
            if path.symlink_metadata().is_ok() {
                self.inside(&path, rel, what)?;
            }
            let bytes = text.clone().into_bytes();
            self.read.push((rel.to_owned(), bytes.clone()));
            return Ok(bytes);
        }
        let real = self.inside(&self.root.join(rel), rel, what)?;
        let bytes = std::fs::read(&real).map_err(|e| io_error(rel, what, &e))?;
        self.read.push((rel.to_owned(), bytes.clone()));
        Ok(bytes)
    }

    /// Reads every `*.ext` file under `top/dir/` (recursively), sorted by path: the files, and
    /// the problems met (unreadable files, links out of the root, links to directories).
    pub(super) fn dir(&mut self, top: &str, dir: &str, ext: &str) -> (Vec<(String, Vec<u8>)>, Vec<Error>) {
        let mut paths = Vec::new();
        let mut errors = Vec::new();
        self.walk(&self.root.join(top).join(dir), ext, &mut paths, &mut errors);
        // A buffer not yet saved is a file too.
        let under = format!("{top}/{dir}/");
        let unsaved = self.overlay.keys().filter(|p| p.starts_with(&under) && p.ends_with(&format!(".{ext}")));
        let unsaved: Vec<String> = unsaved.filter(|p| !paths.contains(p)).cloned().collect();
        paths.extend(unsaved);
        paths.sort();
        let mut out = Vec::new();
        for rel in paths {
            match self.read(&rel, "the file") {
                Ok(bytes) => out.push((rel, bytes)),
                Err(e) => errors.push(e),
            }
        }
        (out, errors)
    }

    /// The content hash (12 hex digits) of every file read, and of the parameters a run set (a
    /// pack run with other numbers is another version of the rules).
    /// Leaves the bytes `range` of file `rel` out of the version (each read as `_`): an
    /// experiment's weights, whose edit moves players, not the rules.
    pub(super) fn unversioned(&mut self, rel: &str, range: std::ops::Range<usize>) {
        self.unversioned.push((rel.to_owned(), range));
    }

    pub(super) fn version(&self, set: &crate::pack::ParamValues) -> String {
        self.digest(set)[..12].to_owned()
    }

    /// The whole SHA-256 of [`Files::version`], in hex.
    pub(super) fn digest(&self, set: &crate::pack::ParamValues) -> String {
        let mut files: Vec<&(String, Vec<u8>)> = self.read.iter().collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut h = Sha256::new();
        for (path, bytes) in files {
            h.update(path.as_bytes());
            h.update([0]);
            h.update((bytes.len() as u64).to_le_bytes());
            let left_out: Vec<&std::ops::Range<usize>> =
                self.unversioned.iter().filter(|(p, _)| p == path).map(|(_, r)| r).collect();
            if left_out.is_empty() {
                h.update(bytes);
                continue;
            }
            let mut masked = bytes.clone();
            for r in left_out {
                masked.get_mut(r.clone()).into_iter().flatten().for_each(|b| *b = b'_');
            }
            h.update(&masked);
        }
        if !set.is_empty() {
            h.update(b"--param\0");
            h.update(serde_json::to_vec(set).unwrap_or_default());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The paths read, relative to the root.
    pub(super) fn paths(&self) -> Vec<String> {
        self.read.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Each file read with a hash of its content, by path.
    pub(super) fn hashes(&self) -> std::collections::BTreeMap<String, u64> {
        self.read.iter().map(|(p, bytes)| (p.clone(), crate::text::hash(&String::from_utf8_lossy(bytes)))).collect()
    }

    /// `path` with its links resolved, when that lies inside the root.
    fn inside(&self, path: &Path, rel: &str, what: &str) -> Result<PathBuf, Error> {
        let real = path.canonicalize().map_err(|e| io_error(rel, what, &e))?;
        if real.starts_with(&self.real_root) {
            Ok(real)
        } else {
            Err(Error::pack(
                "this file is a link to a file outside the pack root; packs read only files inside it",
                Origin::file(rel),
            ))
        }
    }

    fn rel(&self, path: &Path) -> String {
        path.strip_prefix(&self.root).unwrap_or(path).to_string_lossy().replace('\\', "/")
    }

    /// Collects the `*.ext` files under `dir` (relative paths). Directories are entered only when
    /// they are real ones: a link to a directory could lead out of the root or round in a circle.
    fn walk(&self, dir: &Path, ext: &str, out: &mut Vec<String>, errors: &mut Vec<Error>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                self.walk(&path, ext, out, errors);
            } else if kind.is_symlink() && path.is_dir() {
                let detail = "this is a link to a directory; packs follow links to files only";
                errors.push(Error::pack(detail, Origin::file(self.rel(&path))));
            } else if path.extension().is_some_and(|x| x == ext) {
                out.push(self.rel(&path));
            }
        }
    }
}

fn io_error(rel: &str, what: &str, e: &std::io::Error) -> Error {
    let kind = if e.kind() == std::io::ErrorKind::NotFound { ErrorKind::NotFound } else { ErrorKind::Io };
    Error::new(kind, format!("cannot read {what}: {e}")).at(Origin::file(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn links_out_of_the_root_are_refused_unread() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "the secret").unwrap();
        std::fs::create_dir(outside.path().join("dir")).unwrap();
        let root = tempfile::tempdir().unwrap();
        let prompts = root.path().join("prompts/p");
        std::fs::create_dir_all(&prompts).unwrap();
        std::fs::write(prompts.join("ok.j2"), "fine").unwrap();
        std::fs::write(root.path().join("shared.j2"), "shared").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), prompts.join("leak.j2")).unwrap();
        std::os::unix::fs::symlink(root.path().join("shared.j2"), prompts.join("inside.j2")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("dir"), prompts.join("away")).unwrap();
        let mut files = Files::new(root.path());
        let (read, errors) = files.dir("prompts", "p", "j2");
        let names: Vec<&str> = read.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["prompts/p/inside.j2", "prompts/p/ok.j2"]);
        let errors: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errors,
            [
                "this is a link to a directory; packs follow links to files only (in prompts/p/away)",
                "this file is a link to a file outside the pack root; packs read only files inside it (in prompts/p/leak.j2)"
            ]
        );
        assert!(!files.read.iter().any(|(_, b)| b == b"the secret"));
    }
}
