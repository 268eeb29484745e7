//! Loading a pack's data tables: each file of `data/<pack>/` the manifest declares, its rows
//! checked against the declared columns (a bad cell is reported at its `file:line:col`), keys
//! unique, counters named.

use std::collections::HashSet;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value as Json;
use serde_saphyr::Spanned;

use super::super::manifest::TableDecl;
use super::Loader;
use crate::data::{Cell, Column, Table, Tables, YAML_TABLE_NODES};
use crate::error::{Error, Origin};
use crate::vocab::TypeName;
use crate::vocab::is_identifier;

/// A column as declared: its type, and the value rows that leave it out take.
struct ColumnSpec {
    name: String,
    ty: TypeName,
    default: Option<Cell>,
}

impl Loader<'_> {
    /// The manifest's `data:` tables.
    pub(super) fn tables(&mut self, decls: &IndexMap<String, Spanned<TableDecl>>) -> Tables {
        let mut out = std::collections::HashMap::new();
        for (name, decl) in decls {
            if let Some(t) = self.table(name, decl) {
                out.insert(name.clone(), Arc::new(t));
            }
        }
        Arc::new(out)
    }

    fn table(&mut self, name: &str, decl: &Spanned<TableDecl>) -> Option<Table> {
        let d = &decl.value;
        let columns = self.columns(name, d)?;
        let key_name = d.key.as_ref().map_or("id", |k| k.value.as_str());
        let Some(key) = columns.iter().position(|c| c.name == key_name) else {
            let at = d.key.as_ref().map_or_else(|| self.at(decl), |k| self.at(k));
            self.error(format!("table `{name}` has no column `{key_name}` to name its rows (`key:`)"), at);
            return None;
        };
        let mut counters = Vec::new();
        for c in &d.counters {
            if !is_identifier(&c.value) || columns.iter().any(|col| col.name == c.value) || counters.contains(&c.value)
            {
                self.error(format!("table `{name}`: counter `{}` must be a new identifier", c.value), self.at(c));
            }
            counters.push(c.value.clone());
        }
        let file = format!("data/{}/{}", self.pack, d.file.value);
        if d.file.value.contains('/') || d.file.value.starts_with('.') {
            self.error(format!("table `{name}`: the file is a name in data/{}/", self.pack), self.at(&d.file));
            return None;
        }
        let bytes = match self.files.read(&file, &format!("table `{name}`")) {
            Ok(b) => b,
            Err(e) => {
                self.errors.push(e);
                return None;
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                self.error("the table is not UTF-8 text", Origin::file(&file));
                return None;
            }
        };
        let before = self.errors.len();
        let rows = if file.ends_with(".csv") {
            self.csv_rows(&file, &text, &columns)
        } else {
            self.yaml_rows(&file, &text, &columns)
        };
        let mut seen = HashSet::new();
        let mut cells = Vec::new();
        for (row, at) in rows {
            let k = format!("{:?}", row[key]);
            if !seen.insert(k) {
                self.error(format!("table `{name}`: a second row has {key_name} {}", show(&row[key])), at);
                continue;
            }
            cells.push(row);
        }
        if self.errors.len() - before > ROW_PROBLEMS {
            let more = self.errors.len() - before - ROW_PROBLEMS;
            self.errors.truncate(before + ROW_PROBLEMS);
            self.error(format!("table `{name}`: {more} more problems like these in its rows"), Origin::file(&file));
        }
        let columns = columns.into_iter().map(|c| Column { name: c.name, ty: c.ty }).collect();
        let mut table = Table::new(name.to_owned(), columns, key, cells, counters);
        table.doc = d.doc.clone();
        Some(table)
    }

    fn columns(&mut self, table: &str, d: &TableDecl) -> Option<Vec<ColumnSpec>> {
        let mut out = Vec::new();
        let before = self.errors.len();
        for (name, spec) in &d.columns {
            let at = self.at(spec);
            let (ty, default) = match &spec.value {
                Json::String(t) => (type_name(t), None),
                Json::Object(m) if m.keys().all(|k| k == "type" || k == "default") => {
                    (m.get("type").and_then(Json::as_str).and_then(type_name), m.get("default"))
                }
                _ => (None, None),
            };
            let ty = match ty {
                Some(ty @ (TypeName::String | TypeName::Int | TypeName::Float | TypeName::Bool)) => ty,
                _ => {
                    self.error(
                        format!(
                            "table `{table}`: column `{name}` is string, int, float or bool (or {{type, default}})"
                        ),
                        at,
                    );
                    continue;
                }
            };
            let default = match default.map(|v| cell_of_json(v, ty)) {
                Some(Ok(c)) => Some(c),
                Some(Err(why)) => {
                    self.error(format!("table `{table}`: the default of `{name}` {why}"), at);
                    None
                }
                None => None,
            };
            out.push(ColumnSpec { name: name.clone(), ty, default });
        }
        (self.errors.len() == before).then_some(out)
    }

    /// The rows of a YAML table: a list of maps, each cell checked at its place.
    fn yaml_rows(&mut self, file: &str, text: &str, columns: &[ColumnSpec]) -> Vec<(Vec<Cell>, Origin)> {
        type YamlRows = Vec<Spanned<IndexMap<String, Spanned<Json>>>>;
        let mut budget = serde_saphyr::Budget::default();
        budget.max_nodes = YAML_TABLE_NODES;
        budget.max_events = 2 * YAML_TABLE_NODES;
        let mut options = serde_saphyr::Options::default();
        options.budget = Some(budget);
        let rows: YamlRows = match serde_saphyr::from_str_with_options(text, options) {
            Ok(r) => r,
            Err(e) if too_large(&e) => {
                let rows = YAML_TABLE_NODES / (1 + 2 * columns.len());
                self.errors.push(Error::pack(
                    format!(
                        "this table is too large for YAML: a YAML table holds at most {YAML_TABLE_NODES} values \
                         (about {rows} rows of its {} columns); write it as CSV, which has no such limit",
                        columns.len()
                    ),
                    Origin::file(file),
                ));
                return Vec::new();
            }
            Err(e) => {
                self.errors.push(super::yaml_error(&e, file, text));
                return Vec::new();
            }
        };
        let place = |s: &serde_saphyr::Location| Origin::new(file, s.line() as u32, s.column() as u32);
        let mut out = Vec::new();
        for row in rows {
            let at = place(&row.referenced);
            let mut cells = Vec::with_capacity(columns.len());
            let mut ok = true;
            for name in row.value.keys().filter(|k| !columns.iter().any(|c| &c.name == *k)) {
                let cell = &row.value[name];
                self.error(format!("`{name}` is not a column of this table"), place(&cell.referenced));
                ok = false;
            }
            for c in columns {
                let cell = match (row.value.get(&c.name), &c.default) {
                    (Some(v), _) => cell_of_json(&v.value, c.ty)
                        .map_err(|why| (format!("the row's `{}` {why}", c.name), place(&v.referenced))),
                    (None, Some(d)) => Ok(d.clone()),
                    (None, None) => Err((format!("the row has no `{}`", c.name), at.clone())),
                };
                match cell {
                    Ok(cell) => cells.push(cell),
                    Err((why, at)) => {
                        self.error(why, at);
                        ok = false;
                    }
                }
            }
            if ok {
                out.push((cells, at));
            }
        }
        out
    }

    /// The rows of a CSV table: a header row naming columns, then one row per line.
    fn csv_rows(&mut self, file: &str, text: &str, columns: &[ColumnSpec]) -> Vec<(Vec<Cell>, Origin)> {
        let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
        let header: Vec<String> = match reader.headers() {
            Ok(h) => h.iter().map(str::to_owned).collect(),
            Err(e) => {
                self.error(format!("cannot read the header row: {e}"), Origin::new(file, 1, 1));
                return Vec::new();
            }
        };
        for name in header.iter().filter(|h| !columns.iter().any(|c| &c.name == *h)) {
            self.error(format!("`{name}` is not a column of this table"), Origin::new(file, 1, 1));
        }
        let mut out = Vec::new();
        for record in reader.records() {
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line() as u32);
                    self.error(format!("not a CSV row: {e}"), Origin::new(file, line, 0));
                    continue;
                }
            };
            let at = Origin::new(file, record.position().map_or(0, |p| p.line() as u32), 0);
            let mut cells = Vec::with_capacity(columns.len());
            let mut ok = true;
            for c in columns {
                let raw =
                    header.iter().position(|h| *h == c.name).and_then(|i| record.get(i)).filter(|v| !v.is_empty());
                let cell = match (raw, &c.default) {
                    (Some(v), _) => cell_of_text(v, c.ty).map_err(|why| format!("the row's `{}` {why}", c.name)),
                    (None, Some(d)) => Ok(d.clone()),
                    (None, None) => Err(format!("the row has no `{}`", c.name)),
                };
                match cell {
                    Ok(cell) => cells.push(cell),
                    Err(why) => {
                        self.error(why, at.clone());
                        ok = false;
                    }
                }
            }
            if ok {
                out.push((cells, at));
            }
        }
        out
    }
}

fn type_name(t: &str) -> Option<TypeName> {
    serde_json::from_value(Json::String(t.to_owned())).ok()
}

fn cell_of_json(v: &Json, ty: TypeName) -> Result<Cell, String> {
    let wrong = || {
        let quote = if ty == TypeName::String && (v.is_boolean() || v.is_number()) {
            format!(": YAML reads it as {v}; put it in quotes to keep it as written")
        } else {
            String::new()
        };
        format!("should be {} and is {}{quote}", ty.a(), crate::value::json_type_of(v))
    };
    match (ty, v) {
        (TypeName::String, Json::String(s)) => Ok(Cell::Str(s.as_str().into())),
        (TypeName::Int, Json::Number(n)) => n.as_i64().map(Cell::Int).ok_or_else(wrong),
        (TypeName::Float, Json::Number(n)) => n.as_f64().map(Cell::Float).ok_or_else(wrong),
        (TypeName::Bool, Json::Bool(b)) => Ok(Cell::Bool(*b)),
        _ => Err(wrong()),
    }
}

fn cell_of_text(v: &str, ty: TypeName) -> Result<Cell, String> {
    let wrong = || format!("is {}, and `{v}` is not one", ty.a());
    match ty {
        TypeName::String => Ok(Cell::Str(v.into())),
        TypeName::Int => v.parse().map(Cell::Int).map_err(|_| wrong()),
        TypeName::Float => v.parse().map(Cell::Float).map_err(|_| wrong()),
        TypeName::Bool => v.parse().map(Cell::Bool).map_err(|_| wrong()),
        _ => Err(wrong()),
    }
}

fn show(c: &Cell) -> String {
    match c {
        Cell::Str(s) => format!("`{s}`"),
        other => format!("{:?}", other.to_dynamic()),
    }
}

/// The most problems told of one table's rows: past them, how many more there are.
const ROW_PROBLEMS: usize = 20;

/// Whether the YAML parser stopped at the size a table may have.
fn too_large(e: &serde_saphyr::Error) -> bool {
    use serde_saphyr::budget::BudgetBreach;
    matches!(
        e.without_snippet(),
        serde_saphyr::Error::Budget { breach: BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. }, .. }
    )
}
