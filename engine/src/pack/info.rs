//! What a pack declares (beside its name and version), as a value a server shows (`GET /v1/packs`) and a reference tool
//! reads: options, input, output, state fields, profiles, nodes and tables, each with its
//! documentation.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value as Json;

use super::{OpeningKind, Pack};
pub use crate::data::TableInfo;
use crate::llm::ModelSpec;

/// What a pack declares.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PackInfo {
    /// What it is (the manifest's `description`).
    pub description: String,
    /// The options a session opens with, by name.
    pub options: IndexMap<String, OptionInfo>,
    /// The fields of a turn's input, by name.
    pub input: IndexMap<String, InputInfo>,
    /// The state fields a turn's output shows.
    pub output: Vec<String>,
    /// The state fields, by name.
    pub state: IndexMap<String, FieldInfo>,
    /// The model profiles, by name.
    pub profiles: IndexMap<String, ProfileInfo>,
    /// The graph's nodes, in declaration order.
    pub nodes: Vec<NodeInfo>,
    /// The data tables, by name.
    pub tables: BTreeMap<String, TableInfo>,
    /// Whether the pack brings its own stand-in model (`standin.rhai`).
    pub standin: bool,
    /// The scripted players it ships (`scripts/<pack>/players/NAME.rhai`), for simulations.
    pub players: Vec<String>,
    /// The numbers of its `params:` a run may set (`--param`, a sweep, a tune's `vary`), with
    /// their values and declared bounds.
    pub params: Vec<crate::NumericParam>,
    /// The outcomes its simulated games end in (`simulate.outcomes`), for a tune's target.
    pub outcomes: Vec<String>,
    /// The most turns a simulated game plays (`simulate.max_turns`).
    pub max_turns: u32,
    /// What a player types, in one line (`display.input_help`), for a face to show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_help: Option<String>,
    /// How a face shows the pack.
    pub display: DisplayInfo,
    /// Its experiment (`experiment:`): the variants of its numbers given to shares of its
    /// players, with their weights now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<super::Experiment>,
}

/// An option a session opens with.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OptionInfo {
    /// `string`, `int`, `float`, `number`, `bool`, `list` or `map`.
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// The values it may take, when it names them.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<serde_json::Value>>))]
    pub values: Option<Vec<Json>>,
    /// Its default.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<serde_json::Value>))]
    pub default: Option<Json>,
    /// What it does.
    pub description: String,
    /// The least a number may be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// The most a number may be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// The fewest characters (or items) it may have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_length: Option<usize>,
    /// The most characters (or items) it may have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
}

/// A field of a turn's input.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InputInfo {
    /// Its type.
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// Whether a turn must give it.
    pub required: bool,
    /// The most characters it may have.
    pub max_length: Option<usize>,
    /// What it is.
    pub doc: String,
}

/// A state field.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldInfo {
    /// Its type.
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// How a node's update is folded in.
    pub reducer: &'static str,
    /// What it is.
    pub doc: String,
}

/// A model profile.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProfileInfo {
    /// The model: a name, or `{option: {value: model}}` when an option picks it.
    #[cfg_attr(feature = "openapi", schema(value_type = serde_json::Value))]
    pub model: Json,
    /// The provider it names, if it names one.
    pub provider: Option<String>,
    /// Its temperature.
    pub temperature: Option<f64>,
    /// Its most tokens.
    pub max_tokens: Option<u32>,
    /// Whether it asks for JSON.
    pub json: bool,
    /// What it is for.
    pub description: String,
}

/// A node of the graph.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeInfo {
    /// Its name.
    pub name: String,
    /// Its kind (`script`, `llm`, `native`, `select`).
    pub kind: &'static str,
    /// What it runs (a script function, a profile, a native node, a selector).
    pub runs: String,
    /// What it does.
    pub doc: String,
}

/// How a face shows the pack.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DisplayInfo {
    /// Whether the reply before the first turn is a question or a hint.
    pub opening: OpeningKind,
    /// The input every face plays on open.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<serde_json::Value>))]
    pub play_on_open: Option<Json>,
    /// The nodes whose model replies stream to a face.
    pub stream: Vec<String>,
}

impl Pack {
    /// What the pack declares: options, input, output, state fields, profiles, nodes and tables,
    /// each with its documentation (for `GET /v1/packs` and pack references).
    pub fn info(&self) -> PackInfo {
        let options = self
            .options
            .iter()
            .map(|(k, o)| {
                let info = OptionInfo {
                    ty: o.ty.as_str(),
                    values: o.values.clone(),
                    default: o.default.clone(),
                    description: o.description.clone(),
                    min: o.min,
                    max: o.max,
                    min_length: o.min_length,
                    max_length: o.max_length,
                };
                (k.clone(), info)
            })
            .collect();
        let input = self
            .inputs
            .iter()
            .map(|(k, i)| {
                let info =
                    InputInfo { ty: i.ty.as_str(), required: i.required, max_length: i.max_length, doc: i.doc.clone() };
                (k.clone(), info)
            })
            .collect();
        let state = self
            .schema
            .fields
            .iter()
            .map(|(k, f)| (k.clone(), FieldInfo { ty: f.ty.as_str(), reducer: f.reducer.as_str(), doc: f.doc.clone() }))
            .collect();
        let profiles = self
            .profiles
            .values()
            .map(|p| {
                let model = match &p.model {
                    ModelSpec::Fixed(m) => Json::String(m.clone()),
                    ModelSpec::ByOption { option, models } => serde_json::json!({ option.as_str(): models }),
                };
                let info = ProfileInfo {
                    model,
                    provider: p.provider.clone(),
                    temperature: p.temperature,
                    max_tokens: p.max_tokens,
                    json: p.json,
                    description: p.description.clone(),
                };
                (p.name.clone(), info)
            })
            .collect();
        let nodes = self
            .graph
            .nodes
            .iter()
            .map(|n| {
                let (kind, runs) = n.kind.describe();
                NodeInfo { name: n.name.to_string(), kind, runs, doc: n.doc.clone() }
            })
            .collect();
        PackInfo {
            description: self.description.clone(),
            options,
            input,
            output: self.outputs.clone(),
            state,
            profiles,
            nodes,
            tables: self.tables.iter().map(|(k, t)| (k.clone(), t.info())).collect(),
            standin: self.standin.is_some(),
            players: self.players(),
            params: self.numeric_params().to_vec(),
            outcomes: self.simulate().outcomes.clone(),
            max_turns: self.simulate().max_turns,
            input_help: self.display.input_help.clone(),
            display: DisplayInfo {
                opening: self.display.opening,
                play_on_open: self.display.play_on_open.clone(),
                stream: self.display.stream.nodes.clone(),
            },
            experiment: self.experiment.clone(),
        }
    }
}
