//! The designer's graph builder in Rust: what `build_game_graph` in
//! `scripts/designer/builder.rhai` computes, from the same GameDesignDocument to the same
//! GamePlan (a property test holds them equal; `cargo bench -p ruleweave-natives --bench
//! designer` times both).

use serde_json::{Map, Value, json};

/// Why a design has no plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DesignError {
    /// The design has no `scenes` list.
    NoScenes,
    /// A scene (numbered from 1) has no mechanics.
    NoMechanics {
        /// The scene's number.
        scene: usize,
    },
}

impl std::fmt::Display for DesignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DesignError::NoScenes => f.write_str("the design has no scenes list"),
            DesignError::NoMechanics { scene } => write!(f, "scene {scene} has no mechanics"),
        }
    }
}

impl std::error::Error for DesignError {}

/// The GamePlan of a GameDesignDocument: ids `s<scene>_m<n>` counted depth first, connections
/// from list order and advance triggers, the last mechanic of each scene's flattened list
/// terminal, scores summed. A field the design leaves out reads as the schema's default.
pub fn build_game_graph(design: &Value) -> Result<Value, DesignError> {
    let scene_designs = design.get("scenes").and_then(Value::as_array).ok_or(DesignError::NoScenes)?;
    let count = scene_designs.len();
    let mut scenes = Vec::with_capacity(count);
    let mut total_max_score = Score::Int(0);
    for (scene_idx, sd) in scene_designs.iter().enumerate() {
        let scene_number = scene_idx + 1;
        let mut mechanics = Vec::new();
        let mut connections = Vec::new();
        let mut counter = 0;
        let designs = list(sd, "mechanics");
        build_mechanic_graph(scene_number, designs, None, &mut counter, &mut mechanics, &mut connections);
        let Some(last) = mechanics.last_mut() else {
            return Err(DesignError::NoMechanics { scene: scene_number });
        };
        last.insert("is_terminal".into(), Value::Bool(true));
        let last_id = last["mechanic_id"].clone();
        let starting_id = mechanics[0]["mechanic_id"].clone();
        connections.push(connection(last_id, "scene_end".into(), "completion".into(), Value::Null));
        let mut scene_max_score = Score::Int(0);
        for m in &mechanics {
            scene_max_score = scene_max_score.add(&m["max_score"]);
        }
        let transition = if scene_idx < count - 1 {
            json!({
                "transition_type": or(sd, "transition_to_next", json!("auto")),
                "min_score_pct": field(sd, "transition_min_score_pct"),
            })
        } else {
            Value::Null
        };
        total_max_score = total_max_score.add(&scene_max_score.value());
        scenes.push(json!({
            "scene_id": format!("scene_{scene_number}"),
            "scene_number": scene_number,
            "title": field(sd, "title"),
            "learning_goal": field(sd, "learning_goal"),
            "narrative_intro": or(sd, "narrative_intro", json!("")),
            "zone_labels": field(sd, "zone_labels"),
            "needs_diagram": field(sd, "needs_diagram"),
            "image_spec": field(sd, "image_spec"),
            "mechanics": mechanics.into_iter().map(Value::Object).collect::<Vec<_>>(),
            "mechanic_connections": connections,
            "starting_mechanic_id": starting_id,
            "transition_to_next": transition,
            "scene_max_score": scene_max_score.value(),
        }));
    }
    Ok(json!({
        "title": field(design, "title"),
        "subject": field(design, "subject"),
        "difficulty": field(design, "difficulty"),
        "estimated_duration_minutes": field(design, "estimated_duration_minutes"),
        "narrative_intro": field(design, "narrative_intro"),
        "completion_message": field(design, "completion_message"),
        "all_zone_labels": field(design, "all_zone_labels"),
        "distractor_labels": or(design, "distractor_labels", json!([])),
        "label_hierarchy": field(design, "label_hierarchy"),
        "total_max_score": total_max_score.value(),
        "scenes": scenes,
    }))
}

fn build_mechanic_graph(
    scene_number: usize,
    designs: &[Value],
    parent_id: Option<&str>,
    counter: &mut u64,
    mechanics: &mut Vec<Map<String, Value>>,
    connections: &mut Vec<Value>,
) {
    let mut prev_id = parent_id.unwrap_or("scene_start").to_owned();
    for (i, d) in designs.iter().enumerate() {
        *counter += 1;
        let id = format!("s{scene_number}_m{counter}");
        let points = or(d, "points_per_item", json!(10));
        let max_score = Score::of(&field(d, "expected_item_count")).mul(&points).value();
        let Value::Object(mechanic) = json!({
            "mechanic_id": id,
            "mechanic_type": field(d, "mechanic_type"),
            "zone_labels_used": or(d, "zone_labels_used", json!([])),
            "instruction_text": field(d, "instruction_text"),
            "content_brief": field(d, "content_brief"),
            "expected_item_count": field(d, "expected_item_count"),
            "points_per_item": points,
            "max_score": max_score,
            "is_timed": or(d, "is_timed", json!(false)),
            "time_limit_seconds": field(d, "time_limit_seconds"),
            "parent_mechanic_id": parent_id.map_or(Value::Null, |p| json!(p)),
            "is_terminal": false,
        }) else {
            unreachable!("json! of an object literal is an object")
        };
        mechanics.push(mechanic);
        let c = match (i, parent_id) {
            (0, None) => connection("scene_start".into(), json!(id), "auto".into(), Value::Null),
            (0, Some(p)) => connection(json!(p), json!(id), "parent_completion".into(), Value::Null),
            _ => {
                let prev = &designs[i - 1];
                connection(
                    json!(prev_id),
                    json!(id),
                    or(prev, "advance_trigger", json!("completion")),
                    field(prev, "advance_trigger_value"),
                )
            }
        };
        connections.push(c);
        let children = list(d, "children");
        if !children.is_empty() {
            build_mechanic_graph(scene_number, children, Some(&id), counter, mechanics, connections);
        }
        prev_id = id;
    }
}

fn connection(from: Value, to: Value, trigger: Value, value: Value) -> Value {
    json!({"from_mechanic_id": from, "to_mechanic_id": to, "trigger": trigger, "trigger_value": value})
}

/// A field, `null` when absent.
fn field(v: &Value, key: &str) -> Value {
    v.get(key).cloned().unwrap_or(Value::Null)
}

/// A field, `default` when absent or `null` (Rhai's `??`).
fn or(v: &Value, key: &str, default: Value) -> Value {
    v.get(key).filter(|x| !x.is_null()).cloned().unwrap_or(default)
}

/// A list field, empty when absent or not a list.
fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Integer arithmetic while both sides are integers, float once either is not (as in Rhai).
#[derive(Clone, Copy)]
enum Score {
    Int(i64),
    Float(f64),
}

impl Score {
    fn of(v: &Value) -> Score {
        match v.as_i64() {
            Some(i) => Score::Int(i),
            None => Score::Float(v.as_f64().unwrap_or(0.0)),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Score::Int(i) => i as f64,
            Score::Float(f) => f,
        }
    }

    fn add(self, v: &Value) -> Score {
        match (self, Score::of(v)) {
            (Score::Int(a), Score::Int(b)) => Score::Int(a.saturating_add(b)),
            (a, b) => Score::Float(a.as_f64() + b.as_f64()),
        }
    }

    fn mul(self, v: &Value) -> Score {
        match (self, Score::of(v)) {
            (Score::Int(a), Score::Int(b)) => Score::Int(a.saturating_mul(b)),
            (a, b) => Score::Float(a.as_f64() * b.as_f64()),
        }
    }

    fn value(self) -> Value {
        match self {
            Score::Int(i) => json!(i),
            Score::Float(f) => json!(f),
        }
    }
}
