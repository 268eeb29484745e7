//! `PUT /v1/packs/{pack}/params`: "use this value". Writes numbers of a pack's `params:` into its
//! manifest (`config/<pack>.yaml` under this server's root), changing only each number's own
//! characters (comments and layout stay), and reloads the pack, so the next turn plays with them.
//! `PUT /v1/packs/{pack}/variants` writes its experiment's weights the same way: the next session
//! made takes them (the version, which leaves weights out, stays).
//! Each value is checked as a run's `--param` is (a number the pack has, its type, its declared
//! bounds) before anything is written; the file is replaced whole (written aside, then renamed),
//! so a reader never sees half of it. Replicas on one store each have their own root: the file of
//! the replica that answered changes (a root they share is reloaded by every replica's watcher).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{ApiResult, Code};
use super::extract::{Body, PackName};
use super::routes::{Facts, O};
use super::{ApiError, Shared};
use ruleweave::ErrorKind;

/// Numbers to write into a pack's manifest.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewParams {
    /// Numbers of the pack's `params:` by dotted path (`{"thresholds.medium": 59}`).
    #[schema(value_type = Object)]
    params: BTreeMap<String, Value>,
}

/// What was written.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct WrittenParams {
    /// The pack.
    pack: String,
    /// The file changed, relative to the server's root.
    file: String,
    /// The numbers written.
    #[schema(value_type = Object)]
    params: BTreeMap<String, Value>,
    /// The pack's version now (the reload's).
    version: String,
    /// Comments that still state a written number's old value, on its line or in the comment
    /// lines right above it (`config/pirate.yaml:21: the comment above thresholds.medium still
    /// says 60`). Comments are never rewritten: a person reads them and decides.
    stale_comments: Vec<String>,
}

/// Who may call `write`, and the errors it answers of its own.
pub(super) const WRITE: Facts = Facts::keys(&[O]).note("writes the pack's manifest").answers(&[
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Input),
    Code::PackNotWritable,
    Code::Engine(ErrorKind::Pack),
]);

/// `PUT /v1/packs/{pack}/params`: writes numbers into the pack's manifest and reloads it.
#[utoipa::path(put, path = "/v1/packs/{pack}/params", operation_id = "writePackParams", tag = "packs", params(("pack" = String, Path, description = "The pack")), request_body = NewParams, responses(
    (status = 200, description = "Written, and the pack reloaded with them", body = WrittenParams),
))]
pub(super) async fn write(
    State(s): State<Shared>,
    PackName(pack): PackName,
    Body(req): Body<NewParams>,
) -> ApiResult<Json<WrittenParams>> {
    if req.params.is_empty() {
        return Err(ApiError::new(Code::InvalidRequest, "`params` names no number to write"));
    }
    // Checked as a run's values are: every one, before anything is written.
    s.engine.with_params(&pack, req.params.clone())?;
    let manifest = Manifest::of(&s, &pack);
    let file = manifest.file.clone();
    let mut text = manifest.read()?;
    let serving = s.engine.packs().get(&pack)?;
    let mut stale_comments = Vec::new();
    for (name, value) in &req.params {
        let written = ruleweave::write_param(&text, name, value)
            .map_err(|e| ApiError::new(Code::Engine(ruleweave::ErrorKind::Input), format!("{file}: {}", e.detail())))?;
        if let Ok(old) = serving.numeric_param(name) {
            let old = if old.integer { format!("{:.0}", old.value) } else { old.value.to_string() };
            stale_comments.extend(stale_comments_of(&text, &written, name, &old, &file));
        }
        text = written;
    }
    manifest.write(&text)?;
    tracing::info!(pack = %pack, file = %file, "params written: {}", shown(&req.params));
    // Reloaded now, so the answer comes after the pack that plays the next turn (the watcher,
    // when there is one, sees the same file and finds nothing new).
    s.engine.packs().reload_files(std::slice::from_ref(&file));
    let loaded = s.engine.packs().get(&pack)?;
    Ok(Json(WrittenParams { pack, file, params: req.params, version: loaded.version().to_owned(), stale_comments }))
}

/// The comments that still say `old` after `name` was written (`before` → `after`): the comment
/// on the line that changed, and the comment lines right above it, each as `file:line: ...`.
fn stale_comments_of(before: &str, after: &str, name: &str, old: &str, file: &str) -> Vec<String> {
    let lines: Vec<&str> = after.lines().collect();
    let Some(at) = before.lines().zip(&lines).position(|(b, a)| b != *a) else { return Vec::new() };
    let says_old = |comment: &str| {
        comment
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
            .any(|w| w.trim_end_matches('.') == old)
    };
    let mut found = Vec::new();
    if let Some((_, comment)) = lines[at].split_once(" #")
        && says_old(comment)
    {
        found.push(format!("{file}:{}: the comment on the line of {name} still says {old}", at + 1));
    }
    for above in (0..at).rev().take_while(|i| lines[*i].trim_start().starts_with('#')) {
        if says_old(lines[above]) {
            found.push(format!("{file}:{}: the comment above {name} still says {old}", above + 1));
        }
    }
    found
}

/// New weights for variants of a pack's experiment.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewWeights {
    /// Variant → its new weight, 0 or more (`{"lenient": 30}`); the others keep theirs.
    weights: BTreeMap<String, f64>,
}

/// An experiment's weights as written.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct WrittenWeights {
    /// The pack.
    pack: String,
    /// The file changed, relative to the server's root.
    file: String,
    /// Every variant's weight now, in the manifest's order.
    #[schema(value_type = Object)]
    weights: indexmap::IndexMap<String, f64>,
    /// The pack's version (a weight is not part of it: the same as before).
    version: String,
}

/// Who may call `write_weights`, and the errors it answers of its own.
pub(super) const WRITE_WEIGHTS: Facts = Facts::keys(&[O]).note("writes the pack's manifest").answers(&[
    Code::InvalidRequest,
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Input),
    Code::PackNotWritable,
    Code::Engine(ErrorKind::Pack),
]);

/// `PUT /v1/packs/{pack}/variants`: writes weights of the pack's experiment into its manifest
/// and reloads it; the next session made is assigned by them (a session already made keeps its
/// variant).
#[utoipa::path(put, path = "/v1/packs/{pack}/variants", operation_id = "writePackWeights", tag = "packs", params(("pack" = String, Path, description = "The pack")), request_body = NewWeights, responses(
    (status = 200, description = "Written, and the pack reloaded with them", body = WrittenWeights),
))]
pub(super) async fn write_weights(
    State(s): State<Shared>,
    PackName(pack): PackName,
    Body(req): Body<NewWeights>,
) -> ApiResult<Json<WrittenWeights>> {
    let serving = s.engine.packs().get(&pack)?;
    let input = |m: String| ApiError::new(Code::Engine(ErrorKind::Input), m);
    let Some(experiment) = serving.experiment() else {
        return Err(input(format!("pack `{pack}` has no experiment: its manifest declares none (`experiment:`)")));
    };
    if req.weights.is_empty() {
        return Err(ApiError::new(Code::InvalidRequest, "`weights` names no variant"));
    }
    let names: Vec<&str> = experiment.variants.iter().map(|v| v.name.as_str()).collect();
    for (name, weight) in &req.weights {
        if !names.contains(&name.as_str()) {
            return Err(input(format!(
                "`weights`: the experiment has no variant `{name}` (its variants: {})",
                names.join(", ")
            )));
        }
        if !(weight.is_finite() && *weight >= 0.0) {
            return Err(input(format!("`weights`: `{name}` is a weight of 0 or more, not {weight}")));
        }
    }
    let total: f64 = experiment.variants.iter().map(|v| req.weights.get(&v.name).copied().unwrap_or(v.weight)).sum();
    if total <= 0.0 {
        return Err(input("`weights`: the weights would sum to 0, and no new session would have a variant".into()));
    }
    let manifest = Manifest::of(&s, &pack);
    let file = manifest.file.clone();
    let mut text = manifest.read()?;
    for (name, weight) in &req.weights {
        text = ruleweave::write_weight(&text, name, *weight).map_err(|e| input(format!("{file}: {}", e.detail())))?;
    }
    manifest.write(&text)?;
    tracing::info!(pack = %pack, file = %file, "weights written: {:?}", req.weights);
    s.engine.packs().reload_files(std::slice::from_ref(&file));
    let loaded = s.engine.packs().get(&pack)?;
    let weights = loaded.experiment().map(|e| e.variants.iter().map(|v| (v.name.clone(), v.weight)).collect());
    Ok(Json(WrittenWeights { pack, file, weights: weights.unwrap_or_default(), version: loaded.version().to_owned() }))
}

/// A pack's manifest under this server's root, as the routes that write it read and write it.
struct Manifest {
    /// Relative to the root (`config/pirate.yaml`).
    file: String,
    path: std::path::PathBuf,
    pack: String,
}

impl Manifest {
    fn of(s: &Shared, pack: &str) -> Manifest {
        let file = format!("config/{pack}.yaml");
        Manifest { path: s.engine.root().join(&file), file, pack: pack.to_owned() }
    }

    fn not_written(&self, e: std::io::Error) -> ApiError {
        let file = &self.file;
        ApiError::new(
            Code::PackNotWritable,
            format!("cannot write {file}: {e} (the pack's files are not writable here)"),
        )
    }

    fn read(&self) -> ApiResult<String> {
        std::fs::read_to_string(&self.path).map_err(|e| self.not_written(e))
    }

    /// Replaces the file whole with `text`: written aside, then renamed, so a reader never sees
    /// half of it.
    fn write(&self, text: &str) -> ApiResult<()> {
        let aside = self.path.with_file_name(format!(".{}.yaml.writing", self.pack));
        std::fs::write(&aside, text).map_err(|e| self.not_written(e))?;
        if let Err(e) = std::fs::rename(&aside, &self.path) {
            let _ = std::fs::remove_file(&aside);
            return Err(self.not_written(e));
        }
        Ok(())
    }
}

fn shown(params: &BTreeMap<String, Value>) -> String {
    params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}
