//! The reconciler's error type. Each variant has a `category()` used as a metric label and as the
//! reason of the Warning event, and a message that says what to fix. Also what an apiserver
//! error means for both loops ([`stale_crd`]).

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A selected pod carries no usable node id.
    #[error("{0}")]
    Dereference(#[from] crate::rollout::pods::DereferenceError),
    /// A role's label selector is not a selector the API accepts.
    #[error("ObserverSet {object}: spec.nodes.{role}s.selector cannot be used ({message}): fix matchLabels/matchExpressions")]
    Selector {
        object: String,
        role: crate::crd::Role,
        message: String,
    },
    /// A call to the Kubernetes API failed; `action` says which one.
    #[error("{action} failed: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the finalizer, or the cleanup behind it, failed.
    #[error("finalizer of ObserverSet {object}: {message}")]
    Finalizer { object: String, message: String },
    /// A write's precondition failed: the object changed after the read it was decided on.
    #[error("{object} changed after this reconcile read it (another writer, or a late write of a former leader); nothing was written, the reconcile reads it again")]
    Superseded { object: String },
    /// The set's status shows a later leadership's epoch than the one this replica claimed: it
    /// was replaced (paused or cut off past its Lease) and writes nothing more.
    #[error("ObserverSet {object}: a later operator leadership (epoch {theirs}) wrote it after this replica's (epoch {ours}); this replica no longer leads and writes nothing")]
    Deposed {
        object: String,
        ours: i64,
        theirs: i64,
    },
    /// A status write did not reach a majority of the member clusters' copies: nothing that
    /// depends on it (a list) was written.
    #[error("the status of ObserverSet {object} was not persisted: {reason}")]
    NotPersisted { object: String, reason: String },
    /// Too few member clusters answered to know the latest status (the copy to resume from):
    /// nothing is decided or written.
    #[error("ObserverSet {object}: {reason}")]
    NoMajority { object: String, reason: String },
    /// The object as served lacks a namespace or name (never for a namespaced custom resource).
    #[error("ObserverSet has no {0}; it must be a namespaced, named object")]
    MissingMetadata(&'static str),
}

impl Error {
    /// A short, stable label for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Dereference(_) => "dereference",
            Error::Selector { .. } => "invalid_spec",
            Error::Kube { .. } => "kube_api",
            Error::Finalizer { .. } => "finalizer",
            Error::Superseded { .. } => "superseded",
            Error::NotPersisted { .. } => "not_persisted",
            Error::Deposed { .. } => "deposed",
            Error::NoMajority { .. } => "no_majority",
            Error::MissingMetadata(_) => "metadata",
        }
    }

    /// Wraps a failed API call with a description of what was attempted.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed call in a few words for status and logs: the HTTP status for an apiserver's
/// answer, else what went wrong on the way (never a request or response body).
pub fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
        other => other.to_string(),
    }
}

/// Whether a status write failed because the CRD's schema lacks a field this build writes
/// (an operator upgraded without its CRD): server-side apply refuses undeclared fields.
pub fn stale_crd(e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Api(s) if s.message.contains("field not declared in schema") => {
            Some(s.message.clone())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_distinct_labels() {
        let errors = [
            Error::MissingMetadata("namespace"),
            Error::Finalizer {
                object: "a/b".into(),
                message: "x".into(),
            },
            Error::Superseded {
                object: "ConfigMap c".into(),
            },
            Error::NotPersisted {
                object: "a/b".into(),
                reason: "1 of 3".into(),
            },
            Error::Deposed {
                object: "a/b".into(),
                ours: 1,
                theirs: 2,
            },
        ];
        let labels: Vec<_> = errors.iter().map(Error::category).collect();
        assert_eq!(
            labels,
            [
                "metadata",
                "finalizer",
                "superseded",
                "not_persisted",
                "deposed"
            ]
        );
    }
}
