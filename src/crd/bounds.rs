//! The numeric and duration bounds of the spec, in one place: the CRD's schema and CEL rules and
//! the operator's validation both read them, so the apiserver and the operator refuse the same
//! values with the same words.
//!
//! Node ids follow Kafka (`node.id` is a non-negative int32). Every duration has a floor below
//! which the operator would spin or act on noise, and a ceiling above which the value is a typo
//! (and, for the largest ones, would overflow the engine's clock arithmetic).

use std::time::Duration;

use super::duration::{parse_duration, DurationError};

/// The largest Kafka node id (`node.id` is an int32).
pub const MAX_NODE_ID: i32 = i32::MAX;

/// Most ids `observers` or `promotion.promoted` may list (keeps the CEL rules within the
/// apiserver's cost budget; a real cluster has far fewer observers).
pub const MAX_IDS: usize = 256;

/// `promotion.confirmations`: consecutive agreeing scans before acting.
pub const CONFIRMATIONS: (i32, i32) = (1, 100);

/// `promotion.maxConcurrentPromotions`.
pub const MAX_CONCURRENT: (i32, i32) = (1, MAX_IDS as i32);

/// Longest `kafka.bootstrapServers` string (bounds the CEL rule's cost).
pub const BOOTSTRAP_MAX_LENGTH: usize = 4096;

/// Most regexes in each of `promotion.topics.include` and `exclude`, and their longest length.
pub const MAX_TOPIC_PATTERNS: usize = 64;
pub const TOPIC_PATTERN_MAX_LENGTH: usize = 256;

/// Largest compiled size of each of `promotion.topics.include` and `exclude` (the list compiled
/// as one regex set; the `regex` crate's own default is 10 MiB per regex). Topic filters of a
/// real cluster compile to a few KiB; a counted repetition (`a{1000}`) or a Unicode class
/// (`\w`, `\p{L}`) repeated many times is what reaches this, and every scan of every set runs
/// the filter over every topic name, so one author's filter would cost every tenant.
pub const TOPIC_FILTER_MAX_COMPILED_BYTES: usize = 256 << 10;

/// Largest reply the operator's own Kafka connection (offset probe, hedged metadata,
/// DescribeConfigs, DescribeQuorum) reads. The biggest is a Metadata reply for every topic:
/// about 45 bytes a partition at replication factor 3 (error code, index, leader, epoch, three
/// replica and ISR arrays) plus about 40 a topic, so 16 MiB covers some 350 000 partitions, more
/// than a large KRaft cluster holds. The bound is there because `bootstrapServers` is an
/// author's choice: a host that announces a huge reply would otherwise make the operator
/// allocate it, on every scan of every set (it was 64 MiB).
pub const PROBE_REPLY_MAX_BYTES: usize = 16 << 20;

/// `rollout.agentPort`: the observer-agent sidecar's TCP port.
pub const AGENT_PORT: (i32, i32) = (1, 65535);

/// Longest duration string: nine digits and a two-letter unit.
pub const DURATION_MAX_LENGTH: usize = 11;

/// The accepted range of one duration field, both ends inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationBounds {
    /// The field's path under `spec`, as messages name it.
    pub field: &'static str,
    pub min: Duration,
    pub max: Duration,
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `promotion.scanInterval`: faster than 100 ms floods the brokers with metadata requests.
pub const SCAN_INTERVAL: DurationBounds = DurationBounds {
    field: "promotion.scanInterval",
    min: ms(100),
    max: secs(600),
};

/// `promotion.cooldown`: at least 5 s. With no cooldown a broker that bounces would have its
/// observer promoted and demoted as fast as the scans and the window allow, each time a rollout
/// to every pod; the floor bounds what one careless spec can cost the cluster and the operator.
pub const COOLDOWN: DurationBounds = DurationBounds {
    field: "promotion.cooldown",
    min: secs(5),
    max: secs(24 * 3600),
};

/// `promotion.autoDemote.stabilizationWindow`: at least 10 s. A shorter window demotes on the
/// first healthy scan after a broker's restart, before it has shown it stays (a broker that
/// flaps then makes its observer flap with it: D6, e2e/drills/operator/drills-policy.sh).
pub const STABILIZATION_WINDOW: DurationBounds = DurationBounds {
    field: "promotion.autoDemote.stabilizationWindow",
    min: secs(10),
    max: secs(24 * 3600),
};

/// `rollout.settleTime`, whatever the mode (Agent mode does not use it). Time mode has its
/// own floor, [`TIME_MODE_MIN_SETTLE`].
pub const SETTLE_TIME: DurationBounds = DurationBounds {
    field: "rollout.settleTime",
    min: ms(0),
    max: secs(3600),
};

/// `rollout.timeout`.
pub const ROLLOUT_TIMEOUT: DurationBounds = DurationBounds {
    field: "rollout.timeout",
    min: secs(1),
    max: secs(24 * 3600),
};

/// `rollout.jvmCacheTtl`: the range the broker patch accepts for `KAFKA_OBSERVER_IDS_TTL_MS`
/// (100 ms to 60 s; patches/src/io/kafkaobserver/patch/ObserverIds.java).
pub const JVM_CACHE_TTL: DurationBounds = DurationBounds {
    field: "rollout.jvmCacheTtl",
    min: ms(100),
    max: secs(60),
};

/// Every bounded duration field.
pub const DURATIONS: [DurationBounds; 6] = [
    SCAN_INTERVAL,
    COOLDOWN,
    STABILIZATION_WINDOW,
    SETTLE_TIME,
    ROLLOUT_TIMEOUT,
    JVM_CACHE_TTL,
];

/// Why a duration field is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationFieldError {
    #[error("spec.{field}: {source}")]
    Malformed {
        field: &'static str,
        source: DurationError,
    },
    #[error("spec.{field} is {value}: use a duration between {min} and {max}")]
    OutOfRange {
        field: &'static str,
        value: String,
        min: String,
        max: String,
    },
}

impl DurationBounds {
    /// Parses `value` and checks it lies within the bounds.
    pub fn parse(&self, value: &str) -> Result<Duration, DurationFieldError> {
        let d = parse_duration(value).map_err(|source| DurationFieldError::Malformed {
            field: self.field,
            source,
        })?;
        if d < self.min || d > self.max {
            return Err(DurationFieldError::OutOfRange {
                field: self.field,
                value: value.to_string(),
                min: spell(self.min),
                max: spell(self.max),
            });
        }
        Ok(d)
    }

    /// The CEL rule enforcing the bounds on a string that already matches the duration pattern
    /// (a malformed string is left to the schema's `pattern`, whose message is clearer).
    pub fn cel_rule(&self) -> String {
        format!(
            "!self.matches('{}') || [{}].all(ms, ms >= {} && ms <= {})",
            super::DURATION_PATTERN,
            cel_millis("self"),
            self.min.as_millis(),
            self.max.as_millis()
        )
    }

    /// The CEL rule's message: what to write instead.
    pub fn cel_message(&self) -> String {
        format!(
            "{} must be between {} and {}",
            self.field,
            spell(self.min),
            spell(self.max)
        )
    }
}

/// A CEL expression for the milliseconds of the duration string `path` (which must match the
/// duration pattern). Converted by hand: CEL's `duration()` overflows on `999999999h`.
fn cel_millis(path: &str) -> String {
    let number =
        |suffix_len: usize| format!("int({path}.substring(0, size({path}) - {suffix_len}))");
    format!(
        "({path}.endsWith('ms') ? {} : {path}.endsWith('s') ? {} * 1000 : {path}.endsWith('m') ? {} * 60000 : {} * 3600000)",
        number(2),
        number(1),
        number(1),
        number(1)
    )
}

/// The CEL guard of a rule on `rollout`: Time mode and both durations well formed (a malformed
/// one is left to its own `pattern`).
fn time_mode_guard() -> String {
    format!(
        "!has(self.acknowledgement) || self.acknowledgement != 'Time' || !has(self.settleTime) || !self.settleTime.matches('{p}') || (has(self.timeout) && !self.timeout.matches('{p}'))",
        p = super::DURATION_PATTERN
    )
}

/// CEL rule on `rollout`: in Time mode `timeout` is longer than `settleTime` (a `timeout` left
/// out is its default, which the apiserver fills in before the rules run).
pub fn time_mode_timeout_rule() -> String {
    format!(
        "{} || !has(self.timeout) || {} > {}",
        time_mode_guard(),
        cel_millis("self.timeout"),
        cel_millis("self.settleTime")
    )
}

/// The shortest `rollout.settleTime` in Time mode. Time mode takes a pod as acknowledged once
/// settleTime has passed since the write and nudge, without asking it: the controllers' list
/// must have reached the controller JVMs (kubelet delivery, then their observer.ids cache TTL,
/// 1 s by default) before the brokers' list is written. `0s` would write both lists in one
/// reconcile and so give up controllers first.
pub const TIME_MODE_MIN_SETTLE: Duration = secs(10);

/// CEL rule on `rollout`: in Time mode `settleTime` is at least [`TIME_MODE_MIN_SETTLE`].
pub fn time_mode_settle_rule() -> String {
    format!(
        "{} || {} >= {}",
        time_mode_guard(),
        cel_millis("self.settleTime"),
        TIME_MODE_MIN_SETTLE.as_millis()
    )
}

/// Its message.
pub fn time_mode_settle_message() -> String {
    format!(
        "rollout.settleTime must be at least {} when rollout.acknowledgement is Time: a pod counts as acknowledged after settleTime without being asked, and the controllers' list must reach the controller JVMs before the brokers' list is written (or use acknowledgement: Agent)",
        spell(TIME_MODE_MIN_SETTLE)
    )
}

/// Its message.
pub const TIME_MODE_TIMEOUT_MESSAGE: &str = "rollout.timeout must be longer than rollout.settleTime when rollout.acknowledgement is Time: every step waits settleTime, so a shorter timeout degrades every rollout";

/// CEL rule on `rollout.agentPort`.
pub fn agent_port_rule() -> String {
    int_range_rule(AGENT_PORT.0.into(), AGENT_PORT.1.into())
}

/// Its message.
pub fn agent_port_message() -> String {
    format!(
        "rollout.agentPort must be between {} and {}: the TCP port the observer-agent sidecar listens on",
        AGENT_PORT.0, AGENT_PORT.1
    )
}

/// `d` in the spec's own notation, in the largest unit that divides it (`90s`, `10m`, `100ms`).
pub fn spell(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".into()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// CEL rule on a list of node ids: each one a Kafka node id.
pub fn node_ids_rule() -> String {
    format!("self.all(id, id >= 0 && id <= {MAX_NODE_ID})")
}

/// CEL rule on an integer field: within `[min, max]`.
pub fn int_range_rule(min: i64, max: i64) -> String {
    format!("self >= {min} && self <= {max}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_lies_within_its_bounds() {
        let promotion = crate::crd::PromotionSpec::default();
        let rollout = crate::crd::RolloutSpec::default();
        for (bounds, value) in [
            (SCAN_INTERVAL, promotion.scan_interval.as_str()),
            (COOLDOWN, &promotion.cooldown),
            (
                STABILIZATION_WINDOW,
                &promotion.auto_demote.stabilization_window,
            ),
            (SETTLE_TIME, &rollout.settle_time),
            (ROLLOUT_TIMEOUT, &rollout.timeout),
            (JVM_CACHE_TTL, &rollout.jvm_cache_ttl),
        ] {
            assert!(bounds.parse(value).is_ok(), "{}: {value}", bounds.field);
        }
        assert!((CONFIRMATIONS.0..=CONFIRMATIONS.1).contains(&promotion.confirmations));
        assert!(
            (MAX_CONCURRENT.0..=MAX_CONCURRENT.1).contains(&promotion.max_concurrent_promotions)
        );
    }

    #[test]
    fn both_ends_are_inclusive() {
        for b in DURATIONS {
            assert_eq!(b.parse(&spell(b.min)), Ok(b.min), "{}", b.field);
            assert_eq!(b.parse(&spell(b.max)), Ok(b.max), "{}", b.field);
        }
    }

    #[test]
    fn out_of_range_says_the_range() {
        let err = SCAN_INTERVAL.parse("50ms").unwrap_err().to_string();
        assert_eq!(
            err,
            "spec.promotion.scanInterval is 50ms: use a duration between 100ms and 10m"
        );
        let err = JVM_CACHE_TTL.parse("2m").unwrap_err().to_string();
        assert!(err.contains("between 100ms and 1m"), "{err}");
        assert!(ROLLOUT_TIMEOUT.parse("0s").is_err());
        assert!(ROLLOUT_TIMEOUT.parse("25h").is_err());
        assert!(SETTLE_TIME.parse("61m").is_err());
        assert!(COOLDOWN.parse("1441m").is_err());
        assert!(STABILIZATION_WINDOW.parse("999999999h").is_err());
    }

    #[test]
    fn malformed_says_how_to_write_it() {
        let err = COOLDOWN.parse("5 min").unwrap_err();
        assert!(matches!(
            err,
            DurationFieldError::Malformed {
                field: "promotion.cooldown",
                ..
            }
        ));
        assert!(err.to_string().contains("500ms"), "{err}");
    }

    #[test]
    fn spells_in_the_largest_unit() {
        assert_eq!(spell(ms(100)), "100ms");
        assert_eq!(spell(secs(90)), "90s");
        assert_eq!(spell(secs(600)), "10m");
        assert_eq!(spell(secs(86400)), "24h");
        assert_eq!(spell(Duration::ZERO), "0s");
    }

    #[test]
    fn cel_rules_name_the_bounds_in_milliseconds() {
        let rule = SCAN_INTERVAL.cel_rule();
        assert!(rule.contains("ms >= 100 && ms <= 600000"), "{rule}");
        assert!(
            rule.starts_with("!self.matches('^[0-9]{1,9}(ms|s|m|h)$')"),
            "{rule}"
        );
        assert_eq!(
            JVM_CACHE_TTL.cel_message(),
            "rollout.jvmCacheTtl must be between 100ms and 1m"
        );
        // The largest value the pattern admits, in milliseconds, fits CEL's int64.
        assert!(999_999_999u64 * 3_600_000 < i64::MAX as u64);
    }
}
