//! Pack data tables: rows a pack ships in `data/<pack>/` (YAML or CSV), typed by the manifest,
//! loaded once per pack version and shared by every session, and queried by scripts through
//! the `query` host function: filter, order by several keys, limit.
//!
//! A table may declare *counters* (`times_used`): numbers per row shared by every session of the
//! pack, kept in the session store, read at the start of a turn and bumped (`count()`) when the
//! turn commits — never when it is undone.

use std::collections::HashMap;
use std::sync::Arc;

use rhai::{Array, Dynamic, FLOAT, INT, ImmutableString, Map};

use crate::error::{Error, ErrorKind, Result};
use crate::vocab::TypeName;

/// The most YAML values (a row counts one, and two for each of its cells) a table written in
/// YAML may have: parsing keeps every value with its place, so a bigger table belongs in CSV.
pub const YAML_TABLE_NODES: usize = 1_000_000;

/// A loaded table ([`crate::Pack::table`]).
#[derive(Debug)]
pub struct Table {
    pub(crate) name: String,
    pub(crate) columns: Vec<Column>,
    /// The column whose values name rows (for counters and `not_in`).
    pub(crate) key: usize,
    pub(crate) rows: Vec<Row>,
    /// The cells column by column (`cells[column][row]`): a test reads one column's values in a
    /// row, one after the other.
    cells: Vec<Vec<Cell>>,
    /// Counter names (`times_used`): numbers per row, in the store.
    pub(crate) counters: Vec<String>,
    /// What the table holds, from the manifest.
    pub(crate) doc: String,
    /// Row key → row index.
    index: HashMap<String, usize>,
    /// For each text column, a number per distinct value and each row's (empty for the others).
    dictionary: Vec<HashMap<ImmutableString, u32>>,
    codes: Vec<Vec<u32>>,
}

/// A column of a table.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub name: String,
    pub ty: TypeName,
}

/// A row: its map (scripts get a copy) and its key.
#[derive(Debug)]
pub(crate) struct Row {
    pub map: Map,
    /// The key column's value as text (what counters are kept by).
    pub key: String,
}

/// A cell's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Str(ImmutableString),
    Int(INT),
    Float(FLOAT),
    Bool(bool),
}

impl Cell {
    /// The cell from a script value of a query, when it is a scalar.
    fn of(v: &Dynamic) -> Option<Cell> {
        if let Ok(i) = v.as_int() {
            Some(Cell::Int(i))
        } else if let Ok(f) = v.as_float() {
            Some(Cell::Float(f))
        } else if let Ok(b) = v.as_bool() {
            Some(Cell::Bool(b))
        } else {
            v.read_lock::<ImmutableString>().map(|s| Cell::Str(s.clone()))
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(i) => Some(*i as f64),
            Cell::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub(crate) fn to_dynamic(&self) -> Dynamic {
        match self {
            Cell::Str(s) => Dynamic::from(s.clone()),
            Cell::Int(i) => Dynamic::from_int(*i),
            Cell::Float(f) => Dynamic::from_float(*f),
            Cell::Bool(b) => Dynamic::from_bool(*b),
        }
    }

    /// Equality across number types (`3 == 3.0`).
    fn same(&self, other: &Cell) -> bool {
        match (self.number(), other.number()) {
            (Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }
}

/// A table's counters as a turn sees them: one value per row and counter, by row index.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Counters per row.
    width: usize,
    /// `width` values for each row, in row order; empty when nothing was counted.
    values: Vec<i64>,
}

impl Counts {
    /// Row `i`'s counters (zeros when nothing was counted).
    fn row(&self, i: usize) -> Option<&[i64]> {
        self.values.get(i * self.width..(i + 1) * self.width)
    }
}

/// A query's condition on one field.
enum Test {
    Equals(Cell),
    Between(f64, f64),
    In(Vec<Cell>),
    NotIn(Vec<Cell>),
    /// A text column's codes (see `Table::codes`): the row's is among them (`false`), or not
    /// (`true`). Comparing numbers, where comparing text would read every string.
    Code(Vec<u32>, bool),
}

/// A query's sort key.
enum Order {
    Asc(Field),
    Desc(Field),
    /// Closest first to a number.
    Near(Field, f64),
    /// A tie-break that differs per turn but replays the same.
    Random,
}

/// A field a query names: a column or a counter.
#[derive(Clone, Copy)]
enum Field {
    Column(usize),
    Counter(usize),
}

impl Table {
    /// A table of `columns` (the key among them) with `rows` of cells in column order.
    pub(crate) fn new(
        name: String,
        columns: Vec<Column>,
        key: usize,
        cells: Vec<Vec<Cell>>,
        counters: Vec<String>,
    ) -> Self {
        let mut by_column: Vec<Vec<Cell>> = vec![Vec::with_capacity(cells.len()); columns.len()];
        let rows: Vec<Row> = cells
            .into_iter()
            .map(|cells| {
                let map: Map =
                    columns.iter().zip(&cells).map(|(c, v)| (c.name.as_str().into(), v.to_dynamic())).collect();
                let key = match &cells[key] {
                    Cell::Str(s) => s.to_string(),
                    Cell::Int(n) => n.to_string(),
                    Cell::Float(f) => f.to_string(),
                    Cell::Bool(b) => b.to_string(),
                };
                for (column, cell) in by_column.iter_mut().zip(cells) {
                    column.push(cell);
                }
                Row { map, key }
            })
            .collect();
        let index = rows.iter().enumerate().map(|(i, r)| (r.key.clone(), i)).collect();
        let mut dictionary = vec![HashMap::new(); columns.len()];
        let mut codes = vec![Vec::new(); columns.len()];
        for (c, _) in columns.iter().enumerate().filter(|(_, c)| c.ty == TypeName::String) {
            let words = &mut dictionary[c];
            codes[c] = by_column[c]
                .iter()
                .map(|cell| match cell {
                    Cell::Str(s) => {
                        let next = words.len() as u32;
                        *words.entry(s.clone()).or_insert(next)
                    }
                    _ => u32::MAX,
                })
                .collect();
        }
        Table { name, columns, key, rows, cells: by_column, counters, doc: String::new(), index, dictionary, codes }
    }

    /// What the table is, as JSON (for `GET /v1/packs`).
    pub fn info(&self) -> TableInfo {
        TableInfo {
            columns: self.columns.iter().map(|c| (c.name.clone(), c.ty.as_str())).collect(),
            key: self.columns[self.key].name.clone(),
            counters: self.counters.clone(),
            rows: self.rows.len(),
            doc: self.doc.clone(),
        }
    }

    /// The counts of this table from a store's (row key, counter, value) rows; rows the table
    /// no longer has are left out.
    pub fn counts(&self, rows: Vec<(String, String, i64)>) -> Counts {
        let width = self.counters.len();
        let mut values = Vec::new();
        for (key, counter, n) in rows {
            let (Some(c), Some(&i)) = (self.counters.iter().position(|c| *c == counter), self.index.get(&key)) else {
                continue;
            };
            if values.is_empty() {
                values = vec![0; width * self.rows.len()];
            }
            values[i * width + c] = n;
        }
        Counts { width, values }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many rows it has.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Whether a row has this key.
    pub fn has_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn field(&self, name: &str) -> Result<Field> {
        if let Some(i) = self.columns.iter().position(|c| c.name == name) {
            return Ok(Field::Column(i));
        }
        if let Some(i) = self.counters.iter().position(|c| c == name) {
            return Ok(Field::Counter(i));
        }
        let mut known: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        known.extend(self.counters.iter().map(String::as_str));
        Err(bad(format!("table `{}` has no column `{name}` (columns: {})", self.name, known.join(", "))))
    }

    /// Runs a query: `#{where: #{field: value | #{between: [lo, hi]} | #{in: [...]} |
    /// #{not_in: [...]}}, order: [field, "-field", #{near: field, to: n}, "random"], limit: n}`.
    /// Every part is optional. Rows come back as maps, counters included. `salt` seeds `random`.
    pub fn query(&self, q: &Map, counts: Option<&Counts>, salt: u64) -> Result<Array> {
        let mut tests = self.tests(q)?;
        // The cheap tests first: a row most tests reject never reaches a list scan.
        tests.sort_by_key(|(_, t)| match t {
            Test::Code(codes, _) => codes.len(),
            Test::Equals(_) | Test::Between(..) => 1,
            Test::In(xs) | Test::NotIn(xs) => 2 + xs.len(),
        });
        let order = self.order(q)?;
        let limit = match q.get("limit") {
            None => usize::MAX,
            Some(v) => {
                v.as_int().ok().filter(|n| *n >= 0).ok_or_else(|| bad("`limit` is a whole number ≥ 0"))? as usize
            }
        };
        for key in q.keys() {
            if !matches!(key.as_str(), "where" | "order" | "limit") {
                return Err(bad(format!("a query has `where`, `order` and `limit`, not `{key}`")));
            }
        }
        let zeros = vec![0; self.counters.len()];
        let counted = |i: usize| -> &[i64] { counts.and_then(|c| c.row(i)).unwrap_or(&zeros) };
        let counter = |i: usize, c: usize| Cell::Int(counted(i).get(c).copied().unwrap_or(0));
        let passes = |f: Field, t: &Test, i: usize| -> bool {
            if let (Field::Column(c), Test::Code(codes, not)) = (f, t) {
                return codes.contains(&self.codes[c][i]) != *not;
            }
            let held;
            let v = match f {
                Field::Column(c) => &self.cells[c][i],
                Field::Counter(c) => {
                    held = counter(i, c);
                    &held
                }
            };
            match t {
                Test::Equals(x) => v.same(x),
                Test::Between(lo, hi) => v.number().is_some_and(|n| *lo <= n && n <= *hi),
                Test::In(xs) => xs.iter().any(|x| v.same(x)),
                Test::NotIn(xs) => !xs.iter().any(|x| v.same(x)),
                Test::Code(..) => false,
            }
        };
        // Test by test, each over one column: the rows left after the cheapest narrow the rest.
        let mut hits: Vec<usize> = (0..self.rows.len()).collect();
        for (f, t) in &tests {
            // The common tests get a loop of their own; the rest go through `passes`.
            match (*f, t) {
                (Field::Column(c), Test::Code(codes, not)) => {
                    let column = &self.codes[c];
                    match codes.as_slice() {
                        [one] => hits.retain(|&i| (column[i] == *one) != *not),
                        _ => hits.retain(|&i| codes.contains(&column[i]) != *not),
                    }
                }
                (Field::Column(c), Test::Between(lo, hi)) => {
                    let column = &self.cells[c];
                    hits.retain(|&i| column[i].number().is_some_and(|n| *lo <= n && n <= *hi));
                }
                (Field::Column(c), Test::Equals(Cell::Bool(b))) => {
                    let column = &self.cells[c];
                    hits.retain(|&i| column[i] == Cell::Bool(*b));
                }
                _ => hits.retain(|&i| passes(*f, t, i)),
            }
        }
        if !order.is_empty() {
            let value = |i: usize, f: Field| -> Cell {
                match f {
                    Field::Column(c) => self.cells[c][i].clone(),
                    Field::Counter(c) => counter(i, c),
                }
            };
            // Every hit's sort keys, computed once, side by side: hit h's are keys[h*w..(h+1)*w].
            let w = order.len();
            let mut keys: Vec<Key> = Vec::with_capacity(hits.len() * w);
            for &i in &hits {
                keys.extend(order.iter().map(|o| match o {
                    Order::Asc(f) => Key::of(value(i, *f), false),
                    Order::Desc(f) => Key::of(value(i, *f), true),
                    Order::Near(f, to) => Key::Num(value(i, *f).number().map_or(f64::INFINITY, |n| (n - to).abs())),
                    Order::Random => Key::Num((crate::text::hash_with(salt, &self.rows[i].key) >> 11) as f64),
                }));
            }
            let by = |a: &usize, b: &usize| {
                let (ka, kb) = (&keys[a * w..(a + 1) * w], &keys[b * w..(b + 1) * w]);
                ka.iter().zip(kb).map(|(x, y)| x.cmp(y)).find(|o| o.is_ne()).unwrap_or(hits[*a].cmp(&hits[*b]))
            };
            let mut positions: Vec<usize> = (0..hits.len()).collect();
            if limit < positions.len() && limit > 0 {
                positions.select_nth_unstable_by(limit - 1, by);
                positions.truncate(limit);
            }
            positions.sort_unstable_by(by);
            hits = positions.into_iter().map(|p| hits[p]).collect();
        }
        hits.truncate(limit);
        Ok(hits.into_iter().map(|i| self.row(i, counted(i))).collect())
    }

    /// Row `i` as scripts see it: a copy of its map (it goes into a list, and Rhai holds that no
    /// list has a shared value inside it), with the counters when the table has any.
    fn row(&self, i: usize, counted: &[i64]) -> Dynamic {
        let mut map = self.rows[i].map.clone();
        for (name, n) in self.counters.iter().zip(counted) {
            map.insert(name.as_str().into(), Dynamic::from_int(*n));
        }
        Dynamic::from_map(map)
    }

    fn tests(&self, q: &Map) -> Result<Vec<(Field, Test)>> {
        let Some(w) = q.get("where") else { return Ok(Vec::new()) };
        let w = w.read_lock::<Map>().ok_or_else(|| bad("`where` is a map of field → condition"))?;
        let mut out = Vec::new();
        for (name, cond) in w.iter() {
            let field = self.field(name)?;
            let list = |v: &Dynamic, what: &str| -> Result<Vec<Cell>> {
                let a = v.read_lock::<Array>().ok_or_else(|| bad(format!("`{what}` of `{name}` is a list")))?;
                a.iter()
                    .map(|x| Cell::of(x).ok_or_else(|| bad(format!("`{what}` of `{name}` lists scalars"))))
                    .collect()
            };
            let test = match cond.read_lock::<Map>() {
                None => Test::Equals(Cell::of(cond).ok_or_else(|| bad(format!("`{name}` is compared to a scalar")))?),
                Some(m) => match (m.get("between"), m.get("in"), m.get("not_in")) {
                    (Some(b), None, None) if m.len() == 1 => {
                        let b = list(b, "between")?;
                        match b.as_slice() {
                            [lo, hi] if lo.number().is_some() && hi.number().is_some() => {
                                Test::Between(lo.number().unwrap_or(0.0), hi.number().unwrap_or(0.0))
                            }
                            _ => return Err(bad(format!("`between` of `{name}` is [low, high], two numbers"))),
                        }
                    }
                    (None, Some(xs), None) if m.len() == 1 => Test::In(list(xs, "in")?),
                    (None, None, Some(xs)) if m.len() == 1 => Test::NotIn(list(xs, "not_in")?),
                    _ => {
                        return Err(bad(format!(
                            "`{name}`: a condition is a value, or #{{between}}, #{{in}} or #{{not_in}}"
                        )));
                    }
                },
            };
            out.push((field, self.coded(field, test)));
        }
        Ok(out)
    }

    /// A test on a text column as one on its codes, when every value it names is text.
    fn coded(&self, field: Field, test: Test) -> Test {
        let Field::Column(c) = field else { return test };
        if self.codes[c].is_empty() {
            return test;
        }
        let code = |cells: &[Cell]| -> Option<Vec<u32>> {
            cells
                .iter()
                .map(|x| match x {
                    Cell::Str(s) => Some(self.dictionary[c].get(s).copied()),
                    _ => None,
                })
                .collect::<Option<Vec<Option<u32>>>>()
                .map(|codes| codes.into_iter().flatten().collect())
        };
        match test {
            Test::Equals(x) => code(std::slice::from_ref(&x)).map_or(Test::Equals(x), |c| Test::Code(c, false)),
            Test::In(xs) => code(&xs).map_or(Test::In(xs), |c| Test::Code(c, false)),
            Test::NotIn(xs) => code(&xs).map_or(Test::NotIn(xs), |c| Test::Code(c, true)),
            other => other,
        }
    }

    fn order(&self, q: &Map) -> Result<Vec<Order>> {
        let Some(o) = q.get("order") else { return Ok(Vec::new()) };
        let o = o.read_lock::<Array>().ok_or_else(|| bad("`order` is a list of sort keys"))?;
        o.iter()
            .map(|k| {
                if let Some(s) = k.read_lock::<ImmutableString>() {
                    return match s.as_str() {
                        "random" => Ok(Order::Random),
                        desc if desc.starts_with('-') => Ok(Order::Desc(self.field(&desc[1..])?)),
                        asc => Ok(Order::Asc(self.field(asc)?)),
                    };
                }
                let m = k
                    .read_lock::<Map>()
                    .ok_or_else(|| bad("a sort key is a field, \"-field\", \"random\" or #{near, to}"))?;
                let field = m.get("near").and_then(|f| f.read_lock::<ImmutableString>().map(|s| s.to_string()));
                let to = m.get("to").and_then(|t| Cell::of(t)?.number());
                match (field, to) {
                    (Some(f), Some(to)) => Ok(Order::Near(self.field(&f)?, to)),
                    _ => Err(bad("#{near: field, to: number} orders closest first")),
                }
            })
            .collect()
    }
}

/// One sort key of a row: numbers (and booleans, 0/1) by value, text by its characters;
/// `desc` reverses it.
enum Key {
    Num(f64),
    Text(ImmutableString, bool),
}

impl Key {
    fn of(c: Cell, desc: bool) -> Key {
        let sign = if desc { -1.0 } else { 1.0 };
        match c {
            Cell::Int(i) => Key::Num(sign * i as f64),
            Cell::Float(f) => Key::Num(sign * f),
            Cell::Bool(b) => Key::Num(sign * f64::from(u8::from(b))),
            Cell::Str(s) => Key::Text(s, desc),
        }
    }

    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        match (self, other) {
            (Key::Num(a), Key::Num(b)) => a.total_cmp(b),
            (Key::Text(a, desc), Key::Text(b, _)) if *desc => b.cmp(a),
            (Key::Text(a, _), Key::Text(b, _)) => a.cmp(b),
            (Key::Num(_), Key::Text(..)) => std::cmp::Ordering::Less,
            (Key::Text(..), Key::Num(_)) => std::cmp::Ordering::Greater,
        }
    }
}

/// A pack's tables, by name.
pub(crate) type Tables = Arc<HashMap<String, Arc<Table>>>;

/// A data table, as a pack's description shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableInfo {
    /// Its columns and their types.
    pub columns: indexmap::IndexMap<String, &'static str>,
    /// The column whose values name rows.
    pub key: String,
    /// Its counters.
    pub counters: Vec<String>,
    /// How many rows it has.
    pub rows: usize,
    /// What it is.
    pub doc: String,
}

/// A query a table cannot answer: the script that asked it made the mistake.
fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Script, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::from_json;
    use serde_json::json;

    fn questions() -> Table {
        let columns = ["id", "intensity", "language", "active"];
        let types = [TypeName::String, TypeName::Int, TypeName::String, TypeName::Bool];
        let columns: Vec<Column> = columns.iter().zip(types).map(|(n, ty)| Column { name: (*n).into(), ty }).collect();
        let rows = (1..=20)
            .map(|i: i64| {
                vec![
                    Cell::Str(format!("q{i}").into()),
                    Cell::Int((i - 1) % 10 + 1),
                    Cell::Str(if i <= 10 { "en" } else { "pl" }.into()),
                    Cell::Bool(i != 3),
                ]
            })
            .collect();
        Table::new("questions".into(), columns, 0, rows, vec!["times_used".into()])
    }

    fn ids(rows: &Array) -> Vec<String> {
        rows.iter().map(|r| r.read_lock::<Map>().unwrap()["id"].to_string()).collect()
    }

    #[test]
    fn filter_order_and_limit() {
        let t = questions();
        let counts = t.counts(vec![("q4".into(), "times_used".into(), 2), ("gone".into(), "times_used".into(), 9)]);
        let q = from_json(&json!({
            "where": {"language": "en", "active": true, "intensity": {"between": [2, 6]}, "id": {"not_in": ["q6"]}},
            "order": [{"near": "intensity", "to": 4}, "times_used", "random"],
            "limit": 3,
        }));
        let rows = t.query(&q.cast::<Map>(), Some(&counts), 7).unwrap();
        // 4 is nearest; 3 and 5 are next (3 is inactive); then 2 and 6 (6 is excluded).
        assert_eq!(ids(&rows), ["q4", "q5", "q2"]);
        assert_eq!(rows[0].read_lock::<Map>().unwrap()["times_used"].as_int().unwrap(), 2);
        // Less used first: q4 (used twice) goes after q14; text sorts by its characters.
        let q = from_json(&json!({"where": {"intensity": {"between": [4, 4]}}, "order": ["times_used", "id"]}));
        assert_eq!(ids(&t.query(&q.cast::<Map>(), Some(&counts), 7).unwrap()), ["q14", "q4"]);
        let q = from_json(&json!({"where": {"intensity": {"between": [1, 2]}}, "order": ["-id"]}));
        assert_eq!(ids(&t.query(&q.cast::<Map>(), None, 7).unwrap()), ["q2", "q12", "q11", "q1"]);
    }

    #[test]
    fn text_tests_compare_codes_and_know_unknown_values() {
        let t = questions();
        let count =
            |w: serde_json::Value| t.query(&from_json(&json!({"where": w})).cast::<Map>(), None, 1).unwrap().len();
        assert_eq!(count(json!({"language": "de"})), 0, "a value no row has matches nothing");
        assert_eq!(count(json!({"id": {"in": ["q1", "nope"]}})), 1);
        assert_eq!(count(json!({"id": {"not_in": ["nope"]}})), 20);
        assert_eq!(
            count(json!({"id": {"not_in": ["q1", "q2"]}, "language": "en"})),
            count(json!({"language": "en"})) - 2
        );
        assert_eq!(count(json!({"id": 7})), 0, "a number is no text");
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        let t = questions();
        let bad = |q: serde_json::Value| {
            let e = t.query(&from_json(&q).cast::<Map>(), None, 0).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Script, "the script's mistake: {e}");
            e.detail().to_owned()
        };
        assert!(bad(json!({"where": {"colour": "red"}})).contains("no column `colour`"));
        assert!(bad(json!({"where": {"intensity": {"between": [1]}}})).contains("two numbers"));
        assert!(bad(json!({"order": ["-nope"]})).contains("no column `nope`"));
        assert!(bad(json!({"limit": -1})).contains("limit"));
        assert!(bad(json!({"sort": []})).contains("not `sort`"));
    }

    #[test]
    fn random_ties_break_the_same_way_for_the_same_salt() {
        let t = questions();
        let q = from_json(&json!({"order": ["random"], "limit": 5})).cast::<Map>();
        assert_eq!(ids(&t.query(&q, None, 1).unwrap()), ids(&t.query(&q, None, 1).unwrap()));
        assert_ne!(ids(&t.query(&q, None, 1).unwrap()), ids(&t.query(&q, None, 2).unwrap()));
    }
}
