//! `ruleweave new PACK`: a small working pack to start from — a manifest, a script, a template, a
//! stand-in model and a test case — that passes `check` and `test` as created.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The new pack's name (letters, digits and `_`, starting with a letter).
    pack: String,
}

const MANIFEST: &str = r#"# yaml-language-server: $schema=../docs/manifest.schema.json
# PACK: a model answers each message; the turns are counted. A start to edit: every key a
# manifest may have is in docs/manifest.schema.json (your editor completes them) and docs/packs.md.
name: PACK
description: A model answers each message, and the turns are counted.

llm:
  narrator:
    description: Answers the player.
    model: gpt-4o-mini
    temperature: 0.7
    max_tokens: 200

# The offline model `play`, `run` and `test` use when no API key is set.
standin: standin.rhai::respond

input:
  message: {type: string, required: true, max_length: 2000, doc: What the player says.}

state:
  turns: {type: int, doc: Turns played.}
  history: {type: list, reducer: append, doc: 'The conversation: #{role, content}.'}
  reply: {type: string, doc: The last reply.}

output: [reply, turns]

display:
  reply: "{{ reply }}"
  status: "turn {{ turns }}"

graph:
  nodes:
    listen:
      script: PACK.rhai::listen
      doc: Counts the turn and adds the message to the history.
    answer:
      llm: narrator
      system: system.j2
      history: {from: history, last: 10}
      into: reply
    remember:
      script: PACK.rhai::remember
      doc: Adds the reply to the history.
  edges:
    - START -> listen
    - listen -> answer
    - answer -> remember
    - remember -> END
"#;

const SCRIPT: &str = r#"// The rules of PACK. A node function sees the state as `this` (read-only) and returns the
// fields to update; docs/host-functions.md lists what scripts may call.

/// Before the model answers: count the turn, remember the message.
fn listen() {
    #{turns: this.turns + 1, history: [#{role: "user", content: input().message}]}
}

/// After it answered: remember the reply.
fn remember() {
    #{history: [#{role: "assistant", content: this.reply}]}
}
"#;

const STANDIN: &str = r#"// The offline stand-in model: deterministic, so tests can expect its words.

fn respond(request) {
    let last = request.messages[-1].content;
    `You said: ${last}`
}
"#;

const SYSTEM: &str = "You are the narrator of a short interactive story. Answer in two sentences at most.\n";

const CASE: &str = r#"name: the stand-in answers and the turns are counted
turns:
  - input: Hello there
    expect: {turns: 1, reply: "You said: Hello there"}
  - input: What happens next?
    expect: {turns: 2, reply: "You said: What happens next?"}
"#;

pub(super) fn run(root: &Path, args: Args) -> Result<ExitCode> {
    let name = args.pack.as_str();
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64;
    if !ok {
        bail!("`{name}` cannot name a pack: use lowercase letters, digits and `_`, starting with a letter");
    }
    let manifest = root.join("config").join(format!("{name}.yaml"));
    if manifest.exists() {
        bail!("{} exists already", manifest.display());
    }
    let files = [
        (format!("config/{name}.yaml"), MANIFEST.replace("PACK", name)),
        (format!("scripts/{name}/{name}.rhai"), SCRIPT.replace("PACK", name)),
        (format!("scripts/{name}/standin.rhai"), STANDIN.to_owned()),
        (format!("prompts/{name}/system.j2"), SYSTEM.to_owned()),
        (format!("tests/{name}/first.yaml"), CASE.to_owned()),
    ];
    for (path, _) in &files {
        let p = root.join(path);
        if p.exists() {
            bail!("{} exists already", p.display());
        }
    }
    for (path, text) in &files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().expect("a file has a folder"))?;
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
        println!("created {path}");
    }
    let schema = root.join("docs/manifest.schema.json");
    if !schema.exists() {
        std::fs::create_dir_all(root.join("docs"))?;
        std::fs::write(&schema, serde_json::to_string_pretty(&ruleweave::manifest_schema())? + "\n")?;
        println!("created docs/manifest.schema.json (the manifest schema your editor checks against)");
    }
    println!(
        "\nnext: ruleweave check · ruleweave play {name} · ruleweave test {name} · edit config/{name}.yaml and scripts/{name}/"
    );
    Ok(ExitCode::SUCCESS)
}
