//! Durations in the spec are strings such as `500ms`, `1s`, `5m`, `2h`.
//!
//! The same grammar is enforced three times: by the schema pattern (apiserver), by this parser
//! (validation in Rust) and by the tests that keep both in agreement.

use std::time::Duration;

/// Schema pattern for every duration field; keep in sync with [`parse_duration`].
pub const DURATION_PATTERN: &str = r"^[0-9]{1,9}(ms|s|m|h)$";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a duration: write a whole number followed by ms, s, m or h (for example 500ms, 15s, 5m)")]
pub struct DurationError {
    pub value: String,
}

/// Parses `<n>ms|s|m|h`; no spaces, no fractions, no compound forms like `1m30s`.
pub fn parse_duration(value: &str) -> Result<Duration, DurationError> {
    let err = || DurationError {
        value: value.to_string(),
    };
    let split = value.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
    let (digits, unit) = value.split_at(split);
    if digits.is_empty() || digits.len() > 9 {
        return Err(err());
    }
    let n: u64 = digits.parse().map_err(|_| err())?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(err()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_what_the_pattern_rejects() {
        for bad in [
            "",
            "s",
            "1",
            "1.5s",
            "1m30s",
            " 1s",
            "1s ",
            "-1s",
            "1d",
            "1S",
            "1234567890s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn error_says_what_to_write() {
        let msg = parse_duration("1.5s").unwrap_err().to_string();
        assert!(msg.contains("500ms"), "{msg}");
    }
}
