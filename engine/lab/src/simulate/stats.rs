//! The statistics a simulation reports: a share's 95% interval (Wilson's), the sign test's
//! interval for a median of paired differences, percentiles by nearest rank, and a histogram of
//! the turns games took.

use super::Spread;

/// The 95% Wilson interval of `k` successes in `n` trials.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_963_985);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    // At the ends the interval reaches 0 or 1 exactly (its float sum falls a hair short).
    let low = if k == 0.0 { 0.0 } else { (centre - half).max(0.0) };
    let high = if k == n { 1.0 } else { (centre + half).min(1.0) };
    (low, high)
}

/// The difference of two shares, `k1` of `n1` less `k2` of `n2`, with its 95% interval
/// (Newcombe's hybrid score interval, from the two Wilson intervals): `(delta, low, high)`.
pub(crate) fn newcombe(k1: usize, n1: usize, k2: usize, n2: usize) -> (f64, f64, f64) {
    let share = |k: usize, n: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    let (p1, p2) = (share(k1, n1), share(k2, n2));
    let ((l1, u1), (l2, u2)) = (wilson(k1, n1), wilson(k2, n2));
    let delta = p1 - p2;
    let low = delta - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
    let high = delta + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
    (delta, low, high)
}

/// The 95% interval of the median of `d` by the sign test: the k-th smallest to the k-th largest,
/// k the largest with P(Binomial(n, ½) < k) ≤ 2.5%. `None` for fewer than 6 values, which no
/// interval of them covers at 95%.
pub(super) fn sign_test_interval(d: &[f64]) -> Option<(f64, f64)> {
    let n = d.len();
    let mut sorted = d.to_vec();
    sorted.sort_by(f64::total_cmp);
    // P(B ≤ j) for j = 0, 1, …, summed in logs so a large n does not overflow.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let (mut below, mut ln_choose, mut k) = (0.0, 0.0, 0);
    for j in 0..n {
        if j > 0 {
            ln_choose += ((n - j + 1) as f64).ln() - (j as f64).ln();
        }
        below += (ln_choose + ln_half_n).exp();
        if below > 0.025 {
            break;
        }
        k = j + 1;
    }
    (k >= 1).then(|| (sorted[k - 1], sorted[n - k]))
}

/// The median, 10th and 90th percentiles of `values` (nearest rank), or nulls for none.
pub(crate) fn spread(values: &[f64]) -> Spread {
    if values.is_empty() {
        return Spread { median: None, p10: None, p90: None };
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| Some(v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]);
    Spread { median: at(0.5), p10: at(0.1), p90: at(0.9) }
}

/// How many of `turns` are 1, 2, … up to the largest.
pub(super) fn histogram(turns: &[f64]) -> Vec<usize> {
    let most = turns.iter().copied().fold(0.0, f64::max) as usize;
    let mut counts = vec![0; most];
    for &t in turns {
        if t >= 1.0 {
            counts[t as usize - 1] += 1;
        }
    }
    counts
}
