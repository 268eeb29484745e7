//! Test helpers: a provider with canned replies that records what it was asked.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, Provider, TokenSink, Usage};
use ruleweave::{Engine, Error, ErrorKind, Result};

#[allow(unused_imports)] // each test binary and bench that includes this uses some
pub use ruleweave_testkit::{copy_of, edit, postgres, repo_root};

/// The fixture packs of `tests/packs/`.
pub fn fixtures() -> PathBuf {
    repo_root().join("tests/packs")
}

/// Replies queued per profile; `Err` entries fail the call. Every request is recorded.
#[derive(Default)]
pub struct Canned {
    queues: Mutex<HashMap<String, VecDeque<std::result::Result<String, String>>>>,
    pub requests: Mutex<Vec<LlmRequest>>,
}

impl Canned {
    pub fn new() -> Arc<Self> {
        Arc::new(Canned::default())
    }

    /// Queues a reply for `profile`.
    pub fn reply(&self, profile: &str, text: impl Into<String>) -> &Self {
        self.queues.lock().unwrap().entry(profile.into()).or_default().push_back(Ok(text.into()));
        self
    }

    /// Queues a failure for `profile`.
    pub fn fail(&self, profile: &str, why: &str) -> &Self {
        self.queues.lock().unwrap().entry(profile.into()).or_default().push_back(Err(why.into()));
        self
    }

    /// The requests made for `profile`, in order.
    pub fn asked(&self, profile: &str) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().iter().filter(|r| r.profile == profile).cloned().collect()
    }
}

impl Provider for Canned {
    fn name(&self) -> &str {
        "canned"
    }

    fn complete<'a>(&'a self, request: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        self.requests.lock().unwrap().push(request.clone());
        let next = self.queues.lock().unwrap().get_mut(&request.profile).and_then(|q| q.pop_front());
        let result = match next {
            Some(Ok(content)) => {
                Ok(LlmResponse { content, model: request.model.clone(), usage: Usage::default(), attempts: 1 })
            }
            Some(Err(why)) => Err(Error::new(ErrorKind::Llm, why)),
            None => Err(Error::new(ErrorKind::Llm, format!("no canned reply for profile {}", request.profile))),
        };
        Box::pin(std::future::ready(result))
    }
}

/// A reply computed from the request (`Err` fails the call).
pub type Answer = Box<dyn Fn(&LlmRequest) -> std::result::Result<String, String> + Send + Sync>;

/// A model whose replies a test computes from each request; every request is recorded.
pub struct Answering {
    answer: Answer,
    asked: Mutex<Vec<LlmRequest>>,
}

impl Answering {
    pub fn new(
        answer: impl Fn(&LlmRequest) -> std::result::Result<String, String> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Answering { answer: Box::new(answer), asked: Mutex::new(Vec::new()) })
    }

    /// The requests made for `profile`, in order.
    pub fn asked(&self, profile: &str) -> Vec<LlmRequest> {
        self.asked.lock().unwrap().iter().filter(|r| r.profile == profile).cloned().collect()
    }
}

impl Provider for Answering {
    fn name(&self) -> &str {
        "answering"
    }

    fn complete<'a>(&'a self, request: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        self.asked.lock().unwrap().push(request.clone());
        let r = (self.answer)(request)
            .map(|content| LlmResponse { content, model: request.model.clone(), usage: Usage::default(), attempts: 1 })
            .map_err(|why| Error::new(ErrorKind::Llm, why));
        Box::pin(std::future::ready(r))
    }
}

/// An engine over the repository's packs answered by `canned`.
pub fn engine(canned: &Arc<Canned>) -> Engine {
    Engine::builder(repo_root()).provider(canned.clone()).build()
}

/// A judge reply with a total and nothing else.
pub fn judged(total: i64) -> String {
    format!(
        r#"{{"total_score": {total}, "strategy_variety": 0, "conversation_depth": 0, "creativity": 0, "persistence": 0}}"#
    )
}

/// Writes a pack root into a fresh temporary directory: `files` are (path, contents).
pub fn write_root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// A provider that never answers, and says when it has been asked.
#[derive(Default)]
pub struct Silent {
    pub asked: tokio::sync::Notify,
}

impl Provider for Silent {
    fn name(&self) -> &str {
        "silent"
    }

    fn complete<'a>(&'a self, _: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }
}

/// A copy of the pack root `tests/<name>/` in a temporary directory, to edit freely.
pub fn copy_root(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ruleweave_testkit::copy_tree(&repo_root().join("tests").join(name), dir.path());
    dir
}
