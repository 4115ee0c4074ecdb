//! Errors of the stand-in's shell; each message says what to check or fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the pods file {}: {source}; the bed writes it (e2e/testbed/pods.sh json)", path.display())]
    PodsFileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("pods file {} is invalid: {reason}", path.display())]
    PodsFileInvalid { path: PathBuf, reason: String },
    #[error("cannot load kubeconfig {}: {source}; start the control plane (e2e/testbed/control-plane.sh up)", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("--image-bin {value:?} must look like IMAGE=/absolute/path/to/binary")]
    ImageBinFlag { value: String },
    #[error("--jitter {value} must be a finite number >= 0 (0.5 = up to 50 % extra)")]
    Jitter { value: f64 },
    #[error("cannot {action}: {source}; is the apiserver in the kubeconfig reachable?")]
    Api {
        action: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Wraps an API error with what was being done.
    pub fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Api { action, source }
    }
}
