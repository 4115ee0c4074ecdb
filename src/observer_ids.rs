//! The `observer.ids` file: what the operator writes and how the patched Kafka reads it.
//!
//! The file is the contract with the broker and controller patch (stated in `patches/README.md`,
//! "The observer.ids reader"):
//! integers separated by commas and/or whitespace, a line whose trimmed text starts with `#` is a
//! comment, no inline comments, tokens that are not integers are ignored, an empty file means no
//! observers. The operator writes the safe form: a two-line comment header naming the
//! ObserverSet and the revision, then one id per line in ascending order.
//!
//! Rendering and parsing are pure and round-trip: `parse(&render(h, ids))` gives back `h` and
//! `ids`. The observer-agent sidecar uses the same parser, so it acknowledges exactly what Kafka
//! acts on.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::crd::NodeId;

const HEADER_PREFIX: &str = "# Managed by kafka-observer-operator: ObserverSet ";
const SECOND_LINE: &str = "# One observer node id per line. Do not edit: changes are reverted.";

/// The provenance written in the first line of a managed file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub namespace: String,
    pub name: String,
    pub revision: i64,
}

impl Header {
    /// `<namespace>/<name>`, the spelling the agent reports.
    pub fn observer_set(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A parsed file: the header if the first non-blank line is a well-formed one, and the ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObserverFile {
    pub header: Option<Header>,
    pub ids: BTreeSet<NodeId>,
}

/// Renders the file for `ids` at `header`'s revision: header, then one id per line, ascending.
/// An empty set renders the header alone, which Kafka reads as "no observers".
pub fn render<'a>(header: &Header, ids: impl IntoIterator<Item = &'a NodeId>) -> String {
    let sorted: BTreeSet<NodeId> = ids.into_iter().copied().collect();
    let mut out = format!(
        "{HEADER_PREFIX}{}/{}, revision {}\n{SECOND_LINE}\n",
        header.namespace, header.name, header.revision
    );
    for id in sorted {
        let _ = writeln!(out, "{id}");
    }
    out
}

/// Parses a file the way the Kafka patch does, plus the operator's header.
pub fn parse(content: &str) -> ObserverFile {
    ObserverFile {
        header: parse_header(content),
        ids: parse_ids(content),
    }
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
        revision: revision.trim().parse().ok().filter(|r: &i64| *r >= 0)?,
    })
}

/// The observer ids, as the broker patch reads them.
pub fn parse_ids(content: &str) -> BTreeSet<NodeId> {
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
    use proptest::prelude::*;

    fn header(revision: i64) -> Header {
        Header {
            namespace: "kafka".into(),
            name: "kafka".into(),
            revision,
        }
    }

    #[test]
    fn renders_the_documented_form() {
        assert_eq!(
            render(&header(7), &[5, 4]),
            "# Managed by kafka-observer-operator: ObserverSet kafka/kafka, revision 7\n\
             # One observer node id per line. Do not edit: changes are reverted.\n4\n5\n"
        );
    }

    #[test]
    fn empty_set_is_comments_only() {
        let text = render(&header(3), &[]);
        assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
        assert_eq!(
            parse(&text),
            ObserverFile {
                header: Some(header(3)),
                ids: BTreeSet::new()
            }
        );
    }

    #[test]
    fn reads_the_operator_header() {
        let h = parse_header(
            "# Managed by kafka-observer-operator: ObserverSet kafka/main, revision 12\n4\n",
        );
        assert_eq!(
            h,
            Some(Header {
                namespace: "kafka".into(),
                name: "main".into(),
                revision: 12
            })
        );
    }

    #[test]
    fn rejects_other_first_lines() {
        for content in [
            "4\n# Managed by kafka-observer-operator: ObserverSet kafka/main, revision 1\n",
            "# Managed by kafka-observer-operator: ObserverSet kafka, revision 1\n",
            "# Managed by kafka-observer-operator: ObserverSet kafka/main, revision x\n",
            "# Managed by kafka-observer-operator: ObserverSet kafka/main, revision -1\n",
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
        assert_eq!(parse_ids("4\r\n5\r\n"), BTreeSet::from([4, 5]));
    }

    proptest! {
        #[test]
        fn render_then_parse_round_trips(
            namespace in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?",
            name in "[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?",
            revision in 0i64..i64::MAX,
            ids in proptest::collection::btree_set(0..i32::MAX, 0..40),
        ) {
            let h = Header { namespace, name, revision };
            let text = render(&h, &ids);
            prop_assert_eq!(parse(&text), ObserverFile { header: Some(h), ids: ids.clone() });
            // The safe form: every line is a comment or exactly one id.
            for line in text.lines() {
                prop_assert!(line.starts_with('#') || line.parse::<NodeId>().is_ok(), "{}", line);
            }
        }

        #[test]
        fn parser_never_panics_and_ignores_comment_lines(content in "(#[^\n]*\n|[0-9 ,\t]{0,12}\n|[a-z#]{0,5}\n){0,12}") {
            let ids = parse_ids(&content);
            let without_comments: String = content
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n");
            prop_assert_eq!(ids, parse_ids(&without_comments));
        }
    }
}
