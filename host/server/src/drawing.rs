//! A pack's graph drawn as SVG: laid out by `dagre` (the layered layout Mermaid uses, in Rust),
//! drawn here with each node in its kind's shape, routes dashed and labelled. One drawing for
//! every face: `ruleweave graph --html` writes it into a page, and the server answers it at
//! `GET /v1/packs/{pack}/graph` for the console. Each node is a `<g data-node="NAME">`, so a
//! face can find it (to mark it, or to set a breakpoint on it).

use std::fmt::Write as _;

use dagre::graph::{Graph, GraphOptions};
use dagre::{EdgeLabel, GraphLabel, LayoutOptions, NodeLabel};
use ruleweave::{Drawing, EdgeKind};

/// The height of a node's box, and of START's and END's.
const NODE_HEIGHT: f64 = 46.0;
/// How wide a character of the node's text draws (13 px system-ui, a little generous).
const CHAR: f64 = 7.2;
/// The longest label an edge shows whole (the full text is its tooltip).
const LABEL_CHARS: usize = 40;

/// The drawing of `d` as one `<svg>` element (no script, nothing fetched).
pub fn svg(d: &Drawing) -> String {
    let mut g: Graph<NodeLabel, EdgeLabel> =
        Graph::with_options(GraphOptions { directed: true, multigraph: true, compound: false });
    let sized = |w: f64, h: f64| NodeLabel { width: w, height: h, ..NodeLabel::default() };
    for end in ["START", "END"] {
        g.set_node(end, Some(sized(70.0, 30.0)));
    }
    for n in &d.nodes {
        let chars = n.name.chars().count().max(n.what.chars().count().min(48)) as f64;
        g.set_node(n.name.clone(), Some(sized(chars * CHAR + 28.0, NODE_HEIGHT)));
    }
    // Each edge by its index, so two edges between the same nodes (two cases of one route) are two.
    let mut drawn = Vec::new();
    for (i, e) in d.edges.iter().enumerate() {
        let label = shown_label(e.label.as_deref(), e.how);
        for from in &e.from {
            let mut l = EdgeLabel::default();
            if let Some(text) = &label {
                l.width = text.chars().count() as f64 * 6.2 + 8.0;
                l.height = 14.0;
            }
            let name = format!("{i}-{from}");
            g.set_edge(from.clone(), e.to.clone(), Some(l), Some(&name));
            drawn.push((from.clone(), e.to.clone(), name, i, label.clone()));
        }
    }
    dagre::layout(&mut g, Some(LayoutOptions { nodesep: 36.0, ranksep: 46.0, edgesep: 14.0, ..Default::default() }));
    let (width, height) = g.graph_label::<GraphLabel>().map_or((400.0, 300.0), |l| (l.width, l.height));

    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"pack-graph\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"-10 -10 {w:.0} {h:.0}\" role=\"img\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"#4b5563\"/></marker></defs><style>{STYLE}</style>",
        w = width + 20.0,
        h = height + 20.0
    );
    for (from, to, name, i, label) in &drawn {
        let Some(e) = g.edge(from, to, Some(name)) else { continue };
        let how = d.edges[*i].how;
        let path: Vec<String> = e.points.iter().map(|p| format!("{:.1},{:.1}", p.x, p.y)).collect();
        if path.len() < 2 {
            continue;
        }
        let class = match how {
            EdgeKind::Always => "edge",
            EdgeKind::Join => "edge join",
            EdgeKind::Route => "edge route",
        };
        let _ = write!(
            out,
            "<g class=\"{class}\" data-from=\"{}\" data-to=\"{}\"><path d=\"M{}\" marker-end=\"url(#arrow)\"/>",
            escape(from),
            escape(to),
            path.join(" L")
        );
        if let (Some(text), Some(x), Some(y)) = (label, e.x, e.y) {
            let full = d.edges[*i].label.as_deref().unwrap_or(text);
            let _ = write!(
                out,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\"><title>{}</title>{}</text>",
                y + 4.0,
                escape(full),
                escape(text)
            );
        }
        out.push_str("</g>");
    }
    for end in ["START", "END"] {
        let Some(n) = g.node(end) else { continue };
        let (x, y) = (n.x.unwrap_or(0.0), n.y.unwrap_or(0.0));
        let _ = write!(
            out,
            "<g class=\"end\" data-node=\"{end}\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"70\" height=\"30\" rx=\"15\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{end}</text></g>",
            x - 35.0,
            y - 15.0,
            y + 4.5
        );
    }
    for n in &d.nodes {
        let Some(at) = g.node(&n.name) else { continue };
        let (x, y, w, h) = (at.x.unwrap_or(0.0), at.y.unwrap_or(0.0), at.width, at.height);
        let (left, top) = (x - w / 2.0, y - h / 2.0);
        let shape = match n.kind.as_str() {
            // A parallelogram: a call out to a model.
            "llm" => format!(
                "<polygon points=\"{:.1},{top:.1} {:.1},{top:.1} {:.1},{:.1} {:.1},{:.1}\"/>",
                left + 8.0,
                left + w,
                left + w - 8.0,
                top + h,
                left,
                top + h
            ),
            // A subroutine: a box with a second line down each side.
            "native" => format!(
                "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{w:.1}\" height=\"{h:.1}\"/><path d=\"M{:.1},{top:.1} v{h:.1} M{:.1},{top:.1} v{h:.1}\"/>",
                left + 6.0,
                left + w - 6.0
            ),
            // A hexagon: a choice among candidates.
            "select" => format!(
                "<polygon points=\"{:.1},{top:.1} {:.1},{top:.1} {:.1},{y:.1} {:.1},{:.1} {:.1},{:.1} {left:.1},{y:.1}\"/>",
                left + 10.0,
                left + w - 10.0,
                left + w,
                left + w - 10.0,
                top + h,
                left + 10.0,
                top + h
            ),
            _ => format!("<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" rx=\"4\"/>"),
        };
        let pause = if n.pause.is_some() { " pauses" } else { "" };
        let mut tip = n.doc.clone();
        if let Some(when) = &n.pause {
            let _ = write!(tip, "{}pauses after it when {when}", if tip.is_empty() { "" } else { "\n" });
        }
        let what: String = n.what.chars().take(48).collect();
        let _ = write!(
            out,
            "<g class=\"node {}{pause}\" data-node=\"{}\"><title>{}</title>{shape}<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text class=\"what\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
            escape(&n.kind),
            escape(&n.name),
            escape(&tip),
            y - 3.0,
            escape(&n.name),
            y + 13.0,
            escape(&what)
        );
    }
    out.push_str("</svg>");
    out
}

/// The page `ruleweave graph --html` writes: the drawing, its legend, nothing fetched.
pub fn page(pack: &str, d: &Drawing) -> String {
    let pack = escape(pack);
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{pack}: graph</title>\
         <style>body{{font:15px/1.45 system-ui,sans-serif;margin:2rem;color:#1f2937}}h1{{font-size:1.4rem}}\
         .legend{{color:#6b7280;margin:.3rem 0 1rem}}</style></head><body><h1>{pack}</h1>\
         <p class=legend>boxes run scripts · slanted boxes call a model · double-sided boxes run native code · \
         hexagons choose among candidates · dashed edges are routes, labelled with their condition · \
         a heavy outline pauses the turn after it · hover a node for its documentation</p>{}</body></html>\n",
        svg(d)
    )
}

/// An edge's label as drawn: a route's condition on one line, cut at [`LABEL_CHARS`]; a join's
/// `join`; none for an edge always taken.
fn shown_label(label: Option<&str>, how: EdgeKind) -> Option<String> {
    match how {
        EdgeKind::Always => None,
        EdgeKind::Join => Some("join".to_owned()),
        EdgeKind::Route => {
            let one_line = label.unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ");
            Some(if one_line.chars().count() > LABEL_CHARS {
                one_line.chars().take(LABEL_CHARS - 1).chain(std::iter::once('…')).collect()
            } else {
                one_line
            })
        }
    }
}

const STYLE: &str = ".pack-graph text{font:12px system-ui,sans-serif;fill:#111827}\
.pack-graph .what{font-size:10.5px;fill:#4b5563}\
.pack-graph .node rect,.pack-graph .node polygon{fill:#eef2ff;stroke:#4f46e5;stroke-width:1.3}\
.pack-graph .node.llm polygon{fill:#ecfeff;stroke:#0891b2}\
.pack-graph .node.native rect{fill:#f0fdf4;stroke:#16a34a}.pack-graph .node.native path{stroke:#16a34a;fill:none}\
.pack-graph .node.select polygon{fill:#fff7ed;stroke:#ea580c}\
.pack-graph .node.pauses rect,.pack-graph .node.pauses polygon{stroke-width:3;stroke-dasharray:4 2}\
.pack-graph .end rect{fill:#f3f4f6;stroke:#6b7280}\
.pack-graph .edge path{fill:none;stroke:#4b5563;stroke-width:1.3}\
.pack-graph .edge.route path{stroke-dasharray:5 4}.pack-graph .edge text{font-size:10.5px;fill:#374151;paint-order:stroke;stroke:#fff;stroke-width:3px}";

/// Text as HTML and SVG show it.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruleweave::{DrawnEdge, DrawnNode};

    fn node(name: &str, kind: &str) -> DrawnNode {
        DrawnNode { name: name.into(), kind: kind.into(), what: format!("{kind}: x"), doc: String::new(), pause: None }
    }

    fn edge(from: &str, to: &str, how: EdgeKind, label: Option<&str>) -> DrawnEdge {
        DrawnEdge { from: vec![from.into()], to: to.into(), how, label: label.map(Into::into) }
    }

    /// Every node is placed, in its kind's shape, below what leads to it; a route is dashed and
    /// labelled; text is escaped.
    #[test]
    fn a_graph_is_laid_out_in_layers_and_drawn_in_shapes() {
        let d = Drawing {
            nodes: vec![node("listen", "script"), node("judge", "llm"), node("pick", "select")],
            edges: vec![
                edge("START", "listen", EdgeKind::Always, None),
                edge("listen", "judge", EdgeKind::Always, None),
                edge("judge", "pick", EdgeKind::Route, Some("solved & x < 3")),
                edge("judge", "END", EdgeKind::Route, Some("otherwise")),
                edge("pick", "END", EdgeKind::Always, None),
            ],
        };
        let svg = svg(&d);
        for name in ["START", "END", "listen", "judge", "pick"] {
            assert!(svg.contains(&format!("data-node=\"{name}\"")), "{name}: {svg}");
        }
        assert!(svg.contains("<g class=\"node llm\" data-node=\"judge\"><title></title><polygon"), "{svg}");
        assert!(svg.contains("<g class=\"node select\" data-node=\"pick\"><title></title><polygon"), "{svg}");
        assert_eq!(svg.matches("<g class=\"edge route\"").count(), 2);
        assert!(svg.contains(">solved &amp; x &lt; 3</text>"), "{svg}");
        // Layers: each node's centre lies below the one before it.
        let y_of = |name: &str| -> f64 {
            let at = svg.find(&format!("data-node=\"{name}\"")).unwrap();
            let text = &svg[at..];
            let y = text.split("<text x=\"").nth(1).unwrap().split("y=\"").nth(1).unwrap();
            y.split('"').next().unwrap().parse().unwrap()
        };
        assert!(y_of("START") < y_of("listen") && y_of("listen") < y_of("judge") && y_of("judge") < y_of("pick"));
        assert!(y_of("pick") < y_of("END"));
    }
}
