//! `outcomes --html FILE`, and the console's Variants panel: how a pack's live games ended, by
//! variant of its experiment, as one self-contained page (inline SVG and CSS, no script). Each
//! outcome's share per variant with its 95% interval; per variant against the control, each
//! outcome's difference in points with its interval, whether it is beyond noise and how many more
//! games would tell 5 points, the scripted players' predicted effects beside it; and where the
//! tracked fields stood as games ended.

use std::fmt::Write as _;

use ruleweave_lab::outcomes::{OutcomesReport, Predicted, PredictedEffect, VariantOutcomes, points};
use ruleweave_lab::simulate::Spread;

use super::{PALETTE, STYLE, chart, escape, round, svg_open};

/// The page for a report of live games.
pub fn live(r: &OutcomesReport) -> String {
    let pack = escape(&r.pack);
    let mut body = format!("<h1>{pack}: live games by variant</h1><p class=meta>");
    match (&r.experiment, &r.control) {
        (Some(e), Some(c)) => {
            let _ = write!(body, "experiment <code>{}</code>, control <b>{}</b>", escape(e), escape(c));
        }
        _ => body.push_str("no experiment: every live game together"),
    }
    let _ = write!(body, " · {}", escape(&range(r)));
    for (i, v) in r.variants.iter().enumerate().filter(|(_, v)| v.name.is_some()) {
        let _ = write!(body, " · <span class=key style=\"background:{}\"></span> {}", colour(i), name(v));
    }
    body.push_str("</p>");
    body.push_str(&games(r));
    if r.variants.iter().all(|v| v.finished == 0) {
        body.push_str("<p class=meta>No live game has finished in this range yet: shares and differences come with the first.</p>");
    } else {
        body.push_str("<div class=charts>");
        body.push_str(&shares(r));
        for (field, _) in r.variants.first().map(|v| &v.tracked).into_iter().flatten() {
            body.push_str(&tracked(r, field));
        }
        body.push_str("</div>");
    }
    let control = r.control.as_deref().unwrap_or("the control");
    for (i, v) in r.variants.iter().enumerate().filter(|(_, v)| !v.against_control.is_empty()) {
        let _ = write!(body, "<section><h2>{} against {}</h2>", name(v), escape(control));
        body.push_str(&effects(v, colour(i), control, r.predicted.as_ref()));
        body.push_str(&verdicts(v, r.predicted.as_ref()));
        body.push_str("</section>");
    }
    if let Some(p) = &r.predicted {
        let _ = write!(
            body,
            "<p class=meta>Predicted: each scripted player's {} games on the control's rules and on each variant's \
             (the same games, seed <code>{}</code>), on the stand-ins. Live players are not the scripted ones: \
             compare the effects, not the shares.</p>",
            p.games,
            escape(&p.seed)
        );
    }
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{pack}: live games</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
}

/// A variant's colour: its place in the report.
fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn name(v: &VariantOutcomes) -> String {
    escape(v.name.as_deref().unwrap_or("all games"))
}

/// Which games the report reads, in words.
fn range(r: &OutcomesReport) -> String {
    let at = |ms: i64| {
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
        humantime::format_rfc3339_seconds(time).to_string()
    };
    let mut said = match (r.since, r.until) {
        (Some(s), Some(u)) => format!("games opened from {} to {}", at(s), at(u)),
        (Some(s), None) => format!("games opened since {}", at(s)),
        (None, Some(u)) => format!("games opened before {}", at(u)),
        (None, None) => "every game kept".to_owned(),
    };
    if let Some(v) = &r.version {
        let _ = write!(said, ", at version {v}");
    }
    said
}

/// Each variant's weight, what it sets and its games, as a table.
fn games(r: &OutcomesReport) -> String {
    let total: f64 = r.variants.iter().filter_map(|v| v.weight).sum();
    let mut rows = String::new();
    for v in &r.variants {
        let weight = match v.weight {
            Some(w) if total > 0.0 => format!("{} ({}% of new players)", round(w), round(100.0 * w / total)),
            Some(w) => round(w),
            None if r.experiment.is_none() => "–".to_owned(),
            None => "no longer in the experiment".to_owned(),
        };
        let sets = if v.params.is_empty() {
            if v.name.is_some() && v.name == r.control { "the pack's own numbers".to_owned() } else { String::new() }
        } else {
            v.params.iter().map(|(k, x)| format!("{k}={x}")).collect::<Vec<_>>().join(", ")
        };
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{weight}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            name(v),
            escape(&sets),
            v.made,
            v.finished
        );
    }
    format!(
        "<table class=games><tr><th>variant</th><th>weight</th><th>sets</th><th>games made</th><th>finished</th></tr>{rows}</table>"
    )
}

/// Each outcome's share of each variant's finished games as a bar, its 95% interval a whisker.
fn shares(r: &OutcomesReport) -> String {
    let mut names: Vec<&String> = r.variants.iter().flat_map(|v| v.outcomes.keys()).collect();
    names.sort();
    names.dedup();
    let n = r.variants.len() as f64;
    let (width, label) = (480.0, 130.0);
    let row = 12.0 * n + 10.0;
    let height = row * names.len() as f64 + 24.0;
    let scale = |x: f64| label + x * (width - label - 46.0);
    let mut svg = svg_open(width, height);
    for (i, outcome) in names.iter().enumerate() {
        let y = 6.0 + i as f64 * row;
        let _ = write!(svg, "<text x=0 y={}>{}</text>", y + 11.0, escape(outcome));
        for (j, v) in r.variants.iter().enumerate() {
            let Some(s) = v.outcomes.get(*outcome).filter(|_| v.finished > 0) else { continue };
            let y = y + j as f64 * 12.0;
            let _ = write!(
                svg,
                "<rect x={label} y={y} width={:.1} height=10 fill={} opacity=.8><title>{}: {:.1}% (95%: {:.1}–{:.1}%)</title></rect>\
                 <line x1={:.1} x2={:.1} y1={} y2={} stroke=#111827 /><text class=share x={:.1} y={}>{}%</text>",
                scale(s.share) - label,
                colour(j),
                name(v),
                s.share * 100.0,
                s.low * 100.0,
                s.high * 100.0,
                scale(s.low),
                scale(s.high),
                y + 5.0,
                y + 5.0,
                scale(s.high) + 4.0,
                y + 9.0,
                (s.share * 100.0).round()
            );
        }
    }
    for tick in [0.0, 0.5, 1.0] {
        let _ =
            write!(svg, "<text x={:.1} y={} text-anchor=middle>{}%</text>", scale(tick), height - 4.0, tick * 100.0);
    }
    chart("Outcomes (share of finished games, 95% interval)", svg)
}

/// Where `field` stood as each variant's games ended: the median a dot, p10–p90 a line.
fn tracked(r: &OutcomesReport, field: &str) -> String {
    let none = Spread { median: None, p10: None, p90: None };
    let spreads: Vec<Spread> = r.variants.iter().map(|v| v.tracked.get(field).copied().unwrap_or(none)).collect();
    let values = spreads.iter().flat_map(|s| [s.p10, s.p90]).flatten();
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
    if !lo.is_finite() {
        return String::new();
    }
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 1.0, hi + 1.0) };
    let (width, label) = (320.0, 90.0);
    let height = 20.0 * r.variants.len() as f64 + 26.0;
    let x = |v: f64| label + (v - lo) / (hi - lo) * (width - label - 20.0);
    let mut svg = svg_open(width, height);
    for (j, (v, s)) in r.variants.iter().zip(&spreads).enumerate() {
        let y = 14.0 + j as f64 * 20.0;
        let _ = write!(svg, "<text x=0 y={}>{}</text>", y + 4.0, name(v));
        let (Some(p10), Some(median), Some(p90)) = (s.p10, s.median, s.p90) else { continue };
        let _ = write!(
            svg,
            "<line x1={:.1} x2={:.1} y1={y} y2={y} stroke={c} stroke-width=3 opacity=.5 />\
             <circle cx={:.1} cy={y} r=4 fill={c}><title>{}: median {}, p10 {}, p90 {}</title></circle>",
            x(p10),
            x(p90),
            x(median),
            name(v),
            round(median),
            round(p10),
            round(p90),
            c = colour(j),
        );
    }
    let _ = write!(
        svg,
        "<text x={:.1} y={} text-anchor=middle>{}</text><text x={:.1} y={} text-anchor=middle>{}</text>",
        x(lo),
        height - 4.0,
        round(lo),
        x(hi),
        height - 4.0,
        round(hi)
    );
    chart(&format!("{} as games ended (median, p10–p90)", escape(field)), svg)
}

/// The effects the scripted players predict of `v` on `outcome`, lowest first (none without a
/// prediction).
fn predicted_for<'a>(v: &VariantOutcomes, outcome: &str, p: Option<&'a Predicted>) -> Vec<&'a PredictedEffect> {
    match (p, &v.name) {
        (Some(p), Some(variant)) => p.effects_on(variant, outcome),
        _ => Vec::new(),
    }
}

/// The variant's difference from the control in each outcome's share, in points: live, a dot
/// and its 95% interval (filled when beyond noise); predicted, each scripted player a diamond.
fn effects(v: &VariantOutcomes, colour: &str, control: &str, p: Option<&Predicted>) -> String {
    let widest = v
        .against_control
        .iter()
        .flat_map(|d| [d.low, d.high])
        .chain(v.against_control.iter().flat_map(|d| predicted_for(v, &d.outcome, p)).map(|e| e.delta))
        .fold(0.0_f64, |m, x| m.max(x.abs()));
    // The axis runs either side of 0 to a round number of points.
    let reach = [0.05, 0.1, 0.2, 0.25, 0.5, 1.0].into_iter().find(|r| widest <= *r).unwrap_or(1.0);
    let (width, label) = (560.0, 130.0);
    let row = if p.is_some() { 34.0 } else { 22.0 };
    let height = row * v.against_control.len() as f64 + 30.0;
    let x = |d: f64| label + (d + reach) / (2.0 * reach) * (width - label - 20.0);
    let mut svg = svg_open(width, height);
    let _ = write!(svg, "<line x1={0:.1} x2={0:.1} y1=0 y2={1} stroke=#9ca3af />", x(0.0), height - 20.0);
    for (i, d) in v.against_control.iter().enumerate() {
        let y = 12.0 + i as f64 * row;
        let _ = write!(svg, "<text x=0 y={}>{}</text>", y + 4.0, escape(&d.outcome));
        let fill = if d.beyond_noise { colour } else { "#fff" };
        let _ = write!(
            svg,
            "<line x1={:.1} x2={:.1} y1={y} y2={y} stroke={colour} stroke-width=2 />\
             <circle cx={:.1} cy={y} r=4.5 fill={fill} stroke={colour} stroke-width=2><title>live: {} points (95%: {} to {})</title></circle>",
            x(d.low),
            x(d.high),
            x(d.delta),
            points(d.delta),
            points(d.low),
            points(d.high)
        );
        for e in predicted_for(v, &d.outcome, p) {
            let (cx, cy) = (x(e.delta), y + 13.0);
            let _ = write!(
                svg,
                "<path d=\"M{cx:.1} {:.1}L{:.1} {cy:.1}L{cx:.1} {:.1}L{:.1} {cy:.1}Z\" fill=#6b7280 opacity=.8><title>predicted for {}: {} points</title></path>",
                cy - 4.0,
                cx + 4.0,
                cy + 4.0,
                cx - 4.0,
                escape(&e.player),
                points(e.delta)
            );
        }
    }
    for tick in [-reach, 0.0, reach] {
        let _ = write!(svg, "<text x={:.1} y={} text-anchor=middle>{}</text>", x(tick), height - 4.0, points(tick));
    }
    let legend = if p.is_some() { "; ◆ a scripted player's predicted effect" } else { "" };
    chart(
        &format!("{} − {}, in points (95% interval; a filled dot is beyond noise{legend})", name(v), escape(control)),
        svg,
    )
}

/// The differences as a table: each one's interval, whether it is beyond noise, how many more
/// games would tell 5 points, and what the scripted players predicted.
fn verdicts(v: &VariantOutcomes, p: Option<&Predicted>) -> String {
    let mut rows = String::new();
    for d in &v.against_control {
        let verdict = d.verdict();
        let predicted = match predicted_for(v, &d.outcome, p).as_slice() {
            _ if p.is_none() => String::new(),
            [] => "<td></td>".to_owned(),
            [one] => format!("<td>{} ({})</td>", points(one.delta), escape(&one.player)),
            [lo, .., hi] => format!(
                "<td>{} ({}) to {} ({})</td>",
                points(lo.delta),
                escape(&lo.player),
                points(hi.delta),
                escape(&hi.player)
            ),
        };
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{} points</td><td>{} to {}</td><td class={}>{verdict}</td>{predicted}</tr>",
            escape(&d.outcome),
            points(d.delta),
            points(d.low),
            points(d.high),
            if d.beyond_noise { "beyond" } else { "within" },
        );
    }
    let predicted = if p.is_some() { "<th>predicted (scripted players)</th>" } else { "" };
    format!(
        "<table class=against><tr><th>outcome</th><th>live difference</th><th>95% interval</th><th></th>{predicted}</tr>{rows}</table>"
    )
}

#[cfg(test)]
mod tests {
    use ruleweave_lab::outcomes::{OutcomesReport, VariantOutcomes};

    /// A pack without an experiment, or before any game ends, draws a page that says so rather
    /// than empty charts.
    #[test]
    fn no_games_yet_is_said() {
        let report = OutcomesReport {
            pack: "coin".into(),
            experiment: None,
            control: None,
            since: Some(1_796_083_200_000),
            until: None,
            version: Some("b3f8b1aca6f4".into()),
            variants: vec![VariantOutcomes {
                name: None,
                weight: None,
                params: Default::default(),
                made: 2,
                finished: 0,
                outcomes: Default::default(),
                tracked: [("score".to_owned(), ruleweave_lab::simulate::Spread { median: None, p10: None, p90: None })]
                    .into_iter()
                    .collect(),
                against_control: Vec::new(),
            }],
            predicted: None,
        };
        let page = super::live(&report);
        assert!(
            page.contains(
                "no experiment: every live game together · games opened since 2026-12-01T00:00:00Z, at version b3f8b1aca6f4"
            ),
            "{page}"
        );
        assert!(page.contains("<tr><td>all games</td><td>–</td><td></td><td>2</td><td>0</td></tr>"), "{page}");
        assert!(page.contains("No live game has finished in this range yet"), "{page}");
        assert!(!page.contains("<svg"), "no chart without a finished game: {page}");
    }

    /// What a pack or its players named is text on the page, never markup; a tracked field is
    /// drawn per variant, its median and spread in the dot's title.
    #[test]
    fn names_are_escaped_and_tracked_fields_drawn() {
        use ruleweave_lab::simulate::{Share, Spread};
        let spread = |m: f64| Spread { median: Some(m), p10: Some(m - 10.0), p90: Some(m + 10.0) };
        let variant = |name: &str, params: serde_json::Value, m: f64| VariantOutcomes {
            name: Some(name.into()),
            weight: Some(50.0),
            params: serde_json::from_value(params).unwrap(),
            made: 10,
            finished: 10,
            outcomes: [("<won>".to_owned(), Share { share: 0.5, low: 0.2, high: 0.8 })].into_iter().collect(),
            tracked: [("merit".to_owned(), spread(m))].into_iter().collect(),
            against_control: Vec::new(),
        };
        let report = OutcomesReport {
            pack: "coin".into(),
            experiment: Some("x".into()),
            control: Some("plain".into()),
            since: None,
            until: None,
            version: None,
            variants: vec![
                variant("plain", serde_json::json!({}), 40.0),
                variant("kind<script>", serde_json::json!({"chance": 70}), 60.0),
            ],
            predicted: None,
        };
        let page = super::live(&report);
        assert!(!page.contains("<script>") && !page.contains("<won>"), "{page}");
        assert!(page.contains("kind&lt;script&gt;") && page.contains("&lt;won&gt;"), "{page}");
        assert!(page.contains("<h3>merit as games ended (median, p10–p90)</h3>"), "{page}");
        assert!(page.contains("<title>kind&lt;script&gt;: median 60, p10 50, p90 70</title>"), "{page}");
        assert!(page.contains("<td>50 (50% of new players)</td><td>chance=70</td>"), "{page}");
    }
}
