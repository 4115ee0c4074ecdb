//! `promotion.topics` compiled: each list is one regex set, bounded in size
//! ([`TOPIC_FILTER_MAX_COMPILED_BYTES`]), since every scan of every ObserverSet runs it over
//! every topic name. Compiling costs far more than matching, so the loops compile a
//! generation's filter once (`super::memo`).

use regex::{RegexBuilder, RegexSet, RegexSetBuilder};

use super::bounds::{
    MAX_TOPIC_PATTERNS, TOPIC_FILTER_MAX_COMPILED_BYTES, TOPIC_PATTERN_MAX_LENGTH,
};
use super::promotion::TopicFilter;
use super::validation::{SpecError, SpecViolation};

/// A topic is watched when it matches an include and no exclude.
#[derive(Clone, Debug)]
pub struct CompiledTopicFilter {
    include: RegexSet,
    exclude: RegexSet,
}

impl CompiledTopicFilter {
    /// Compiles the patterns under the rules `validate` applies to `promotion.topics`.
    pub fn new<I, E, S, T>(include: I, exclude: E) -> Result<Self, SpecError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
        E: IntoIterator<Item = T>,
        T: Into<String>,
    {
        compile(&TopicFilter {
            include: include.into_iter().map(Into::into).collect(),
            exclude: exclude.into_iter().map(Into::into).collect(),
        })
        .map_err(|violations| SpecError { violations })
    }

    /// Every topic.
    pub fn all() -> Self {
        CompiledTopicFilter::new([".*"], Vec::<String>::new()).expect("static regex")
    }

    pub fn watches(&self, topic: &str) -> bool {
        self.include.is_match(topic) && !self.exclude.is_match(topic)
    }
}

/// Both lists compiled, or every problem found in them.
pub fn compile(spec: &TopicFilter) -> Result<CompiledTopicFilter, Vec<SpecViolation>> {
    let mut errors = Vec::new();
    let include = compile_list("include", &spec.include, &mut errors);
    let exclude = compile_list("exclude", &spec.exclude, &mut errors);
    match (include, exclude) {
        (Some(include), Some(exclude)) if errors.is_empty() => {
            Ok(CompiledTopicFilter { include, exclude })
        }
        _ => Err(errors),
    }
}

fn compile_list(
    list: &'static str,
    patterns: &[String],
    errors: &mut Vec<SpecViolation>,
) -> Option<RegexSet> {
    let before = errors.len();
    if patterns.len() > MAX_TOPIC_PATTERNS {
        errors.push(SpecViolation::TooManyTopicPatterns {
            list,
            count: patterns.len(),
        });
        // Not compiled at all: its size is what the count bounds.
        return None;
    }
    // Each pattern alone first, for a message that points at the bad one.
    for (index, pattern) in patterns.iter().enumerate() {
        let checked = if pattern.len() > TOPIC_PATTERN_MAX_LENGTH {
            Err(format!(
                "{} characters, use at most {TOPIC_PATTERN_MAX_LENGTH}",
                pattern.len()
            ))
        } else {
            RegexBuilder::new(pattern)
                .size_limit(TOPIC_FILTER_MAX_COMPILED_BYTES)
                .dfa_size_limit(TOPIC_FILTER_MAX_COMPILED_BYTES)
                .build()
                .map(drop)
                .map_err(|e| match e {
                    regex::Error::CompiledTooBig(_) => format!(
                        "it compiles to more than {} KiB",
                        TOPIC_FILTER_MAX_COMPILED_BYTES >> 10
                    ),
                    other => other.to_string(),
                })
        };
        if let Err(message) = checked {
            errors.push(SpecViolation::TopicRegex {
                list,
                index,
                pattern: pattern.clone(),
                message,
            });
        }
    }
    if errors.len() > before {
        return None;
    }
    match RegexSetBuilder::new(patterns)
        .size_limit(TOPIC_FILTER_MAX_COMPILED_BYTES)
        .dfa_size_limit(TOPIC_FILTER_MAX_COMPILED_BYTES)
        .build()
    {
        Ok(set) => Some(set),
        Err(regex::Error::CompiledTooBig(_)) => {
            errors.push(SpecViolation::TopicFilterTooLarge { list });
            None
        }
        Err(other) => {
            // Each pattern compiled alone, so this is not expected; say it rather than panic.
            errors.push(SpecViolation::TopicRegex {
                list,
                index: 0,
                pattern: patterns.join(" | "),
                message: other.to_string(),
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(
        include: &[&str],
        exclude: &[&str],
    ) -> Result<CompiledTopicFilter, Vec<SpecViolation>> {
        compile(&TopicFilter {
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
        })
    }

    #[test]
    fn an_include_and_no_exclude() {
        let f = filter(&["^orders", "^payments$"], &["\\.dlq$"]).unwrap();
        assert!(f.watches("orders.eu"));
        assert!(f.watches("payments"));
        assert!(!f.watches("orders.dlq"));
        assert!(!f.watches("audit"));
        let none = filter(&[], &[]).unwrap();
        assert!(!none.watches("orders"), "no include watches nothing");
    }

    #[test]
    fn real_filters_fit_the_bound() {
        let sixty_four: Vec<String> = (0..64)
            .map(|i| format!("^team-{i}\\.[a-zA-Z0-9._-]+$"))
            .collect();
        let refs: Vec<&str> = sixty_four.iter().map(String::as_str).collect();
        assert!(filter(&refs, &["^__", "\\.(dlq|retry)$"]).is_ok());
    }

    #[test]
    fn one_pattern_too_large_is_named() {
        let v = filter(&["^ok$", "(\\w{50}){50}"], &[]).unwrap_err();
        assert!(
            matches!(&v[..], [SpecViolation::TopicRegex { list: "include", index: 1, message, .. }] if message.contains("more than 256 KiB")),
            "{v:?}"
        );
    }

    #[test]
    fn a_list_too_large_together_is_refused_with_what_to_do() {
        // Each fits alone; the 64 of them together do not (a Unicode `\w` compiles to tens of KiB).
        let big: Vec<String> = (0..64).map(|i| format!("^{i}\\w{{4}}$")).collect();
        let refs: Vec<&str> = big.iter().map(String::as_str).collect();
        for p in &refs {
            assert!(filter(&[p], &[]).is_ok(), "{p} alone fits");
        }
        let v = filter(&[".*"], &refs).unwrap_err();
        assert_eq!(v, [SpecViolation::TopicFilterTooLarge { list: "exclude" }]);
        let m = v[0].to_string();
        assert!(m.starts_with("spec.promotion.topics.exclude compiles to more than 256 KiB: use fewer or simpler patterns"), "{m}");
    }
}
