//! The model providers against a local server speaking their protocols: OpenAI's streaming,
//! Anthropic's Messages API (plain and streaming), and renamed models.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ruleweave::llm::{Anthropic, AnthropicConfig, LlmRequest, Message, OpenAi, OpenAiConfig, Provider, RetryPolicy};
use ruleweave::{Engine, Event, LlmChoice};
use serde_json::json;
use support::mock_llm::{MockLlm, Reply};

fn request(model: &str, json_mode: bool) -> LlmRequest {
    LlmRequest {
        profile: "p".into(),
        model: model.into(),
        messages: vec![Message::new("system", "You are a pirate."), Message::new("user", "Ahoy!")],
        temperature: Some(0.3),
        max_tokens: None,
        json: json_mode,
    }
}

fn quick() -> RetryPolicy {
    RetryPolicy { max_retries: 1, base_backoff: std::time::Duration::from_millis(1), ..RetryPolicy::default() }
}

#[tokio::test]
async fn openai_streams_tokens_and_reports_usage() {
    let mock = MockLlm::start();
    mock.chat(Reply::Content("Arr, who goes there?".into()));
    let p = OpenAi::new(OpenAiConfig { base_url: mock.base_url.clone(), ..Default::default() }).unwrap();
    let pieces: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = pieces.clone();
    let r = p
        .complete(
            &request("gpt-4o-mini", false),
            Some(Arc::new(move |t: &str| sink.lock().unwrap().push(t.to_owned()))),
        )
        .await
        .unwrap();
    assert_eq!(r.content, "Arr, who goes there?");
    assert_eq!(pieces.lock().unwrap().concat(), r.content);
    assert!(pieces.lock().unwrap().len() > 1, "it arrived in pieces");
    assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (11, 7));
    let body = &mock.seen_kind("chat")[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert!(mock.seen()[0].authorization.is_none(), "no key, no header (local servers)");
}

#[tokio::test]
async fn anthropic_speaks_the_messages_api() {
    let mock = MockLlm::start();
    mock.message(Reply::Content("{\"ok\": true}".into()));
    let config = AnthropicConfig {
        api_key: "ak-test".into(),
        base_url: mock.root_url(),
        timeout: std::time::Duration::from_secs(5),
        retry: quick(),
    };
    let p = Anthropic::new(config).unwrap();
    let r = p.complete(&request("claude-haiku-test", true), None).await.unwrap();
    assert_eq!(r.content, "{\"ok\": true}");
    assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (13, 5));
    let seen = &mock.seen()[0];
    assert_eq!(seen.headers["x-api-key"], "ak-test");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(
        seen.body,
        json!({
            "model": "claude-haiku-test",
            "max_tokens": 1024,
            "temperature": 0.3,
            "system": "You are a pirate.\n\nReply with a single JSON object and nothing else.",
            "messages": [{"role": "user", "content": "Ahoy!"}],
        })
    );
}

#[tokio::test]
async fn anthropic_streams_and_retries_overload() {
    let mock = MockLlm::start();
    mock.message(Reply::Status(529, "Overloaded".into())).message(Reply::Content("Blow me down!".into()));
    let config = AnthropicConfig {
        api_key: "k".into(),
        base_url: mock.root_url(),
        timeout: std::time::Duration::from_secs(5),
        retry: quick(),
    };
    let p = Anthropic::new(config).unwrap();
    let pieces: Arc<Mutex<String>> = Arc::default();
    let sink = pieces.clone();
    let r = p
        .complete(&request("claude-x", false), Some(Arc::new(move |t: &str| sink.lock().unwrap().push_str(t))))
        .await
        .unwrap();
    assert_eq!(r.content, "Blow me down!");
    assert_eq!(*pieces.lock().unwrap(), "Blow me down!");
    assert_eq!(r.attempts, 2);
    assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (13, 5));
}

#[tokio::test]
async fn anthropic_refuses_models_it_does_not_serve() {
    let mock = MockLlm::start();
    let config = AnthropicConfig {
        api_key: "k".into(),
        base_url: mock.root_url(),
        timeout: std::time::Duration::from_secs(5),
        retry: quick(),
    };
    let e = Anthropic::new(config).unwrap().complete(&request("gpt-4o-mini", false), None).await.unwrap_err();
    assert!(e.detail().contains("RULEWEAVE_MODEL_MAP=gpt-4o-mini=claude-"), "{e}");
    assert!(mock.seen().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn the_environment_picks_and_maps_models_for_a_whole_game() {
    let mock = MockLlm::start();
    let vars: HashMap<&str, String> = [
        ("RULEWEAVE_LLM", "anthropic".to_owned()),
        ("ANTHROPIC_API_KEY", "k".to_owned()),
        ("ANTHROPIC_BASE_URL", mock.root_url()),
        ("RULEWEAVE_MODEL", "claude-for-everything".to_owned()),
    ]
    .into();
    let choice = LlmChoice::from_vars(|k| vars.get(k).cloned()).unwrap();
    mock.message(Reply::Content("{\"total_score\": 12}".into())).message(Reply::Content("Arr.".into()));
    let engine = Engine::builder(support::repo_root()).llm(choice).build();
    let mut game = engine.open("pirate", &Default::default()).await.unwrap();
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = events.clone();
    let r = game
        .turn_with_events(json!({"message": "Ahoy!"}), Arc::new(move |e: &Event| sink.lock().unwrap().push(e.clone())))
        .await
        .unwrap();
    assert_eq!(r.output["merit_score"], 12);
    assert_eq!(r.output["pirate_response"], "Arr.");
    let models: Vec<String> = mock.seen().iter().map(|s| s.body["model"].as_str().unwrap().to_owned()).collect();
    assert_eq!(models, ["claude-for-everything", "claude-for-everything"]);
    let tokens = events.lock().unwrap().iter().filter(|e| matches!(e, Event::Token { .. })).count();
    assert!(tokens > 0, "a watched turn streams");
}
