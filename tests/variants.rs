//! Live variants: an experiment in a pack's manifest (`experiment:`), variants of its `params:`
//! numbers given to shares of its players. Here, what `check` says of one: the shares and what
//! each variant sets, and every mistake at its place.

use crate::support::{ruleweave, stderr, stdout};

/// The coin pack, copied, with `experiment` appended to its manifest.
fn coin_with(experiment: &str) -> tempfile::TempDir {
    let copy = crate::support::copy_of(&["tests/packs/coin"]);
    let manifest = copy.path().join("tests/packs/coin/config/coin.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}{experiment}")).unwrap();
    copy
}

fn check(copy: &tempfile::TempDir) -> (i32, String, String) {
    let out = ruleweave(&copy.path().join("tests/packs/coin")).arg("check").output().unwrap();
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

/// A good experiment loads, and `check` says how new players split and what each variant sets.
#[test]
fn check_shows_an_experiments_shares() {
    let copy = coin_with(
        "experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 60}\n    \
         kind: {weight: 20, params: {chance: 60}}\n    kinder: {weight: 20, params: {chance: 70, bias: 0.05}}\n",
    );
    let (code, out, err) = check(&copy);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "\n        experiment `kinder-coin`: fair 60% (the control), kind 20% (chance=60), \
             kinder 20% (bias=0.05, chance=70)\n"
        ),
        "{out}"
    );
}

/// Each mistake is named at its place in the manifest: an unknown number (with the nearest),
/// one outside its bounds, one that is no number, a negative weight, a bad name, weights that sum
/// to 0, and not exactly one control.
#[test]
fn an_experiment_is_checked_where_it_is_written() {
    let copy = coin_with(
        "experiment:\n  name: kinder coin\n  variants:\n    fair: {weight: 0}\n    \
         kind: {weight: 0, params: {chanse: 60}}\n    kinder: {weight: 0, params: {chance: 170}}\n    \
         odd: {weight: 0, params: {bias: high}}\n",
    );
    let (code, _, err) = check(&copy);
    assert_eq!(code, 1, "{err}");
    for said in [
        "error: experiment `kinder coin` is no name: letters, digits, `_` and `-`, at most 64",
        "error: variant `kind` sets `chanse`, which is no number in params (did you mean `chance`?)",
        "error: variant `kinder`: parameter `chance` is 0 to 100 (param_bounds), not 170",
        "error: variant `odd`: `bias` is a number, not \"high\"",
        "error: the experiment's weights sum to 0: no new session would have a variant",
    ] {
        assert!(err.contains(said), "{said}\n{err}");
    }
    // The unknown number is named on its own line, where the variant sets it.
    let at = err.find("sets `chanse`").unwrap();
    assert!(err[at..].contains("--> config/coin.yaml:37:"), "{err}");

    let copy =
        coin_with("experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 1}\n    plain: {weight: -1}\n");
    let (code, _, err) = check(&copy);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: variant `plain`: a weight is a number of 0 or more, not -1"), "{err}");
    assert!(
        err.contains("error: an experiment has one control, the variant that sets no params: fair, plain do"),
        "{err}"
    );
    let copy = coin_with("experiment:\n  name: kinder-coin\n  variants:\n    fair: {weight: 1}\n");
    let (code, _, err) = check(&copy);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("an experiment has two variants or more: a control, and what it is compared with"), "{err}");
}
