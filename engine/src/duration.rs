//! The one grammar for durations, in manifests and the host's `ruleweave.toml` alike:
//! humantime's (`250ms`, `90s`, `30m`, `1h30m`, `7d`, units summed, spaces allowed), and `never`
//! where a setting may be off.

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

/// A duration: `250ms`, `90s`, `1h30m`, `7d`.
pub fn parse(text: &str) -> Result<Duration> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        Error::new(ErrorKind::Input, format!("`{}` is not a duration like 250ms, 90s, 1h30m or 7d ({e})", text.trim()))
    })
}

/// A duration, or `never` (`None`).
pub fn parse_or_never(text: &str) -> Result<Option<Duration>> {
    if text.trim() == "never" {
        return Ok(None);
    }
    parse(text).map(Some).map_err(|e| Error::new(ErrorKind::Input, format!("{}, nor never", e.detail())))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn one_grammar_with_never() {
        for (text, ms) in
            [("250ms", 250), ("90s", 90_000), ("1h30m", 5_400_000), ("1h 30m", 5_400_000), ("7d", 604_800_000)]
        {
            assert_eq!(super::parse(text).unwrap(), Duration::from_millis(ms), "{text}");
            assert_eq!(super::parse_or_never(text).unwrap(), Some(Duration::from_millis(ms)), "{text}");
        }
        assert_eq!(super::parse_or_never(" never ").unwrap(), None);
        for bad in ["", "soon", "30", "-1s", "never"] {
            assert!(super::parse(bad).is_err(), "{bad}");
        }
        let e = super::parse_or_never("30").unwrap_err();
        assert!(e.detail().contains("`30` is not a duration like") && e.detail().ends_with("nor never"), "{e}");
    }
}
