//! Host functions: everything a script may do beyond pure computation, registered from one table
//! with its documentation beside it (the pack author's reference is generated from this table).
//!
//! Functions that need the running turn (input, options, randomness, events, models) find it in the
//! call's tag; outside a turn (while a library loads) they fail with a message saying so.
//!
//! Pack scripts compile with Rhai's `OptimizationLevel::Full`, which calls a function whose
//! arguments are all constants while compiling and keeps the result. So each function says
//! whether it is `volatile`: one that reads the turn or anything that changes (input, options,
//! params, time, randomness, counters, models, embeddings), has a side effect (events, logs) or
//! takes the call's context is registered as volatile and never folded; the rest (text, JSON,
//! numbers) depend on their arguments alone, and a constant call of one is worked out once.

use std::sync::Arc;

use rhai::{Array, Dynamic, Engine, EvalAltResult, FLOAT, INT, ImmutableString, Map, NativeCallContext};

use crate::event::Event;
use crate::llm::Message;
use crate::text;
pub(crate) use crate::turn::TurnCtx;
use crate::value;

mod models;
mod reg;
mod shared;
mod tables;
mod tag;

use models::{as_messages, ask, ask_with, thrown, web_search};
use reg::Reg;
pub(crate) use shared::HostShared;
use shared::{Folded, phrases};
use tables::{bump, schema_of, table_of};
pub(crate) use tag::CallTag;
use tag::{below, embeddings, random_f64, str_list, with_turn};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// One host function: its name, signature and documentation, and how it is registered.
pub struct HostFn {
    /// The name scripts call.
    pub name: &'static str,
    /// Its signature(s), as the pack author's reference shows them.
    pub signature: &'static str,
    /// What it does.
    pub doc: &'static str,
    /// Whether a call may give another result for the same arguments, or does something: never
    /// worked out while compiling (see the module's documentation).
    pub volatile: bool,
    register: fn(&mut Reg<'_>, &Arc<HostShared>),
}

/// Every host function, in the order the reference lists them.
pub fn host_functions() -> &'static [HostFn] {
    HOST_FUNCTIONS
}

pub(crate) fn register_all(engine: &mut Engine, shared: &Arc<HostShared>) {
    for f in HOST_FUNCTIONS {
        (f.register)(&mut Reg { engine, name: f.name, volatile: f.volatile }, shared);
    }
}

static HOST_FUNCTIONS: &[HostFn] = &[
    // ---- the turn -------------------------------------------------------------------------
    HostFn {
        name: "input",
        volatile: true,
        signature: "input() -> map",
        doc: "This turn's input, as the pack's `input:` section declares it.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| with_turn(&ctx, |t| Ok(t.turn.input.clone())));
        },
    },
    HostFn {
        name: "option",
        volatile: true,
        signature: "option(name: string) -> value",
        doc: "The session's value of an option (`option(\"difficulty\")`).",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, name: &str| {
                with_turn(&ctx, |t| {
                    t.turn.options.get(name).cloned().ok_or_else(|| {
                        let known: Vec<&str> = t.turn.options.keys().map(|k| k.as_str()).collect();
                        format!("unknown option `{name}` (options: {})", known.join(", ")).into()
                    })
                })
            });
        },
    },
    HostFn {
        name: "param",
        volatile: true,
        signature: "param(name: string) -> value",
        doc: "A parameter from the pack's `params:` section (`param(\"thresholds\")`).",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |name: &str| -> RhaiResult<Dynamic> {
                shared.params.get(name).cloned().ok_or_else(|| {
                    let known: Vec<&str> = shared.params.keys().map(|k| k.as_str()).collect();
                    format!("unknown parameter `{name}` (params: {})", known.join(", ")).into()
                })
            });
        },
    },
    HostFn {
        name: "session_id",
        volatile: true,
        signature: "session_id() -> string",
        doc: "The id of the running session.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| with_turn(&ctx, |t| Ok(t.turn.session_id.to_string())));
        },
    },
    HostFn {
        name: "turn_number",
        volatile: true,
        signature: "turn_number() -> int",
        doc: "The number of the running turn: 1 for a session's first turn, 0 while a session opens.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| with_turn(&ctx, |t| Ok(t.turn.turn as INT)));
        },
    },
    HostFn {
        name: "now",
        volatile: true,
        signature: "now() -> int",
        doc: "When the turn began, in unix milliseconds: the same for every call in a turn, recorded \
              with the turn so a replay sees the same time.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| with_turn(&ctx, |t| Ok(t.turn.now_ms as INT)));
        },
    },
    // ---- prompts and models ---------------------------------------------------------------
    HostFn {
        name: "render",
        volatile: true,
        signature: "render(template: string, vars: map) -> string",
        doc: "Renders `prompts/<pack>/<template>` with `vars` at the top level, plus `params`, \
              `options` and `input`. State fields are not visible unless passed in `vars`.",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, name: &str, vars: Map| {
                with_turn(&ctx, |t| {
                    shared
                        .prompts
                        .render_vars(name, &vars, &t.turn.options, &t.turn.input)
                        // The template's own place goes into the words; the script's is the call.
                        .map_err(|e| thrown(crate::error::Error::new(e.kind(), e.to_string())))
                })
            });
        },
    },
    HostFn {
        name: "llm",
        volatile: true,
        signature: "llm(profile: string, prompt: string) -> string",
        doc: "Asks the profile's model with `prompt` as the user message and returns its reply. A \
              script that calls a model runs on a thread that may wait; call it by name (a call \
              through a function pointer is refused).",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, profile: &str, prompt: &str| {
                ask(&ctx, &shared, profile, vec![Message::new("user", prompt)])
            });
        },
    },
    HostFn {
        name: "llm_json",
        volatile: true,
        signature: "llm_json(profile: string, prompt: string) -> value",
        doc: "Like `llm`, and parses the reply as JSON (fenced or surrounded by prose); throws when \
              the reply holds no valid JSON, so a caller can fall back.",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, profile: &str, prompt: &str| -> RhaiResult<Dynamic> {
                let reply = ask(&ctx, &shared, profile, vec![Message::new("user", prompt)])?;
                value::parse_json_reply(&reply).map(|v| value::from_json(&v)).map_err(|e| e.into())
            });
        },
    },
    HostFn {
        name: "llm_chat",
        volatile: true,
        signature: "llm_chat(profile: string, messages: array [, settings: map]) -> string",
        doc: "Asks the profile's model with a whole conversation: an array of `#{role, content}` \
              with roles `system`, `user`, `assistant`. `settings` replaces some of the profile's for \
              this call: `#{model, provider, temperature, max_tokens, json}` (a debater's vendor and model: \
              `provider` names a provider as a profile's `provider:` does, and when it is not set up the default \
              provider answers with the profile's own model).",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, profile: &str, messages: Array| {
                let messages = as_messages(&messages)?;
                ask(&ctx, &s, profile, messages)
            });
            let shared = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, profile: &str, messages: Array, settings: Map| {
                let messages = as_messages(&messages)?;
                ask_with(&ctx, &shared, profile, messages, &settings)
            });
        },
    },
    HostFn {
        name: "last_call",
        volatile: true,
        signature: "last_call() -> map",
        doc: "The last model call the running node made in this turn: `#{model, provider, prompt_tokens, \
              completion_tokens, latency_ms, attempts}` (`()` before any), to record what a reply cost.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| -> RhaiResult<Dynamic> {
                with_turn(&ctx, |tag| {
                    let Some(c) = tag.turn.last_call(&tag.node) else { return Ok(Dynamic::UNIT) };
                    let mut m = Map::new();
                    m.insert("model".into(), c.model.into());
                    m.insert("provider".into(), c.provider.into());
                    m.insert("prompt_tokens".into(), Dynamic::from_int(c.prompt_tokens.into()));
                    m.insert("completion_tokens".into(), Dynamic::from_int(c.completion_tokens.into()));
                    m.insert("latency_ms".into(), Dynamic::from_float(c.latency_ms));
                    m.insert("attempts".into(), Dynamic::from_int(c.attempts.into()));
                    Ok(Dynamic::from_map(m))
                })
            });
        },
    },
    HostFn {
        name: "search",
        volatile: true,
        signature: "search(query: string [, max_results: int]) -> array",
        doc: "Searches the web (Tavily with `TAVILY_API_KEY`, else the pack's `search_standin:`): \
              `[#{title, url, content, score}]`, at most `max_results` (default 5, at most 20). Timed \
              out and retried like a model call, counted against `max_llm_calls`, a `search` event, and \
              recorded with the turn's model exchanges. Throws when the search fails, so a caller can \
              go on without it. Like `llm`, a script calling it runs on a thread that may wait.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, query: &str| web_search(&ctx, query, 5));
            e.register_fn(|ctx: NativeCallContext<'_>, query: &str, max: INT| {
                web_search(&ctx, query, max.clamp(1, 20) as usize)
            });
        },
    },
    HostFn {
        name: "tokens_spent",
        volatile: true,
        signature: "tokens_spent() -> map",
        doc: "The tokens this turn's model calls have spent so far, per node: `#{node: #{calls, \
              prompt_tokens, completion_tokens}}` (a map node's items counted together; the stand-in's \
              are estimates).",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| -> RhaiResult<Map> {
                with_turn(&ctx, |tag| {
                    let mut out = Map::new();
                    for (node, calls, prompt, completion) in tag.turn.tokens_by_node() {
                        let mut m = Map::new();
                        m.insert("calls".into(), Dynamic::from_int(calls.into()));
                        m.insert("prompt_tokens".into(), Dynamic::from_int(prompt as INT));
                        m.insert("completion_tokens".into(), Dynamic::from_int(completion as INT));
                        out.insert(node.into(), Dynamic::from_map(m));
                    }
                    Ok(out)
                })
            });
        },
    },
    // ---- JSON Schemas -----------------------------------------------------------------------
    HostFn {
        name: "schema_errors",
        volatile: false,
        signature: "schema_errors(schema: string, value) -> array",
        doc: "What is wrong with `value` against one of the pack's `schemas:`, one string per \
              problem (`/scenes/0/mechanics: [] has less than 1 item`); empty when it is valid.",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |name: &str, v: Dynamic| -> RhaiResult<Array> {
                let s = schema_of(&shared, name)?;
                Ok(s.errors(&value::to_json(&v)).into_iter().map(Dynamic::from).collect())
            });
        },
    },
    HostFn {
        name: "with_defaults",
        volatile: false,
        signature: "with_defaults(schema: string, value) -> value",
        doc: "`value` with the `default` of every property the schema gives one and `value` leaves \
              out filled in, at every depth (what a model's reply to that schema gets before `then`).",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |name: &str, v: Dynamic| -> RhaiResult<Dynamic> {
                let s = schema_of(&shared, name)?;
                let mut json = value::to_json(&v);
                s.with_defaults(&mut json);
                Ok(value::from_json(&json))
            });
        },
    },
    // ---- data tables ----------------------------------------------------------------------
    HostFn {
        name: "query",
        volatile: true,
        signature: "query(table: string, query: map) -> array",
        doc: "Rows of one of the pack's `data:` tables, as maps (counters included): `#{where: \
              #{field: value, field: #{between: [lo, hi]}, field: #{in: [...]}, field: #{not_in: \
              [...]}}, order: [\"field\", \"-field\", #{near: \"field\", to: n}, \"random\"], limit: n}`, \
              every part optional. `random` breaks ties the same way when a turn is replayed.",
        register: |e, shared| {
            let shared = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, table: &str, q: Map| -> RhaiResult<Array> {
                let t = table_of(&shared, table)?;
                with_turn(&ctx, |tag| {
                    let counts = tag.turn.counts(table);
                    t.query(&q, counts.as_deref(), tag.turn.random_u64()).map_err(thrown)
                })
            });
        },
    },
    HostFn {
        name: "count",
        volatile: true,
        signature: "count(table: string, key: string [, counter: string, by: int])",
        doc: "Adds 1 (or `by`) to a row's counter (the table's first, or `counter`), shared by every \
              session of the pack: counted when the turn commits, never when it is undone.",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, table: &str, key: &str| {
                bump(&ctx, &s, table, key, None, 1)
            });
            let s = shared.clone();
            e.register_fn(move |ctx: NativeCallContext<'_>, table: &str, key: &str, counter: &str, by: INT| {
                bump(&ctx, &s, table, key, Some(counter), by)
            });
        },
    },
    // ---- text -----------------------------------------------------------------------------
    HostFn {
        name: "fold",
        volatile: false,
        signature: "fold(text: string) -> string",
        doc: "Lowercase without diacritics: `fold(\"Załoga\") == \"zaloga\"`.",
        register: |e, _| {
            e.register_fn(|s: &str| text::fold(s));
        },
    },
    HostFn {
        name: "words",
        volatile: false,
        signature: "words(text: string [, min_chars: int]) -> array",
        doc: "The folded words of `text` (runs of letters and digits); with `min_chars`, only the words \
              that long or longer.",
        register: |e, _| {
            e.register_fn(|s: &str| -> Array {
                text::words(&text::fold(s)).map(|w| Dynamic::from(w.to_owned())).collect()
            });
            e.register_fn(|s: &str, min: INT| -> Array {
                let min = min.max(0) as usize;
                text::words(&text::fold(s))
                    .filter(|w| w.chars().count() >= min)
                    .map(|w| Dynamic::from(w.to_owned()))
                    .collect()
            });
        },
    },
    HostFn {
        name: "words_without",
        volatile: false,
        signature: "words_without(text: string, skip: string | array) -> string",
        doc: "The folded words of `text` but those of `skip` (a text, or a list of words), joined by \
              spaces: `words_without(\"What else about oat milk?\", \"oat milk\")` is `\"what else about\"`.",
        register: |e, _| {
            e.register_fn(|s: &str, skip: &str| -> String {
                let skip = text::fold(skip);
                let skip: Vec<&str> = text::words(&skip).collect();
                text::words_without(s, &skip)
            });
            e.register_fn(|s: &str, skip: Array| -> String {
                let skip: Vec<String> = skip.iter().map(|w| text::fold(&w.to_string())).collect();
                let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
                text::words_without(s, &skip)
            });
        },
    },
    HostFn {
        name: "distinct",
        volatile: false,
        signature: "distinct(list: array) -> array",
        doc: "The items of `list` without repeats, in the order they first appear.",
        register: |e, _| {
            e.register_fn(|list: Array| -> Array {
                // Strings (the usual items) are compared as they are; anything else by its JSON.
                let mut strings = std::collections::HashSet::<_, foldhash::fast::RandomState>::default();
                let mut others = std::collections::HashSet::<_, foldhash::fast::RandomState>::default();
                list.into_iter()
                    .filter(|v| match v.read_lock::<ImmutableString>() {
                        Some(s) => strings.insert(s.clone()),
                        None => others.insert(crate::value::to_json(v).to_string()),
                    })
                    .collect()
            });
        },
    },
    HostFn {
        name: "word_count",
        volatile: false,
        signature: "word_count(text: string) -> int",
        doc: "How many whitespace-separated words `text` has.",
        register: |e, _| {
            e.register_fn(|s: &str| text::word_count(s) as INT);
        },
    },
    HostFn {
        name: "truncate_words",
        volatile: false,
        signature: "truncate_words(text: string, limit: int) -> string",
        doc: "The first `limit` words of `text`.",
        register: |e, _| {
            e.register_fn(|s: &str, n: INT| text::truncate_words(s, n.max(0) as usize));
        },
    },
    HostFn {
        name: "labelled",
        volatile: false,
        signature: "labelled(text: string, label: string) -> array",
        doc: "What follows `label` on each line of `text` that starts with it, in order: \
              `labelled(prompt, \"Player: \")` is every line a transcript gives the player. How a stand-in \
              model reads the parts of its prompt without a loop over its lines.",
        register: |e, _| {
            e.register_fn(|text: &str, label: &str| -> Array {
                text.lines()
                    .filter_map(|line| line.strip_prefix(label))
                    .map(|rest| Dynamic::from(rest.to_owned()))
                    .collect()
            });
        },
    },
    HostFn {
        name: "keywords_found",
        volatile: false,
        signature: "keywords_found(text: string, table: string | map) -> array",
        doc: "The names in a keyword table (a map of name → list of keywords, or the name of a \
              parameter holding one) with a keyword in `text`, in alphabetical order. Matching ignores case \
              and diacritics; a keyword matches at the start of a word, so stems work (`zalog` \
              finds `załogi`).",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |t: &str, table: &str| -> RhaiResult<Array> {
                match s.folded.get(table) {
                    Some(Folded::Table(names, set)) => {
                        let found = set.found(&text::fold(t));
                        Ok(names
                            .iter()
                            .zip(found)
                            .filter(|(_, f)| *f)
                            .map(|(name, _)| Dynamic::from(name.clone()))
                            .collect())
                    }
                    _ => {
                        Err(format!("parameter `{table}` is not a keyword table (a map of name → list of keywords)")
                            .into())
                    }
                }
            });
            e.register_fn(|t: &str, table: Map| -> RhaiResult<Array> {
                let t = text::fold(t);
                let mut found = Array::new();
                for (name, kws) in &table {
                    let kws = phrases(kws).ok_or("a keyword table maps names to lists of strings")?;
                    if kws.iter().any(|k| text::has_phrase(&t, k)) {
                        found.push(Dynamic::from(name.to_string()));
                    }
                }
                Ok(found)
            });
        },
    },
    HostFn {
        name: "contains_any",
        volatile: false,
        signature: "contains_any(text: string, phrases: array | string) -> bool",
        doc: "Whether any phrase (a list, or the name of a parameter holding one) occurs in `text`, \
              ignoring case and diacritics, at the start of a word.",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |t: &str, list: &str| -> RhaiResult<bool> {
                match s.folded.get(list) {
                    Some(Folded::List(set)) => Ok(set.found(&text::fold(t))[0]),
                    _ => Err(format!("parameter `{list}` is not a list of phrases").into()),
                }
            });
            e.register_fn(|t: &str, list: Array| -> RhaiResult<bool> {
                Ok(text::contains_any(t, str_list(&list, "phrases")?.iter().map(|p| p.as_str())))
            });
        },
    },
    HostFn {
        name: "matches",
        volatile: false,
        signature: "matches(text: string, pattern: string) -> bool",
        doc: "Whether the regular expression `pattern` (case-insensitive, linear-time) matches `text`.",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |t: &str, p: &str| -> RhaiResult<bool> { Ok(s.regex(p)?.is_match(t)) });
        },
    },
    HostFn {
        name: "after_match",
        volatile: false,
        signature: "after_match(text: string, pattern: string) -> string | ()",
        doc: "What follows the first match of the regular expression `pattern` (case-insensitive) in `text`, or `()` \
              when it does not match: `after_match(\"**Phase 3: Refinement:** Friends\", \"refinement[*:\\\\s]*\")` is \
              \"Friends\". For reading a model's reply by its headings.",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |t: &str, p: &str| -> RhaiResult<Dynamic> {
                Ok(s.regex(p)?.find(t).map_or(Dynamic::UNIT, |m| Dynamic::from(t[m.end()..].to_owned())))
            });
        },
    },
    HostFn {
        name: "matches_any",
        volatile: false,
        signature: "matches_any(text: string, patterns: array | string) -> bool",
        doc: "Whether any of the patterns (a list, or the name of a parameter holding one) matches.",
        register: |e, shared| {
            let s = shared.clone();
            e.register_fn(move |t: &str, list: Array| -> RhaiResult<bool> {
                for p in str_list(&list, "patterns")? {
                    if s.regex(&p)?.is_match(t) {
                        return Ok(true);
                    }
                }
                Ok(false)
            });
            let s = shared.clone();
            e.register_fn(move |t: &str, name: &str| -> RhaiResult<bool> { Ok(s.regex_set(name)?.is_match(t)) });
        },
    },
    HostFn {
        name: "similarity",
        volatile: true,
        signature: "similarity(a: string, b: string) -> float",
        doc: "Similarity in [0, 1]. Lexical (the cosine of the two texts' folded word counts), except \
              in the scorers of a selector with `similarity:` embeddings: there two texts that both \
              have vectors (focus descriptions, the texts it names) compare by the cosine of those.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, a: &str, b: &str| {
                text::similarity_in(embeddings(&ctx).as_deref(), a, b) as FLOAT
            });
        },
    },
    HostFn {
        name: "max_similarity",
        volatile: true,
        signature: "max_similarity(text: string, others: array) -> float",
        doc: "The highest `similarity` of `text` to any of `others` (0.0 when there are none): is this \
              what was said before?",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, t: &str, others: Array| -> RhaiResult<FLOAT> {
                let others = str_list(&others, "others")?;
                let e = embeddings(&ctx);
                Ok(text::max_similarity_in(e.as_deref(), t, others.iter().map(|o| o.as_str())) as FLOAT)
            });
        },
    },
    HostFn {
        name: "max_similarity_to_earlier",
        volatile: true,
        signature: "max_similarity_to_earlier(texts: array) -> array",
        doc: "For each of `texts`, its highest `similarity` to any text before it (0.0 for the first): \
              `max_similarity(texts[i], texts.extract(0, i))` for every i, each text read once. How much \
              each message of a conversation repeats the earlier ones.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, texts: Array| -> RhaiResult<Array> {
                let texts = str_list(&texts, "texts")?;
                let texts: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
                let e = embeddings(&ctx);
                Ok(text::max_similarity_to_earlier_in(e.as_deref(), &texts)
                    .into_iter()
                    .map(|s| Dynamic::from_float(s as FLOAT))
                    .collect())
            });
        },
    },
    HostFn {
        name: "similarity_kind",
        volatile: true,
        signature: "similarity_kind() -> string",
        doc: "`\"embedding\"` while a selector's scorers run with embeddings (`similarity:` on, and the \
              call succeeded), else `\"lexical\"`: the two have different scales, so a threshold can \
              depend on it.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| -> ImmutableString {
                if embeddings(&ctx).is_some() { "embedding".into() } else { "lexical".into() }
            });
        },
    },
    HostFn {
        name: "parse_json",
        volatile: false,
        signature: "parse_json(text: string) -> value",
        doc: "Parses JSON (also inside a ```json fence or surrounded by prose); throws when there is none.",
        register: |e, _| {
            e.register_fn(|s: &str| -> RhaiResult<Dynamic> {
                value::parse_json_reply(s).map(|v| value::from_json(&v)).map_err(|e| e.into())
            });
        },
    },
    HostFn {
        name: "to_json",
        volatile: false,
        signature: "to_json(value) -> string",
        doc: "The value as compact JSON.",
        register: |e, _| {
            e.register_fn(|v: Dynamic| value::to_json(&v).to_string());
        },
    },
    HostFn {
        name: "hash",
        volatile: false,
        signature: "hash(text: string) -> int",
        doc: "A stable hash of `text` (the same on every machine and version), for deterministic \
              choices such as a stand-in model's.",
        register: |e, _| {
            e.register_fn(|s: &str| (text::hash(s) >> 1) as INT);
        },
    },
    HostFn {
        name: "decimals",
        volatile: false,
        signature: "decimals(x: number, digits: int) -> string",
        doc: "`x` with at most `digits` decimals, as people read it: `decimals(0.6454972, 2)` is \"0.65\", \
              `decimals(2.0, 2)` is \"2\" (for reasons and messages; a number in the state stays whole).",
        register: |e, _| {
            e.register_fn(|x: FLOAT, digits: INT| crate::text::decimals(x, digits.clamp(0, 17) as usize));
            e.register_fn(|x: INT, _: INT| x.to_string());
        },
    },
    HostFn {
        name: "clamp",
        volatile: false,
        signature: "clamp(x: number, lo: number, hi: number) -> number",
        doc: "`x` limited to [lo, hi].",
        register: |e, _| {
            e.register_fn(|x: INT, lo: INT, hi: INT| x.max(lo).min(hi));
            e.register_fn(|x: FLOAT, lo: FLOAT, hi: FLOAT| x.max(lo).min(hi));
            e.register_fn(|x: FLOAT, lo: INT, hi: INT| x.max(lo as FLOAT).min(hi as FLOAT));
        },
    },
    // ---- randomness (seeded per session and turn, so replays repeat it) --------------------
    HostFn {
        name: "random",
        volatile: true,
        signature: "random() -> float",
        doc: "A random float in [0, 1), from the session's seeded generator.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>| with_turn(&ctx, |t| Ok(random_f64(&t.turn))));
        },
    },
    HostFn {
        name: "random_int",
        volatile: true,
        signature: "random_int(lo: int, hi: int) -> int",
        doc: "A random integer in [lo, hi], from the session's seeded generator.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, lo: INT, hi: INT| {
                with_turn(&ctx, |t| {
                    if hi < lo {
                        return Err(format!("random_int({lo}, {hi}): hi is below lo").into());
                    }
                    let span = (hi as i128 - lo as i128 + 1) as u128;
                    Ok((lo as i128 + below(&t.turn, span.min(u64::MAX as u128) as u64) as i128) as INT)
                })
            });
        },
    },
    HostFn {
        name: "pick",
        volatile: true,
        signature: "pick(list: array) -> value",
        doc: "A random item of `list` (throws on an empty list).",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, list: Array| {
                with_turn(&ctx, |t| {
                    if list.is_empty() {
                        return Err("pick() of an empty list".into());
                    }
                    Ok(list[below(&t.turn, list.len() as u64) as usize].clone())
                })
            });
        },
    },
    HostFn {
        name: "shuffle",
        volatile: true,
        signature: "shuffle(list: array) -> array",
        doc: "The items of `list` in random order.",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, mut list: Array| {
                with_turn(&ctx, |t| {
                    for i in (1..list.len()).rev() {
                        let j = below(&t.turn, i as u64 + 1) as usize;
                        list.swap(i, j);
                    }
                    Ok(list)
                })
            });
        },
    },
    // ---- events and logging ---------------------------------------------------------------
    HostFn {
        name: "emit",
        volatile: true,
        signature: "emit(name: string, data)",
        doc: "Emits a custom event with the turn's events (shown by `run`, streamed by the server).",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, name: &str, data: Dynamic| {
                with_turn(&ctx, |t| {
                    t.turn.emit(Event::Custom {
                        node: t.node.to_string(),
                        name: name.to_owned(),
                        data: value::to_json(&data),
                    });
                    Ok(())
                })
            });
        },
    },
    HostFn {
        name: "log",
        volatile: true,
        signature: "log(message: string)",
        doc: "Logs a message (tracing at info level, and a `log` event).",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, msg: &str| {
                with_turn(&ctx, |t| {
                    tracing::info!(target: "ruleweave::script", node = %t.node, "{msg}");
                    t.turn.emit(Event::Log { node: t.node.to_string(), level: "info".into(), message: msg.to_owned() });
                    Ok(())
                })
            });
        },
    },
    HostFn {
        name: "warn",
        volatile: true,
        signature: "warn(message: string)",
        doc: "Logs a warning (tracing at warn level, and a `log` event).",
        register: |e, _| {
            e.register_fn(|ctx: NativeCallContext<'_>, msg: &str| {
                with_turn(&ctx, |t| {
                    tracing::warn!(target: "ruleweave::script", node = %t.node, "{msg}");
                    t.turn.emit(Event::Log { node: t.node.to_string(), level: "warn".into(), message: msg.to_owned() });
                    Ok(())
                })
            });
        },
    },
    HostFn {
        name: "refuse",
        volatile: true,
        signature: "refuse(message: string)",
        doc: "Refuses the turn's input (or the session's options, in `init`): the turn fails as invalid input \
              with `message` (HTTP 422 on the JSON API, 400 on the chat face), not as a script error, and \
              nothing changes.",
        register: |e, _| {
            e.register_fn(|msg: &str| -> RhaiResult<()> { Err(thrown(crate::error::Error::refusal(msg))) });
        },
    },
];
