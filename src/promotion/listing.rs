//! Partition lists in the engine's reasons, kept short.

use super::snapshot::PartitionState;

/// "t-0, t-1, t-2 and 4 more": partition lists in reasons stay short.
pub(super) fn list_partitions<'a>(parts: impl IntoIterator<Item = &'a PartitionState>) -> String {
    let names: Vec<String> = parts
        .into_iter()
        .map(|p| format!("{}-{}", p.topic, p.partition))
        .collect();
    summarize(&names)
}

pub(super) fn summarize(names: &[String]) -> String {
    const SHOWN: usize = 3;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}
