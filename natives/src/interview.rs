//! The interview pack's scorers (`scripts/interview/scorers.rhai`) and focus generators
//! (`scripts/interview/focus.rhai`), rule for rule.

use ruleweave::values::{Array, Dynamic, ImmutableString, Map};
use ruleweave::{EngineBuilder, FocusContext, Result, ScorerContext, ScorerOutput, text};

/// Registers the nine scorers under the names `config/interview.yaml` gives them.
pub fn register(builder: EngineBuilder) -> EngineBuilder {
    builder
        .native_scorer("interview_knowledge_ceiling", knowledge_ceiling)
        .native_scorer("interview_element_exhausted", element_exhausted)
        .native_scorer("interview_recent_redundancy", recent_redundancy)
        .native_scorer("interview_coverage_gap", coverage_gap)
        .native_scorer("interview_ambiguity", ambiguity)
        .native_scorer("interview_depth_breadth_balance", depth_breadth_balance)
        .native_scorer("interview_engagement", engagement)
        .native_scorer("interview_strategy_diversity", strategy_diversity)
        .native_scorer("interview_novelty", novelty)
}

// ---- reading Rhai values ----------------------------------------------------------------------

fn string(v: Option<&Dynamic>) -> Option<ImmutableString> {
    v.and_then(|v| v.read_lock::<ImmutableString>().map(|s| s.clone()))
}

fn int(v: Option<&Dynamic>) -> Option<i64> {
    v.and_then(|v| v.as_int().ok())
}

fn float(v: Option<&Dynamic>) -> Option<f64> {
    v.and_then(|v| v.as_float().ok().or_else(|| v.as_int().ok().map(|i| i as f64)))
}

fn boolean(v: Option<&Dynamic>) -> bool {
    v.and_then(|v| v.as_bool().ok()).unwrap_or(false)
}

/// Lends the array in `v` (empty when there is none) without copying it.
fn with_list<T>(v: Option<&Dynamic>, f: impl FnOnce(&[Dynamic]) -> T) -> T {
    match v.and_then(|v| v.read_lock::<Array>()) {
        Some(a) => f(&a),
        None => f(&[]),
    }
}

/// Lends the map in `v` (empty when there is none) without copying it.
fn with_map<T>(v: Option<&Dynamic>, f: impl FnOnce(&Map) -> T) -> T {
    match v.and_then(|v| v.read_lock::<Map>()) {
        Some(m) => f(&m),
        None => f(&Map::new()),
    }
}

fn strings(v: Option<&Dynamic>) -> Vec<ImmutableString> {
    with_list(v, |a| a.iter().filter_map(|x| x.read_lock::<ImmutableString>().map(|s| s.clone())).collect())
}

/// The respondent's last answer ("" before any).
fn last_answer(state: &Map) -> ImmutableString {
    string(state.get("last_answer")).unwrap_or_default()
}

/// The last `n` items of `items` (all of them when there are fewer).
fn last<T>(items: &[T], n: i64) -> &[T] {
    let n = n.max(0) as usize;
    if items.len() > n { &items[items.len() - n..] } else { items }
}

/// The candidate strategy's `type_category`.
fn category(ctx: &ScorerContext<'_>) -> ImmutableString {
    string(ctx.strategy.get("type_category")).unwrap_or_default()
}

/// What the scorer's param `table` (category → number) says of `category`.
fn by_category(ctx: &ScorerContext<'_>, table: &str, category: &str) -> Option<f64> {
    with_map(ctx.params.get(table), |m| float(m.get(category)))
}

/// Whether this turn's LLM signals decide (the pack's flag, the scorer's opt-in, fresh signals).
fn llm_signals(ctx: &ScorerContext<'_>) -> Option<Map> {
    with_map(ctx.state.get("qualitative_signals"), |s| {
        let fresh = boolean(ctx.params.get("use_llm_signals"))
            && boolean(ctx.pack_params.get("use_llm_signals"))
            && string(s.get("source")).as_deref() == Some("llm")
            && int(s.get("turn")).is_some()
            && int(s.get("turn")) == int(ctx.state.get("turn_count"));
        fresh.then(|| s.clone())
    })
}

fn contains_param(ctx: &ScorerContext<'_>, text: &str, phrases: &str) -> bool {
    let list = strings(ctx.pack_params.get(phrases));
    text::contains_any(text, list.iter().map(|s| s.as_str()))
}

fn scored(score: f64, reasoning: String) -> Result<ScorerOutput> {
    Ok(ScorerOutput { raw_score: score, reasoning, ..Default::default() })
}

fn vetoed(veto: bool, reasoning: String) -> Result<ScorerOutput> {
    Ok(ScorerOutput { is_veto: veto, reasoning, ..Default::default() })
}

// ---- tier 1 -----------------------------------------------------------------------------------

/// KnowledgeCeiling: after "I don't know", no digging; with fresh LLM signals, only a terminal one.
pub fn knowledge_ceiling(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let category = category(ctx);
    if !strings(ctx.params.get("categories")).contains(&category) {
        return vetoed(false, format!("{category} is not limited by knowledge"));
    }
    if let Some(s) = llm_signals(ctx) {
        let terminal = with_map(s.get("knowledge_ceiling"), |kc| boolean(kc.get("is_terminal")));
        let productive = with_map(s.get("uncertainty"), |u| string(u.get("kind")).as_deref() == Some("productive"));
        let veto = terminal && !productive;
        return vetoed(veto, format!("terminal \"don't know\" (LLM signal): {veto}"));
    }
    let veto = contains_param(ctx, &last_answer(ctx.state), "dont_know");
    vetoed(veto, format!("the respondent does not know (rules): {veto}"))
}

/// ElementExhausted: an element mentioned more than `max_mentions` times is not asked about again.
pub fn element_exhausted(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let Some(e) = string(ctx.focus.get("element_id")) else {
        return vetoed(false, "no element in focus".into());
    };
    let n = with_map(ctx.state.get("mentions"), |m| int(m.get(e.as_str()))).unwrap_or(0);
    let limit = int(ctx.params.get("max_mentions")).unwrap_or(0);
    vetoed(n > limit, format!("{e} mentioned {n} times (limit {limit})"))
}

/// RecentRedundancy: the focus description against the questions actually asked recently, by
/// embeddings when the selection has them, else by words; each kind has its own threshold.
pub fn recent_redundancy(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let asked = strings(ctx.state.get("questions"));
    let recent = last(&asked, int(ctx.params.get("recent")).unwrap_or(0));
    let description = string(ctx.focus.get("focus_description")).unwrap_or_default();
    let kind = ctx.similarity_kind();
    let s = if kind != "embedding" && boolean(ctx.params.get("ignore_topic")) {
        let topic = text::fold(&string(ctx.state.get("topic")).unwrap_or_default());
        let topic: Vec<&str> = text::words(&topic).collect();
        let others: Vec<String> = recent.iter().map(|q| text::words_without(q, &topic)).collect();
        ctx.max_similarity(&text::words_without(&description, &topic), others.iter().map(String::as_str))
    } else {
        ctx.max_similarity(&description, recent.iter().map(|q| q.as_str()))
    };
    let threshold = if kind == "embedding" { "embedding_threshold" } else { "threshold" };
    let limit = float(ctx.params.get(threshold)).unwrap_or(1.0);
    let mut out =
        vetoed(s > limit, format!("{kind} similarity {} to recent questions (limit {limit})", text::decimals(s, 2)))?;
    out.signals.insert("similarity".into(), Dynamic::from_float(s));
    out.signals.insert("kind".into(), kind.into());
    Ok(out)
}

// ---- tier 2 -----------------------------------------------------------------------------------

/// CoverageGap: the more elements are uncovered, the more covering one is worth.
pub fn coverage_gap(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let elements = strings(ctx.state.get("elements"));
    let open = with_map(ctx.state.get("mentions"), |m| {
        elements.iter().filter(|e| int(m.get(e.as_str())).unwrap_or(0) == 0).count()
    });
    let gap = if elements.is_empty() { 0.0 } else { open as f64 / elements.len() as f64 };
    let score = 1.0 + by_category(ctx, "weights", &category(ctx)).unwrap_or(0.0) * gap;
    scored(score, format!("{open} of {} elements uncovered", elements.len()))
}

/// Ambiguity: a short or hedging answer asks for clarification.
pub fn ambiguity(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let answer = last_answer(ctx.state);
    let words = text::word_count(&answer);
    let hedging = contains_param(ctx, &answer, "hedges");
    let unclear = !answer.is_empty() && (words < 6 || hedging);
    let score = if unclear { by_category(ctx, "scores", &category(ctx)).unwrap_or(1.0) } else { 1.0 };
    scored(score, format!("the last answer is {}", if unclear { "unclear" } else { "clear" }))
}

/// DepthBreadthBalance: lean against whichever kind the recent questions overused.
pub fn depth_breadth_balance(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let history = strings(ctx.state.get("category_history"));
    let recent = last(&history, int(ctx.params.get("window")).unwrap_or(0));
    let lean_of = |c: &str| with_map(ctx.params.get("leans"), |m| int(m.get(c))).unwrap_or(0);
    let depth = recent.iter().filter(|c| lean_of(c) == 1).count() as i64;
    let breadth = recent.iter().filter(|c| lean_of(c) == -1).count() as i64;
    let n = depth + breadth;
    let mut lean = if n == 0 { 0.0 } else { (breadth - depth) as f64 / n as f64 };
    if let Some(s) = llm_signals(ctx) {
        // A positive lean favours depth (the recent questions went wide).
        if with_map(s.get("contradiction"), |c| boolean(c.get("detected"))) {
            lean += 0.5;
        }
        lean += 0.5 - with_map(s.get("concept_depth"), |c| float(c.get("level"))).unwrap_or(0.5);
        lean = lean.clamp(-1.0, 1.0);
    }
    let score = match lean_of(&category(ctx)) {
        1 => 1.0 + 0.8 * lean,
        -1 => 1.0 - 0.8 * lean,
        _ => 1.0,
    };
    scored(score, format!("{depth} depth, {breadth} breadth of the last {}", recent.len()))
}

/// Engagement: a talkative respondent can go deeper; a terse one needs an easy question.
pub fn engagement(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let level = match llm_signals(ctx) {
        Some(s) => {
            let intensity = with_map(s.get("emotional"), |e| float(e.get("intensity"))).unwrap_or(0.0);
            let reasoning = with_map(s.get("reasoning"), |r| float(r.get("score"))).unwrap_or(0.0);
            (intensity + 0.3 * reasoning).clamp(0.0, 1.0)
        }
        None => (text::word_count(&last_answer(ctx.state)) as f64 / 40.0).clamp(0.0, 1.0),
    };
    let line = with_map(ctx.params.get("by_category"), |m| {
        with_list(m.get(category(ctx).as_str()), |l| Some((float(l.first())?, float(l.get(1))?)))
    });
    let score = line.map_or(1.0, |(a, b)| a + b * level);
    scored(score, format!("engagement {}", text::decimals(level, 2)))
}

/// StrategyDiversity: a strategy used often lately scores lower; one not used lately higher.
pub fn strategy_diversity(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let history = strings(ctx.state.get("strategy_history"));
    let recent = last(&history, int(ctx.params.get("window")).unwrap_or(0));
    let id = ctx.strategy_id();
    let used = recent.iter().filter(|s| s.as_str() == id.as_str()).count();
    let score = if used == 0 { 1.2 } else { (1.0 - 0.2 * used as f64).max(0.0) };
    scored(score, format!("{id} used {used} times in the last {}", recent.len()))
}

/// Novelty: a focus on something just brought up, or never touched, is fresh.
pub fn novelty(ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
    let kind = string(ctx.focus.get("focus_type")).unwrap_or_default();
    let score = if kind == "coverage" {
        1.2
    } else if let Some(node) = ctx.focus.get("node_id").filter(|n| !n.is_unit()) {
        let node = node.to_string();
        let now = int(ctx.state.get("turn_count"));
        let fresh = with_list(ctx.state.get("nodes"), |nodes| {
            nodes.iter().any(|n| {
                with_map(Some(n), |n| {
                    n.get("id").map(|i| i.to_string()).as_deref() == Some(node.as_str()) && int(n.get("turn")) == now
                })
            })
        });
        if fresh { 1.3 } else { 0.9 }
    } else if kind == "summary" {
        0.9
    } else {
        1.0
    };
    scored(score, format!("focus of type {kind}"))
}

// ---- focus generators (scripts/interview/focus.rhai) -------------------------------------------

/// Registers the six focus generators under the names `config/interview.yaml` gives them.
pub fn register_focuses(builder: EngineBuilder) -> EngineBuilder {
    builder
        .native_focus("interview_recent_node", recent_node)
        .native_focus("interview_open", open)
        .native_focus("interview_peripheral", peripheral)
        .native_focus("interview_recent_nodes", recent_nodes)
        .native_focus("interview_uncovered", uncovered)
        .native_focus("interview_last_answer", last_answer_focus)
}

/// A focus from `(key, value)` pairs.
fn focus<const N: usize>(pairs: [(&str, Dynamic); N]) -> Map {
    pairs.into_iter().map(|(k, v)| (k.into(), v)).collect()
}

/// A field of a map value (unit when it has none).
fn field(v: &Dynamic, key: &str) -> Dynamic {
    with_map(Some(v), |m| m.get(key).cloned().unwrap_or(Dynamic::UNIT))
}

/// The state's `topic` as scripts interpolate it.
fn topic(ctx: &FocusContext<'_>) -> String {
    ctx.state.get("topic").map(|t| t.to_string()).unwrap_or_default()
}

/// deepen, contrast: the most recent concept (and the study's element it is about, if any).
pub fn recent_node(ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
    let Some(n) = with_list(ctx.state.get("nodes"), |nodes| nodes.last().cloned()) else { return Ok(Vec::new()) };
    let label = field(&n, "label");
    let what = if string(ctx.strategy.get("id")).as_deref() == Some("contrast") {
        format!("a time when {label} was different")
    } else {
        format!("why {label} matters")
    };
    let text = label.to_string();
    let element = with_map(ctx.pack_params.get("element_keywords"), |table| {
        strings(ctx.state.get("elements")).into_iter().find(|e| match table.get(e.as_str()) {
            Some(words) => text::contains_any(&text, strings(Some(words)).iter().map(|s| s.as_str())),
            None => text::contains_any(&text, [e.as_str()]),
        })
    });
    let fresh =
        int(Some(&field(&n, "turn"))).is_some() && int(Some(&field(&n, "turn"))) == int(ctx.state.get("turn_count"));
    let mut f = focus([
        ("focus_type", "depth".into()),
        ("node_id", field(&n, "id")),
        ("label", label),
        ("focus_description", what.into()),
        ("confidence", Dynamic::from_float(if fresh { 1.0 } else { 0.6 })),
    ]);
    if let Some(e) = element {
        f.insert("element_id".into(), e.into());
    }
    Ok(vec![f])
}

/// broaden, ease, closing: the topic, nothing in particular, worded by the strategy's kind.
pub fn open(ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
    let kind = string(ctx.strategy.get("type_category")).unwrap_or_default();
    let topic = topic(ctx);
    let what = match kind.as_str() {
        "rapport" => format!("what you enjoy about {topic}"),
        "closing" => format!("anything else about {topic}"),
        _ => format!("what else about {topic}"),
    };
    let kind = if kind == "breadth" { "breadth" } else { "open" };
    Ok(vec![focus([
        ("focus_type", kind.into()),
        ("focus_description", what.into()),
        ("confidence", Dynamic::from_float(0.5)),
    ])])
}

/// bridge: a peripheral concept (the fewest links), not one from the last answer.
pub fn peripheral(ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
    let mut degree: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    with_list(ctx.state.get("edges"), |edges| {
        for e in edges {
            let (from, to) = (field(e, "from").to_string(), field(e, "to").to_string());
            *degree.entry(from.clone()).or_default() += 1;
            if to != from {
                *degree.entry(to).or_default() += 1;
            }
        }
    });
    let now = int(ctx.state.get("turn_count")).unwrap_or(0);
    let best = with_list(ctx.state.get("nodes"), |nodes| {
        let mut best: Option<(&Dynamic, i64)> = None;
        for n in nodes {
            if int(Some(&field(n, "turn"))).is_some_and(|t| t >= now) {
                continue;
            }
            let links = degree.get(&field(n, "id").to_string()).copied().unwrap_or(0);
            if best.is_none_or(|(_, fewest)| links < fewest) {
                best = Some((n, links));
            }
        }
        best.map(|(n, links)| (n.clone(), links))
    });
    let Some((n, links)) = best else { return Ok(Vec::new()) };
    let label = field(&n, "label");
    Ok(vec![focus([
        ("focus_type", "peripheral".into()),
        ("node_id", field(&n, "id")),
        ("focus_description", format!("how {label} connects").into()),
        ("label", label),
        ("degree", Dynamic::from_int(links)),
        ("confidence", Dynamic::from_float(1.0 / (1 + links) as f64)),
    ])])
}

/// synthesis: the two or three most recent concepts.
pub fn recent_nodes(ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
    let recent = with_list(ctx.state.get("nodes"), |nodes| {
        if nodes.len() < 2 {
            return None;
        }
        let recent = last(nodes, 3);
        let ids: Array = recent.iter().map(|n| field(n, "id")).collect();
        let mut labels = String::new();
        for n in recent {
            let label = field(n, "label").to_string();
            labels = if labels.is_empty() { label } else { format!("{labels}, {label}") };
        }
        Some((ids, labels))
    });
    let Some((ids, labels)) = recent else { return Ok(Vec::new()) };
    let confidence = ids.len() as f64 / 3.0;
    Ok(vec![focus([
        ("focus_type", "summary".into()),
        ("nodes", Dynamic::from_array(ids)),
        ("focus_description", labels.into()),
        ("confidence", Dynamic::from_float(confidence)),
    ])])
}

/// cover_element: one focus per element no answer has mentioned yet.
pub fn uncovered(ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
    let topic = topic(ctx);
    let mentioned = |e: &str| with_map(ctx.state.get("mentions"), |m| float(m.get(e)).unwrap_or(0.0) != 0.0);
    Ok(strings(ctx.state.get("elements"))
        .into_iter()
        .filter(|e| !mentioned(e))
        .map(|e| {
            let what = format!("the {e} of {topic}");
            focus([
                ("focus_type", "coverage".into()),
                ("element_id", e.clone().into()),
                ("label", e.into()),
                ("focus_description", what.into()),
                ("confidence", Dynamic::from_float(1.0)),
            ])
        })
        .collect())
}

/// reflection: the respondent's last answer, its first words.
pub fn last_answer_focus(ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
    let answer = with_list(ctx.state.get("conversation_history"), |history| {
        history
            .iter()
            .rev()
            .find(|m| string(Some(&field(m, "role"))).as_deref() == Some("respondent"))
            .map(|m| field(m, "content"))
    });
    Ok(answer
        .map(|content| {
            let what = text::truncate_words(&content.to_string(), 8);
            vec![focus([
                ("focus_type", "reflection".into()),
                ("focus_description", what.into()),
                ("confidence", Dynamic::from_float(0.8)),
            ])]
        })
        .unwrap_or_default())
}
