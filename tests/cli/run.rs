//! `ruleweave run`: one JSON line per turn, deterministic on the stand-in; against a local Chat Completions server that answers 429, 500, slowly, and with malformed JSON.

use super::*;

#[test]
fn run_prints_one_json_line_per_turn_and_a_won_game_refuses_more() {
    let (_dir, file) = temp_file("moves.yaml", WINNING_MOVES);
    let out = ruleweave(&repo_root())
        .args(["run", "pirate", "--set", "difficulty=medium", "--input"])
        .arg(&file)
        .output()
        .unwrap();
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 5, "{}", stderr(&out));
    for (i, line) in lines[..4].iter().enumerate() {
        let keys: Vec<&str> = line.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["display", "output", "state", "turn"], "exactly the contract's keys");
        // What a person sees travels with the line: the captain's words are the reply.
        assert_eq!(line["display"]["reply"], line["output"]["pirate_response"]);
        assert!(line["display"]["status"].as_str().unwrap().starts_with("merit "), "{line}");
        assert_eq!(line["turn"], i as u64 + 1);
        assert_eq!(line["state"]["conversation_history"].as_array().unwrap().len(), 2 * (i + 1));
    }
    let won = &lines[3]["output"];
    assert_eq!(won["is_won"], true, "{won}");
    // In English the captain agrees in English (the exact words are the game's Polish ones).
    assert_eq!(won["outcome"], "won_agreement");
    assert!(won["pirate_response"].as_str().unwrap().contains("The treasure is yours"), "{won}");
    assert_eq!(lines[4]["turn"], 5);
    assert_eq!(lines[4]["error"]["code"], "session_finished");
    assert!(lines[4]["error"]["message"].as_str().unwrap().contains("won and over"));
    assert_eq!(out.status.code(), Some(1), "a refused input makes the exit status 1");
    assert!(stderr(&out).contains("stand-in model"), "the stand-in is labelled: {}", stderr(&out));
}

#[test]
fn run_is_deterministic_on_the_stand_in() {
    // The first four moves, on medium: the fourth wins (a fifth would be refused).
    let moves: String =
        WINNING_MOVES.lines().filter(|l| l.starts_with('-')).take(4).map(|l| format!("{l}\n")).collect();
    let (_dir, file) = temp_file("moves.yaml", &moves);
    let run = || {
        let out = ruleweave(&repo_root())
            .args(["run", "pirate", "--set", "difficulty=medium", "--input"])
            .arg(&file)
            .output()
            .unwrap();
        // Two runs that fail alike would compare equal: each must play every move.
        assert!(out.status.success(), "{}", stderr(&out));
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines.iter().all(|l| l["output"]["pirate_response"].is_string()), "{lines:?}");
        lines
            .into_iter()
            .map(|mut l| {
                l["state"]["game_id"] = json!("");
                l
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn run_refuses_an_inputs_file_that_is_not_a_list() {
    let (_dir, file) = temp_file("moves.yaml", "message: hello\n");
    let out = ruleweave(&repo_root()).args(["run", "pirate", "--input"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("must hold a list of inputs"), "{}", stderr(&out));
}

#[test]
fn a_retry_after_past_any_clock_waits_the_longest_backoff() {
    let mock = MockLlm::start();
    mock.judge(Reply::RetryAfter("1e30".into()))
        .judge(Reply::RetryAfter("18446744073709551615".into()))
        .judge(judged(30))
        .chat(Reply::Content("Arr.".into()));
    let out = run_against(&mock, "- Ahoy!\n", "easy");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["output"]["merit_score"], 30);
    assert_eq!(llm_events(&lines[0], "judge")[0]["attempts"], 3);
}

#[test]
fn requests_carry_the_pirates_profiles_and_windows() {
    let mock = MockLlm::start();
    mock.judge(judged(20)).chat(Reply::Content("Arr, who goes there?".into()));
    mock.judge(judged(30)).chat(Reply::Content("Still no.".into()));
    let out = run_against(&mock, "- Ahoy, I am a sailor!\n- Please, captain.\n", "hard");
    assert!(out.status.success(), "{}", stderr(&out));

    let seen = mock.seen();
    assert!(seen.iter().all(|s| s.authorization.as_deref() == Some("Bearer sk-test")));
    let judge = mock.seen_kind("judge");
    assert_eq!(judge.len(), 2);
    let mut first = judge[0].clone();
    let prompt = first["messages"][0]["content"].take();
    assert_eq!(
        first,
        json!({"model": "gpt-4o-mini", "temperature": 0.3, "max_tokens": 500,
               "response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": null}]})
    );
    let prompt = prompt.as_str().unwrap();
    assert!(prompt.contains("Poziom trudności: hard"));
    assert!(prompt.contains("Persony gracza: crew_member"));
    assert!(prompt.contains("\nGracz: Ahoy, I am a sailor!\n"), "{prompt}");

    let chat = mock.seen_kind("chat");
    assert_eq!(chat.len(), 2);
    let second = &chat[1];
    assert_eq!(second["model"], "gpt-4-turbo");
    assert_eq!(second["temperature"], 0.8);
    assert_eq!(second["max_tokens"], 300);
    let roles: Vec<(&str, &str)> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(roles[0].0, "system");
    assert_eq!(
        &roles[1..],
        [("user", "Ahoy, I am a sailor!"), ("assistant", "Arr, who goes there?"), ("user", "Please, captain.")]
    );
    let lines = json_lines(&out);
    assert_eq!(lines[1]["output"]["merit_score"], 30);
    assert_eq!(lines[1]["output"]["pirate_response"], "Still no.");
    let judge_events = llm_events(&lines[0], "judge");
    assert_eq!(judge_events[0]["provider"], "openai");
    assert_eq!(judge_events[0]["prompt_tokens"], 11);
    assert_eq!(judge_events[0]["completion_tokens"], 7);
}

#[test]
fn a_429_is_retried() {
    let mock = MockLlm::start();
    mock.judge(Reply::Status(429, "Rate limit reached".into())).judge(judged(25));
    let out = run_against(&mock, "- Ahoy!\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["output"]["merit_breakdown"]["source"], "judge");
    assert_eq!(line["output"]["merit_score"], 25);
    assert_eq!(llm_events(line, "judge")[0]["attempts"], 2);
    assert_eq!(mock.seen_kind("judge").len(), 2);
}

#[test]
fn a_judge_that_keeps_failing_falls_back_to_the_rules() {
    let mock = MockLlm::start();
    for _ in 0..3 {
        mock.judge(Reply::Status(500, "The server had an error".into()));
    }
    let out = run_against(&mock, "- I am a sailor, please, I will pay you gold\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    let breakdown = &line["output"]["merit_breakdown"];
    assert_eq!(breakdown["source"], "fallback");
    assert_eq!(line["output"]["merit_score"], 2 * 5 + 3 + 2);
    let reason = breakdown["reason"].as_str().unwrap();
    assert!(reason.contains("HTTP 500") && reason.contains("after 3 attempts"), "{reason}");
    assert_eq!(mock.seen_kind("judge").len(), 3, "1 try and 2 retries");
    assert_eq!(llm_events(line, "judge")[0]["error"].as_str().map(|e| e.contains("HTTP 500")), Some(true));
}

#[test]
fn a_timeout_is_retried() {
    let mock = MockLlm::start();
    // The first answer never comes: the client's timeout gives up on it, whatever the machine's speed.
    mock.judge(Reply::Hang).judge(judged(44));
    let out = run_against(&mock, "- Ahoy!\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["output"]["merit_score"], 44, "the slow answer was abandoned");
    assert_eq!(llm_events(line, "judge")[0]["attempts"], 2);
}

#[test]
fn malformed_json_from_the_model_falls_back() {
    let mock = MockLlm::start();
    mock.judge(Reply::Content("Niestety nie potrafię ocenić tej rozmowy.".into()));
    mock.judge(Reply::Raw("{\"choices\": [ this is not json".into()));
    let out = run_against(&mock, "- Ahoy!\n- Ahoy again!\n", "medium");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let first = &lines[0]["output"]["merit_breakdown"];
    assert_eq!(first["source"], "fallback");
    assert!(first["reason"].as_str().unwrap().contains("contains no JSON"), "{first}");
    let second = &lines[1]["output"]["merit_breakdown"];
    assert_eq!(second["source"], "fallback");
    assert!(second["reason"].as_str().unwrap().contains("the reply is not valid JSON"), "{second}");
}

/// The captain's model failing after its retries leaves him silent for that move, with a note a
/// person sees; the game goes on.
#[test]
fn a_failed_captain_call_leaves_him_silent_and_the_game_going() {
    let mock = MockLlm::start();
    mock.chat(Reply::Content("First answer.".into()));
    for _ in 0..3 {
        mock.chat(Reply::Status(503, "overloaded".into()));
    }
    mock.chat(Reply::Content("Third answer.".into()));
    let out = run_against(&mock, "- one\n- two\n- three\n", "easy");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    let silent = "The captain narrows his eyes and says nothing. Try him another way, landlubber.";
    assert_eq!((&lines[1]["turn"], &lines[1]["display"]["reply"]), (&json!(2), &json!(silent)), "{}", lines[1]);
    let notes = lines[1]["display"]["notes"].to_string();
    assert!(notes.contains("the captain says nothing") && notes.contains("503"), "{notes}");
    let history: Vec<&str> = lines[2]["state"]["conversation_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(history, ["one", "First answer.", "two", silent, "three", "Third answer."]);
}
