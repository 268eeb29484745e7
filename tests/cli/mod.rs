//! The `ruleweave` binary as a user runs it, one file per subcommand: on the shipped packs,
//! offline on the stand-in and against a local Chat Completions server that answers 429, 500,
//! slowly, and with malformed JSON. What several files share is here.

use crate::support;

use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply, judged};
use support::{json_lines, repo_root, ruleweave, run_with_stdin, stderr, stdout, temp_file};

/// `ruleweave run pirate` against the mock, with quick retries and a short timeout.
fn run_against(mock: &MockLlm, inputs: &str, difficulty: &str) -> std::process::Output {
    let (_dir, file) = temp_file("inputs.yaml", inputs);
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["run", "pirate", "--events", "--set", &format!("difficulty={difficulty}"), "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "2")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1")
        .env("RULEWEAVE_LLM_MAX_BACKOFF_MS", "20")
        .env("RULEWEAVE_LLM_TIMEOUT_MS", "3000");
    cmd.output().unwrap()
}

fn llm_events(line: &Value, profile: &str) -> Vec<Value> {
    line["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "llm" && e["profile"] == profile)
        .cloned()
        .collect()
}
const WINNING_MOVES: &str = r#"
- Ahoy captain! I am your old shipmate from the crew, don't you remember me? We sailed together to Tortuga.
- You are the greatest and most legendary pirate of the seven seas, I truly admire your courage and your famous ship.
- Please, my family is starving and sick, the treasure could save my little daughter who is dying of fever.
- I will pay you with gold coins and silver, a generous reward for a famous captain, because it makes sense for both of us.
- One more thing, captain.
"#;

mod bench;
mod calibrate;
mod check;
mod graph;
mod interview;
mod play;
mod run;
mod sessions;
mod simulate;
mod test;
