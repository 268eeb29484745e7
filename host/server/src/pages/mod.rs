//! `simulate --html FILE`: the report as one self-contained page (inline SVG and CSS: no script,
//! no CDN, no build step) a designer opens in any browser. Per player: each outcome's share with
//! its 95% interval, the turns games took, and where each tracked field stood turn by turn (the
//! median and the band from the 10th to the 90th percentile, a dashed line at its threshold when
//! the pack names one); with `--against`, the other copy of the rules drawn beside in another
//! colour, what differs between the copies, and the differences with their intervals. A sweep's
//! page draws each outcome's share against the value (a heat map for a grid of two), and a
//! tune's every value tried over the target's band.

use std::fmt::Write as _;

mod live;
pub use live::live;

use ruleweave_lab::simulate::tune::{SweepPoint, SweepReport, TuneReport};
use ruleweave_lab::simulate::{Against, PlayerReport, Report, Spread, Tracked, UNFINISHED};

/// This copy's colour, and the other copy's.
const HERE: &str = "#2563eb";
const THERE: &str = "#ea580c";

/// The page for a report.
pub fn page(report: &Report) -> String {
    let pack = escape(&report.pack);
    let against = report.against.as_ref();
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>{pack}: {} games per player</h1><p class=meta>seed <code>{}</code> · each game played to its end or {} turns",
        report.games,
        escape(&report.seed),
        report.max_turns
    );
    if let Some(against) = against {
        let _ = write!(
            body,
            " · <span class=key style=\"background:{HERE}\"></span> these rules · <span class=key style=\"background:{THERE}\"></span> {}",
            escape(&against.root)
        );
    }
    body.push_str("</p>");
    if let Some(against) = against {
        body.push_str(&changes(against));
    }
    for (i, p) in report.players.iter().enumerate() {
        let other = against.and_then(|a| a.players.get(i));
        let _ = write!(body, "<section><h2>{} <small>({} games)</small></h2>", escape(&p.name), p.games);
        if let Some(e) = &p.error {
            let _ = write!(body, "<p class=error>stopped: {}</p>", escape(e));
        }
        body.push_str("<div class=charts>");
        body.push_str(&outcomes(p, other, report.max_turns));
        body.push_str(&turns_chart(p, other));
        for (field, s) in &p.track {
            let theirs = other.and_then(|o| o.track.get(field));
            body.push_str(&band(field, s, theirs));
        }
        body.push_str("</div>");
        if let Some(against) = against {
            body.push_str(&differences(against, &p.name));
        }
        body.push_str("</section>");
    }
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{pack}: simulation</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
}

/// One colour per outcome of a sweep's chart, in turn.
const PALETTE: [&str; 8] = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#4b5563"];

/// `simulate --sweep ... --html FILE`: for one parameter, per player, each outcome's share
/// against the value (a line, its 95% interval a band); for two, per player and outcome, a heat
/// map of the share over the grid.
pub fn sweep(report: &SweepReport) -> String {
    let SweepReport { pack, params: param, games, seed, sweep: points, .. } = report;
    let mut body = format!(
        "<h1>{}: {} at each value</h1><p class=meta>{games} games per player at each value, the same games at every value · seed <code>{}</code></p>",
        escape(pack),
        escape(&param.join(" × ")),
        escape(seed)
    );
    // The sweep at a glance, as the command line prints it first.
    let rows = report.table();
    body.push_str("<table class=summary>");
    for (i, row) in rows.iter().enumerate() {
        let cell = if i == 0 { "th" } else { "td" };
        body.push_str("<tr>");
        for x in row {
            let _ = write!(body, "<{cell}>{}</{cell}>", escape(x));
        }
        body.push_str("</tr>");
    }
    body.push_str("</table>");
    let players: Vec<&str> =
        points.first().map(|p| p.players.iter().map(|p| p.name.as_str()).collect()).unwrap_or_default();
    for (i, player) in players.iter().enumerate() {
        let _ = write!(body, "<section><h2>{}</h2><div class=charts>", escape(player));
        let mut outcomes: Vec<&String> = points.iter().flat_map(|p| p.players[i].outcomes.keys()).collect();
        outcomes.sort();
        outcomes.dedup();
        if param.len() == 1 {
            body.push_str(&curves(&param[0], points, i, &outcomes));
        } else {
            for outcome in outcomes {
                body.push_str(&heat_map(param, points, i, outcome));
            }
        }
        body.push_str("</div></section>");
    }
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{}: sweep</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        escape(pack)
    )
}

/// A value of a sweep's point as a number (one parameter) or the pair's (two).
fn value_at(point: &SweepPoint, param: &str) -> f64 {
    match &point.value {
        serde_json::Value::Object(m) => m.get(param).and_then(|v| v.as_f64()).unwrap_or(0.0),
        v => v.as_f64().unwrap_or(0.0),
    }
}

/// Share against value: a line per outcome, its interval a band.
fn curves(param: &str, points: &[SweepPoint], player: usize, outcomes: &[&String]) -> String {
    let (width, height, left, right) = (640.0, 260.0, 40.0, 150.0);
    let xs: Vec<f64> = points.iter().map(|p| value_at(p, param)).collect();
    let (lo, hi) =
        (xs.iter().copied().fold(f64::INFINITY, f64::min), xs.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let span = if hi > lo { hi - lo } else { 1.0 };
    let x = |v: f64| left + (v - lo) / span * (width - left - right);
    let y = |share: f64| 10.0 + (1.0 - share) * (height - 40.0);
    let mut svg = svg_open(width, height);
    for (k, outcome) in outcomes.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        let at = |p: &SweepPoint| {
            p.players[player].outcomes.get(*outcome).map_or((0.0, 0.0, 0.0), |s| (s.share, s.low, s.high))
        };
        let upper: Vec<String> =
            points.iter().map(|p| format!("{:.1},{:.1}", x(value_at(p, param)), y(at(p).2))).collect();
        let lower: Vec<String> =
            points.iter().rev().map(|p| format!("{:.1},{:.1}", x(value_at(p, param)), y(at(p).1))).collect();
        let line: Vec<String> =
            points.iter().map(|p| format!("{:.1},{:.1}", x(value_at(p, param)), y(at(p).0))).collect();
        let _ = write!(
            svg,
            "<polygon points=\"{} {}\" fill={colour} opacity=.15 /><polyline points=\"{}\" fill=none stroke={colour} stroke-width=2 />",
            upper.join(" "),
            lower.join(" "),
            line.join(" ")
        );
        for p in points {
            let (share, low, high) = at(p);
            let _ = write!(
                svg,
                "<circle cx={:.1} cy={:.1} r=3 fill={colour}><title>{} = {}: {} {:.1}% (95%: {:.1}–{:.1}%)</title></circle>",
                x(value_at(p, param)),
                y(share),
                escape(param),
                round(value_at(p, param)),
                escape(outcome),
                share * 100.0,
                low * 100.0,
                high * 100.0
            );
        }
        let _ = write!(
            svg,
            "<rect x={:.1} y={:.1} width=10 height=10 fill={colour} /><text x={:.1} y={:.1}>{}</text>",
            width - right + 14.0,
            12.0 + k as f64 * 16.0,
            width - right + 28.0,
            21.0 + k as f64 * 16.0,
            escape(outcome)
        );
    }
    axes(&mut svg, (x(lo), x(hi)), (lo, hi), whole(&xs), &y, height, param);
    chart("Outcomes by value (share, 95% interval)", svg)
}

/// One outcome's share over a grid of two parameters, a cell per pair, darker for more.
fn heat_map(param: &[String], points: &[SweepPoint], player: usize, outcome: &str) -> String {
    let mut columns: Vec<f64> = points.iter().map(|p| value_at(p, &param[0])).collect();
    let mut rows: Vec<f64> = points.iter().map(|p| value_at(p, &param[1])).collect();
    for v in [&mut columns, &mut rows] {
        v.sort_by(f64::total_cmp);
        v.dedup();
    }
    let (cell, left, top) = (44.0, 60.0, 20.0);
    let (width, height) = (left + cell * columns.len() as f64 + 10.0, top + cell * rows.len() as f64 + 30.0);
    let mut svg = svg_open(width, height);
    for p in points {
        let (c, r) = (value_at(p, &param[0]), value_at(p, &param[1]));
        let (Some(i), Some(j)) = (columns.iter().position(|v| *v == c), rows.iter().position(|v| *v == r)) else {
            continue;
        };
        let share = p.players[player].outcomes.get(outcome).map_or(0.0, |s| s.share);
        let (cx, cy) = (left + i as f64 * cell, top + j as f64 * cell);
        let ink = if share > 0.55 { "#ffffff" } else { "#111827" };
        let _ = write!(
            svg,
            "<rect x={cx:.1} y={cy:.1} width={cell} height={cell} fill=#2563eb fill-opacity={:.2} stroke=#ffffff /><text x={:.1} y={:.1} text-anchor=middle style=\"fill:{ink}\">{}%</text>",
            0.05 + share * 0.9,
            cx + cell / 2.0,
            cy + cell / 2.0 + 4.0,
            (share * 100.0).round()
        );
    }
    for (i, c) in columns.iter().enumerate() {
        let _ = write!(
            svg,
            "<text x={:.1} y={:.1} text-anchor=middle>{}</text>",
            left + i as f64 * cell + cell / 2.0,
            top - 6.0,
            round(*c)
        );
    }
    for (j, r) in rows.iter().enumerate() {
        let _ = write!(svg, "<text x=0 y={:.1}>{}</text>", top + j as f64 * cell + cell / 2.0 + 4.0, round(*r));
    }
    let _ = write!(
        svg,
        "<text x={left} y={:.1}>across: {} · down: {}</text>",
        height - 8.0,
        escape(&param[0]),
        escape(&param[1])
    );
    chart(&format!("{} (share)", escape(outcome)), svg)
}

/// `tune --html FILE`: every value tried, its share and 95% interval, over the target's band,
/// the answer marked.
pub fn tune(r: &TuneReport) -> String {
    let t = &r.target;
    let pct = |x: f64| format!("{}%", round(x * 100.0));
    let verdict = if r.found {
        format!(
            "{} = {} gives {} {} {} ± {}",
            escape(&r.param),
            r.value,
            escape(&t.player),
            escape(&t.outcome),
            pct(t.share),
            pct(t.within)
        )
    } else {
        format!(
            "no value of {} found for {} {} {} ± {}",
            escape(&r.param),
            escape(&t.player),
            escape(&t.outcome),
            pct(t.share),
            pct(t.within)
        )
    };
    let mut body = format!(
        "<h1>{}: {verdict}</h1><p class=meta>{} games in {:.1} s · seed <code>{}</code>{}</p>",
        escape(&r.pack),
        r.games_played,
        r.seconds,
        escape(&r.seed),
        r.why.as_deref().map(|w| format!(" · {}", escape(w))).unwrap_or_default()
    );
    let (width, height, left) = (640.0, 280.0, 40.0);
    let xs: Vec<f64> = r.evaluations.iter().filter_map(|e| e.value.as_f64()).collect();
    let (lo, hi) =
        (xs.iter().copied().fold(f64::INFINITY, f64::min), xs.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let span = if hi > lo { hi - lo } else { 1.0 };
    let x = |v: f64| left + 10.0 + (v - lo) / span * (width - left - 30.0);
    let y = |share: f64| 10.0 + (1.0 - share) * (height - 40.0);
    let mut svg = svg_open(width, height);
    let (band_low, band_high) = ((t.share - t.within).max(0.0), (t.share + t.within).min(1.0));
    let _ = write!(
        svg,
        "<rect x={left} y={:.1} width={:.1} height={:.1} fill=#16a34a opacity=.15><title>the target: {} to {}</title></rect>",
        y(band_high),
        width - left,
        y(band_low) - y(band_high),
        pct(band_low),
        pct(band_high)
    );
    let answer = r.value.as_f64();
    for e in &r.evaluations {
        let Some(v) = e.value.as_f64() else { continue };
        let colour = if Some(v) == answer { if r.found { "#16a34a" } else { "#ea580c" } } else { HERE };
        let _ = write!(
            svg,
            "<line x1={:.1} x2={:.1} y1={:.1} y2={:.1} stroke={colour} stroke-width=2 /><circle cx={:.1} cy={:.1} r={} fill={colour}><title>{} = {}: {:.1}% (95%: {:.1}–{:.1}%, {} games)</title></circle>",
            x(v),
            x(v),
            y(e.high),
            y(e.low),
            x(v),
            y(e.share),
            if Some(v) == answer { 5 } else { 3 },
            escape(&r.param),
            e.value,
            e.share * 100.0,
            e.low * 100.0,
            e.high * 100.0,
            e.games
        );
    }
    axes(&mut svg, (x(lo), x(hi)), (lo, hi), whole(&xs), &y, height, &r.param);
    body.push_str("<div class=charts>");
    body.push_str(&chart("Share at each value tried (95% interval), the target's band in green", svg));
    body.push_str("</div><table><tr><th>value</th><th>share</th><th>95% interval</th><th>games</th></tr>");
    for e in &r.evaluations {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}–{}</td><td>{}</td></tr>",
            e.value,
            pct(e.share),
            pct(e.low),
            pct(e.high),
            e.games
        );
    }
    body.push_str("</table>");
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{}: tune</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        escape(&r.pack)
    )
}

/// A calibration's page: per profile, each number's gap (model − stand-in) with its interval and
/// each category's agreement and confusion table; then the replay.
pub fn calibration(c: &ruleweave_lab::calibrate::Calibration) -> String {
    let mut body = format!(
        "<h1>{}: its stand-ins against its models</h1><p class=meta>{} sessions · version <code>{}</code></p>",
        escape(&c.pack),
        c.sessions,
        escape(&c.version)
    );
    let opt = |x: Option<f64>| x.map_or("–".to_owned(), round);
    for (profile, p) in &c.profiles {
        let _ = write!(
            body,
            "<h2>{} <small>{} calls compared, {} unread</small></h2><table><tr><th>number</th><th>model − stand-in</th>\
             <th>95% interval</th><th>mean |difference|</th><th>rank correlation</th><th>calls</th></tr>",
            escape(profile),
            p.calls,
            p.unread
        );
        for (field, g) in &p.numbers {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{} to {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(field),
                round(g.mean_difference),
                opt(g.low),
                opt(g.high),
                round(g.mean_absolute),
                opt(g.rank_correlation),
                g.pairs
            );
        }
        body.push_str("</table>");
        for (field, a) in &p.categories {
            let said: std::collections::BTreeSet<&String> = a.confusion.values().flat_map(|by| by.keys()).collect();
            let _ = write!(
                body,
                "<h3>{}: agree {}% of {} calls</h3><table><tr><th>model ↓ stand-in →</th>",
                escape(field),
                round(a.agreement * 100.0),
                a.pairs
            );
            for s in &said {
                let _ = write!(body, "<th>{}</th>", escape(s));
            }
            body.push_str("</tr>");
            for (model, by) in &a.confusion {
                let _ = write!(body, "<tr><th>{}</th>", escape(model));
                for s in &said {
                    let _ = write!(body, "<td>{}</td>", by.get(*s).copied().unwrap_or(0));
                }
                body.push_str("</tr>");
            }
            body.push_str("</table>");
        }
    }
    if let Some(r) = &c.replayed {
        let _ = write!(
            body,
            "<h2>Replayed with the stand-ins in the models' place</h2><p>Of {} turns, {} would have routed otherwise \
             and {} ended otherwise.</p>",
            r.turns, r.routed_differently, r.ended_differently
        );
    }
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{}: calibration</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        escape(&c.pack)
    )
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1f2937;padding:0 1rem}\
h1{font-size:1.5rem;margin:0}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}h2 small{color:#6b7280;font-weight:normal}\
h3{font-size:.9rem;margin:.2rem 0;color:#374151}.meta{color:#6b7280;margin:.3rem 0 1rem}\
.key{display:inline-block;width:.8em;height:.8em;border-radius:2px;vertical-align:-.05em}\
.charts{display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start}.chart{border:1px solid #e5e7eb;border-radius:6px;padding:.5rem .7rem}\
svg text{font:11px system-ui,sans-serif;fill:#4b5563}.error{color:#b91c1c}\
table{border-collapse:collapse;margin-top:.6rem;font-size:.9rem}td,th{padding:.2rem .7rem;text-align:left;border-bottom:1px solid #f3f4f6}\
.beyond{color:#b91c1c;font-weight:600}.within{color:#6b7280}";

/// Each outcome's share as a bar, its 95% interval as a whisker; the other copy's beside it.
fn outcomes(p: &PlayerReport, other: Option<&PlayerReport>, max_turns: u32) -> String {
    let mut names: Vec<&String> = p.outcomes.keys().collect();
    if let Some(o) = other {
        names.extend(o.outcomes.keys());
    }
    names.sort();
    names.dedup();
    let (width, row, label) = (460.0, if other.is_some() { 30.0 } else { 20.0 }, 170.0);
    let height = row * names.len() as f64 + 24.0;
    let scale = |x: f64| label + x * (width - label - 46.0);
    let mut svg = svg_open(width, height);
    for (i, name) in names.iter().enumerate() {
        let y = 6.0 + i as f64 * row;
        let shown = ruleweave_lab::simulate::outcome_label(name, max_turns);
        let _ = write!(svg, "<text x=0 y={}>{}</text>", y + 11.0, escape(&shown));
        for (j, (side, colour)) in [(Some(p), HERE), (other, THERE)].into_iter().enumerate() {
            let Some(side) = side else { continue };
            let (share, low, high) = side.outcomes.get(*name).map_or((0.0, 0.0, 0.0), |s| (s.share, s.low, s.high));
            let y = y + j as f64 * 12.0;
            let _ = write!(
                svg,
                "<rect x={label} y={y} width={:.1} height=10 fill={colour} opacity=.8><title>{:.1}% (95%: {:.1}–{:.1}%)</title></rect>\
                 <line x1={:.1} x2={:.1} y1={} y2={} stroke=#111827 /><text class=share x={:.1} y={}>{}%</text>",
                scale(share) - label,
                share * 100.0,
                low * 100.0,
                high * 100.0,
                scale(low),
                scale(high),
                y + 5.0,
                y + 5.0,
                scale(high) + 4.0,
                y + 9.0,
                (share * 100.0).round()
            );
        }
    }
    for tick in [0.0, 0.5, 1.0] {
        let _ =
            write!(svg, "<text x={:.1} y={} text-anchor=middle>{}%</text>", scale(tick), height - 4.0, tick * 100.0);
    }
    chart("Outcomes (share, 95% interval)", svg)
}

/// The turns games took, as a histogram of the share of games per number of turns (the copies'
/// bars side by side), with each copy's median and p10–p90 under it.
fn turns_chart(p: &PlayerReport, other: Option<&PlayerReport>) -> String {
    let sides: Vec<(&PlayerReport, &str)> =
        [(Some(p), HERE), (other, THERE)].into_iter().filter_map(|(s, c)| Some((s?, c))).collect();
    let counts = |side: &PlayerReport| -> Vec<f64> { side.turns_histogram.iter().map(|&k| k as f64).collect() };
    let most = sides.iter().map(|(s, _)| counts(s).len()).max().unwrap_or(0).max(1);
    let shares: Vec<Vec<f64>> = sides
        .iter()
        .map(|(s, _)| {
            let c = counts(s);
            let total: f64 = c.iter().sum::<f64>().max(1.0);
            c.iter().map(|k| k / total).collect()
        })
        .collect();
    let top = shares.iter().flatten().copied().fold(0.0, f64::max).max(0.01);
    let (width, height, base) = (300.0, 150.0 + 14.0 * sides.len() as f64, 110.0);
    let slot = (width - 20.0) / most as f64;
    let bar = (slot * 0.8 / sides.len() as f64).max(1.0);
    let mut svg = svg_open(width, height);
    for (j, ((_, colour), share)) in sides.iter().zip(&shares).enumerate() {
        for (i, x) in share.iter().enumerate() {
            let h = x / top * (base - 10.0);
            let _ = write!(
                svg,
                "<rect x={:.1} y={:.1} width={bar:.1} height={h:.1} fill={colour} opacity=.8><title>{} turn(s): {:.1}% of games</title></rect>",
                10.0 + i as f64 * slot + slot * 0.1 + j as f64 * bar,
                base - h,
                i + 1,
                x * 100.0
            );
        }
    }
    let _ = write!(svg, "<line x1=10 x2={} y1={base} y2={base} stroke=#9ca3af />", width - 10.0);
    for turn in [1, most.div_ceil(2), most] {
        let _ = write!(
            svg,
            "<text x={:.1} y={} text-anchor=middle>{turn}</text>",
            10.0 + (turn as f64 - 0.5) * slot,
            base + 14.0
        );
    }
    for (j, (side, colour)) in sides.iter().enumerate() {
        let t = &side.turns;
        let unfinished = side.outcomes.get(UNFINISHED).map_or(0.0, |s| s.share);
        let summary = match t.median {
            Some(_) => format!("median {}, p10 {}, p90 {}", round(num(t.median)), round(num(t.p10)), round(num(t.p90))),
            None => "no game finished".to_owned(),
        };
        let apart =
            if unfinished > 0.0 { format!(" · {}% unfinished", (unfinished * 100.0).round()) } else { String::new() };
        let _ = write!(
            svg,
            "<text x=10 y={} fill={colour} style=\"fill:{colour}\">{summary}{apart}</text>",
            base + 34.0 + 14.0 * j as f64,
        );
    }
    chart("Turns to finish (share of finished games)", svg)
}

/// Where a tracked field stood after each turn: the median as a line, p10–p90 as a band.
fn band(field: &str, here: &Tracked, there: Option<&Tracked>) -> String {
    let sides: Vec<(&Vec<Spread>, &str)> =
        [(Some(here), HERE), (there, THERE)].into_iter().filter_map(|(s, c)| Some((&s?.per_turn, c))).collect();
    let turns = sides.iter().map(|(t, _)| t.len()).max().unwrap_or(0).max(1);
    let threshold = here.threshold;
    let values = sides.iter().flat_map(|(t, _)| t.iter()).flat_map(|s| [num(s.p10), num(s.p90)]).chain(threshold);
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
    let (low, high) = if low.is_finite() && high > low { (low, high) } else { (low.min(0.0), low.max(0.0) + 1.0) };
    let (width, height) = (320.0, 170.0);
    let x = |turn: usize| 34.0 + turn as f64 / turns.max(2).saturating_sub(1) as f64 * (width - 70.0);
    let y = |v: f64| 10.0 + (high - v) / (high - low) * (height - 40.0);
    let mut svg = svg_open(width, height);
    // The other copy first, so this copy's line lies on top where they agree.
    for (per_turn, colour) in sides.iter().rev() {
        let at = |i: usize, value: fn(&Spread) -> Option<f64>| (x(i), y(num(value(&per_turn[i]))));
        let upper: Vec<String> =
            (0..per_turn.len()).map(|i| at(i, |s| s.p90)).map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let lower: Vec<String> =
            (0..per_turn.len()).rev().map(|i| at(i, |s| s.p10)).map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let median: Vec<String> =
            (0..per_turn.len()).map(|i| at(i, |s| s.median)).map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let _ = write!(
            svg,
            "<polygon points=\"{} {}\" fill={colour} opacity=.18 /><polyline points=\"{}\" fill=none stroke={colour} stroke-width=2 />",
            upper.join(" "),
            lower.join(" "),
            median.join(" ")
        );
    }
    if let Some(line) = threshold {
        let _ = write!(
            svg,
            "<line x1={:.1} x2={:.1} y1={:.1} y2={:.1} stroke=#111827 stroke-dasharray=\"5 4\" /><text x={:.1} y={:.1} text-anchor=end>threshold {}</text>",
            x(0),
            x(turns - 1),
            y(line),
            y(line),
            x(turns - 1),
            y(line) - 4.0,
            round(line)
        );
    }
    let _ = write!(
        svg,
        "<text x=0 y={:.1}>{}</text><text x=0 y={:.1}>{}</text><text x={:.1} y={} text-anchor=middle>turn 1</text><text x={:.1} y={} text-anchor=middle>turn {turns}</text>",
        y(high) + 4.0,
        round(high),
        y(low),
        round(low),
        x(0),
        height - 6.0,
        x(turns - 1),
        height - 6.0
    );
    chart(&format!("{} by turn (median, p10–p90)", escape(field)), svg)
}

/// The differences of one player's outcomes between the two copies, as a table.
fn differences(against: &Against, player: &str) -> String {
    let mut rows = String::new();
    for d in against.differences.iter().filter(|d| d.player == player) {
        let beyond = d.beyond_noise;
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{:+.1} points</td><td>{:.1} to {:.1}</td><td class={}>{}</td></tr>",
            escape(&d.outcome),
            d.delta * 100.0,
            d.low * 100.0,
            d.high * 100.0,
            if beyond { "beyond" } else { "within" },
            if beyond { "beyond noise" } else { "within noise" }
        );
    }
    for t in against.tracked.iter().filter(|t| t.player == player) {
        let Some(delta) = t.delta else { continue };
        let interval = match (t.low, t.high) {
            (Some(low), Some(high)) => format!("{} to {}", round(low), round(high)),
            _ => format!("too few games ({})", t.games),
        };
        let beyond = t.beyond_noise;
        let field = if t.field == "turns" { "turns to finish".to_owned() } else { t.field.clone() };
        let _ = write!(
            rows,
            "<tr><td>{} (median)</td><td>{}{}</td><td>{interval}</td><td class={}>{}</td></tr>",
            escape(&field),
            if delta > 0.0 { "+" } else { "" },
            round(delta),
            if beyond { "beyond" } else { "within" },
            if beyond { "beyond noise" } else { "within noise" }
        );
    }
    format!(
        "<table><tr><th>outcome or field</th><th>these rules − the other</th><th>95% interval</th><th></th></tr>{rows}</table>"
    )
}

/// What differs between the two copies of the pack, as a table (the manifest's values, then the
/// first differing line of each other file).
fn changes(against: &Against) -> String {
    if against.changes.is_empty() {
        return "<p class=meta>The two copies of the pack are the same: any difference is the games' own.</p>".into();
    }
    let show = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "<em>none</em>".to_owned(),
        serde_json::Value::String(s) => format!("<code>{}</code>", escape(s)),
        other => format!("<code>{}</code>", escape(&other.to_string())),
    };
    let mut rows = String::new();
    for c in &against.changes {
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.file),
            escape(&c.key),
            show(&c.ours),
            show(&c.theirs)
        );
    }
    format!(
        "<h2>What differs</h2><table><tr><th>file</th><th>where</th><th>these rules</th><th>{}</th></tr>{rows}</table>",
        escape(&against.root)
    )
}

/// A share chart's axes: 0%, 50% and 100% up the side, the values at the ends and the
/// parameter's name along the bottom.
fn axes(
    svg: &mut String,
    (left, right): (f64, f64),
    (lo, hi): (f64, f64),
    whole: bool,
    y: &dyn Fn(f64) -> f64,
    height: f64,
    param: &str,
) {
    for tick in [0.0, 0.5, 1.0] {
        let _ = write!(svg, "<text x=0 y={:.1}>{}%</text>", y(tick) + 4.0, tick * 100.0);
    }
    // The values under the axis at a readable step (every value when there are ten or fewer
    // whole ones), the parameter's name under them.
    let at = |v: f64| if hi > lo { left + (v - lo) / (hi - lo) * (right - left) } else { (left + right) / 2.0 };
    for tick in ticks(lo, hi, whole) {
        let label = ruleweave::text::decimals(tick, 6);
        let _ = write!(svg, "<text x={:.1} y={:.1} text-anchor=middle>{label}</text>", at(tick), height - 17.0);
    }
    let _ = write!(
        svg,
        "<text x={:.1} y={:.1} text-anchor=middle>{}</text>",
        (left + right) / 2.0,
        height - 3.0,
        escape(param)
    );
}

/// Whether every value plotted is a whole number (an integer parameter's): its axis steps by 1
/// at least.
fn whole(xs: &[f64]) -> bool {
    xs.iter().all(|x| x.fract() == 0.0)
}

/// Values from `lo` to `hi` at a step of 1, 2 or 5 times a power of ten (at least 1 for `whole`
/// values), at most eleven of them, the ends always among them.
fn ticks(lo: f64, hi: f64, whole: bool) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let rough = if whole { ((hi - lo) / 10.0).max(1.0) } else { (hi - lo) / 10.0 };
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= rough).unwrap_or(10.0 * power);
    let first = (lo / step).floor() as i64 + 1;
    let inner =
        (first..).map(|k| k as f64 * step).take_while(|t| *t < hi - step * 0.25).filter(|t| *t > lo + step * 0.25);
    std::iter::once(lo).chain(inner).chain(std::iter::once(hi)).collect()
}

fn chart(title: &str, svg: String) -> String {
    format!("<div class=chart><h3>{title}</h3>{svg}</svg></div>")
}

fn svg_open(width: f64, height: f64) -> String {
    format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width={width} height={height} viewBox=\"0 0 {width} {height}\">")
}

fn num(v: Option<f64>) -> f64 {
    v.unwrap_or(0.0)
}

fn round(x: f64) -> String {
    ruleweave::text::decimals(x, 1)
}

/// Text as HTML shows it.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::ticks;

    #[test]
    fn chart_ticks_fall_at_readable_steps() {
        assert_eq!(ticks(58.0, 60.0, true), [58.0, 59.0, 60.0], "every whole value of a short range");
        assert_eq!(ticks(0.0, 100.0, true), [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]);
        assert_eq!(ticks(40.0, 83.0, true), [40.0, 45.0, 50.0, 55.0, 60.0, 65.0, 70.0, 75.0, 80.0, 83.0]);
        let bias = ticks(-0.4, 0.4, false);
        assert_eq!(bias.len(), 9, "{bias:?}");
        assert_eq!(
            bias.iter().map(|t| ruleweave::text::decimals(*t, 6)).collect::<Vec<_>>()[3..6],
            ["-0.1", "0", "0.1"]
        );
        assert_eq!(ticks(5.0, 5.0, true), [5.0], "one value, one tick");
    }
}
