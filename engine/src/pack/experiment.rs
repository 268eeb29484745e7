//! A pack's experiment: variants of its rules, each a set of its `params:` numbers, given to
//! shares of its players by weight (`experiment:` in the manifest).
//!
//! A player's variant comes from where a hash of the pack, the experiment's name and the
//! player's key falls in `[0, 1)`: the variants divide that line into ranges in the manifest's
//! order, each as wide as its share of the weights (as GrowthBook's bucket ranges do). So while
//! the weights stay, a player always gets the same variant, on any machine and after any restart;
//! a weight change moves only the players whose point lies where one range gave way to another;
//! a weight of 0 is an empty range, which no new player falls in; and a new experiment name
//! places everyone afresh.

use sha2::{Digest, Sha256};

use super::ParamValues;

/// The longest name an experiment or a variant may have.
pub(crate) const NAME_MAX: usize = 64;

/// An experiment: its name and its variants, in the manifest's order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Experiment {
    /// Its name: renaming it places every player afresh.
    pub name: String,
    /// Its variants, in the manifest's order (the order of their ranges).
    pub variants: Vec<Variant>,
}

/// One variant of the rules.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Variant {
    /// Its name (`lenient`).
    pub name: String,
    /// Its weight: its share of new players is its weight over the sum of all weights.
    pub weight: f64,
    /// The numbers of `params:` it sets, by dotted path; none for the control.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params: ParamValues,
}

impl Variant {
    /// Whether it is the control: the rules as the manifest's `params:` has them.
    pub fn is_control(&self) -> bool {
        self.params.is_empty()
    }
}

impl Experiment {
    /// The control: the variant that sets no params (the loader holds a pack to exactly one).
    pub fn control(&self) -> &Variant {
        self.variants.iter().find(|v| v.is_control()).unwrap_or(&self.variants[0])
    }

    /// The variant named `name`.
    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Each variant's range of `[0, 1)`, in order: `(name, from, to)`; a weight of 0 is empty.
    pub fn ranges(&self) -> Vec<(&str, f64, f64)> {
        let total: f64 = self.variants.iter().map(|v| v.weight).sum();
        let mut from = 0.0;
        self.variants
            .iter()
            .enumerate()
            .map(|(i, v)| {
                // The last range with any weight ends at 1 exactly, whatever the rounding.
                let last = self.variants[i + 1..].iter().all(|w| w.weight == 0.0);
                let to = if last && v.weight > 0.0 { 1.0 } else { from + v.weight / total };
                let range = (v.name.as_str(), from, to);
                from = to;
                range
            })
            .collect()
    }

    /// The variant of the player whose assignment key is `key` in a session of `pack`.
    pub fn assign(&self, pack: &str, key: &str) -> &Variant {
        let at = point(pack, &self.name, key);
        let ranges = self.ranges();
        let found = ranges.iter().position(|(_, from, to)| *from <= at && at < *to);
        // A point is always in one range while the weights sum above 0 (the loader holds them
        // to it); past the last, the control.
        found.map_or_else(|| self.control(), |i| &self.variants[i])
    }
}

/// Where `key` falls in `[0, 1)` for experiment `experiment` of `pack`: the first 8 bytes of the
/// SHA-256 of the three (each followed by a zero byte), over 2^64.
pub fn point(pack: &str, experiment: &str, key: &str) -> f64 {
    let mut hash = Sha256::new();
    for part in [pack, experiment, key] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let top = u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 is 32 bytes"));
    // 53 bits, as many as an f64 holds exactly: the point is below 1.
    (top >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether `name` may name an experiment or a variant: letters, digits, `_` and `-`, at most
/// [`NAME_MAX`].
pub(crate) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experiment(weights: &[(&str, f64)]) -> Experiment {
        let variants = weights
            .iter()
            .enumerate()
            .map(|(i, (name, weight))| Variant {
                name: (*name).to_owned(),
                weight: *weight,
                params: match i {
                    0 => ParamValues::new(),
                    _ => ParamValues::from([("thresholds.medium".to_owned(), serde_json::json!(40 + i))]),
                },
            })
            .collect();
        Experiment { name: "thresholds".into(), variants }
    }

    fn players() -> impl Iterator<Item = String> {
        (0..10_000).map(|i| format!("player-{i}"))
    }

    /// The same player gets the same variant every time; another pack or experiment name places
    /// players afresh.
    #[test]
    fn a_player_always_gets_the_same_variant() {
        let e = experiment(&[("control", 50.0), ("lenient", 50.0)]);
        let first: Vec<&str> = players().map(|p| e.assign("pirate", &p).name.as_str()).collect();
        let again: Vec<&str> = players().map(|p| e.assign("pirate", &p).name.as_str()).collect();
        assert_eq!(first, again);
        let renamed = Experiment { name: "thresholds-2".into(), ..e.clone() };
        let moved = players().filter(|p| e.assign("pirate", p).name != renamed.assign("pirate", p).name).count();
        // Half of the players land elsewhere when everyone is placed afresh: 5,000 ± 4 sigma (200).
        assert!((4_800..=5_200).contains(&moved), "{moved} of 10,000 moved");
    }

    /// 10,000 players split as the weights say, within noise: each count within 4 standard
    /// deviations of its expectation (the ids are fixed, so this never flakes).
    #[test]
    fn players_split_as_the_weights_say() {
        let e = experiment(&[("control", 60.0), ("lenient", 20.0), ("harsh", 20.0)]);
        for (name, share) in [("control", 0.6f64), ("lenient", 0.2), ("harsh", 0.2)] {
            let n = players().filter(|p| e.assign("pirate", p).name == name).count() as f64;
            let (mean, sd) = (10_000.0 * share, (10_000.0 * share * (1.0 - share)).sqrt());
            assert!((n - mean).abs() < 4.0 * sd, "{name}: {n} of 10,000, expected {mean} ± {}", 4.0 * sd);
        }
    }

    /// A weight change moves only the players whose point lies where a range gave way: from
    /// 50/50 to 60/40, exactly those between 0.5 and 0.6, all from the second variant to the first.
    #[test]
    fn a_weight_change_moves_only_the_players_it_must() {
        let before = experiment(&[("control", 50.0), ("lenient", 50.0)]);
        let after = experiment(&[("control", 60.0), ("lenient", 40.0)]);
        for p in players() {
            let (was, is) = (&before.assign("pirate", &p).name, &after.assign("pirate", &p).name);
            let at = point("pirate", "thresholds", &p);
            let must = (0.5..0.6).contains(&at);
            assert_eq!(was != is, must, "{p} at {at}: {was} → {is}");
            if must {
                assert_eq!((was.as_str(), is.as_str()), ("lenient", "control"));
            }
        }
    }

    /// A variant of weight 0 gets no new player; the others share them by their weights.
    #[test]
    fn weight_zero_gets_no_new_player() {
        let e = experiment(&[("control", 1.0), ("lenient", 0.0), ("harsh", 1.0)]);
        assert!(players().all(|p| e.assign("pirate", &p).name != "lenient"));
        assert_eq!(e.ranges(), vec![("control", 0.0, 0.5), ("lenient", 0.5, 0.5), ("harsh", 0.5, 1.0)]);
        let last_empty = experiment(&[("control", 1.0), ("lenient", 0.0)]);
        assert_eq!(last_empty.ranges(), vec![("control", 0.0, 1.0), ("lenient", 1.0, 1.0)]);
        assert!(players().all(|p| last_empty.assign("pirate", &p).name == "control"));
    }

    /// The point is the documented hash, so another implementation can place players the same.
    #[test]
    fn the_point_is_the_documented_hash() {
        let digest = Sha256::digest(b"pirate\0thresholds\0ada\0");
        let top = u64::from_be_bytes(digest[..8].try_into().unwrap());
        assert_eq!(point("pirate", "thresholds", "ada"), (top >> 11) as f64 / 9_007_199_254_740_992.0);
    }
}
