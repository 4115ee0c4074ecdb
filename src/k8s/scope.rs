//! What the operator watches: the namespaces (`--watch-namespaces`; none given: the whole
//! cluster) and the pods in them (`--pod-selector`). A namespaced install is granted Roles in
//! exactly these namespaces (the chart's `watchNamespaces`), so every watch, list and write is
//! made per namespace, never cluster-wide. The checks are pure; `apis` builds the clients.

use std::collections::BTreeSet;

use kube::core::{Expression, Selector};
use kube::{Api, Client};

/// The namespaces and pods the operator watches, validated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchScope {
    /// Sorted, without duplicates; empty: every namespace (the cluster-wide mode).
    namespaces: Vec<String>,
    /// Only pods with these labels are watched, cached and taken as a role's pods (an empty
    /// selector: every pod of the watched namespaces).
    pub pods: Selector,
}

/// A `--watch-namespaces` or `--pod-selector` value the operator cannot use.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScopeError {
    #[error("--watch-namespaces: {0:?} is not a namespace name (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)")]
    Namespace(String),
    #[error("--pod-selector: {0:?} is not a requirement this flag takes: use key=value, key!=value, key or !key, separated by commas (e.g. app.kubernetes.io/name=kafka)")]
    PodSelector(String),
}

impl WatchScope {
    /// The scope from the flags' values: `namespaces` as given (empty strings, from a trailing
    /// comma, ignored), `pod_selector` in kubectl's equality-based syntax.
    pub fn new(namespaces: &[String], pod_selector: &str) -> Result<Self, ScopeError> {
        let mut unique = BTreeSet::new();
        for ns in namespaces
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
        {
            if !is_namespace_name(ns) {
                return Err(ScopeError::Namespace(ns.to_owned()));
            }
            unique.insert(ns.to_owned());
        }
        Ok(WatchScope {
            namespaces: unique.into_iter().collect(),
            pods: parse_pod_selector(pod_selector)?,
        })
    }

    /// The watched namespaces; empty in the cluster-wide mode.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// One `Api` per watched namespace, or one for all namespaces in the cluster-wide mode.
    pub fn apis<K>(&self, client: &Client) -> Vec<Api<K>>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        if self.namespaces.is_empty() {
            return vec![Api::all(client.clone())];
        }
        self.namespaces
            .iter()
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect()
    }

    /// For the logs: the namespaces, or `<all>`.
    pub fn describe(&self) -> String {
        if self.namespaces.is_empty() {
            "<all>".into()
        } else {
            self.namespaces.join(",")
        }
    }
}

/// RFC 1123 label: what Kubernetes accepts as a namespace name.
fn is_namespace_name(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && b.len() <= 63 && b.iter().all(inner) && edge(&b[0]) && edge(&b[b.len() - 1])
}

/// A label key or value as the flag takes it (the apiserver checks the exact rules when the
/// watch starts; this refuses what would be read as another operator: spaces, `=`, `!`, `,`).
fn is_label_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 316
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b'/'))
}

/// kubectl's equality-based selector syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated.
fn parse_pod_selector(text: &str) -> Result<Selector, ScopeError> {
    let mut selector = Selector::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || ScopeError::PodSelector(part.to_owned());
        let expression = if let Some((k, v)) = part.split_once("!=") {
            Expression::NotEqual(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Expression::Equal(k.trim().into(), v.trim().into())
        } else if let Some(k) = part.strip_prefix('!') {
            Expression::DoesNotExist(k.trim().into())
        } else {
            Expression::Exists(part.into())
        };
        let ok = match &expression {
            Expression::Equal(k, v) | Expression::NotEqual(k, v) => {
                is_label_token(k) && (v.is_empty() || is_label_token(v))
            }
            Expression::Exists(k) | Expression::DoesNotExist(k) => is_label_token(k),
            _ => false,
        };
        if !ok {
            return Err(bad());
        }
        selector.extend(expression);
    }
    Ok(selector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::SelectorExt;
    use std::collections::BTreeMap;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_namespace_is_the_whole_cluster() {
        let scope = WatchScope::new(&[], "").unwrap();
        assert!(scope.namespaces().is_empty());
        assert_eq!(scope.describe(), "<all>");
        assert!(scope.pods.selects_all());
        // A trailing comma (`--watch-namespaces kafka,`) adds no namespace.
        let scope = WatchScope::new(&names(&["", " "]), "").unwrap();
        assert!(scope.namespaces().is_empty());
    }

    #[test]
    fn namespaces_sorted_once_each() {
        let scope = WatchScope::new(&names(&["kafka-2", "kafka", "kafka-2"]), "").unwrap();
        assert_eq!(scope.namespaces(), ["kafka", "kafka-2"]);
        assert_eq!(scope.describe(), "kafka,kafka-2");
    }

    #[test]
    fn refuses_what_is_not_a_namespace_name() {
        for bad in [
            "Kafka",
            "-kafka",
            "kafka-",
            "team_a",
            "a/b",
            &"a".repeat(64),
        ] {
            assert_eq!(
                WatchScope::new(&names(&[bad]), ""),
                Err(ScopeError::Namespace(bad.into())),
                "{bad}"
            );
        }
        let message = ScopeError::Namespace("Kafka".into()).to_string();
        assert!(message.contains("--watch-namespaces") && message.contains("lowercase"));
    }

    #[test]
    fn pod_selector_matches_like_kubectl() {
        let scope = WatchScope::new(&[], "app.kubernetes.io/name=kafka, tier!=test,!skip").unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(scope
            .pods
            .matches(&labels(&[("app.kubernetes.io/name", "kafka")])));
        assert!(!scope
            .pods
            .matches(&labels(&[("app.kubernetes.io/name", "zookeeper")])));
        assert!(!scope.pods.matches(&labels(&[
            ("app.kubernetes.io/name", "kafka"),
            ("tier", "test")
        ])));
        assert!(!scope.pods.matches(&labels(&[
            ("app.kubernetes.io/name", "kafka"),
            ("skip", "")
        ])));
        assert_eq!(
            scope.pods.to_string(),
            "app.kubernetes.io/name=kafka,tier!=test,!skip"
        );
        let exists = WatchScope::new(&[], "kafkaobserver.io/observed").unwrap();
        assert_eq!(exists.pods.to_string(), "kafkaobserver.io/observed");
        assert!(WatchScope::new(&[], "a==b")
            .unwrap()
            .pods
            .matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn refuses_what_the_pod_selector_does_not_take() {
        for bad in ["a in (b,c)", "=kafka", "a b=c", "a=b=c", "!"] {
            assert!(
                matches!(WatchScope::new(&[], bad), Err(ScopeError::PodSelector(_))),
                "{bad}"
            );
        }
    }
}
