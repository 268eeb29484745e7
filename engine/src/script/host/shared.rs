//! What host functions share for the whole life of a pack version: its params (with keyword
//! lists folded once), prompts, profiles, tables and schemas, and compiled patterns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use rhai::{Array, Dynamic, ImmutableString, Map};

use super::{RhaiResult, str_list};
use crate::llm::Profile;
use crate::prompt::Prompts;
use crate::text;

/// What host functions share for the whole life of a pack version.
pub(crate) struct HostShared {
    pub pack: String,
    pub params: Map,
    pub prompts: Arc<Prompts>,
    pub profiles: Arc<IndexMap<String, Profile>>,
    /// The pack's data tables.
    pub tables: crate::data::Tables,
    /// The pack's JSON Schemas.
    pub schemas: crate::schemas::Schemas,
    /// Parameters shaped like keyword lists or tables, folded and compiled once at load.
    pub(super) folded: HashMap<String, Folded>,
    regexes: Mutex<HashMap<String, Arc<regex::Regex>>>,
    /// Pattern lists named by parameter, compiled on first use.
    regex_sets: Mutex<HashMap<String, Arc<regex::RegexSet>>>,
}

/// A parameter prepared for matching: a list of phrases (one group), or a table of name →
/// phrases (a group per name).
pub(super) enum Folded {
    List(text::PhraseSet),
    Table(Vec<ImmutableString>, text::PhraseSet),
}

impl HostShared {
    pub(crate) fn new(
        pack: String,
        params: Map,
        prompts: Arc<Prompts>,
        profiles: Arc<IndexMap<String, Profile>>,
        tables: crate::data::Tables,
        schemas: crate::schemas::Schemas,
    ) -> Self {
        let folded = params.iter().filter_map(|(k, v)| Some((k.to_string(), fold_param(v)?))).collect();
        HostShared {
            pack,
            params,
            prompts,
            profiles,
            tables,
            schemas,
            folded,
            regexes: Mutex::new(HashMap::new()),
            regex_sets: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn regex(&self, pattern: &str) -> RhaiResult<Arc<regex::Regex>> {
        let mut cache = self.regexes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = cache.get(pattern) {
            return Ok(r.clone());
        }
        let r = regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("bad pattern `{pattern}`: {e}"))?;
        if cache.len() >= 512 {
            cache.clear();
        }
        let r = Arc::new(r);
        cache.insert(pattern.to_owned(), r.clone());
        Ok(r)
    }

    /// The patterns of parameter `name`, compiled once into a set.
    pub(super) fn regex_set(&self, name: &str) -> RhaiResult<Arc<regex::RegexSet>> {
        let mut cache = self.regex_sets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = cache.get(name) {
            return Ok(r.clone());
        }
        let list = self.params.get(name).and_then(|v| v.read_lock::<Array>().map(|a| a.clone()));
        let list = list.ok_or_else(|| format!("parameter `{name}` is not a list of patterns"))?;
        let patterns = str_list(&list, "patterns")?;
        let set = regex::RegexSetBuilder::new(patterns.iter().map(|p| p.as_str()))
            .case_insensitive(true)
            .size_limit(1 << 22)
            .build()
            .map_err(|e| format!("bad pattern in parameter `{name}`: {e}"))?;
        let set = Arc::new(set);
        cache.insert(name.to_owned(), set.clone());
        Ok(set)
    }
}

/// The folded phrases of a string or a list of strings.
pub(super) fn phrases(v: &Dynamic) -> Option<Vec<String>> {
    if let Some(s) = v.read_lock::<ImmutableString>() {
        return Some(vec![text::fold(&s)]);
    }
    let arr = v.read_lock::<Array>()?;
    arr.iter().map(|x| x.read_lock::<ImmutableString>().map(|s| text::fold(&s))).collect()
}

fn fold_param(v: &Dynamic) -> Option<Folded> {
    if v.is_array() {
        return text::PhraseSet::new(&[phrases(v)?]).map(Folded::List);
    }
    let map = v.read_lock::<Map>()?;
    let mut names = Vec::with_capacity(map.len());
    let mut groups = Vec::with_capacity(map.len());
    for (k, v) in map.iter() {
        names.push(ImmutableString::from(k.as_str()));
        groups.push(phrases(v)?);
    }
    Some(Folded::Table(names, text::PhraseSet::new(&groups)?))
}
