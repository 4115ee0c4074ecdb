//! Reading an `observer.ids` file the way the Kafka broker patch does, plus the operator's
//! header line (`# Managed by kafka-observer-operator: ObserverSet <ns>/<name>, revision <n>`).
//!
//! Broker rules: ids are integers separated by commas and/or whitespace; a line whose trimmed
//! text starts with `#` is a comment; there are no inline comments (in `3 # was 4` the 4
//! counts); tokens that are not integers are ignored; an empty file means no observers.

use std::collections::BTreeSet;

const HEADER_PREFIX: &str = "# Managed by kafka-observer-operator: ObserverSet ";

/// The provenance written in the first line of a managed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub namespace: String,
    pub name: String,
    pub revision: u64,
}

/// The header, if the first non-blank line is a well-formed one.
pub fn parse_header(content: &str) -> Option<Header> {
    let line = content.lines().map(str::trim).find(|l| !l.is_empty())?;
    let rest = line.strip_prefix(HEADER_PREFIX)?;
    let (set, revision) = rest.split_once(", revision ")?;
    let (namespace, name) = set.split_once('/')?;
    if namespace.is_empty() || name.is_empty() || name.contains('/') {
        return None;
    }
    Some(Header {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        revision: revision.trim().parse().ok()?,
    })
}

/// The observer ids, as the broker patch reads them.
pub fn parse_ids(content: &str) -> BTreeSet<i32> {
    content
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.split(|c: char| c == ',' || c.is_whitespace()))
        .filter_map(|token| token.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_operator_header() {
        let header = parse_header(
            "# Managed by kafka-observer-operator: ObserverSet kafka/main, revision 12\n4\n",
        )
        .unwrap();
        assert_eq!(
            header,
            Header {
                namespace: "kafka".into(),
                name: "main".into(),
                revision: 12
            }
        );
    }

    #[test]
    fn rejects_other_first_lines() {
        for content in [
            "4\n# Managed by kafka-observer-operator: ObserverSet kafka/main, revision 1\n",
            "# Managed by kafka-observer-operator: ObserverSet kafka, revision 1\n",
            "# Managed by kafka-observer-operator: ObserverSet kafka/main, revision x\n",
            "# something else\n",
            "",
        ] {
            assert_eq!(parse_header(content), None, "{content:?}");
        }
    }

    #[test]
    fn follows_the_broker_rules() {
        assert_eq!(parse_ids(""), BTreeSet::new());
        assert_eq!(parse_ids("4\n5\n"), BTreeSet::from([4, 5]));
        assert_eq!(parse_ids("1,2 3\t4,,5"), BTreeSet::from([1, 2, 3, 4, 5]));
        assert_eq!(parse_ids("  # 7\n8"), BTreeSet::from([8]));
        // No inline comments: the 4 counts, `#` and `was` are ignored tokens.
        assert_eq!(parse_ids("3 # was 4"), BTreeSet::from([3, 4]));
        assert_eq!(parse_ids("x 9 1.5"), BTreeSet::from([9]));
    }
}
