//! The model providers against a local server speaking their protocols: OpenAI's streaming and
//! embeddings, Anthropic's Messages API (plain and streaming), and renamed models.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ruleweave::llm::{
    Anthropic, AnthropicConfig, EmbedRequest, LlmRequest, Message, ModelMap, OpenAi, OpenAiConfig, Provider,
    RetryPolicy,
};
use ruleweave::{Engine, Event, LlmChoice};
use serde_json::json;
use support::mock_llm::{MockLlm, Reply, letter_counts};

fn request(model: &str, json_mode: bool) -> LlmRequest {
    LlmRequest {
        provider: None,
        default_model: None,
        profile: "p".into(),
        model: model.into(),
        messages: vec![Message::new("system", "You are a pirate."), Message::new("user", "Ahoy!")],
        temperature: Some(0.3),
        max_tokens: None,
        json: json_mode,
        schema: None,
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

fn embed(texts: &[&str]) -> EmbedRequest {
    EmbedRequest {
        profile: "embedder".into(),
        model: "text-embedding-3-small".into(),
        texts: texts.iter().map(|t| t.to_string()).collect(),
    }
}

#[tokio::test]
async fn openai_embeds_in_input_order_and_never_sends_a_text_twice() {
    let mock = MockLlm::start();
    let config = OpenAiConfig { api_key: Some("sk-e".into()), base_url: mock.base_url.clone(), ..Default::default() };
    let p = OpenAi::new(config).unwrap();
    // The mock answers in reverse order; `index` puts each vector back with its text.
    let r = p.embed(&embed(&["why foam matters", "abc", "why foam matters"])).await.unwrap();
    assert_eq!(r.vectors.len(), 3);
    assert_eq!(&r.vectors[0][..], &letter_counts("why foam matters")[..]);
    assert_eq!(&r.vectors[1][..], &letter_counts("abc")[..]);
    assert_eq!(r.vectors[0], r.vectors[2]);
    assert_eq!((r.model.as_str(), r.prompt_tokens, r.cached, r.attempts), ("text-embedding-3-small", 4, 0, 1));
    let sent = mock.seen_kind("embeddings");
    assert_eq!(sent[0]["input"], json!(["why foam matters", "abc"]), "each distinct text once, in order");
    assert_eq!(sent[0]["model"], "text-embedding-3-small");
    assert_eq!(mock.seen()[0].authorization.as_deref(), Some("Bearer sk-e"));
    // Asked again with one new text: only that one is sent.
    let r = p.embed(&embed(&["why foam matters", "the price"])).await.unwrap();
    assert_eq!((r.cached, r.attempts), (1, 1));
    assert_eq!(&r.vectors[1][..], &letter_counts("the price")[..]);
    assert_eq!(mock.seen_kind("embeddings")[1]["input"], json!(["the price"]));
    // All cached: no request at all.
    let r = p.embed(&embed(&["abc"])).await.unwrap();
    assert_eq!((r.cached, r.attempts, r.prompt_tokens), (1, 0, 0));
    assert_eq!(mock.seen_kind("embeddings").len(), 2);
}

#[tokio::test]
async fn openai_embeddings_retry_429_and_report_failures() {
    let mock = MockLlm::start();
    let config = OpenAiConfig { base_url: mock.base_url.clone(), retry: quick(), ..Default::default() };
    let p = OpenAi::new(config).unwrap();
    mock.embedding(Reply::Status(429, "slow down".into()));
    let r = p.embed(&embed(&["one"])).await.unwrap();
    assert_eq!(r.attempts, 2);
    // 500 until the retries run out: an error, and nothing cached.
    mock.embedding(Reply::Status(500, "down".into())).embedding(Reply::Status(500, "down".into()));
    let e = p.embed(&embed(&["two"])).await.unwrap_err();
    assert!(e.detail().contains("500"), "{e}");
    // Replies that break the protocol are errors that say how.
    let cases = [
        ("not json", "not valid JSON"),
        (r#"{"object": "list"}"#, "no data list"),
        (
            r#"{"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]}"#,
            "1 texts were sent but 2",
        ),
        (r#"{"data": [{"index": 0, "embedding": "AAAA"}]}"#, "no embedding list"),
        (r#"{"data": [{"index": 0, "embedding": [1.0, "x"]}]}"#, "not all finite numbers"),
        (r#"{"data": [{"index": 0, "embedding": [1.0, 1e39]}]}"#, "not all finite numbers"),
        (r#"{"data": [{"index": 5, "embedding": [1.0]}]}"#, "index 5"),
    ];
    for (body, says) in cases {
        mock.embedding(Reply::Raw(body.into()));
        let e = p.embed(&embed(&["three"])).await.unwrap_err();
        assert!(e.detail().contains(says), "{body}: {e}");
    }
    // Once the server behaves, the text is embedded (no failure was cached).
    assert_eq!(&p.embed(&embed(&["three"])).await.unwrap().vectors[0][..], &letter_counts("three")[..]);
}

#[tokio::test]
async fn embeddings_follow_model_renames_and_anthropic_has_none() {
    let mock = MockLlm::start();
    let openai: Arc<dyn Provider> =
        Arc::new(OpenAi::new(OpenAiConfig { base_url: mock.base_url.clone(), ..Default::default() }).unwrap());
    // RULEWEAVE_MODEL names a chat model: it does not rename embedding models; the map does.
    let map = ModelMap {
        all: Some("llama3.2".into()),
        map: vec![("text-embedding-3-small".into(), "nomic-embed-text".into())],
    };
    let mapped = map.wrap(openai);
    mapped.embed(&embed(&["x"])).await.unwrap();
    mapped.embed(&EmbedRequest { model: "text-embedding-3-large".into(), ..embed(&["y"]) }).await.unwrap();
    let models: Vec<_> = mock.seen_kind("embeddings").iter().map(|b| b["model"].clone()).collect();
    assert_eq!(models, [json!("nomic-embed-text"), json!("text-embedding-3-large")]);
    let config = AnthropicConfig {
        api_key: "k".into(),
        base_url: mock.root_url(),
        timeout: std::time::Duration::from_secs(5),
        retry: quick(),
    };
    let e = Anthropic::new(config).unwrap().embed(&embed(&["x"])).await.unwrap_err();
    assert!(e.detail().contains("anthropic provider has no embeddings endpoint"), "{e}");
}

/// The debate as designed: the side for the motion on the default provider (OpenAI's wire), the
/// side against on Gemini's OpenAI-compatible endpoint (its own key and URL), each server hearing
/// only its own side; a model the operator names as a reasoning model is asked with
/// `max_completion_tokens` and no temperature; a profile with a JSON Schema on Gemini gets JSON
/// mode (which that endpoint takes) rather than the schema.
#[tokio::test]
async fn each_side_of_a_debate_speaks_through_its_own_provider() {
    let openai = MockLlm::start();
    let gemini = MockLlm::start();
    let vars: HashMap<&str, String> = [
        ("OPENAI_API_KEY", "sk-openai".to_owned()),
        ("OPENAI_BASE_URL", openai.base_url.clone()),
        ("GOOGLE_API_KEY", "g-key".to_owned()),
        ("GEMINI_BASE_URL", gemini.base_url.clone()),
        ("RULEWEAVE_REASONING_MODELS", "gpt-4o-mini".to_owned()),
        ("RULEWEAVE_LLM_RETRIES", "0".to_owned()),
    ]
    .into();
    let vars = Arc::new(vars);
    let (a, b) = (vars.clone(), vars.clone());
    let engine = Engine::builder(support::repo_root())
        .llm(LlmChoice::from_vars(move |k| a.get(k).cloned()).unwrap())
        .named_providers(ruleweave::llm::NamedProviders::from_vars(move |k| b.get(k).cloned()))
        .build();
    let options = json!({"rounds": 1, "fact_check": "standard"});
    let mut debate = engine.open("debate", options.as_object().unwrap()).await.unwrap();
    let r = debate.turn(json!("start")).await.unwrap();
    assert_eq!(r.output["transcript"].as_array().unwrap().len(), 2, "{}", r.output);

    let heard = |mock: &MockLlm| -> Vec<(String, String)> {
        mock.seen()
            .iter()
            .filter(|s| s.body["messages"].to_string().contains("SIDE: "))
            .map(|s| (s.body["model"].as_str().unwrap().to_owned(), s.authorization.clone().unwrap_or_default()))
            .collect()
    };
    assert_eq!(heard(&gemini), [("gemini-2.0-flash".to_owned(), "Bearer g-key".to_owned())], "the side against");
    assert_eq!(heard(&openai), [("gpt-4o".to_owned(), "Bearer sk-openai".to_owned())], "the side for");
    let speakers: Vec<&str> =
        r.output["transcript"].as_array().unwrap().iter().map(|t| t["model"].as_str().unwrap()).collect();
    assert_eq!(speakers, ["gpt-4o", "gemini-2.0-flash"]);
    // The claim extractor runs on gpt-4o-mini, named a reasoning model.
    let claims = openai.seen_kind("judge").into_iter().find(|b| b["model"] == "gpt-4o-mini").expect("claims asked");
    assert_eq!((claims.get("temperature"), &claims["max_completion_tokens"]), (None, &json!(400)), "{claims}");

    // A schema-bearing profile on Gemini: JSON mode, the schema left to the prompt.
    gemini.judge(Reply::Content("{\"title\": \"x\"}".into()));
    let mut design = engine.open("designer", &Default::default()).await.unwrap();
    let _ = design.turn(json!("the chambers of the heart")).await;
    let asked = gemini.seen_kind("judge");
    let designer = asked.iter().find(|b| b["model"] == "gemini-2.5-pro").expect("the designer asked Gemini");
    assert_eq!(designer["response_format"], json!({"type": "json_object"}), "{designer}");
}
