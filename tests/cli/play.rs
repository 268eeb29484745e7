//! `ruleweave play`: every pack as a person sees it in the terminal, the breakdown on request, a pasted line, stepping through a turn.

use super::*;

#[test]
fn play_shows_replies_scores_and_the_breakdown_on_request() {
    let moves: Vec<&str> = WINNING_MOVES.lines().filter_map(|l| l.strip_prefix("- ")).collect();
    let input = format!("{}\n/why\n/events\n{}\n{}\n{}\n{}\n/quit\n", moves[0], moves[1], moves[2], moves[3], moves[4]);
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", "pirate"]);
    let out = run_with_stdin(cmd, &input);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("model: the pack's stand-in model"), "{text}");
    assert!(text.contains("pirate (stand-in) › "), "replies are labelled: {text}");
    assert!(text.contains("merit 15/100, needs 60 on medium"), "{text}");
    assert!(text.contains("judge: strategy variety 5/30"), "/why shows the breakdown: {text}");
    assert!(text.contains("You won! The captain hands over his treasure"), "{text}");
    assert!(text.contains("won and over"), "a further move is refused: {text}");
    // /events reads as lines, not JSON; piped output has no colour codes.
    assert!(text.contains("step 1: intake\n  intake done in "), "{text}");
    assert!(text.contains("  model merit_check (judge, gpt-4o-mini (stand-in), "), "{text}");
    assert!(text.contains("  validate_response → END"), "{text}");
    assert!(!text.contains(r#"{"type":"#) && !text.contains('\u{1b}'), "{text}");
}

#[test]
fn play_opens_with_the_first_question_and_explains_how_texts_were_compared() {
    for (set, says) in [
        ("similarity=embedding", "similarity by embeddings (text-embedding-3-small (stand-in), "),
        ("similarity=lexical", "similarity by words"),
    ] {
        let mut cmd = ruleweave(&repo_root());
        cmd.args(["play", "interview", "--explain", "--no-watch", "--store", "memory", "--set", set]);
        let out = run_with_stdin(cmd, "/bogus\nI love the foam in the morning.\n/quit\n");
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(&format!("choose: exploratory phase (turn count 1), {says}")), "{text}");
        // The opening question and what to type come before the first prompt; an unknown command
        // is not an answer.
        let opening = "interview (stand-in) › Let's talk about oat milk in coffee. What comes to mind first?\n  \
                       type: Answer the question in your own words (\"I don't know\" is an answer too).\n> ";
        assert!(text.contains(opening), "{text}");
        assert!(text.contains("unknown command /bogus; commands: /why"), "{text}");
        assert!(text.contains("turn 1, exploratory"), "the answer after it is turn 1: {text}");
    }
}

#[test]
fn play_keeps_its_database_under_the_root_and_why_waits_for_a_turn() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let elsewhere = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ruleweave"));
    cmd.current_dir(elsewhere.path()).env("RULEWEAVE_LLM", "standin").env_remove("RULEWEAVE_STORE");
    cmd.arg("--root").arg(root.path()).args(["play", "pirate"]);
    let out = support::run_with_stdin(cmd, "/why\nAhoy!\n/quit\n");
    let text = support::stdout(&out);
    assert!(text.contains("nothing to explain yet: no turn has been played"), "{text}");
    assert!(text.contains("pirate (stand-in) ›"), "{text}");
    assert!(root.path().join("ruleweave.db").is_file(), "the default database is under --root");
    assert!(!elsewhere.path().join("ruleweave.db").exists(), "not where the command ran");
}

/// `play PACK` with `lines` typed (piped: plain text), its screen after the banner.
fn played(pack: &str, set: &[&str], lines: &str) -> String {
    let mut cmd = ruleweave(&repo_root());
    cmd.args(["play", pack, "--store", "memory", "--no-watch"]);
    for s in set {
        cmd.args(["--set", s]);
    }
    let out = run_with_stdin(cmd, lines);
    let text = stdout(&out);
    let start = text.find("/quit\n").map_or(0, |i| i + "/quit\n".len());
    text[start..].to_owned()
}

#[test]
fn every_pack_plays_in_the_terminal_as_a_person_sees_it() {
    // The pirate: what to type, the captain's words, then where the merit stands.
    let screen = played("pirate", &[], "Ahoy, captain! I am the harbour master's daughter.\n");
    let mut lines = screen.lines();
    assert_eq!(
        lines.next().unwrap(),
        "  type: Say anything to the captain, in English or Polish: flattery, tales, bribes, threats… whatever wins his treasure."
    );
    let reply = lines.next().unwrap();
    assert!(reply.starts_with("> pirate (stand-in) › ") && !reply.ends_with("continue"), "{screen}");
    assert!(lines.next().unwrap().starts_with("  merit "), "{screen}");

    // The interview: its first question before the first answer, then the next with the choice.
    let screen = played("interview", &[], "I like oat milk because it foams.\n");
    assert!(screen.starts_with("interview (stand-in) › Let's talk about oat milk in coffee."), "{screen}");
    assert!(screen.contains("?\n  type: Answer the question in your own words"), "{screen}");
    assert!(screen.contains("\n  turn 1, exploratory: "), "{screen}");

    // The party: the lobby opens on its first question; `all` plays a round, `+gus` only joins.
    let screen = played("party", &["players=ana,bo,cy,dee"], "all\n+gus\n");
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[0].starts_with("party (stand-in) › Never have I ever"), "{screen}");
    assert!(lines[1].starts_with("  round 1/20 · "), "{screen}");
    assert_eq!(lines[2], "  type: 4/6, all, none, names of those who have; +name joins, -name leaves", "{screen}");
    assert!(lines[4].starts_with("  round 2/20 · safe (intensity 2) · B 0.15 + P 0.04"), "{screen}");
    let question = lines[3].trim_start_matches("> party (stand-in) › ");
    assert_eq!(
        lines[5],
        format!("> party (stand-in) › (now at the table: ana, bo, cy, dee, gus; the question stands) {question}")
    );
    assert!(lines[6].starts_with("  round 2/20 · ") && lines[6].ends_with("· 5 players"), "{screen}");

    // The designer: what to type, then the design it built.
    let screen = played("designer", &[], "the chambers of the heart\n");
    assert!(screen.starts_with("designer (stand-in) › Type what the game should teach"), "{screen}");
    assert!(screen.contains("› Explore the chambers of the heart: 2 scene(s), 160 points"), "{screen}");
    assert!(screen.contains("\n  complete · attempts 1 · validation 1.0"), "{screen}");

    // The debate at a pause: the status says what to type; a note goes to the next round.
    let screen =
        played("debate", &["rounds=2", "pause=rounds", "fact_check=off"], "start\nAddress the costs, please.\n");
    assert!(screen.contains("paused: type a note for the next round's debaters, or `continue`"), "{screen}");
    assert!(screen.contains("As the moderator asks, on \"Address the costs, please.\""), "{screen}");
    assert!(!screen.contains("PHASE") && !screen.contains("failed"), "{screen}");
}

/// In a real terminal (a pseudo-terminal, through util-linux's `script`), a line that arrives in
/// one burst with its newline, as a paste does, runs as a typed one: the editor does not ask the
/// terminal to mark pastes (which would keep the newline in the line and wait for another Enter).
#[test]
fn a_pasted_line_runs_like_a_typed_one_in_a_terminal() {
    use std::io::{Read, Write};
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let exe = env!("CARGO_BIN_EXE_ruleweave");
    let mut child = std::process::Command::new("script")
        .args(["-qfec", &format!("{exe} play pirate --store memory --no-watch"), "/dev/null"])
        .current_dir(root.path())
        .env("RULEWEAVE_LLM", "standin")
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut screen = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = screen.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let mut wait_for = |text: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !seen.contains(text) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(bytes) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("the terminal never showed {text:?}: {seen:?}"),
            }
        }
        seen.clone()
    };
    wait_for("type: Say anything to the captain");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"/why\n").unwrap();
    let shown = wait_for("nothing to explain yet");
    assert!(!shown.contains("\x1b[?2004h"), "bracketed paste asked for: {shown:?}");
    stdin.write_all(b"/quit\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// Stepping in the terminal: a breakpoint set by name (a wrong name refused with the graph's
/// nodes), a turn held there, a move refused while it is held, a step at a time, a field set by
/// hand that the rest of the turn sees, then the reply.
#[test]
fn play_steps_through_a_turn() {
    let screen = played(
        "pirate",
        &[],
        "/break generate_respons\n/break after merit_check\nAhoy, captain!\nAnother move\n/set merit_score=95\n/set merit_score=\"high\"\n/step\n/continue\n/break\n",
    );
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(
        lines[1],
        "> ! no node `generate_respons` (nodes: intake, merit_check, generate_response, validate_response, handle_blocked)"
    );
    assert_eq!(lines[2], "> breakpoint after merit_check: a turn stops there (/step, /continue go on)");
    assert_eq!(lines[3], ">   ‖ turn 1 held after merit_check; next: generate_response");
    assert_eq!(lines[5], "> turn 1 is held after merit_check: /step, /continue, /set FIELD=VALUE, /state");
    assert_eq!(lines[6], "> merit_score = 95 (checkpoint 2, an edit)");
    assert_eq!(lines[7], "> ! `merit_score` is an int, not a string");
    assert_eq!(lines[8], ">   ‖ turn 1 held before validate_response", "one step: the reply node ran");
    assert!(lines[10].starts_with("> pirate (stand-in) › "), "{screen}");
    assert_eq!(
        lines[11], "  merit 95/100, needs 60 on medium · state edited at turn 1",
        "the rest of the turn saw the edit, and the status line says it was made by hand: {screen}"
    );
    assert_eq!(lines[13], "> breakpoints: after merit_check", "{screen}");
}
