//! How timestamps read where the crate writes them itself: the JSON and YAML of the
//! `kubectl observer` views ([`Rfc3339`], [`serialize`]) and the text of reasons, messages and
//! views ([`Text`]). Both show the fraction of a second in whole groups of three digits (none,
//! milli-, micro- or nanoseconds: the fewest that are exact), the shape these outputs have always
//! had; jiff's own `Display` trims trailing zeros instead (`.5` where they say `.500`). Kubernetes
//! fields (`Time`, `MicroTime`) keep k8s-openapi's formats.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use serde::{Serialize, Serializer};

/// `t` as a Kubernetes `MicroTime`, truncated to microseconds: what the apiserver keeps of one, so
/// a value written and read back compares equal. Truncating keeps it in range, so the fallback
/// is never taken.
pub fn to_micro(t: Timestamp) -> MicroTime {
    MicroTime(Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t))
}

/// Digits of the fraction of a second to show: 0, 3, 6 or 9.
fn fraction_digits(t: Timestamp) -> usize {
    match t.subsec_nanosecond() {
        0 => 0,
        n if n % 1_000_000 == 0 => 3,
        n if n % 1_000 == 0 => 6,
        _ => 9,
    }
}

/// RFC 3339 in UTC: `2027-01-15T08:00:00.500Z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfc3339(pub Timestamp);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{:.*}", fraction_digits(self.0), self.0)
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `#[serde(serialize_with)]` of a timestamp field: [`Rfc3339`].
pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    Rfc3339(*t).serialize(s)
}

/// `#[serde(serialize_with)]` of an optional timestamp field: [`Rfc3339`] or `null`.
pub fn serialize_option<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    t.map(Rfc3339).serialize(s)
}

/// For people: `2027-01-15 08:00:00.500 UTC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Text(pub Timestamp);

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let format = match fraction_digits(self.0) {
            0 => "%Y-%m-%d %H:%M:%S UTC",
            3 => "%Y-%m-%d %H:%M:%S%.3f UTC",
            6 => "%Y-%m-%d %H:%M:%S%.6f UTC",
            _ => "%Y-%m-%d %H:%M:%S%.9f UTC",
        };
        write!(f, "{}", self.0.strftime(format))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(nanos: i32) -> Timestamp {
        Timestamp::new(1_800_000_000, nanos).unwrap()
    }

    #[test]
    fn the_fraction_comes_in_groups_of_three_digits() {
        let cases = [
            (0, "2027-01-15T08:00:00Z", "2027-01-15 08:00:00 UTC"),
            (
                500_000_000,
                "2027-01-15T08:00:00.500Z",
                "2027-01-15 08:00:00.500 UTC",
            ),
            (
                123_450_000,
                "2027-01-15T08:00:00.123450Z",
                "2027-01-15 08:00:00.123450 UTC",
            ),
            (
                123_456_780,
                "2027-01-15T08:00:00.123456780Z",
                "2027-01-15 08:00:00.123456780 UTC",
            ),
        ];
        for (nanos, rfc3339, text) in cases {
            assert_eq!(Rfc3339(at(nanos)).to_string(), rfc3339);
            assert_eq!(Text(at(nanos)).to_string(), text);
        }
    }

    #[test]
    fn json_holds_the_rfc3339_string_or_null() {
        #[derive(Serialize)]
        struct View {
            #[serde(serialize_with = "serialize")]
            at: Timestamp,
            #[serde(serialize_with = "serialize_option")]
            since: Option<Timestamp>,
            #[serde(serialize_with = "serialize_option")]
            until: Option<Timestamp>,
        }
        let view = View {
            at: at(0),
            since: Some(at(1_000)),
            until: None,
        };
        assert_eq!(
            serde_json::to_value(view).unwrap(),
            serde_json::json!({
                "at": "2027-01-15T08:00:00Z",
                "since": "2027-01-15T08:00:00.000001Z",
                "until": null,
            })
        );
    }
}
