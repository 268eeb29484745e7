//! `ruleweave check`: the shipped packs pass, a bad pack fails at its spot, `--root` anywhere, an unknown pack named.

use super::*;

#[test]
fn check_passes_on_the_shipped_packs() {
    let out = ruleweave(&repo_root()).arg("check").output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("ok      pirate (version "), "{}", stdout(&out));
}

#[test]
fn root_is_a_global_flag_before_or_after_the_subcommand() {
    let fixture = repo_root().join("tests/packs/cycle");
    for args in [vec!["--root", fixture.to_str().unwrap(), "check"], vec!["check", "--root", fixture.to_str().unwrap()]]
    {
        let out = ruleweave(&std::env::temp_dir()).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("ok      cycle"), "{}", stdout(&out));
    }
}

#[test]
fn check_fails_bad_packs_with_the_spot() {
    for (case, spot, line) in [
        ("err_yaml", "config/game.yaml:2:21", "  score: {type: int}}"),
        ("err_rhai", "scripts/game/score.rhai:2:25", "    let x = this.score +;"),
        ("err_template_var", "prompts/game/ask.j2:2:14", "You said: {{ last_mesage }}"),
        ("err_unknown_edge", "config/game.yaml:8:14", "    - add -> judge"),
        ("err_route_missing", "config/game.yaml:11:13", "        to: celebrate"),
    ] {
        let root = repo_root().join("tests/packs").join(case);
        let out = ruleweave(&root).arg("check").output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{case}");
        let err = stderr(&out);
        assert!(err.contains(&format!("--> {spot}")), "{case}: {err}");
        assert!(err.contains(line), "{case}: the source line is shown: {err}");
        let col: usize = spot.rsplit(':').next().unwrap().parse().unwrap();
        let caret = format!("| {}^", " ".repeat(col - 1));
        assert!(err.contains(&caret), "{case}: a caret under column {col}: {err}");
    }
}

#[test]
fn an_unknown_pack_is_an_error() {
    let out = ruleweave(&repo_root()).args(["graph", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("there is no pack `nope` (packs: debate, designer, interview, party, pirate)"), "{err}");
    assert!(!err.contains("os error"), "no file system error text: {err}");
    let out = ruleweave(&repo_root()).args(["graph", "piratee"]).output().unwrap();
    assert!(stderr(&out).contains("there is no pack `piratee` (did you mean `pirate`? packs:"), "{}", stderr(&out));
}
