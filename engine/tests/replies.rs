//! Every model-reading node of every pack against replies in the shapes real models send them
//! (`tests/data/replies.yaml`, data a pack author extends): each case's turns are played once on
//! the pack's stand-in, again with those replies given back as they were (the baseline), then
//! once per reply and shape with that one reply reshaped. A shape the pack must read as the
//! plain reply leaves the turns' output as the baseline's; an unusable one takes the node's
//! fallback with a note a person sees, or fails the turn only where the case says the pack
//! passes a model's failure on, and never reaches the player's reply.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ruleweave::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{Answering, copy_of, repo_root};

#[derive(Deserialize)]
struct Corpus {
    shapes: Vec<Shape>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shape {
    name: String,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    profiles: Vec<String>,
    same: bool,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    replace: Vec<(String, String)>,
    #[serde(default)]
    edit: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    pack: String,
    #[serde(default)]
    name: Option<String>,
    turns: Vec<Value>,
    #[serde(default)]
    options: serde_json::Map<String, Value>,
    #[serde(default)]
    edit: Option<Edit>,
    #[serde(default)]
    fails: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    file: String,
    from: String,
    to: String,
}

impl Shape {
    /// `reply` in this shape, or `None` when the shape is not for it.
    fn apply(&self, profile: &str, reply: &str) -> Option<String> {
        if !self.profiles.is_empty() && !self.profiles.iter().any(|p| p == profile) {
            return None;
        }
        if self.when.as_deref() == Some("json") && serde_json::from_str::<Value>(reply).is_err() {
            return None;
        }
        let mut out = reply.to_owned();
        for (from, to) in &self.replace {
            out = out.replace(from, to);
        }
        if !self.replace.is_empty() && out == reply {
            return None; // nothing of the shape in this reply
        }
        if let Some(text) = &self.text {
            out = text.replace("{reply}", &out);
        }
        match self.edit.as_deref() {
            Some("trailing_commas") => {
                let v: Value = serde_json::from_str(reply).ok()?;
                out = with_trailing_commas(&v);
            }
            Some("first_half") => out = reply.chars().take(reply.chars().count() / 2).collect(),
            Some(other) => panic!("shape `{}`: no edit `{other}`", self.name),
            None => {}
        }
        Some(out)
    }
}

/// `v` as JSON with a comma after the last item of every list and map, as models write it.
fn with_trailing_commas(v: &Value) -> String {
    match v {
        Value::Object(m) if !m.is_empty() => {
            let items: Vec<String> =
                m.iter().map(|(k, v)| format!("{}: {},", Value::String(k.clone()), with_trailing_commas(v))).collect();
            format!("{{{}}}", items.join(" "))
        }
        Value::Array(a) if !a.is_empty() => {
            format!("[{}]", a.iter().map(|v| format!("{},", with_trailing_commas(v))).collect::<Vec<_>>().join(" "))
        }
        other => other.to_string(),
    }
}

/// What a played case left: per turn, the output (volatile fields out), the reply a person saw,
/// and the notes; or the error of the turn that failed.
#[derive(Debug, PartialEq)]
struct Played {
    turns: Vec<(Value, Option<String>, Vec<String>)>,
    error: Option<String>,
}

/// The fields that differ from one run to the next whatever the replies: timings, token counts.
fn steady(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "latency_ms" | "tokens" | "prompt_tokens" | "completion_tokens"))
                .map(|(k, v)| (k.clone(), steady(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(steady).collect()),
        other => other.clone(),
    }
}

/// The stand-in's replies by profile and request (concurrent calls arrive in any order), the
/// profile's first reply for a request it never saw (a path a fallback opened). `shaped`
/// replaces the reply to one request, the first time it is asked: (profile, request, text).
struct Replies {
    by_request: HashMap<(String, String), String>,
    first: HashMap<String, String>,
    shaped: Mutex<Option<(String, String, String)>>,
}

impl Replies {
    fn answer(&self, r: &ruleweave::llm::LlmRequest) -> Result<String, String> {
        let key = (r.profile.clone(), request_key(r));
        let mut shaped = self.shaped.lock().unwrap();
        if shaped.as_ref().is_some_and(|(p, k, _)| *p == key.0 && *k == key.1) {
            return Ok(shaped.take().unwrap().2);
        }
        match self.by_request.get(&key).or_else(|| self.first.get(&r.profile)) {
            Some(reply) => Ok(reply.clone()),
            None => Err(format!("no reply for {}", r.profile)),
        }
    }
}

/// What identifies a request: its messages.
fn request_key(r: &ruleweave::llm::LlmRequest) -> String {
    serde_json::to_string(&r.messages).unwrap()
}

async fn play(engine: &Engine, case: &Case) -> (Played, Vec<(String, String, String)>) {
    let mut s = engine.open_with_id(&case.pack, &case.options, Some("replies-corpus".into())).await.unwrap();
    let mut played = Played { turns: Vec::new(), error: None };
    let mut exchanges = Vec::new();
    for input in &case.turns {
        match s.turn(input.clone()).await {
            Ok(r) => {
                for x in r.exchanges.iter().filter_map(ruleweave::Exchange::model) {
                    if let Some(resp) = &x.response {
                        exchanges.push((x.request.profile.clone(), request_key(&x.request), resp.content.clone()));
                    }
                }
                played.turns.push((steady(&r.output), r.display.reply.clone(), r.display.notes.clone()));
            }
            Err(e) => {
                played.error = Some(e.to_string());
                break;
            }
        }
    }
    (played, exchanges)
}

fn root_of(case: &Case) -> tempfile::TempDir {
    let p = &case.pack;
    let mut paths =
        vec![format!("config/{p}.yaml"), format!("scripts/{p}"), format!("prompts/{p}"), "scripts/lib".into()];
    for optional in [format!("data/{p}"), format!("schemas/{p}")] {
        if repo_root().join(&optional).exists() {
            paths.push(optional);
        }
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    let root = copy_of(&paths);
    if let Some(e) = &case.edit {
        let file = root.path().join(&e.file);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(&e.from), "{}: `{}` is not in {}", case.pack, e.from, e.file);
        std::fs::write(&file, text.replace(&e.from, &e.to)).unwrap();
    }
    root
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_model_reading_node_takes_the_shapes_real_models_send() {
    let corpus: Corpus =
        serde_saphyr::from_str(&std::fs::read_to_string(repo_root().join("tests/data/replies.yaml")).unwrap()).unwrap();
    let mut problems = Vec::new();
    let mut tried = 0;
    for case in &corpus.cases {
        let name = case.name.clone().unwrap_or_else(|| case.pack.clone());
        let root = root_of(case);
        let (_, harvested) = play(&Engine::builder(root.path()).build(), case).await;
        let mut by_request = HashMap::new();
        let mut first: HashMap<String, (String, String)> = HashMap::new();
        for (profile, key, reply) in &harvested {
            by_request.insert((profile.clone(), key.clone()), reply.clone());
            first.entry(profile.clone()).or_insert_with(|| (key.clone(), reply.clone()));
        }
        let firsts: HashMap<String, String> = first.iter().map(|(p, (_, r))| (p.clone(), r.clone())).collect();
        let run = |shaped: Option<(String, String, String)>| {
            let replies =
                Arc::new(Replies { by_request: by_request.clone(), first: firsts.clone(), shaped: Mutex::new(shaped) });
            let engine = Engine::builder(root.path()).provider(Answering::new(move |r| replies.answer(r))).build();
            async move { play(&engine, case).await.0 }
        };
        let baseline = run(None).await;
        assert_eq!(baseline.error, None, "{name}: the stand-in's own replies play");
        let baseline_notes: Vec<&String> = baseline.turns.iter().flat_map(|t| &t.2).collect();
        let mut profiles: Vec<&String> = first.keys().collect();
        profiles.sort();
        for profile in profiles {
            let (key, reply) = &first[profile];
            for shape in &corpus.shapes {
                let Some(text) = shape.apply(profile, reply) else { continue };
                tried += 1;
                let what = format!("{name}: {profile} answering in shape `{}`", shape.name);
                let got = run(Some((profile.clone(), key.clone(), text.clone()))).await;
                if shape.same {
                    if got != baseline {
                        let diff = first_difference(
                            &json!(got.turns.iter().map(|t| &t.0).collect::<Vec<_>>()),
                            &json!(baseline.turns.iter().map(|t| &t.0).collect::<Vec<_>>()),
                            "",
                        );
                        let said: Vec<_> = got.turns.iter().map(|t| (&t.1, &t.2)).collect();
                        let plain: Vec<_> = baseline.turns.iter().map(|t| (&t.1, &t.2)).collect();
                        problems.push(format!(
                            "{what}: the turn differs from the plain reply's at {diff} (error: {:?}; said {said:?}, not {plain:?})",
                            got.error
                        ));
                    }
                    continue;
                }
                match &got.error {
                    Some(e) if !case.fails.contains(profile) => {
                        problems.push(format!("{what}: the turn failed where the pack has a fallback: {e}"))
                    }
                    Some(_) => {}
                    None => {
                        let notes: Vec<&String> = got.turns.iter().flat_map(|t| &t.2).collect();
                        if !notes.iter().any(|n| !baseline_notes.contains(n)) {
                            problems.push(format!("{what}: the fallback left no note a person sees"));
                        }
                        let leaked = !text.trim().is_empty()
                            && got.turns.iter().any(|t| t.1.as_deref().is_some_and(|r| r.contains(text.trim())));
                        if leaked {
                            problems.push(format!("{what}: the unusable reply reached the player"));
                        }
                    }
                }
            }
        }
    }
    assert!(tried > 60, "only {tried} reshaped replies were tried");
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// Where `a` first differs from `b`: a path and the two values.
fn first_difference(a: &Value, b: &Value, at: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) if v == w => {}
                    Some(w) => return first_difference(v, w, &format!("{at}/{k}")),
                    None => return format!("{at}/{k}: only in the reshaped run"),
                }
            }
            format!(
                "{at}: keys {:?} only in the plain run",
                y.keys().filter(|k| !x.contains_key(*k)).collect::<Vec<_>>()
            )
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            let i = x.iter().zip(y).position(|(v, w)| v != w).unwrap_or(0);
            first_difference(&x[i], &y[i], &format!("{at}/{i}"))
        }
        _ => format!("{at}: {} instead of {}", truncated(a), truncated(b)),
    }
}

fn truncated(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 160 { format!("{}…", &s[..s.char_indices().nth(160).map_or(s.len(), |(i, _)| i)]) } else { s }
}

#[test]
fn the_shapes_reshape_as_they_say() {
    let shape = |yaml: &str| -> Shape { serde_saphyr::from_str(yaml).unwrap() };
    let commas = shape("{name: c, same: true, edit: trailing_commas}");
    assert_eq!(commas.apply("p", r#"{"a": [1, 2]}"#).unwrap().replace(char::is_whitespace, ""), r#"{"a":[1,2,],}"#);
    let json_only = shape("{name: j, when: json, same: true, text: \"x {reply}\"}");
    assert_eq!(json_only.apply("p", "not json"), None);
    assert_eq!(json_only.apply("p", "{}"), Some("x {}".into()));
}
