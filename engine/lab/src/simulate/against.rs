//! The same games on two copies of the rules, compared: each outcome's difference in share
//! (Newcombe's hybrid score interval), and each tracked field and the turns game by game (the
//! sign test's interval of the median difference).

use std::path::Path;

use super::stats::{newcombe, sign_test_interval, spread};
use super::{Against, Difference, Played, Report, TrackedDifference, changes};

/// Adds the games on another copy of the rules, at `root`, and how they and the copies differ
/// (`ours` is this copy's root).
pub fn compare(report: &mut Report, ours: &Path, root: &Path, here: &[Played], there: &[Played]) {
    report.against = Some(Against {
        root: root.display().to_string(),
        players: there.iter().map(Played::report).collect(),
        differences: differences(here, there),
        tracked: tracked_differences(here, there),
        changes: changes::between(ours, root, &report.pack),
        diff: changes::diffs(ours, root, &report.pack),
    });
}

/// For each player, each tracked field's and the turns' differences game by game.
pub(super) fn tracked_differences(here: &[Played], there: &[Played]) -> Vec<TrackedDifference> {
    let mut out = Vec::new();
    for (a, b) in here.iter().zip(there) {
        let turns = |p: &Played| -> Vec<Option<f64>> { p.turns.iter().map(|&(t, done)| done.then_some(t)).collect() };
        let fields = a.track.iter().zip(&b.track).map(|((f, x), (_, y))| (f.as_str(), x.clone(), y.clone()));
        for (field, x, y) in fields.chain([("turns", turns(a), turns(b))]) {
            let d: Vec<f64> = x.iter().zip(&y).filter_map(|(x, y)| Some((*x)? - (*y)?)).collect();
            let (delta, interval) = (spread(&d).median, sign_test_interval(&d));
            out.push(TrackedDifference {
                player: a.name.clone(),
                field: field.to_owned(),
                games: d.len(),
                delta,
                low: interval.map(|i| i.0),
                high: interval.map(|i| i.1),
                beyond_noise: interval.is_some_and(|(low, high)| low > 0.0 || high < 0.0),
            });
        }
    }
    out
}

/// For each player and outcome, this copy's share less the other's, with a 95% interval
/// (Newcombe's hybrid score interval, from the two Wilson intervals); beyond noise when the
/// interval leaves out 0.
pub(super) fn differences(here: &[Played], there: &[Played]) -> Vec<Difference> {
    let mut out = Vec::new();
    for (a, b) in here.iter().zip(there) {
        let mut outcomes: Vec<&str> = a.outcomes.iter().chain(&b.outcomes).map(String::as_str).collect();
        outcomes.sort_unstable();
        outcomes.dedup();
        for outcome in outcomes {
            let count = |p: &Played| p.outcomes.iter().filter(|o| *o == outcome).count();
            let (delta, low, high) = newcombe(count(a), a.outcomes.len(), count(b), b.outcomes.len());
            out.push(Difference {
                player: a.name.clone(),
                outcome: outcome.to_owned(),
                delta,
                low,
                high,
                beyond_noise: low > 0.0 || high < 0.0,
            });
        }
    }
    out
}
