//! Which ObserverSets may use a Secret: the Secret's own opt-in. Without it, anyone who may create
//! an ObserverSet could have the operator (or `kubectl observer`) read any Secret of the namespace
//! and send its values to a host of their choosing. So a Secret is used only when its annotation
//! `kafkaobserver.io/observer-sets` names the set (comma-separated names) or is `*` (every
//! ObserverSet of the Secret's namespace). Pure: the caller (`k8s::secrets`) passes the Secret's
//! annotations, read before its data; a refusal names the Secret and the annotation to add, never
//! a key or a value of the Secret.

use std::collections::BTreeMap;
use std::fmt;

use crate::kafka::security::SecretError;

/// The annotation a Secret carries to let ObserverSets of its namespace use it.
pub const ANNOTATION: &str = "kafkaobserver.io/observer-sets";

/// The entry of [`ANNOTATION`] that lets every ObserverSet of the namespace use the Secret.
pub const EVERY_SET: &str = "*";

/// Why a Secret may not be used by an ObserverSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The Secret has no [`ANNOTATION`].
    NotAnnotated,
    /// The annotation names neither the set nor `*`.
    NotNamed,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotAnnotated => write!(f, "has no annotation {ANNOTATION}"),
            Refusal::NotNamed => write!(f, "does not name it in its annotation {ANNOTATION}"),
        }
    }
}

/// Whether the Secret with these `annotations` lets ObserverSet `observer_set` use it. Entries
/// are trimmed; empty ones are ignored; names compare exactly (Kubernetes names are lower case).
pub fn decide(
    annotations: Option<&BTreeMap<String, String>>,
    observer_set: &str,
) -> Result<(), Refusal> {
    let value = annotations
        .and_then(|a| a.get(ANNOTATION))
        .ok_or(Refusal::NotAnnotated)?;
    let granted = value
        .split(',')
        .map(str::trim)
        .any(|entry| entry == EVERY_SET || (!entry.is_empty() && entry == observer_set));
    if granted {
        Ok(())
    } else {
        Err(Refusal::NotNamed)
    }
}

/// [`decide`] as the typed error the Secrets' readers return: it names the Secret and the set.
pub fn require(
    namespace: &str,
    secret: &str,
    observer_set: &str,
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<(), SecretError> {
    decide(annotations, observer_set).map_err(|refusal| SecretError::NotOptedIn {
        namespace: namespace.into(),
        secret: secret.into(),
        observer_set: observer_set.into(),
        refusal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("other".to_string(), "x".to_string()),
            (ANNOTATION.to_string(), value.to_string()),
        ])
    }

    #[test]
    fn a_secret_without_the_annotation_is_refused() {
        assert_eq!(decide(None, "orders"), Err(Refusal::NotAnnotated));
        let other = BTreeMap::from([("other".to_string(), "orders".to_string())]);
        assert_eq!(decide(Some(&other), "orders"), Err(Refusal::NotAnnotated));
    }

    #[test]
    fn the_named_sets_may_use_it_and_no_other() {
        let a = annotated("orders, payments ,audit");
        for set in ["orders", "payments", "audit"] {
            assert_eq!(decide(Some(&a), set), Ok(()), "{set}");
        }
        for set in ["order", "orders,payments", "Orders", "", "*"] {
            assert_eq!(decide(Some(&a), set), Err(Refusal::NotNamed), "{set:?}");
        }
    }

    #[test]
    fn a_star_lets_every_set_of_the_namespace_use_it() {
        assert_eq!(decide(Some(&annotated("*")), "orders"), Ok(()));
        assert_eq!(decide(Some(&annotated(" * ")), "anything"), Ok(()));
        assert_eq!(decide(Some(&annotated("audit,*")), "orders"), Ok(()));
    }

    #[test]
    fn an_empty_value_or_empty_entries_grant_nothing() {
        for value in ["", " ", ",", " , ,"] {
            assert_eq!(
                decide(Some(&annotated(value)), "orders"),
                Err(Refusal::NotNamed),
                "{value:?}"
            );
        }
        // A prefix or a glob is not a name.
        assert_eq!(
            decide(Some(&annotated("ord*")), "orders"),
            Err(Refusal::NotNamed)
        );
    }

    #[test]
    fn the_refusal_names_the_secret_the_set_and_the_annotation_to_add() {
        let err = require("team-a", "kafka-user", "orders", None).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("Secret team-a/kafka-user"), "{msg}");
        assert!(
            msg.contains("has no annotation kafkaobserver.io/observer-sets"),
            "{msg}"
        );
        assert!(msg.contains("ObserverSet orders may not use it"), "{msg}");
        assert!(
            msg.contains("kubectl annotate secret -n team-a kafka-user kafkaobserver.io/observer-sets=orders"),
            "{msg}"
        );
        let a = annotated("audit");
        let msg = require("team-a", "kafka-user", "orders", Some(&a))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("does not name it"), "{msg}");
        // The annotation's current value is not repeated (it may list other teams' sets).
        assert!(!msg.contains("audit"), "{msg}");
        assert!(require("team-a", "kafka-user", "audit", Some(&a)).is_ok());
    }
}
