//! The copies of one ObserverSet's status, one per member cluster (one copy in a single-cluster
//! install): read in parallel, written in parallel, each write on the `resourceVersion` of that
//! copy's last read or write. Which copy to resume from and whether a write counts are
//! `crate::reconciler::copies`' (pure).

use std::collections::BTreeMap;

use kube::api::Api;
use serde_json::Value;

use super::error::{Error, Result};
use super::status;
use crate::crd::ObserverSet;
use crate::reconciler::copies::{self, Copy, Read};

/// One member's copy: the ObserverSet of that name in the member's namespace, through the
/// member's client.
#[derive(Clone)]
pub struct StatusCopy {
    pub member: String,
    pub api: Api<ObserverSet>,
}

/// Each member's `resourceVersion` as last read or written: the precondition of its next write.
/// A member absent here (not answered, or its write lost its precondition) is read again before
/// it is written.
pub type Versions = BTreeMap<String, Option<String>>;

#[derive(Clone)]
pub struct StatusCopies {
    copies: Vec<StatusCopy>,
}

impl StatusCopies {
    pub fn new(copies: Vec<StatusCopy>) -> Self {
        StatusCopies { copies }
    }

    /// The one copy of a single-cluster install.
    pub fn local(api: Api<ObserverSet>) -> Self {
        Self::new(vec![StatusCopy {
            member: crate::rollout::LOCAL.to_string(),
            api,
        }])
    }

    pub fn members(&self) -> usize {
        self.copies.len()
    }

    /// Every member's copy of `name`, in parallel (each call bounded by its client's timeout).
    pub async fn read(&self, name: &str) -> Vec<Copy> {
        let reads = self.copies.iter().map(|c| async move {
            let read = match c.api.get_opt(name).await {
                Ok(Some(o)) => Read::Answered {
                    status: o.status,
                    version: o.metadata.resource_version,
                },
                Ok(None) => Read::Answered {
                    status: None,
                    version: None,
                },
                Err(e) => Read::Unanswered(super::error::brief(&e)),
            };
            Copy {
                member: c.member.clone(),
                read,
            }
        });
        futures::future::join_all(reads).await
    }

    /// Writes `body` as field manager `manager` to every copy with a known version, in
    /// parallel, and updates `versions`. Counts only on a majority of all members
    /// ([`copies::persisted`]); when it falls short because copies changed under it, the error
    /// is [`Error::Superseded`] (the reconcile reads again at once), otherwise
    /// [`Error::NotPersisted`].
    pub async fn write(
        &self,
        name: &str,
        manager: &str,
        body: &Value,
        versions: &mut Versions,
    ) -> Result<()> {
        let writes = self.copies.iter().map(|c| {
            let expected = versions.get(&c.member).cloned();
            async move {
                let result = match expected {
                    Some(Some(version)) => {
                        status::apply(&c.api, name, manager, body, Some(&version)).await
                    }
                    Some(None) => Err(Error::NotPersisted {
                        object: name.to_string(),
                        reason: "the ObserverSet does not exist in this member".into(),
                    }),
                    None => Err(Error::NotPersisted {
                        object: name.to_string(),
                        reason: "not read since its last failure".into(),
                    }),
                };
                (c.member.clone(), result)
            }
        });
        let mut results = futures::future::join_all(writes).await;
        // One copy (a single-cluster install): its own error, as the apiserver gave it.
        if let [(member, result)] = results.as_mut_slice() {
            let result = std::mem::replace(result, Ok(None));
            return match result {
                Ok(version) => {
                    versions.insert(member.clone(), version);
                    Ok(())
                }
                Err(e) => {
                    versions.remove(member.as_str());
                    Err(e)
                }
            };
        }
        let mut refused = Vec::new();
        let mut superseded = false;
        let mut accepted = 0;
        for (member, result) in results {
            match result {
                Ok(version) => {
                    accepted += 1;
                    versions.insert(member, version);
                }
                Err(e) => {
                    superseded |= matches!(e, Error::Superseded { .. });
                    versions.remove(&member);
                    refused.push((member, e.to_string()));
                }
            }
        }
        match copies::persisted(self.copies.len(), accepted, &refused) {
            Ok(()) => Ok(()),
            Err(_) if superseded => Err(Error::Superseded {
                object: format!(
                    "the status of ObserverSet {name} in {}",
                    members_of(&refused)
                ),
            }),
            Err(e) => Err(Error::NotPersisted {
                object: name.to_string(),
                reason: e.to_string(),
            }),
        }
    }
}

fn members_of(refused: &[(String, String)]) -> String {
    let names: Vec<&str> = refused
        .iter()
        .map(|(m, _)| {
            if m.is_empty() {
                "this cluster"
            } else {
                m.as_str()
            }
        })
        .collect();
    names.join(", ")
}
