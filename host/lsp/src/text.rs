//! Reading a buffer as an editor points into it: LSP positions (a line and a UTF-16 column),
//! the word under the cursor, and the keys of a block-style YAML document by their path. Each
//! works on text that is half typed: nothing here parses a whole file.

use lsp_types::{Position, Range};

/// The `n`th line (0-based) of `text`, without its line break; empty past the end.
pub(super) fn line(text: &str, n: u32) -> &str {
    text.lines().nth(n as usize).unwrap_or("")
}

/// The UTF-16 column of the `chars`th character of `line`.
pub(super) fn utf16_col(line: &str, chars: usize) -> u32 {
    line.chars().take(chars).map(char::len_utf16).sum::<usize>() as u32
}

/// The byte offset in `line` of UTF-16 column `col` (the end when past it).
pub(super) fn byte_at(line: &str, col: u32) -> usize {
    let mut units = 0;
    for (i, c) in line.char_indices() {
        if units >= col as usize {
            return i;
        }
        units += c.len_utf16();
    }
    line.len()
}

/// The range from character `from` to character `to` of line `n`.
pub(super) fn range_chars(text: &str, n: u32, from: usize, to: usize) -> Range {
    let l = line(text, n);
    Range::new(Position::new(n, utf16_col(l, from)), Position::new(n, utf16_col(l, to)))
}

pub(super) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The range a problem reported at `line:column` (1-based, characters; 0 when unknown) covers:
/// the word there, a quoted text there, else the one character; the whole line when the column
/// is unknown, the first line when the line is.
pub(super) fn problem_range(text: &str, line_1: u32, column_1: u32) -> Range {
    let n = line_1.saturating_sub(1);
    let l = line(text, n);
    let chars: Vec<char> = l.chars().collect();
    if line_1 == 0 || column_1 == 0 {
        let start = chars.iter().take_while(|c| c.is_whitespace()).count();
        return range_chars(text, n, start, chars.len().max(start));
    }
    let start = (column_1 as usize - 1).min(chars.len());
    let Some(&first) = chars.get(start) else {
        return range_chars(text, n, start, start);
    };
    // A problem placed at a flow map or list (`lonely: {script: …}`) is about what its key names.
    let mut key_end = start;
    while key_end > 0 && chars[key_end - 1].is_whitespace() {
        key_end -= 1;
    }
    if matches!(first, '{' | '[') && key_end > 0 && chars[key_end - 1] == ':' {
        let to = key_end - 1;
        let from = chars[..to].iter().rposition(|c| c.is_whitespace() || *c == '-').map_or(0, |i| i + 1);
        if from < to {
            return range_chars(text, n, from, to);
        }
    }
    let end = if is_word(first) {
        start + chars[start..].iter().take_while(|c| is_word(**c)).count()
    } else if first == '"' || first == '\'' {
        chars[start + 1..].iter().position(|c| *c == first).map_or(chars.len(), |p| start + p + 2)
    } else {
        start + 1
    };
    range_chars(text, n, start, end)
}

/// The word under `pos` (letters, digits, `_`, and `extra`), with its range.
pub(super) fn word_at(text: &str, pos: Position, extra: &[char]) -> Option<(String, Range)> {
    let l = line(text, pos.line);
    let at = byte_at(l, pos.character);
    let part = |c: char| is_word(c) || extra.contains(&c);
    let start = l[..at].char_indices().rev().take_while(|(_, c)| part(*c)).last().map_or(at, |(i, _)| i);
    let end = at + l[at..].chars().take_while(|c| part(*c)).map(char::len_utf8).sum::<usize>();
    if start == end {
        return None;
    }
    let from = l[..start].chars().count();
    let to = from + l[start..end].chars().count();
    Some((l[start..end].to_owned(), range_chars(text, pos.line, from, to)))
}

/// The text of the line before `pos`.
pub(super) fn before(text: &str, pos: Position) -> &str {
    let l = line(text, pos.line);
    &l[..byte_at(l, pos.character)]
}

/// The text of the line from `pos` on.
pub(super) fn after(text: &str, pos: Position) -> &str {
    let l = line(text, pos.line);
    &l[byte_at(l, pos.character)..]
}

/// Whether byte `at` of a template's text lies inside an expression or a statement (`{{ … }}`,
/// `{% … %}`) rather than in its prose.
pub(super) fn in_expression(text: &str, at: usize) -> bool {
    let head = &text[..at.min(text.len())];
    let open = head.rfind("{{").max(head.rfind("{%"));
    let close = head.rfind("}}").max(head.rfind("%}"));
    match (open, close) {
        (Some(o), Some(c)) => o > c,
        (Some(_), None) => true,
        _ => false,
    }
}

/// One key of a YAML document: its path of keys from the top and where it is.
#[derive(Debug, Clone)]
pub(super) struct Key {
    pub(super) path: Vec<String>,
    pub(super) line: u32,
    /// Its first and one-past-last character (inside the quotes of a quoted key).
    pub(super) from: usize,
    pub(super) to: usize,
    /// The last line of its value when that is a block scalar (`doc: |`), else its own line.
    pub(super) last: u32,
}

/// A key at the start of a line (after its indentation and a list item's `- `): its name, what
/// follows its `:`, and the characters before the name on the line.
struct LineKey<'l> {
    name: &'l str,
    rest: &'l str,
    offset: usize,
}

/// The keys of a block-style YAML document (`key:` at the start of a line, nested by
/// indentation; a list item's first key sits under the list's key), in order. Flow maps
/// (`{a: 1}`) and block scalars' contents are not looked into.
pub(super) fn yaml_keys(text: &str) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut scalar: Option<(usize, usize)> = None;
    for (n, l) in text.lines().enumerate() {
        let trimmed = l.trim_start();
        let indent = l.len() - trimmed.len();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some((at, key)) = scalar {
            if indent > at {
                keys[key].last = n as u32;
                continue;
            }
            scalar = None;
        }
        let Some(k) = line_key(l) else { continue };
        let depth = l[..k.offset].len();
        while stack.last().is_some_and(|(i, _)| *i >= depth) {
            stack.pop();
        }
        let mut path: Vec<String> = stack.iter().map(|(_, k)| k.clone()).collect();
        path.push(k.name.to_owned());
        let from = l[..k.offset].chars().count();
        let to = from + k.name.chars().count();
        keys.push(Key { path, line: n as u32, from, to, last: n as u32 });
        let value = k.rest.trim();
        if value.starts_with('|') || value.starts_with('>') {
            scalar = Some((indent, keys.len() - 1));
        }
        stack.push((depth, k.name.to_owned()));
    }
    keys
}

/// The key line `l` starts with, when it is `key:`, `key: value`, `"key": value` or
/// `- key: value`.
fn line_key(l: &str) -> Option<LineKey<'_>> {
    let trimmed = l.trim_start();
    let mut offset = l.len() - trimmed.len();
    let mut body = trimmed;
    if let Some(item) = body.strip_prefix("- ") {
        offset += 2 + (item.len() - item.trim_start().len());
        body = item.trim_start();
    }
    let (name, rest, quoted) = match body.chars().next()? {
        q @ ('"' | '\'') => {
            let end = body[1..].find(q)? + 1;
            (&body[1..end], &body[end + 1..], true)
        }
        _ => {
            let end = body.find(':')?;
            (&body[..end], &body[end..], false)
        }
    };
    let rest = rest.strip_prefix(':')?;
    let ok = !name.is_empty() && !name.starts_with(['-', '[', '{', '#']) && (rest.is_empty() || rest.starts_with(' '));
    ok.then_some(LineKey { name, rest, offset: offset + usize::from(quoted) })
}

/// The key a line (without its indentation) starts with, when it is `key:` or `key: value`.
fn key_of(trimmed: &str) -> Option<String> {
    line_key(trimmed).filter(|k| k.offset == usize::from(trimmed.starts_with(['"', '\'']))).map(|k| k.name.to_owned())
}

/// The path of keys line `n` sits under: its parents by indentation (a list item's `- ` opens
/// no key), then its own key if it has one. On a blank line the cursor's column `col` is its
/// indentation.
pub(super) fn yaml_path_at(text: &str, n: u32, col: usize) -> Vec<String> {
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(n as usize).copied().unwrap_or("");
    let mut indent = if here.trim().is_empty() { col } else { indent_of(here) };
    let mut path: Vec<String> = key_of(here.trim_start()).into_iter().collect();
    for l in lines[..(n as usize).min(lines.len())].iter().rev() {
        let trimmed = l.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || indent_of(l) >= indent {
            continue;
        }
        indent = indent_of(l);
        if let Some(k) = key_of(trimmed) {
            path.insert(0, k);
        }
        if indent == 0 {
            break;
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: p\nstate:\n  score: {type: int}\n  doc: |\n    not: a key\ngraph:\n  nodes:\n    judge:\n      llm: j\n  edges:\n    - START -> judge\n";

    #[test]
    fn keys_nest_by_indentation_and_skip_block_scalars() {
        let paths: Vec<String> = yaml_keys(DOC).iter().map(|k| k.path.join(".")).collect();
        assert_eq!(
            paths,
            [
                "name",
                "state",
                "state.score",
                "state.doc",
                "graph",
                "graph.nodes",
                "graph.nodes.judge",
                "graph.nodes.judge.llm",
                "graph.edges"
            ]
        );
        assert_eq!(yaml_path_at(DOC, 10, 0), ["graph", "edges"]);
        assert_eq!(yaml_path_at(DOC, 8, 0), ["graph", "nodes", "judge", "llm"]);
        assert_eq!(yaml_path_at("graph:\n  nodes:\n    judge:\n\n", 3, 6), ["graph", "nodes", "judge"]);
        assert_eq!(yaml_keys(DOC)[3].last, 4, "a block scalar's lines are its key's");
        // Quoted keys, with letters past ASCII, and a list item's keys.
        let quoted = yaml_keys("\"é\": 1\nroutes:\n  - when: x\n    to: y\n");
        let paths: Vec<String> = quoted.iter().map(|k| k.path.join(".")).collect();
        assert_eq!(paths, ["é", "routes", "routes.when", "routes.to"]);
        assert_eq!((quoted[0].from, quoted[0].to), (1, 2));
        assert_eq!((quoted[2].from, quoted[2].to), (4, 8));
    }

    #[test]
    fn a_problem_covers_its_word_or_its_quoted_text() {
        let text = "let x = scroe(1);\nname: \"a b\" # c\n";
        assert_eq!(problem_range(text, 1, 9), Range::new(Position::new(0, 8), Position::new(0, 13)));
        assert_eq!(problem_range(text, 2, 7), Range::new(Position::new(1, 6), Position::new(1, 11)));
        assert_eq!(problem_range(text, 2, 0), Range::new(Position::new(1, 0), Position::new(1, 15)));
        assert_eq!(problem_range("\u{a0}\u{a0}é: [1]\n", 1, 6), Range::new(Position::new(0, 2), Position::new(0, 3)));
        let map = "  lonely: {script: x}\n";
        assert_eq!(problem_range(map, 1, 11), Range::new(Position::new(0, 2), Position::new(0, 8)));
        let (w, _) = word_at(text, Position::new(0, 10), &[]).unwrap();
        assert_eq!(w, "scroe");
    }
}
