//! The interview through `run` and `play`: its fallbacks, its signals, and its models (chat and embeddings) failing the ways real ones do.

use super::*;

/// No dead end: with every candidate vetoed (here, any similarity at all counts as a repeat), the
/// interview's fallback strategy asks, and the decision event says why; closing is unavailable in
/// the exploratory phase.
#[test]
fn the_interview_falls_back_when_every_candidate_is_vetoed() {
    let root = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    support::edit(root.path(), "config/interview.yaml", "params: {threshold: 0.45,", "params: {threshold: -1,");
    let (_dir, answers) =
        temp_file("answers.yaml", "- I like oat milk, it tastes nutty and foams well.\n- The price is high.\n");
    let mut cmd = ruleweave(root.path());
    cmd.args(["run", "interview", "--events", "--input", answers.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for line in json_lines(&out) {
        let decision = line["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap();
        let b = &decision["breakdown"];
        assert!(b["candidates"].as_array().unwrap().iter().all(|c| c["vetoed"] == true), "{b}");
        assert_eq!(b["fallback"], "every candidate was vetoed: the fallback strategy `ease` answers");
        assert_eq!(b["unavailable"], json!(["closing"]));
        assert_eq!(line["output"]["decision"]["strategy"]["id"], "ease");
        assert_eq!(
            line["output"]["question"],
            "Let's take a step back: what do you enjoy most about oat milk in coffee?"
        );
    }
}

/// The six qualitative signals, read once per turn from the recent answers by the stand-in as a
/// model would, each consumed where it belongs: reasoning raises engagement, a stance that shifts
/// calls for depth, a terminal "don't know" vetoes digging, and answers falling away move the
/// phase clock on.
#[test]
fn the_interview_reads_six_signals_each_turn_and_uses_them() {
    let (_dir, answers) = temp_file(
        "answers.yaml",
        r#"
- I love oat milk because it tastes nutty, and I think my morning coffee became a little ritual of comfort.
- Actually I don't like it anymore, the foam is not good in espresso.
- I don't know, whatever, I don't care.
"#,
    );
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--events", "--input", answers.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let keys = ["uncertainty", "reasoning", "emotional", "contradiction", "knowledge_ceiling", "concept_depth"];
    for line in &lines {
        let s = &line["state"]["qualitative_signals"];
        assert_eq!(s["source"], "llm", "the stand-in answered as the model: {s}");
        assert_eq!(s["turn"], line["turn"]);
        for k in keys {
            assert!(s[k].is_object(), "{k} missing: {s}");
        }
    }
    let signals = |n: usize| lines[n]["state"]["qualitative_signals"].clone();
    let decision = |n: usize| {
        lines[n]["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap()["breakdown"].clone()
    };
    let candidate = |b: &Value, strategy: &str| {
        b["candidates"].as_array().unwrap().iter().find(|c| c["strategy"] == strategy).cloned().unwrap()
    };
    let raw = |c: &Value, scorer: &str| {
        c["scores"].as_array().unwrap().iter().find(|s| s["scorer"] == scorer).unwrap()["raw_score"].as_f64().unwrap()
    };

    // Turn 1: causal and metacognitive reasoning, an abstract answer; engagement counts the reasoning.
    let first = signals(0);
    assert_eq!(first["reasoning"]["causal"], true);
    assert_eq!(first["reasoning"]["metacognitive"], true);
    assert!(first["concept_depth"]["level"].as_f64().unwrap() > 0.5, "{first}");
    let intensity = first["emotional"]["intensity"].as_f64().unwrap();
    let level = (intensity + 0.3 * first["reasoning"]["score"].as_f64().unwrap()).min(1.0);
    assert!((raw(&candidate(&decision(0), "deepen"), "engagement") - (0.6 + 0.8 * level)).abs() < 1e-9);

    // Turn 2: the stance shifted (love → don't like): depth is favoured by the balance scorer.
    assert_eq!(signals(1)["contradiction"]["detected"], true);
    let b = decision(1);
    let (deepen, broaden) = (candidate(&b, "deepen"), candidate(&b, "bridge"));
    assert!(raw(&deepen, "depth_breadth_balance") > raw(&broaden, "depth_breadth_balance"), "{b}");

    // Turn 3: a terminal "don't know": the ceiling vetoes digging; the answer fell away.
    let third = signals(2);
    assert_eq!(third["knowledge_ceiling"], json!({"says_dont_know": true, "is_terminal": true}));
    assert_eq!(third["uncertainty"]["kind"], "terminal");
    assert_eq!(third["emotional"]["trajectory"], "falling");
    let deepen = candidate(&decision(2), "deepen");
    assert_eq!(
        (&deepen["vetoes"][0]["scorer"], &deepen["vetoes"][0]["is_veto"]),
        (&json!("knowledge_ceiling"), &json!(true))
    );
    let state = &lines[2]["state"];
    // The phases follow the turn count (emotional pacing is an option, off by default).
    assert_eq!((state["turn_count"].as_i64(), state["phase_clock"].as_i64()), (Some(3), Some(3)));
}

/// A whole interview on the stand-in: no turn fails, every one asks a question, and none asks
/// about a filler word (the pack's stop words) — through every phase, with "don't know"s and a
/// stance that shifts — until the answer to the closing question ends it, and the next is refused.
#[test]
fn a_whole_interview_never_fails_nor_asks_about_filler() {
    let answers = [
        "I usually have oat milk in my coffee because it tastes nutty and foams well.",
        "Honestly it takes a while to get used to, but now I really like it.",
        "The price is a bit high compared to regular milk.",
        "I don't know, whatever, I don't care about the packaging.",
        "It is fine.",
        "I think it matters for the environment, that is something I value.",
        "Actually I don't like the carton, it is not good for recycling.",
        "Maybe the texture, I guess, it is kind of creamy.",
        "I don't know much about sustainability but I am curious about it.",
        "My mornings feel like a little ritual with it.",
        "Nothing else really.",
        "Yes.",
    ];
    let text: String = answers.iter().map(|a| format!("- {a:?}\n")).collect();
    let (_dir, file) = temp_file("answers.yaml", &text);
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--events", "--input", file.to_str().unwrap()]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "the answer after the end is refused: {}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 12);
    let manifest = std::fs::read_to_string(repo_root().join("config/interview.yaml")).unwrap();
    let start = manifest.find("  stopwords: [").unwrap() + "  stopwords: [".len();
    let stopwords: Vec<String> = manifest[start..manifest[start..].find(']').unwrap() + start]
        .split(',')
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty())
        .collect();
    assert!(stopwords.len() > 50);
    let mut phases = std::collections::BTreeSet::new();
    let (last, lines) = lines.split_last().unwrap();
    let (thanks, lines) = lines.split_last().unwrap();
    assert!(last["error"]["message"].as_str().unwrap().contains("This interview is over"), "{last}");
    assert_eq!(thanks["output"]["finished"], true, "{thanks}");
    assert!(thanks["output"]["question"].as_str().unwrap().starts_with("Thank you, that was the last question"));
    for line in lines {
        assert!(line.get("error").is_none(), "turn {} failed: {line}", line["turn"]);
        let question = line["output"]["question"].as_str().unwrap().to_lowercase();
        assert!(question.ends_with('?'), "{question}");
        let decision = &line["output"]["decision"];
        phases.insert(decision["phase"].as_str().unwrap().to_owned());
        let about = decision["focus"]["label"].as_str().unwrap_or("");
        assert!(
            !stopwords.iter().any(|w| w == about),
            "turn {} asks about the filler word {about:?}: {question}",
            line["turn"]
        );
    }
    assert_eq!(phases.len(), 3, "every phase was reached: {phases:?}");
}

#[test]
fn the_interview_uses_the_models_and_falls_back_to_rules_when_they_fail() {
    let mock = MockLlm::start();
    // Turn 1: extraction and signals answer; turn 2: extraction fails three times, signals are not JSON.
    mock.judge(Reply::Content(json!({"concepts": ["oat milk", "foam"], "links": [["oat milk", "foam"]]}).to_string()))
        .judge(Reply::Content(
            json!({
                "uncertainty": {"kind": "productive", "level": 0.6},
                "reasoning": {"causal": false, "counterfactual": false, "metacognitive": false, "score": 0.0},
                "emotional": {"intensity": 0.9, "trajectory": "rising"},
                "contradiction": {"detected": false, "about": ""},
                "knowledge_ceiling": {"says_dont_know": true, "is_terminal": false},
                "concept_depth": {"level": 0.2},
                "note": "curious"
            })
            .to_string(),
        ))
        .chat(Reply::Content("What makes the foam matter to you?".into()))
        .judge(Reply::Status(500, "overloaded".into()))
        .judge(Reply::Status(500, "overloaded".into()))
        .judge(Reply::Status(500, "overloaded".into()))
        .judge(Reply::Content("I think the respondent is curious.".into()))
        .chat(Reply::Content("And the price?".into()));
    let (_dir, file) = temp_file(
        "answers.yaml",
        "- I don't know why, but oat milk makes a lovely foam.\n- Cheaper would be better, honestly.\n",
    );
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "interview", "--events", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "2")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let (first, second) = (&lines[0]["state"], &lines[1]["state"]);
    let labels = |s: &Value| s["nodes"].as_array().unwrap().iter().map(|n| n["label"].clone()).collect::<Vec<_>>();
    assert_eq!(labels(first), [json!("oat milk"), json!("foam")]);
    assert_eq!(first["edges"], json!([{"from": "n1", "to": "n2"}]));
    let signals = &first["qualitative_signals"];
    assert_eq!((&signals["source"], &signals["knowledge_ceiling"]["says_dont_know"]), (&json!("llm"), &json!(true)));
    assert_eq!((&signals["uncertainty"]["kind"], &signals["note"]), (&json!("productive"), &json!("curious")));
    assert_eq!(first["question"], "What makes the foam matter to you?");
    // The "don't know" was exploratory by the model's reading: deepening was not vetoed for it.
    let decision = lines[0]["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap();
    let deepen = decision["breakdown"]["candidates"].as_array().unwrap().iter().find(|c| c["strategy"] == "deepen");
    let ceiling = &deepen.expect("deepen on the newest concept")["vetoes"][0];
    assert_eq!((&ceiling["scorer"], &ceiling["is_veto"]), (&json!("knowledge_ceiling"), &json!(false)));
    assert_eq!(ceiling["signals"]["source"], "llm");
    // Turn 2: the heuristic grew the graph, the rules read the signals.
    assert_eq!(labels(second)[2..], [json!("cheaper")], "`better` is a filler word, no concept");
    assert_eq!(second["qualitative_signals"]["source"], "rules");
    assert_eq!(second["question"], "And the price?");
    assert_eq!(second["mentions"], json!({"price": 1, "texture": 1}));
    // What the models were asked.
    let asked = mock.seen_kind("judge");
    assert_eq!(asked.len(), 6);
    assert_eq!(asked[0]["model"], "gpt-4o-mini");
    assert!(asked[0]["messages"][0]["content"].as_str().unwrap().contains("Answer: I don't know why, but oat milk"));
    let chat = mock.seen_kind("chat");
    assert!(chat[0]["messages"][0]["content"].as_str().unwrap().contains("studying oat milk in coffee"));
    assert!(chat[0]["messages"][1]["content"].as_str().unwrap().contains("Strategy: "));
}

#[test]
fn the_interview_compares_by_embeddings_when_asked_and_by_words_when_they_fail() {
    let mock = MockLlm::start();
    let signals = json!({"emotional": {"intensity": 0.8, "trajectory": "steady"}, "note": "fine"}).to_string();
    let morning = json!({"concepts": ["morning"], "links": []}).to_string();
    let asked = "What gets you going at the start of the day?";
    // Turns 1 and 2: the embeddings endpoint answers (queued, since turn 3's failures queue after).
    for question in [asked, "And the price?"] {
        mock.judge(Reply::Content(morning.clone())).judge(Reply::Content(signals.clone()));
        mock.embedding(Reply::Content(String::new())).chat(Reply::Content(question.into()));
    }
    // Turn 3: the embeddings endpoint is down.
    mock.judge(Reply::Content(morning.clone()))
        .judge(Reply::Content(signals.clone()))
        .chat(Reply::Content("Thanks!".into()));
    for _ in 0..3 {
        mock.embedding(Reply::Status(500, "down".into()));
    }
    // The question asked means what deepening on "morning" would ask, in other words.
    let pair = |x: f32, y: f32| (0..26).map(|i| [x, y].get(i).copied().unwrap_or(0.0)).collect::<Vec<f32>>();
    mock.vector("why morning matters", &pair(0.6, 0.8)).vector(asked, &pair(0.8, 0.6));
    let (_dir, file) = temp_file("answers.yaml", "- I drink it every morning.\n- Mornings are slow.\n- Yes.\n");
    let out = ruleweave(&repo_root())
        .args(["run", "interview", "--events", "--set", "similarity=embedding", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "2")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let decision = |n: usize| {
        lines[n]["events"].as_array().unwrap().iter().find(|e| e["type"] == "decision").unwrap()["breakdown"].clone()
    };
    let deepen = |b: &Value| {
        let c = b["candidates"].as_array().unwrap().iter().find(|c| c["strategy"] == "deepen").unwrap().clone();
        c["vetoes"].as_array().unwrap().iter().find(|v| v["scorer"] == "recent_redundancy").cloned()
    };
    let (first, second, third) = (decision(0), decision(1), decision(2));
    assert_eq!(first["similarity"]["kind"], "embedding", "{}", first["similarity"]);
    assert_eq!(first["similarity"]["model"], "text-embedding-3-small");
    // Turn 2: the paraphrase is caught (cos 0.96 > 0.8); by words the two share nothing.
    assert_eq!(second["similarity"]["kind"], "embedding");
    let v = deepen(&second).expect("deepen reached recent_redundancy");
    assert_eq!((&v["is_veto"], &v["signals"]["kind"]), (&json!(true), &json!("embedding")), "{v}");
    assert_eq!(lines[1]["state"]["question"], "And the price?");
    // What was sent: focus descriptions and recent questions, each text once per provider.
    let sent = mock.seen_kind("embeddings");
    let inputs = |i: usize| {
        sent[i]["input"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert!(inputs(0).contains(&"why morning matters".to_owned()), "{:?}", inputs(0));
    assert!(inputs(1).contains(&asked.to_owned()), "{:?}", inputs(1));
    assert!(!inputs(1).contains(&"why morning matters".to_owned()), "embedded in turn 1, cached since");
    assert!(second["similarity"]["cached"].as_u64().unwrap() > 0, "{}", second["similarity"]);
    // Turn 3: three 500s; the turn goes on comparing words and says why.
    assert_eq!(third["similarity"]["kind"], "lexical");
    assert!(third["similarity"]["why"].as_str().unwrap().contains("500"), "{}", third["similarity"]);
    assert_eq!(lines[2]["state"]["question"], "Thanks!");
    let failed =
        lines[2]["events"].as_array().unwrap().iter().find(|e| e["type"] == "llm" && e["embedded"].is_object());
    assert!(failed.unwrap()["error"].is_string());
}
