//! docs/packs.md's first pack, followed to the letter: its commands run, each code block goes where
//! its step says, and the riddle it builds opens on its riddle, is solved by its answer, saves a
//! playtest that `test` passes, and follows an edited answer offline.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::{repo_root, ruleweave, run_with_stdin, stderr, stdout};

/// The fenced blocks of the tutorial, in order: (language, text with the list's indent removed).
fn tutorial_blocks() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(repo_root().join("docs/packs.md")).unwrap();
    let start = doc.find("## Your first pack, step by step").expect("the tutorial's heading");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.trim_start().strip_prefix("```") else { continue };
        let indent = line.len() - line.trim_start().len();
        let mut text = String::new();
        for l in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            text.push_str(l.get(indent..).unwrap_or(l.trim_start()));
            text.push('\n');
        }
        blocks.push((lang.to_owned(), text));
    }
    blocks
}

/// `a` with `b` merged in as a person merges a snippet: each map key by key, anything else
/// (a list, a value) replaced.
fn merged(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            for (k, v) in b {
                let old = a.remove(&k).unwrap_or(Value::Null);
                a.insert(k, merged(old, v));
            }
            Value::Object(a)
        }
        (_, b) => b,
    }
}

fn run(root: &Path, args: &[&str]) -> std::process::Output {
    let out = ruleweave(root).args(args).output().unwrap();
    assert!(out.status.success(), "ruleweave {args:?}: {}{}", stdout(&out), stderr(&out));
    out
}

/// `play riddle`, with `lines` typed: the screen after the banner's command list.
fn play(root: &Path, lines: &str) -> String {
    let mut cmd = ruleweave(root);
    cmd.args(["play", "riddle", "--no-watch"]);
    let out = run_with_stdin(cmd, lines);
    let text = stdout(&out);
    let start = text.find("/quit\n").map_or(0, |i| i + "/quit\n".len());
    text[start..].to_owned()
}

#[test]
fn the_tutorial_builds_a_riddle_that_plays_saves_and_follows_its_answer() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let blocks = tutorial_blocks();
    let langs: Vec<&str> = blocks.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(langs, ["sh", "jinja", "yaml", "rhai", "rhai"], "the tutorial's steps changed: update this test");

    // The commands, as written (each line's command before its comment).
    for line in blocks[0].1.lines() {
        let command = line.split('#').next().unwrap().trim();
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(args[0], "ruleweave", "{line}");
        if args[1] == "play" {
            let screen = play(root, "hello\n");
            assert!(screen.starts_with("> riddle (stand-in) › You said: hello"), "{screen}");
        } else {
            run(root, &args[1..]);
        }
    }

    // 1. The judge's template.
    std::fs::write(root.join("prompts/riddle/judge.j2"), &blocks[1].1).unwrap();
    // 2. Merged into the manifest (written back as JSON, which is YAML).
    let manifest = root.join("config/riddle.yaml");
    let scaffold: Value = serde_saphyr::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let snippet: Value = serde_saphyr::from_str(&blocks[2].1).unwrap();
    std::fs::write(&manifest, serde_json::to_string_pretty(&merged(scaffold, snippet)).unwrap()).unwrap();
    // 3. The functions, added to the script.
    let script = root.join("scripts/riddle/riddle.rhai");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("{text}\n{}", blocks[3].1)).unwrap();
    // 4. The stand-in's answer, after the line `let last = ...;`.
    let standin = root.join("scripts/riddle/standin.rhai");
    let text = std::fs::read_to_string(&standin).unwrap();
    let at = text.find("let last = ").expect("the stand-in's `let last` line");
    let at = at + text[at..].find('\n').unwrap() + 1;
    std::fs::write(&standin, format!("{}{}{}", &text[..at], blocks[4].1, &text[at..])).unwrap();

    let out = run(root, &["check"]);
    assert!(stdout(&out).contains("riddle"), "{}", stdout(&out));

    // The game opens on its riddle; a wrong answer is not it, the answer solves it.
    let screen = play(root, "a towel\nan egg\n/save solved\n");
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines[0], "riddle (stand-in) › What has to be broken before you can use it?", "{screen}");
    assert!(screen.contains("\n  turn 1\n"), "not solved by a towel: {screen}");
    assert!(screen.contains("\n  turn 2 · solved!\n"), "{screen}");
    assert!(screen.contains("The riddle is solved."), "{screen}");
    // The saved playtest checks every output field, the judge's verdict with them.
    let case = std::fs::read_to_string(root.join("tests/riddle/solved.yaml")).unwrap();
    let case: Value = serde_saphyr::from_str(&case).unwrap();
    let expect = &case["turns"][1]["expect"];
    assert_eq!((&expect["turns"], &expect["solved"]), (&Value::from(2), &Value::Bool(true)), "{case}");
    assert!(expect["reply"].is_string(), "{case}");
    let out = run(root, &["test", "riddle"]);
    assert!(stdout(&out).contains("solved"), "{}", stdout(&out));

    // A new answer: the stand-in follows the pack's parameter, offline.
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"answer\": \"egg\"", "\"answer\": \"towel\"")).unwrap();
    let screen = play(root, "a towel\n");
    assert!(screen.contains("\n  turn 1 · solved!\n"), "{screen}");
}
