//! Test cases as their files write them (`tests/<pack>/*.yaml`): the options, the inputs turn by
//! turn, the model replies to use, and what to expect. `ruleweave test` runs them (a case is a
//! [`Recording`] replayed), `play`'s `/save` writes one, `replay --file` plays one, and the
//! language server counts the nodes they run.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use ruleweave::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::replay::{Answer, RecordedTurn, Recording};

/// A test case as its file writes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What the case checks (default: the file's name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The session's options.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
    /// The session's id, which seeds its randomness (default: the case's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Its turns, in order.
    pub turns: Vec<CaseTurn>,
}

/// One turn of a case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseTurn {
    /// The input: a map of input fields, or a line of text.
    pub input: Value,
    /// Model replies by profile, in order: a reply's text, or `{error: "..."}` for a failed call.
    /// `search` gives search results (a list of `{title, url, content}`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub replies: IndexMap<String, Vec<Value>>,
    /// Fields of the state after the turn, and their values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Map<String, Value>>,
    /// The turn fails, with an error saying this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_error: Option<String>,
}

impl Case {
    /// The case as a recording to replay: its inputs and replies.
    pub fn recording(&self, pack: &str) -> Recording {
        let turns = self
            .turns
            .iter()
            .map(|t| RecordedTurn {
                turn: 0,
                input: t.input.clone(),
                edits: Vec::new(),
                answers: t
                    .replies
                    .iter()
                    .flat_map(|(profile, replies)| replies.iter().map(move |r| answer(profile, r)))
                    .collect(),
                state: None,
                nodes: Vec::new(),
                error: t.expect_error.clone(),
            })
            .collect();
        Recording {
            pack: pack.to_owned(),
            id: self.seed.clone().unwrap_or_else(|| format!("test-{}", self.name)),
            options: self.options.clone(),
            turns,
            base: None,
            edits: Vec::new(),
            variant: None,
        }
    }

    /// A case from a recording: its inputs and replies, and after each turn the `fields` of the
    /// recorded state.
    pub fn from_recording(name: &str, rec: &Recording, fields: &[String]) -> Case {
        let turns = rec
            .turns
            .iter()
            .map(|t| {
                let mut replies: IndexMap<String, Vec<Value>> = IndexMap::new();
                for a in &t.answers {
                    let v = match (&a.reply, &a.error) {
                        (Some(r), _) if a.profile == "search" => {
                            serde_json::from_str(r).unwrap_or_else(|_| Value::String(r.clone()))
                        }
                        (Some(r), _) => Value::String(r.clone()),
                        (None, e) => serde_json::json!({"error": e.clone().unwrap_or_default()}),
                    };
                    replies.entry(a.profile.clone()).or_default().push(v);
                }
                let expect = t.state.as_ref().map(|s| pick(s, fields));
                CaseTurn { input: t.input.clone(), replies, expect, expect_error: None }
            })
            .collect();
        Case { name: name.to_owned(), options: rec.options.clone(), seed: Some(rec.id.clone()), turns }
    }
}

/// A case's reply as a recorded answer.
fn answer(profile: &str, reply: &Value) -> Answer {
    let (reply, error) = match reply {
        Value::String(s) => (Some(s.clone()), None),
        Value::Object(o) if o.len() == 1 && o.contains_key("error") => {
            (None, Some(o["error"].as_str().unwrap_or("failed").to_owned()))
        }
        // Search results, or a JSON reply written as YAML.
        other => (Some(other.to_string()), None),
    };
    Answer { profile: profile.to_owned(), asked: None, reply, error }
}

/// The `fields` of a state.
pub fn pick(state: &Value, fields: &[String]) -> Map<String, Value> {
    fields.iter().filter_map(|f| Some((f.clone(), state.get(f)?.clone()))).collect()
}

/// The case files of `pack` (`tests/<pack>/*.yaml`), sorted.
pub fn case_files(root: &Path, pack: &str) -> Vec<PathBuf> {
    let dir = root.join("tests").join(pack);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Reads a case file (its name defaults to the file's stem).
pub fn read_case(path: &Path) -> Result<Case> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot read {}: {e}", path.display())))?;
    let mut case: Case = serde_saphyr::from_str(&text).map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    if case.name.is_empty() {
        case.name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    }
    Ok(case)
}

/// Writes a case file.
pub fn write_case(path: &Path, case: &Case) -> Result<()> {
    let yaml = serde_saphyr::to_string(case)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot write the case as YAML: {e}")))?;
    let cannot = |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(cannot)?;
    }
    std::fs::write(path, yaml).map_err(cannot)
}
