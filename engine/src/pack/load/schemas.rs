//! Loading a pack's JSON Schemas: each file of `schemas/<pack>/` the manifest names, parsed as
//! YAML (JSON is YAML too) and compiled; a file that does not parse is reported at its
//! `file:line:col`, a document that is not a schema at the manifest's line naming it.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value as Json;

use super::super::manifest::SpannedStr;
use super::{Loader, yaml_error};
use crate::error::Origin;
use crate::schemas::{JsonSchema, Schemas};
use crate::vocab::is_identifier;

impl Loader<'_> {
    /// The manifest's `schemas:`.
    pub(super) fn schemas(&mut self, decls: &IndexMap<String, SpannedStr>) -> Schemas {
        let mut out = HashMap::new();
        for (name, file) in decls {
            if !is_identifier(name) {
                self.error(format!("schema name `{name}` must be an identifier"), self.at(file));
                continue;
            }
            if file.value.contains('/') || file.value.starts_with('.') {
                self.error(format!("schema `{name}`: the file is a name in schemas/{}/", self.pack), self.at(file));
                continue;
            }
            let path = format!("schemas/{}/{}", self.pack, file.value);
            let bytes = match self.files.read(&path, &format!("schema `{name}`")) {
                Ok(b) => b,
                Err(e) => {
                    self.errors.push(e);
                    continue;
                }
            };
            let Ok(text) = String::from_utf8(bytes) else {
                self.error("the schema is not UTF-8 text", Origin::file(&path));
                continue;
            };
            let document: Json = match serde_saphyr::from_str(&text) {
                Ok(d) => d,
                Err(e) => {
                    self.errors.push(yaml_error(&e, &path, &text));
                    continue;
                }
            };
            match JsonSchema::compile(name, &path, document) {
                Ok(s) => {
                    out.insert(name.clone(), Arc::new(s));
                }
                Err(why) => self.error(format!("schema `{name}` ({path}) is {why}"), self.at(file)),
            }
        }
        Arc::new(out)
    }
}
