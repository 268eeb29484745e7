//! A job's event stream (`GET /v1/jobs/{job}/events`), read as a client reads it.

use serde_json::Value;

/// A job's event stream, as a client reads it.
pub struct JobEvents {
    response: reqwest::Response,
    parser: ruleweave_testkit::sse::Parser,
    job: String,
}

impl JobEvents {
    pub async fn open(server: &str, job: &str) -> JobEvents {
        Self::open_as(server, job, None).await
    }

    /// The stream, asked for with `key`.
    pub async fn open_as(server: &str, job: &str, key: Option<&str>) -> JobEvents {
        let mut asked = crate::support::http().get(format!("{server}/v1/jobs/{job}/events"));
        if let Some(key) = key {
            asked = asked.bearer_auth(key);
        }
        let response = asked.send().await.unwrap();
        assert_eq!(response.status(), 200);
        JobEvents { response, parser: Default::default(), job: job.to_owned() }
    }

    /// The next event: its name and the job it carries.
    pub async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(e) = self.parser.next() {
                let body: Value = serde_json::from_str(&e.data).unwrap();
                assert_eq!(body["job"], self.job.as_str());
                return (e.name, body);
            }
            let piece = tokio::time::timeout(std::time::Duration::from_secs(120), self.response.chunk())
                .await
                .expect("the job's stream went quiet")
                .unwrap()
                .expect("the stream ended before the job did");
            self.parser.feed(&piece);
        }
    }

    /// Reads on until the job ends: the progress events seen, and the last event (`done`,
    /// `failed`, `cancelled`) with the job.
    pub async fn end(&mut self) -> (usize, String, Value) {
        let mut progress = 0;
        loop {
            match self.next().await {
                (name, body) if name == "progress" => {
                    assert_eq!(body["state"], "running");
                    progress += 1;
                }
                (name, body) => return (progress, name, body),
            }
        }
    }
}
