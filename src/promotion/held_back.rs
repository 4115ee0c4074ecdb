//! Why the engine did not act where it might have. Typed by what a reason is about, so the
//! automation picks its Event reason and the CLI its per-broker view from the concern, never
//! from the wording (which is for people and may change).

use std::fmt;
use std::ops::Deref;

use super::snapshot::BrokerId;

/// What a held-back reason is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concern {
    /// The scan itself (failed or stale): nothing is decided.
    Scan,
    /// Partitions whose replicas are all observers: a placement to fix, never a promotion.
    Placement,
    /// Promoting this observer.
    Promotion(BrokerId),
    /// Demoting this automatically promoted broker (or moving leadership off it first).
    Demotion(BrokerId),
    /// Electing this broker uncleanly for partitions without a live primary.
    Takeover(BrokerId),
}

/// One held-back reason: its concern and the sentence shown in status, Events, logs and the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBack {
    pub concern: Concern,
    text: String,
}

impl HeldBack {
    /// `text` prefixed with what the concern names: "observer <id>: " for a promotion,
    /// "broker <id>: " for a demotion or a takeover, "not acting: " for the scan.
    pub fn new(concern: Concern, text: impl fmt::Display) -> Self {
        let text = match concern {
            Concern::Scan => format!("not acting: {text}"),
            Concern::Placement => text.to_string(),
            Concern::Promotion(x) => format!("observer {x}: {text}"),
            Concern::Demotion(x) | Concern::Takeover(x) => format!("broker {x}: {text}"),
        };
        Self { concern, text }
    }

    /// The broker this reason is about, if it is about one.
    pub fn broker(&self) -> Option<BrokerId> {
        match self.concern {
            Concern::Promotion(x) | Concern::Demotion(x) | Concern::Takeover(x) => Some(x),
            Concern::Scan | Concern::Placement => None,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The reasons as one line, "; "-separated (Events, status, logs).
pub fn joined(reasons: &[HeldBack]) -> String {
    let texts: Vec<&str> = reasons.iter().map(HeldBack::as_str).collect();
    texts.join("; ")
}

/// What the reasons say, their numbers left out: one entry per reason, its concern and its
/// sentence with every run of digits as `#`. Two explanations that differ only in counts (a lag
/// shrinking scan by scan, "1 of 2 scans") have the same gist, so the automation publishes a
/// new Event when the gist changes, not a new Warning every scan while an observer catches up
/// (status and the debug log keep the exact sentence). The concern keeps the broker id apart.
pub fn gist(reasons: &[HeldBack]) -> Vec<(Concern, String)> {
    reasons
        .iter()
        .map(|r| {
            let mut out = String::with_capacity(r.text.len());
            let mut in_digits = false;
            for c in r.text.chars() {
                if c.is_ascii_digit() {
                    if !in_digits {
                        out.push('#');
                    }
                    in_digits = true;
                } else {
                    out.push(c);
                    in_digits = false;
                }
            }
            (r.concern, out)
        })
        .collect()
}

impl fmt::Display for HeldBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Read as its sentence (tests and callers that only show it).
impl Deref for HeldBack {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_concern_names_the_subject_of_the_sentence() {
        assert_eq!(
            HeldBack::new(Concern::Promotion(4), "lagging").as_str(),
            "observer 4: lagging"
        );
        assert_eq!(
            HeldBack::new(Concern::Demotion(4), "window").as_str(),
            "broker 4: window"
        );
        assert_eq!(
            HeldBack::new(Concern::Takeover(5), "x").to_string(),
            "broker 5: x"
        );
        assert_eq!(
            HeldBack::new(Concern::Scan, "stale").as_str(),
            "not acting: stale"
        );
        assert_eq!(HeldBack::new(Concern::Placement, "p").as_str(), "p");
        assert_eq!(HeldBack::new(Concern::Takeover(5), "x").broker(), Some(5));
        assert_eq!(HeldBack::new(Concern::Scan, "x").broker(), None);
    }

    #[test]
    fn the_gist_leaves_out_counts_but_keeps_the_broker_and_the_kind_of_reason() {
        let lag = |n: i64, x: BrokerId| {
            HeldBack::new(
                Concern::Promotion(x),
                format!("needed but lagging (up to {n} messages, max 1000) on t-0"),
            )
        };
        assert_eq!(gist(&[lag(5321, 4)]), gist(&[lag(1204, 4)]));
        assert_eq!(
            gist(&[lag(5321, 4)])[0].1,
            "observer #: needed but lagging (up to # messages, max #) on t-#"
        );
        assert_ne!(
            gist(&[lag(5321, 4)]),
            gist(&[lag(5321, 5)]),
            "another observer"
        );
        let unknown = HeldBack::new(
            Concern::Promotion(4),
            "needed but its lag is unknown on t-0",
        );
        assert_ne!(gist(&[lag(5321, 4)]), gist(&[unknown]), "another reason");
        assert_ne!(
            gist(&[lag(1, 4)]),
            gist(&[lag(1, 4), lag(1, 5)]),
            "one more reason"
        );
    }
}
