//! The designer pack through the binary: the designer model on its own named provider (a local
//! server speaking OpenAI's protocol, failing as real ones do) with the GameDesignDocument schema
//! as the request's structured-output format, the rest of the pipeline on the stand-in; and the
//! whole pipeline offline.

use crate::support;

use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply};
use support::{json_lines, repo_root, ruleweave, stderr, temp_file};

fn heart() -> Value {
    let chambers = ["Left Ventricle", "Right Ventricle", "Left Atrium", "Right Atrium"];
    json!({
        "title": "Heart Anatomy", "subject": "Biology", "difficulty": "beginner", "estimated_duration_minutes": 10,
        "narrative_intro": "Inside the heart.", "completion_message": "Well done.", "all_zone_labels": chambers,
        "scenes": [{
            "title": "Label the Heart", "learning_goal": "Name the four chambers.", "zone_labels": chambers,
            "needs_diagram": true,
            "mechanics": [
                {"mechanic_type": "drag_drop", "instruction_text": "Drag each label.", "zone_labels_used": chambers,
                 "content_brief": {"generation_goal": "Labels for 4 chambers"}, "expected_item_count": 4},
                {"mechanic_type": "click_to_identify", "instruction_text": "Click the chamber described.",
                 "zone_labels_used": chambers, "content_brief": {"generation_goal": "What each chamber does"},
                 "expected_item_count": 4}
            ]
        }]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_designer_model_gets_the_schema_and_its_mistakes_back() {
    let mock = MockLlm::start();
    mock.judge(Reply::Status(500, r#"{"error": {"message": "overloaded"}}"#.into()));
    mock.judge(Reply::Content("Sure! Here's the game: {\"title\": \"Heart\", \"scenes\": [".into()));
    mock.judge(Reply::Content(heart().to_string()));
    let (_dir, file) = temp_file("questions.json", r#"["the chambers of the heart"]"#);
    let out = ruleweave(&repo_root())
        .args(["run", "designer", "--events", "--input"])
        .arg(&file)
        .env("GEMINI_API_KEY", "gm-test")
        .env("GEMINI_BASE_URL", &mock.base_url)
        // Gemini gets JSON mode by default (tests/providers.rs); here it takes the schema.
        .env("GEMINI_STRUCTURED_OUTPUT", "json_schema")
        .env("RULEWEAVE_LLM_RETRIES", "1")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1")
        .output()
        .unwrap();
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{}", stderr(&out));
    let o = &lines[0]["output"];
    assert_eq!(o["status"], json!("complete"), "{}", lines[0]);
    assert_eq!(o["attempts"], json!(1));
    assert_eq!(o["plan"]["total_max_score"], json!(80));
    let seen = mock.seen();
    assert_eq!(seen.len(), 3, "the 500 retried, then the broken reply sent back once");
    for s in &seen {
        assert_eq!(s.body["model"], "gemini-2.5-pro");
        assert_eq!(s.authorization.as_deref(), Some("Bearer gm-test"));
        let format = &s.body["response_format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["json_schema"]["name"], "design");
        assert_eq!(format["json_schema"]["schema"]["title"], "GameDesignDocument");
        assert!(format["json_schema"]["schema"]["$defs"]["mechanic"].is_object());
    }
    let messages = seen[2].body["messages"].as_array().unwrap();
    let feedback = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(feedback.starts_with("Your reply is not valid JSON"), "{feedback}");
    assert_eq!(messages[messages.len() - 2]["role"], "assistant");
    let events = lines[0]["events"].as_array().unwrap();
    let asked_again = events.iter().any(|e| {
        e["type"] == "log"
            && e["node"] == "design"
            && e["message"].as_str().unwrap().starts_with("asking again (1 of 2)")
    });
    assert!(asked_again, "the retry is an event");
}

#[test]
fn the_whole_pipeline_runs_offline() {
    let (_dir, file) = temp_file(
        "questions.yaml",
        "- the water cycle\n- {question: the chambers of the heart, subject: biology, context: year 9}\n",
    );
    let out = ruleweave(&repo_root()).args(["run", "designer", "--input"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2);
    for l in &lines {
        let o = &l["output"];
        assert_eq!(o["status"], json!("complete"), "{l}");
        assert_eq!(o["blueprint_validation"]["passed"], json!(true));
        assert_eq!(o["blueprint"]["sceneTransitions"][0]["type"], json!("score_gate"));
    }
    assert_eq!(lines[1]["output"]["design"]["subject"], json!("biology"));
    // The stand-in shapes the game by the question: a cycle is put in order, a structure labelled.
    assert_eq!(lines[0]["output"]["design"]["title"], json!("How the water cycle works"));
    assert_eq!(lines[0]["output"]["design"]["scenes"][0]["mechanics"][0]["mechanic_type"], json!("sequencing"));
    assert_eq!(lines[1]["output"]["design"]["title"], json!("Explore the chambers of the heart"));
    assert_eq!(lines[1]["output"]["design"]["scenes"][0]["needs_diagram"], json!(true));
}
