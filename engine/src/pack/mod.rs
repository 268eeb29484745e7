//! Packs: one game or flow, loaded from `config/<pack>.yaml`, `scripts/<pack>/` and
//! `prompts/<pack>/`, validated whole, and frozen into an immutable [`Pack`].
//!
//! Loading compiles every script once and parses every template; every problem found is reported
//! with `file:line:col` (all of them, not just the first). A pack's version is the hash of its
//! files, so a checkpoint can say which rules produced it.

pub(crate) mod experiment;
mod info;
mod load;
pub(crate) mod manifest;
mod params;

pub use experiment::{Experiment, Variant};
pub use info::{DisplayInfo, FieldInfo, InputInfo, NodeInfo, OptionInfo, PackInfo, ProfileInfo, TableInfo};
pub use params::{NumericParam, ParamValues, parse_param, write_param, write_weight};

/// Texts to read in place of a pack's files, by path relative to the root
/// (`scripts/pirate/merit.rhai`): an editor's unsaved buffers, checked as if saved
/// ([`crate::Packs::check`]).
pub type Overlay = Arc<std::collections::HashMap<String, String>>;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use rhai::{Dynamic, Map};
use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::llm::{Profile, Provider};
use crate::prompt::Prompts;
use crate::script::{FnRef, Sandbox};
use crate::state::Schema;
use crate::value;

use crate::vocab::TypeName;
pub(crate) use load::{load, load_with};

/// What the text before the first turn is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OpeningKind {
    /// A question: the player's first input answers it (an interviewer's first question).
    #[default]
    Question,
    /// A hint of what to type: the player's first input is the game's first input (a designer's
    /// "type what the game should teach").
    Hint,
}

/// A loaded, validated pack: immutable, shared by every session that runs on this version.
pub struct Pack {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) version: String,
    pub(crate) root: PathBuf,
    pub(crate) options: IndexMap<String, OptionSpec>,
    pub(crate) params: Map,
    /// The numbers of `params:` a run may vary, with their bounds.
    pub(crate) numeric_params: Vec<NumericParam>,
    pub(crate) profiles: Arc<IndexMap<String, Profile>>,
    pub(crate) schema: Schema,
    pub(crate) inputs: IndexMap<String, InputSpec>,
    pub(crate) outputs: Vec<String>,
    pub(crate) finish: Option<Finish>,
    pub(crate) display: Display,
    pub(crate) graph: Graph,
    pub(crate) sandbox: Arc<Sandbox>,
    pub(crate) limits: crate::limits::Limits,
    pub(crate) tables: crate::data::Tables,
    /// The compiled scripts, by file.
    pub(crate) scripts: crate::script::Scripts,
    pub(crate) prompts: Arc<Prompts>,
    pub(crate) init: Option<FnRef>,
    pub(crate) migrate: Option<FnRef>,
    /// Whether the engine's store has this version's state schema (`Runtime::record_schema`).
    pub(crate) schema_recorded: std::sync::atomic::AtomicBool,
    pub(crate) selectors: IndexMap<String, Arc<crate::select::Selector>>,
    pub(crate) standin: Option<Arc<dyn Provider>>,
    pub(crate) search_standin: Option<Arc<dyn crate::search::Search>>,
    pub(crate) files: Vec<String>,
    /// A hash of each file's content, to tell which files an edit changed.
    pub(crate) file_hashes: std::collections::BTreeMap<String, u64>,
    pub(crate) lobby: Option<crate::lobby::Lobby>,
    /// What `ruleweave simulate` reports of a game.
    pub(crate) simulate: Simulate,
    /// How long its finished sessions are kept: `None` when the pack does not say (the host's
    /// setting applies), `Some(None)` for `never`.
    pub(crate) expire_finished_after: Option<Option<std::time::Duration>>,
    /// Turns a typed line into the turn's input.
    pub(crate) typed: Option<FnRef>,
    /// Variants of its rules given to shares of its players (`experiment:`).
    pub(crate) experiment: Option<experiment::Experiment>,
    /// What loaded but is likely a mistake, each at its place.
    pub(crate) warnings: Vec<Error>,
}

impl Pack {
    /// What loaded but is likely a mistake (a phase profile naming a disabled strategy), each at
    /// its place: `check` shows them; the pack runs.
    pub fn warnings(&self) -> &[Error] {
        &self.warnings
    }

    /// The pack's data table `name` (`data:` in the manifest): loaded once per pack version and
    /// shared by every session.
    pub fn table(&self, name: &str) -> Option<&Arc<crate::data::Table>> {
        self.tables.get(name)
    }
}

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pack").field("name", &self.name).field("version", &self.version).finish_non_exhaustive()
    }
}

/// What `ruleweave simulate` reports of each game (the manifest's `simulate:`).
#[derive(Debug, Clone, Default)]
pub struct Simulate {
    /// The state field holding the game's outcome (`None`: finished or unfinished).
    pub outcome: Option<String>,
    /// The values the outcome field may end a game with, when the pack lists them.
    pub outcomes: Vec<String>,
    /// Number fields reported at the end of each game.
    pub track: Vec<String>,
    /// The most turns a game is played for.
    pub max_turns: u32,
    /// The tracked fields whose line a report draws (`thresholds:`), each a template over the
    /// session's state (the pirate's merit: the difficulty's threshold).
    pub thresholds: Vec<String>,
}

/// A session option as the pack declares it.
#[derive(Debug, Clone)]
pub struct OptionSpec {
    /// The option's type.
    pub ty: TypeName,
    /// The values allowed, when the pack lists them.
    pub values: Option<Vec<Json>>,
    /// The value when a session does not choose one; an option without default is required.
    pub default: Option<Json>,
    /// What the option means.
    pub description: String,
    /// The most characters of a text given for it (the most bytes of its JSON otherwise), as
    /// the manifest declares it; 1,000 characters and 10,000 bytes when it does not.
    pub max_length: Option<usize>,
    /// The fewest characters of a text (its ends trimmed).
    pub min_length: Option<usize>,
    /// The range a number must be in, as the manifest declares it.
    pub min: Option<f64>,
    /// See [`OptionSpec::min`].
    pub max: Option<f64>,
    /// Whether its value names a model a session chooses (`model: true`).
    pub model: bool,
}

impl Pack {
    /// What `ruleweave simulate` reports of a game of this pack.
    pub fn simulate(&self) -> &Simulate {
        &self.simulate
    }

    /// The names of the scripted players the pack ships (`scripts/<pack>/players/NAME.rhai`).
    pub fn players(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .scripts
            .files()
            .filter_map(|f| f.path.rsplit_once("/players/").map(|(_, n)| n.trim_end_matches(".rhai").to_owned()))
            .collect();
        names.sort();
        names
    }
}

impl OptionSpec {
    /// What is wrong with `v` as this option's value (its type aside), in words that follow
    /// "option `name`".
    fn problem(&self, v: &Json) -> Option<String> {
        let (size, most, what) = match v {
            Json::String(s) => (s.chars().count(), self.max_length.unwrap_or(OPTION_TEXT_CHARS), "characters"),
            other => (other.to_string().len(), self.max_length.unwrap_or(OPTION_JSON_BYTES), "bytes of JSON"),
        };
        if size > most {
            return Some(format!("is {size} {what}; the most a session may give is {most} (its max_length)"));
        }
        if let (Json::String(s), Some(least)) = (v, self.min_length)
            && s.trim().chars().count() < least
        {
            return Some(format!("is {:?}, shorter than {least} characters (its min_length)", s.trim()));
        }
        if let Some(x) = v.as_f64()
            && (self.min.is_some_and(|m| x < m) || self.max.is_some_and(|m| x > m))
        {
            let shown = |b: f64| Json::from(b).to_string().trim_end_matches(".0").to_owned();
            return Some(match (self.min, self.max) {
                (Some(lo), Some(hi)) => format!("is {v}, not between {} and {}", shown(lo), shown(hi)),
                (Some(lo), None) => format!("is {v}, less than {}", shown(lo)),
                (_, hi) => format!("is {v}, more than {}", shown(hi.unwrap_or_default())),
            });
        }
        if let Some(values) = &self.values
            && !values.contains(v)
        {
            let allowed: Vec<String> = values.iter().map(show).collect();
            return Some(format!("must be one of {}, not {}", allowed.join(", "), show(v)));
        }
        None
    }
}

/// The most characters of a text option a session may give, unless the option says otherwise.
pub(crate) const OPTION_TEXT_CHARS: usize = 1_000;
/// The most bytes of an option of any other type's JSON, unless the option says otherwise.
pub(crate) const OPTION_JSON_BYTES: usize = 10_000;

/// A field of a turn's input as the pack declares it.
#[derive(Debug, Clone)]
pub struct InputSpec {
    /// The field's type.
    pub ty: TypeName,
    /// Whether every turn must give it.
    pub required: bool,
    /// The value when a turn does not give it.
    pub default: Option<Json>,
    /// For strings the most characters, for lists the most items.
    pub max_length: Option<usize>,
    /// What the field means.
    pub doc: String,
}

/// When a session is over.
#[derive(Debug, Clone)]
pub(crate) struct Finish {
    pub field: String,
    pub message: String,
}

/// Which inline display templates the pack has (named `display.<part>`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Display {
    pub reply: bool,
    pub status: bool,
    pub details: bool,
    pub finished: bool,
    /// What a face shows while replies stream (`display.stream`, `stream_from`, `speaker`).
    pub stream: Arc<crate::speech::Streamed>,
    /// What the reply before the first turn is (`display.opening`).
    pub opening: OpeningKind,
    /// The input every face plays on open (`display.play_on_open`).
    pub play_on_open: Option<Json>,
    /// What to type, in one line (`display.input_help`).
    pub input_help: Option<String>,
}

impl Pack {
    /// The nodes whose model replies a console shows as they stream (`display.stream`); a map
    /// node's items stream as `node[i]`.
    pub fn streamed_nodes(&self) -> &[String] {
        &self.display.stream.nodes
    }

    /// Whether the pack says when a session is over (`finish:`): a game it does not finish within
    /// `simulate.max_turns` is unfinished, stopped by the cap.
    pub fn finishes(&self) -> bool {
        self.finish.is_some()
    }

    /// What a player types, in one line (`display.input_help`), for every face to show.
    pub fn input_help(&self) -> Option<&str> {
        self.display.input_help.as_deref()
    }

    /// The pack's name (the manifest's file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the pack is, in a sentence.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The content hash of the pack's files (12 hex digits).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The directory the pack was loaded from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The names of the pack's selectors (`selectors:`), in manifest order.
    pub fn selectors(&self) -> Vec<&str> {
        self.selectors.keys().map(String::as_str).collect()
    }

    /// The files the version hash covers, relative to the root.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// The session options the pack declares.
    pub fn options(&self) -> &IndexMap<String, OptionSpec> {
        &self.options
    }

    /// The input fields a turn takes.
    pub fn inputs(&self) -> &IndexMap<String, InputSpec> {
        &self.inputs
    }

    /// The state fields a turn's output shows.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// The LLM profiles.
    pub fn profiles(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.values()
    }

    /// The pack's offline stand-in model (`standin:`), if it has one.
    pub fn standin(&self) -> Option<Arc<dyn Provider>> {
        self.standin.clone()
    }

    /// The pack's offline search engine (`search_standin:`), if it has one.
    pub fn search_standin(&self) -> Option<Arc<dyn crate::search::Search>> {
        self.search_standin.clone()
    }

    /// Whether the pack has a stand-in model.
    pub fn has_standin(&self) -> bool {
        self.standin.is_some()
    }

    /// What a turn of this version runs with: its compiled parts, the host's natives, the turn.
    pub(crate) fn env<'a>(
        &'a self,
        natives: &'a crate::native::NativeNodes,
        turn: &'a Arc<crate::turn::TurnCtx>,
    ) -> crate::graph::env::Env<'a> {
        crate::graph::env::Env {
            graph: &self.graph,
            schema: &self.schema,
            sandbox: &self.sandbox,
            prompts: &self.prompts,
            profiles: &self.profiles,
            params: &self.params,
            limits: &self.limits,
            natives,
            turn,
        }
    }

    /// The graph as a Mermaid flowchart.
    pub fn mermaid(&self) -> String {
        self.graph.drawing().mermaid()
    }

    /// The graph as a drawing needs it: nodes with their kind and what they run, edges with how
    /// they are taken (see [`Drawing`](crate::Drawing)).
    pub fn drawing(&self) -> crate::Drawing {
        self.graph.drawing()
    }

    /// The names of the graph's nodes, in declaration order.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.graph.nodes.iter().map(|n| &*n.name)
    }

    /// The pack's parameters (`params:`) as JSON.
    pub fn params(&self) -> Json {
        value::map_to_json(&self.params)
    }

    /// Its experiment (`experiment:`): the variants of its rules and their weights.
    pub fn experiment(&self) -> Option<&Experiment> {
        self.experiment.as_ref()
    }

    /// The numbers of the pack's `params:` a run may vary, by dotted path, with their values in
    /// this version and their declared bounds.
    pub fn numeric_params(&self) -> &[NumericParam] {
        &self.numeric_params
    }

    /// The number at `path` of the pack's `params:`, or an input error naming the nearest one.
    pub fn numeric_param(&self, path: &str) -> Result<&NumericParam> {
        self.numeric_params.iter().find(|p| p.path == path).ok_or_else(|| {
            let near = crate::script::lint::nearest(path, self.numeric_params.iter().map(|p| p.path.as_str()))
                .map(|n| format!(": did you mean `{n}`?"))
                .unwrap_or_default();
            Error::input(format!("pack `{}` has no numeric parameter `{path}`{near}", self.name))
        })
    }

    /// What the pack declares, as JSON: options, input, output, state fields, profiles and
    /// nodes, each with its documentation (for `GET /v1/packs` and pack references).
    pub fn describe(&self) -> Json {
        let mut v = serde_json::json!({"name": self.name, "version": self.version});
        if let (Some(all), Json::Object(declared)) =
            (v.as_object_mut(), serde_json::to_value(self.info()).unwrap_or_default())
        {
            all.extend(declared);
        }
        v
    }

    /// Parses a `--set KEY=VALUE` value for option `name` by the option's type
    /// (`hard` stays a string, `3` is an int for an int option, a list is JSON or comma-separated).
    pub fn option_from_str(&self, name: &str, raw: &str) -> Result<Json> {
        let spec = self.options.get(name).ok_or_else(|| self.unknown_option(name))?;
        let bad = || Error::input(format!("option `{name}` is {}, and `{raw}` is not one", spec.ty.a()));
        Ok(match spec.ty {
            TypeName::String => Json::String(raw.to_owned()),
            TypeName::Int => Json::from(raw.trim().parse::<i64>().map_err(|_| bad())?),
            TypeName::Float | TypeName::Number => {
                let f: f64 = raw.trim().parse().map_err(|_| bad())?;
                serde_json::Number::from_f64(f).map(Json::Number).ok_or_else(bad)?
            }
            TypeName::Bool => Json::Bool(raw.trim().parse().map_err(|_| bad())?),
            TypeName::List => serde_json::from_str(raw).unwrap_or_else(|_| {
                Json::Array(raw.split(',').map(|s| Json::String(s.trim().to_owned())).filter(|s| s != "").collect())
            }),
            TypeName::Map => serde_json::from_str(raw).map_err(|_| bad())?,
            TypeName::Any => serde_json::from_str(raw).unwrap_or_else(|_| Json::String(raw.to_owned())),
        })
    }

    fn unknown_option(&self, name: &str) -> Error {
        let known: Vec<&str> = self.options.keys().map(String::as_str).collect();
        let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
        Error::input(format!("pack `{}` has no option `{name}` (options: {known})", self.name))
    }

    /// Checks chosen options against the declarations and fills in defaults.
    pub fn resolve_options(&self, given: &serde_json::Map<String, Json>) -> Result<Map> {
        if let Some(name) = given.keys().find(|k| !self.options.contains_key(*k)) {
            return Err(self.unknown_option(name));
        }
        let mut out = Map::new();
        // Every option's problem at once, not the first only.
        let mut problems = Vec::new();
        for (name, spec) in &self.options {
            let v = match (given.get(name), &spec.default) {
                (Some(v), _) => v.clone(),
                (None, Some(d)) => d.clone(),
                (None, None) => {
                    return Err(Error::input(format!("option `{name}` is required ({})", spec.description)));
                }
            };
            if !spec.ty.holds_json(&v) {
                let shown: String = v.to_string().chars().take(80).collect();
                return Err(Error::input(format!(
                    "option `{name}` is {}, not {} ({shown})",
                    spec.ty.a(),
                    value::json_type_of(&v)
                )));
            }
            if let Some(why) = spec.problem(&v) {
                problems.push(format!("option `{name}` {why}"));
                continue;
            }
            out.insert(name.as_str().into(), value::from_json(&v));
        }
        match problems.len() {
            0 => Ok(out),
            1 => Err(Error::input(problems.remove(0))),
            n => Err(Error::input(format!("the options have {n} problem(s):\n- {}", problems.join("\n- ")))),
        }
    }

    /// Checks a turn's input against the declarations and fills in defaults.
    pub fn check_input(&self, input: &Json) -> Result<Map> {
        let obj = input.as_object().ok_or_else(|| {
            Error::input(format!("a turn's input is a map of fields, not {}", value::json_type_of(input)))
        })?;
        if let Some(name) = obj.keys().find(|k| !self.inputs.contains_key(*k)) {
            let known: Vec<&str> = self.inputs.keys().map(String::as_str).collect();
            return Err(Error::input(format!("unknown input field `{name}` (fields: {})", known.join(", "))));
        }
        let mut out = Map::new();
        for (name, spec) in &self.inputs {
            let v = match (obj.get(name), &spec.default) {
                (Some(v), _) => v.clone(),
                (None, Some(d)) => d.clone(),
                (None, None) if spec.required => {
                    return Err(Error::input(format!("input field `{name}` is required")));
                }
                (None, None) => continue,
            };
            if !spec.ty.holds_json(&v) {
                return Err(Error::input(format!(
                    "input field `{name}` is {}, not {}",
                    spec.ty.a(),
                    value::json_type_of(&v)
                )));
            }
            if let Some(max) = spec.max_length {
                let len = match &v {
                    Json::String(s) => s.chars().count(),
                    Json::Array(a) => a.len(),
                    _ => 0,
                };
                if len > max {
                    return Err(Error::input(format!("input field `{name}` is {len} long; the most is {max}")));
                }
            }
            if spec.required && v.as_str().is_some_and(|s| s.trim().is_empty()) {
                return Err(Error::input(format!("input field `{name}` is empty")));
            }
            out.insert(name.as_str().into(), value::from_json(&v));
        }
        Ok(out)
    }

    /// Whether a script of the pack's (`typed:`) reads a line a person typed into the turn's
    /// input: the turn runs it ([`crate::Session::turn`] given a string).
    pub fn reads_typed_lines(&self) -> bool {
        self.typed.is_some()
    }

    /// The turn input for a bare string, when the pack takes exactly one string field.
    pub fn input_from_text(&self, text: &str) -> Option<Json> {
        let strings: Vec<&String> =
            self.inputs.iter().filter(|(_, s)| s.ty == TypeName::String).map(|(k, _)| k).collect();
        match strings.as_slice() {
            [one] if self.inputs.values().filter(|s| s.required).count() <= 1 => {
                Some(serde_json::json!({ one.as_str(): text }))
            }
            _ => None,
        }
    }

    /// Whether `state` is finished (the `finish.when` field is true).
    pub(crate) fn is_finished(&self, state: &Dynamic) -> bool {
        let Some(finish) = &self.finish else {
            return false;
        };
        state
            .read_lock::<Map>()
            .and_then(|m| m.get(finish.field.as_str()).and_then(|v| v.as_bool().ok()))
            .unwrap_or(false)
    }

    /// What to tell a turn that arrives after the session finished.
    pub fn finished_message(&self) -> &str {
        self.finish.as_ref().map_or("this session is finished", |f| f.message.as_str())
    }
}

fn show(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}
