//! The manifest `config/<pack>.yaml` as plain serde data: what a pack may say, nothing that runs.
//!
//! Everything a later check may complain about is `Spanned`, so the complaint can name
//! `file:line:col`. Shapes that are "one of two forms" (a route as cases or as a script) use small
//! visitors instead of `#[serde(untagged)]`, which would lose positions and say only "did not match
//! any variant".

use std::fmt;

use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
pub(crate) use serde_saphyr::Spanned;

pub(crate) use crate::graph::kinds::NodeDecl;
use crate::vocab::{Reducer, ScorerImpl, TypeName};

/// A `Spanned` string: a name, script reference or template name with its position.
pub(crate) type SpannedStr = Spanned<String>;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    /// Must match the file name when given.
    #[schemars(with = "Option<String>")]
    pub name: Option<SpannedStr>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    #[schemars(with = "IndexMap<String, OptionDecl>")]
    pub options: IndexMap<String, Spanned<OptionDecl>>,
    #[serde(default)]
    #[schemars(with = "IndexMap<String, serde_json::Value>")]
    pub params: IndexMap<String, Spanned<serde_json::Value>>,
    /// The range a run may give a number of `params:`, by dotted path (`thresholds.medium:
    /// {min: 0, max: 100}`): what `--param`, simulate's sweeps and `tune` keep to.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, BoundsDecl>")]
    pub param_bounds: IndexMap<String, Spanned<BoundsDecl>>,
    #[serde(default)]
    #[schemars(with = "IndexMap<String, ProfileDecl>")]
    pub llm: IndexMap<String, Spanned<ProfileDecl>>,
    /// `file.rhai::respond` (or just `file.rhai`): the pack's offline stand-in model.
    #[schemars(with = "Option<String>")]
    pub standin: Option<SpannedStr>,
    /// `file.rhai::embed`: the stand-in's embeddings, `fn(text) -> [float]` (without it, the
    /// engine's hashed features of the words).
    #[schemars(with = "Option<String>")]
    pub standin_embed: Option<SpannedStr>,
    /// `file.rhai::search`: the pack's offline stand-in search engine.
    #[schemars(with = "Option<String>")]
    pub search_standin: Option<SpannedStr>,
    /// Limit name → value, checked against the limit table (`crate::limits`).
    #[serde(default)]
    #[schemars(with = "IndexMap<String, u64>")]
    pub limits: IndexMap<String, Spanned<u64>>,
    /// `file.rhai::init`: computes the first state of a session from its options.
    #[schemars(with = "Option<String>")]
    pub init: Option<SpannedStr>,
    /// `file.rhai::migrate`: `migrate(state, from_version)` moves a live session's state onto a
    /// new version of the pack; returns the fields to set.
    #[schemars(with = "Option<String>")]
    pub migrate: Option<SpannedStr>,
    #[serde(default)]
    #[schemars(with = "IndexMap<String, FieldDecl>")]
    pub state: IndexMap<String, Spanned<FieldDecl>>,
    #[serde(default)]
    #[schemars(with = "IndexMap<String, InputDecl>")]
    pub input: IndexMap<String, Spanned<InputDecl>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub output: Vec<SpannedStr>,
    #[schemars(with = "Option<FinishDecl>")]
    pub finish: Option<Spanned<FinishDecl>>,
    #[serde(default)]
    pub display: DisplayDecl,
    /// Data tables the pack ships in `data/<pack>/`, queried by scripts.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, TableDecl>")]
    pub data: IndexMap<String, Spanned<TableDecl>>,
    /// JSON Schemas the pack ships in `schemas/<pack>/`: name → file (YAML or JSON).
    #[serde(default)]
    #[schemars(with = "IndexMap<String, String>")]
    pub schemas: IndexMap<String, SpannedStr>,
    /// Two-tier selectors (the adaptive interviewer's scoring pipeline), used by `select:` nodes.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, SelectorDecl>")]
    pub selectors: IndexMap<String, Spanned<SelectorDecl>>,
    /// `file.rhai::typed`: `typed(text)` turns a line a person typed into the turn's input map.
    #[schemars(with = "Option<String>")]
    pub typed: Option<SpannedStr>,
    /// Lobby rounds: a turn gathers one input per player.
    #[schemars(with = "Option<LobbyDecl>")]
    pub lobby: Option<Spanned<LobbyDecl>>,
    /// How long a finished session is kept (`1h`, `7d`, `never`); the host's setting when absent.
    #[schemars(with = "Option<String>")]
    pub expire_finished_after: Option<SpannedStr>,
    /// What `ruleweave simulate` reports of each simulated game.
    #[schemars(with = "Option<SimulateDecl>")]
    pub simulate: Option<Spanned<SimulateDecl>>,
    /// Variants of the rules given to shares of the players, each sticking to its players.
    #[schemars(with = "Option<ExperimentDecl>")]
    pub experiment: Option<Spanned<ExperimentDecl>>,
    pub graph: GraphDecl,
}

/// An experiment: variants of the pack's `params:` numbers, each given to a share of the players
/// by its weight; the variant that sets no params is the control.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExperimentDecl {
    /// Its name: a new name places every player afresh.
    #[schemars(with = "String")]
    pub name: SpannedStr,
    /// Variant name → its weight and the numbers it sets (`lenient: {weight: 20, params:
    /// {thresholds.medium: 55}}`).
    #[schemars(with = "IndexMap<String, VariantDecl>")]
    pub variants: IndexMap<String, Spanned<VariantDecl>>,
}

/// One variant of an experiment.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VariantDecl {
    /// Its weight, 0 or more: its share of new players is its weight over the sum of all.
    #[schemars(with = "f64")]
    pub weight: Spanned<f64>,
    /// Numbers of `params:` by dotted path, each within its `param_bounds:`; none for the control.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, serde_json::Value>")]
    pub params: IndexMap<String, Spanned<serde_json::Value>>,
}

/// The range of a number in `params:`: either end may be left open.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoundsDecl {
    /// The least value a run may give it.
    pub min: Option<f64>,
    /// The most value a run may give it.
    pub max: Option<f64>,
}

/// What `ruleweave simulate` reports of each game its scripted players play.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SimulateDecl {
    /// The state field whose value at the end is the game's outcome (`outcome`); without it, a
    /// game's outcome is `finished` or `unfinished`.
    pub outcome: Option<String>,
    /// The values the outcome field may end a game with (`tune` refuses a target none of them
    /// matches; `unfinished` need not be listed).
    #[serde(default)]
    pub outcomes: Vec<String>,
    /// Number fields whose values at the end are reported (median, p10, p90).
    #[serde(default)]
    pub track: Vec<String>,
    /// The most turns a game is played for (20 when absent).
    pub max_turns: Option<u32>,
    /// A line to draw on a tracked field's chart, as a template over the session's state
    /// (`merit_score: "{{ params.thresholds[difficulty] }}"`: the score the game is won at).
    #[serde(default)]
    #[schemars(with = "IndexMap<String, String>")]
    pub thresholds: IndexMap<String, SpannedStr>,
}

/// Lobby rounds: each player posts their own input; the round's turn runs when every player has
/// answered, or `timeout` after the round's question was asked.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LobbyDecl {
    /// A list state field: the players' names.
    #[schemars(with = "String")]
    pub players: SpannedStr,
    /// An int state field: the round being answered.
    #[schemars(with = "String")]
    pub round: SpannedStr,
    /// A map input field: the round's answers, player → answer.
    #[schemars(with = "String")]
    pub answers: SpannedStr,
    /// The answers allowed (any value when absent).
    pub values: Option<Vec<serde_json::Value>>,
    /// A list input field: who joins (joining is refused when absent).
    #[schemars(with = "Option<String>")]
    pub join: Option<SpannedStr>,
    /// A list input field: who leaves (leaving is refused when absent).
    #[schemars(with = "Option<String>")]
    pub leave: Option<SpannedStr>,
    /// How long a round waits after its question was asked (`30s`).
    #[schemars(with = "String")]
    pub timeout: SpannedStr,
    /// At most this many players (joins past it are refused).
    pub max_players: Option<usize>,
    /// The longest a player's name may be (default 40 characters).
    pub max_name: Option<usize>,
}

/// A data table: a file of rows, its typed columns, the column naming rows, shared counters.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableDecl {
    /// `questions.yaml` (a list of maps) or `questions.csv` (a header row), in `data/<pack>/`.
    #[schemars(with = "String")]
    pub file: SpannedStr,
    /// The column whose values name rows (default: `id`).
    #[schemars(with = "Option<String>")]
    pub key: Option<SpannedStr>,
    /// Column → type (`int`), or `{type, default}` for a column rows may leave out.
    #[schemars(with = "IndexMap<String, serde_json::Value>")]
    pub columns: IndexMap<String, Spanned<serde_json::Value>>,
    /// Numbers per row shared by every session of the pack (`times_used`), kept in the store.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub counters: Vec<SpannedStr>,
    #[serde(default)]
    pub doc: String,
}

/// A selector: strategies make candidates, veto scorers reject, weighted scorers rank.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SelectorDecl {
    /// The phases in order, each lasting `turns` turns; the last (or one without `turns`) lasts
    /// the rest.
    #[schemars(with = "Vec<PhaseDecl>")]
    pub phases: Vec<Spanned<PhaseDecl>>,
    /// An int state field holding the turn count that picks the phase (default: the turns done
    /// before this one).
    #[schemars(with = "Option<String>")]
    pub turn_field: Option<SpannedStr>,
    #[schemars(with = "Vec<StrategyDecl>")]
    pub strategies: Vec<Spanned<StrategyDecl>>,
    /// phase → strategy → multiplier; strategies a phase does not name get 1.0.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, IndexMap<String, f64>>")]
    pub phase_profiles: IndexMap<String, Spanned<IndexMap<String, f64>>>,
    /// Tier 1: any veto rejects the candidate; the first veto ends its checks.
    #[serde(default)]
    #[schemars(with = "Vec<ScorerDecl>")]
    pub vetoes: Vec<Spanned<ScorerDecl>>,
    /// Tier 2: Σ weight × raw score, raw scores in [0, 2].
    #[serde(default)]
    #[schemars(with = "Vec<ScorerDecl>")]
    pub scorers: Vec<Spanned<ScorerDecl>>,
    /// Which implementation scorers that have both use (default `script`).
    #[serde(rename = "impl")]
    pub implementation: Option<ScorerImpl>,
    /// Embeddings for `similarity` while the selector scores (lexical without).
    #[schemars(with = "Option<SimilarityDecl>")]
    pub similarity: Option<Spanned<SimilarityDecl>>,
    /// The strategy that answers when every candidate is vetoed: its first candidate (vetoed or
    /// not), or its first focus. Without one, such a decision has no winner.
    #[schemars(with = "Option<String>")]
    pub fallback: Option<SpannedStr>,
}

/// Embeddings a selector makes before scoring, so `similarity` compares meanings, not words.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SimilarityDecl {
    /// The `llm:` profile whose model embeds.
    #[schemars(with = "String")]
    pub embed: SpannedStr,
    /// State fields (strings or lists of strings) whose texts get vectors, beside every
    /// candidate's focus description.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub texts: Vec<SpannedStr>,
    /// Only the last `last` items of each list field (default: all of them).
    #[schemars(with = "Option<usize>")]
    pub last: Option<Spanned<usize>>,
    /// When to embed, written like a route's `when` (default: always).
    #[schemars(with = "Option<String>")]
    pub when: Option<SpannedStr>,
}

/// A phase of a selector.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PhaseDecl {
    pub name: String,
    pub turns: Option<u64>,
}

/// A strategy: every enabled one is a candidate, once per focus its generator makes.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StrategyDecl {
    pub id: String,
    pub name: Option<String>,
    pub type_category: Option<String>,
    pub prompt_hint: Option<String>,
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// `open` (one focus on nothing in particular) or `file.rhai::fn`: `fn(strategy) -> [focus]`.
    #[schemars(with = "String")]
    pub focus: SpannedStr,
    /// The name a host registered the generator's Rust twin under; the selector's `impl` picks
    /// which runs.
    #[schemars(with = "Option<String>")]
    pub focus_native: Option<SpannedStr>,
}

fn enabled() -> bool {
    true
}

/// A scorer: a Rhai function, a registered native one, or both (the selector's `impl` picks).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScorerDecl {
    pub id: String,
    /// `file.rhai::fn`: `fn(candidate, params)` with the state as `this`.
    #[schemars(with = "Option<String>")]
    pub script: Option<SpannedStr>,
    /// The script scores every candidate in one call: `fn(candidates, params)` gets the list of
    /// candidates still in the running and returns one result per candidate, in order.
    #[serde(default)]
    pub batch: bool,
    /// The name a host registered the native twin under.
    #[schemars(with = "Option<String>")]
    pub native: Option<SpannedStr>,
    #[serde(rename = "impl")]
    pub implementation: Option<ScorerImpl>,
    /// Tier 2 only.
    pub weight: Option<f64>,
    #[serde(default = "enabled")]
    pub enabled: bool,
    #[serde(default)]
    pub params: IndexMap<String, serde_json::Value>,
}

/// A session option (`difficulty`), chosen when the session opens.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OptionDecl {
    #[serde(rename = "type")]
    pub ty: Option<TypeName>,
    pub values: Option<Vec<serde_json::Value>>,
    pub default: Option<serde_json::Value>,
    #[serde(default)]
    pub description: String,
    /// The most characters a session may give this option (a text), or the most bytes of its
    /// JSON (anything else); 1,000 and 10,000 by default. Options reach prompts: a client must
    /// not make every call of a session pay for a 50,000-character persona.
    pub max_length: Option<usize>,
    /// The fewest characters of a text option (spaces at its ends aside).
    pub min_length: Option<usize>,
    /// The least a number option may be.
    pub min: Option<f64>,
    /// The most a number option may be.
    pub max: Option<f64>,
    /// The option names a model a session chooses (a debater's): when the host limits the models
    /// sessions may choose, one outside the pack's own and those it allows is refused as the
    /// session is made, naming what is allowed.
    #[serde(default)]
    pub model: bool,
}

/// An LLM profile: which model, how it is asked.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProfileDecl {
    #[schemars(with = "ModelDecl")]
    pub model: Spanned<ModelDecl>,
    /// A named OpenAI-compatible provider (`groq`: `GROQ_API_KEY`, `GROQ_BASE_URL`).
    #[schemars(with = "Option<String>")]
    pub provider: Option<SpannedStr>,
    /// The model to ask when `provider` is not set up and the default provider answers.
    pub default_model: Option<String>,
    /// Other models the pack's own scripts ask this profile for (a debater's vendor's model,
    /// through `llm_chat`'s settings): allowed wherever the profile's own model is.
    #[serde(default)]
    pub other_models: Vec<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub json: bool,
    #[serde(default)]
    pub description: String,
}

/// A model name, or one name per value of a session option.
#[derive(Debug)]
pub(crate) enum ModelDecl {
    Fixed(String),
    /// `{difficulty: {easy: gpt-3.5-turbo, ...}}`: exactly one option name as the key.
    ByOption(IndexMap<String, IndexMap<String, String>>),
}

impl schemars::JsonSchema for ModelDecl {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ModelDecl".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A model name, or one per value of a session option: {option: {value: model}}.",
            "anyOf": [
                {"type": "string"},
                {"type": "object", "minProperties": 1, "maxProperties": 1,
                 "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}}}
            ]
        })
    }
}

impl<'de> Deserialize<'de> for ModelDecl {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ModelDecl;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a model name, or a map {option: {value: model}}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ModelDecl, E> {
                Ok(ModelDecl::Fixed(v.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ModelDecl, A::Error> {
                Deserialize::deserialize(de::value::MapAccessDeserializer::new(map)).map(ModelDecl::ByOption)
            }
        }
        d.deserialize_any(V)
    }
}

/// A state field: its type, first value and reducer.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FieldDecl {
    #[serde(rename = "type")]
    pub ty: TypeName,
    pub default: Option<serde_json::Value>,
    #[serde(default)]
    pub reducer: Reducer,
    /// What a fork of a session holds here: `keep`, the parent's value (the default), or `init`,
    /// the value the pack's `init` gives the new session (its id, anything that must not be
    /// shared with the parent).
    #[serde(default)]
    pub fork: ForkPolicy,
    #[serde(default)]
    pub doc: String,
}

/// What a fork of a session holds in a state field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ForkPolicy {
    /// The parent's value.
    #[default]
    Keep,
    /// The value the pack's `init` gives the new session.
    Init,
}

/// A field of a turn's input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InputDecl {
    #[serde(rename = "type")]
    pub ty: TypeName,
    #[serde(default)]
    pub required: bool,
    pub default: Option<serde_json::Value>,
    /// For strings: the most characters accepted; for lists: the most items.
    pub max_length: Option<usize>,
    #[serde(default)]
    pub doc: String,
}

/// When a session is over, and what to say to a turn that comes after.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FinishDecl {
    /// A bool state field; the session is finished once it is true.
    #[schemars(with = "String")]
    pub when: SpannedStr,
    pub message: String,
}

/// How `play` shows a turn: minijinja templates over the state.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DisplayDecl {
    #[schemars(with = "Option<String>")]
    pub reply: Option<SpannedStr>,
    #[schemars(with = "Option<String>")]
    pub status: Option<SpannedStr>,
    #[schemars(with = "Option<String>")]
    pub details: Option<SpannedStr>,
    #[schemars(with = "Option<String>")]
    pub finished: Option<SpannedStr>,
    /// Nodes whose model replies a console shows token by token as they stream.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub stream: Vec<SpannedStr>,
    /// A regular expression: a streamed reply shows only what follows its first match (the
    /// speech after a `PHASE 3 - REFINEMENT:` heading, not the reasoning before it).
    #[schemars(with = "Option<String>")]
    pub stream_from: Option<SpannedStr>,
    /// The state field that names who speaks, read as a streamed node starts.
    #[schemars(with = "Option<String>")]
    pub speaker: Option<SpannedStr>,
    /// What the reply says before the first turn: a `question` the player's first input answers
    /// (the default), or a `hint` of what to type, whose answer is the game's first input.
    #[serde(default)]
    pub opening: super::OpeningKind,
    /// An input every face plays as soon as a session opens, for a pack whose first turn needs no
    /// answer from the player (a party's `{}` that asks the first question).
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub play_on_open: Option<Spanned<serde_json::Value>>,
    /// What to type, in one line, for every face to show a player: under the terminal's
    /// opening, as the console's placeholder, in the chat face's opening and refusals
    /// (`4/6, all, none, names of those who have; +name joins, -name leaves`).
    #[schemars(with = "Option<String>")]
    pub input_help: Option<SpannedStr>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GraphDecl {
    pub recursion_limit: Option<u32>,
    /// `turn` (default): one checkpoint per turn; `step`: one after every step as well, so a
    /// crash in a long turn resumes from the last finished step.
    #[serde(default)]
    pub checkpoint: CheckpointEvery,
    #[schemars(with = "IndexMap<String, NodeDecl>")]
    pub nodes: IndexMap<String, Spanned<NodeDecl>>,
    #[schemars(with = "Vec<String>")]
    pub edges: Vec<SpannedStr>,
    #[serde(default)]
    #[schemars(with = "IndexMap<String, RouteDecl>")]
    pub routes: IndexMap<String, Spanned<RouteDecl>>,
    /// Pause points: node → a condition; when the node finishes and the condition holds, the
    /// turn stops there and the next turn goes on from where it stopped.
    #[serde(default)]
    #[schemars(with = "IndexMap<String, String>")]
    pub pause_after: IndexMap<String, SpannedStr>,
}

/// How often a turn is checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CheckpointEvery {
    #[default]
    Turn,
    Step,
}

/// A conditional route out of a node: a list of cases, or a script function.
#[derive(Debug)]
pub(crate) enum RouteDecl {
    Cases(Vec<CaseDecl>),
    Script(ScriptRouteDecl),
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaseDecl {
    /// A Rhai expression over `this` (the state); absent on the last, default case.
    #[schemars(with = "Option<String>")]
    pub when: Option<SpannedStr>,
    /// A node name or END; several names separated by commas fan out.
    #[schemars(with = "String")]
    pub to: SpannedStr,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScriptRouteDecl {
    #[serde(rename = "fn")]
    #[schemars(with = "String")]
    pub func: SpannedStr,
    /// Every node the function may name (END included), for validation and diagrams.
    #[schemars(with = "Vec<String>")]
    pub to: Vec<SpannedStr>,
}

impl schemars::JsonSchema for RouteDecl {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RouteDecl".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let cases = generator.subschema_for::<Vec<CaseDecl>>();
        let script = generator.subschema_for::<ScriptRouteDecl>();
        schemars::json_schema!({
            "description": "A list of cases ({when, to}; the last without `when`), or a script: {fn, to}.",
            "anyOf": [cases, script]
        })
    }
}

impl<'de> Deserialize<'de> for RouteDecl {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RouteDecl;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of cases ({when, to}) or a map {fn, to}")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RouteDecl, A::Error> {
                Deserialize::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(RouteDecl::Cases)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RouteDecl, A::Error> {
                Deserialize::deserialize(de::value::MapAccessDeserializer::new(map)).map(RouteDecl::Script)
            }
        }
        d.deserialize_any(V)
    }
}

/// The JSON Schema of a manifest, from the types the loader reads it into (node kinds from their
/// table), for editors with a YAML language server (`docs/manifest.schema.json`).
pub fn manifest_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(Manifest).to_value();
    if let Some(o) = schema.as_object_mut() {
        o.insert("title".into(), "ruleweave pack manifest (config/<pack>.yaml)".into());
    }
    schema
}
