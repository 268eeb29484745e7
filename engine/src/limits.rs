//! Limits: how much a pack's scripts, templates and model calls may do, from one table.
//!
//! Every limit has a default and a ceiling. A manifest may set any of them under `limits:`, within
//! `1..=ceiling`: 0 would mean "unlimited" to Rhai, and a ceiling is what the host can hold (the
//! call depth a thread's stack can take, the memory one value may use, the model calls a turn may
//! pay for). The pack author's reference lists the table ([`limit_table`]).

use std::time::Duration;

/// How much a pack may do: per script call (operations, wall time, call depth, sizes), per
/// template render (output size), and per turn (model calls and the time spent waiting for them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rhai operations per call (roughly: expressions evaluated).
    pub max_operations: u64,
    /// Wall time per call, not counting time spent waiting for a model.
    pub max_wall: Duration,
    /// Nested function calls.
    pub max_call_levels: usize,
    /// Bytes in one string (and in all the strings of one list or map).
    pub max_string_size: usize,
    /// Items in one array (nested arrays included).
    pub max_array_size: usize,
    /// Entries in one map (nested maps included).
    pub max_map_size: usize,
    /// Bytes a template may render.
    pub max_render_size: usize,
    /// Model calls one turn may make (a script calling `llm()` in a loop stops here).
    pub max_llm_calls: u32,
    /// Time one turn may spend waiting for models.
    pub max_llm_time: Duration,
}

/// One limit a manifest may set under `limits:`.
pub struct LimitDef {
    /// The key in the manifest.
    pub key: &'static str,
    /// What it bounds.
    pub doc: &'static str,
    /// Its value when the manifest does not set it.
    pub default: u64,
    /// The most a manifest may set.
    pub max: u64,
    get: fn(&Limits) -> u64,
    set: fn(&mut Limits, u64),
}

/// Every limit, in the order the reference lists them.
pub fn limit_table() -> &'static [LimitDef] {
    LIMITS
}

/// Bytes of stack one level of script calls may take at worst (a function whose body nests
/// expressions as deep as the parser allows). Measured: a debug build needs ~4× a release one.
const STACK_PER_LEVEL: usize = if cfg!(debug_assertions) { 176 << 10 } else { 44 << 10 };
/// Bytes of stack a script call needs besides its levels.
const STACK_BASE: usize = if cfg!(debug_assertions) { 1 << 20 } else { 256 << 10 };
/// How deep expressions may nest (in a function body too). It sets how much stack one call
/// level can take, so it is fixed, not a pack's choice.
pub(crate) const MAX_EXPR_DEPTH: usize = 32;

const MIB: u64 = 1 << 20;

static LIMITS: &[LimitDef] = &[
    LimitDef {
        key: "max_operations",
        doc: "Rhai operations per script call (roughly: expressions evaluated).",
        default: 1_000_000,
        max: 100_000_000,
        get: |l| l.max_operations,
        set: |l, v| l.max_operations = v,
    },
    LimitDef {
        key: "max_wall_ms",
        doc: "Wall time per script call, in milliseconds; time waiting for a model does not count.",
        default: 500,
        max: 30_000,
        get: |l| l.max_wall.as_millis() as u64,
        set: |l, v| l.max_wall = Duration::from_millis(v),
    },
    LimitDef {
        key: "max_call_levels",
        doc: "How deep script functions may call one another. The ceiling is what a thread's stack \
              holds at worst.",
        default: 32,
        max: 64,
        get: |l| l.max_call_levels as u64,
        set: |l, v| l.max_call_levels = v as usize,
    },
    LimitDef {
        key: "max_string_size",
        doc: "Bytes in one string, and in all the strings of one list or map.",
        default: MIB,
        max: 16 * MIB,
        get: |l| l.max_string_size as u64,
        set: |l, v| l.max_string_size = v as usize,
    },
    LimitDef {
        key: "max_array_size",
        doc: "Items in one list, nested lists included.",
        default: 100_000,
        max: 1_000_000,
        get: |l| l.max_array_size as u64,
        set: |l, v| l.max_array_size = v as usize,
    },
    LimitDef {
        key: "max_map_size",
        doc: "Entries in one map, nested maps included.",
        default: 10_000,
        max: 100_000,
        get: |l| l.max_map_size as u64,
        set: |l, v| l.max_map_size = v as usize,
    },
    LimitDef {
        key: "max_render_size",
        doc: "Bytes one template may render (a prompt, a display line).",
        default: MIB,
        max: 16 * MIB,
        get: |l| l.max_render_size as u64,
        set: |l, v| l.max_render_size = v as usize,
    },
    LimitDef {
        key: "max_llm_calls",
        doc: "Model calls one turn may make, embeddings included: what a turn may cost.",
        default: 64,
        max: 10_000,
        get: |l| u64::from(l.max_llm_calls),
        set: |l, v| l.max_llm_calls = v as u32,
    },
    LimitDef {
        key: "max_llm_ms",
        doc: "Milliseconds one turn may spend waiting for models, retries included.",
        default: 600_000,
        max: 3_600_000,
        get: |l| l.max_llm_time.as_millis() as u64,
        set: |l, v| l.max_llm_time = Duration::from_millis(v),
    },
];

impl Default for Limits {
    fn default() -> Self {
        let mut l = Limits {
            max_operations: 0,
            max_wall: Duration::ZERO,
            max_call_levels: 0,
            max_string_size: 0,
            max_array_size: 0,
            max_map_size: 0,
            max_render_size: 0,
            max_llm_calls: 0,
            max_llm_time: Duration::ZERO,
        };
        for def in LIMITS {
            (def.set)(&mut l, def.default);
        }
        l
    }
}

impl Limits {
    /// Sets the limit a manifest calls `key`, refusing values outside `1..=ceiling` with an
    /// input error whose sentence says why.
    pub fn set(&mut self, key: &str, value: u64) -> crate::Result<()> {
        let def = LIMITS.iter().find(|d| d.key == key).ok_or_else(|| {
            let keys: Vec<&str> = LIMITS.iter().map(|d| d.key).collect();
            crate::Error::input(format!("`{key}` is not a limit (limits: {})", keys.join(", ")))
        })?;
        if value == 0 {
            return Err(crate::Error::input(format!(
                "limits.{key} is 0, which would mean unlimited; give a number from 1 to {} (default {})",
                def.max, def.default
            )));
        }
        if value > def.max {
            return Err(crate::Error::input(format!(
                "limits.{key} is {value}; the most this host allows is {} (default {})",
                def.max, def.default
            )));
        }
        (def.set)(self, value);
        Ok(())
    }

    /// These limits with every value brought within `1..=ceiling` (for limits built in code
    /// rather than read from a manifest): nothing is ever unlimited.
    pub fn bounded(self) -> Limits {
        let mut out = self;
        for def in LIMITS {
            let current = (def.get)(&self);
            let value = if current == 0 { def.default } else { current.min(def.max) };
            (def.set)(&mut out, value);
        }
        out
    }

    /// Bytes of stack a script call needs at worst with these limits.
    pub(crate) fn stack_needed(&self) -> usize {
        STACK_BASE + self.max_call_levels * STACK_PER_LEVEL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_values_over_the_ceiling_are_refused() {
        let mut l = Limits::default();
        let e = l.set("max_array_size", 0).unwrap_err();
        assert!(e.kind() == crate::ErrorKind::Input && e.detail().contains("0, which would mean unlimited"), "{e}");
        let e = l.set("max_call_levels", 800).unwrap_err();
        assert_eq!(e.detail(), "limits.max_call_levels is 800; the most this host allows is 64 (default 32)");
        assert!(l.set("max_wall_ms", u64::MAX).is_err());
        assert!(l.set("nope", 1).unwrap_err().detail().contains("not a limit"));
        l.set("max_wall_ms", 2000).unwrap();
        assert_eq!(l.max_wall, Duration::from_millis(2000));
    }

    #[test]
    fn limits_built_in_code_are_bounded_too() {
        let l = Limits { max_operations: 0, max_call_levels: 10_000, ..Limits::default() }.bounded();
        assert_eq!((l.max_operations, l.max_call_levels), (1_000_000, 64));
        assert_eq!(Limits::default().bounded(), Limits::default());
    }

    #[test]
    fn every_limit_in_the_table_round_trips() {
        for def in limit_table() {
            let mut l = Limits::default();
            assert_eq!((def.get)(&l), def.default, "{}", def.key);
            l.set(def.key, def.max).unwrap();
            assert_eq!((def.get)(&l), def.max, "{}", def.key);
        }
    }
}
