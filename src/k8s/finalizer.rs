//! Deletion of an ObserverSet. Deleting the observer lists would promote every observer at once
//! (the patched Kafka treats a missing file as "no observers"), so:
//! - Retain (default): remove our owner references; the ConfigMaps and their content stay.
//! - Delete: delete the ConfigMaps, but only once no pod mounts them; until then the finalizer
//!   stays and a Warning event says which pods block it. Only a ConfigMap this set owns (an
//!   owner reference with its uid, which the operator puts on every list it writes) is
//!   deleted: a same-named ConfigMap someone else made is left alone, and the event says so.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};

use super::config_map;
use super::error::{Error, Result};
use crate::crd::{DeletionPolicy, Role};
use crate::rollout::config_map::{config_map_name, pods_mounting};

/// Finalizer the operator puts on every ObserverSet it manages.
pub const FINALIZER: &str = "kafkaobserver.io/observer-lists";

/// What the cleanup did, for the event.
#[derive(Debug, PartialEq, Eq)]
pub enum Cleanup {
    Retained(Vec<String>),
    Deleted {
        deleted: Vec<String>,
        /// Same-named ConfigMaps without this set's owner reference: kept.
        not_owned: Vec<String>,
    },
}

/// What the Delete policy does with one ConfigMap name (pure).
#[derive(Debug, PartialEq, Eq)]
pub enum Fate {
    /// Nothing by that name.
    Absent,
    /// Ours: delete the object of this uid.
    Delete(String),
    /// Someone else's: keep it.
    NotOwned,
}

/// A ConfigMap is deleted only when it carries an owner reference with the set's uid.
pub fn fate(config_map: Option<&ConfigMap>, set_uid: &str) -> Fate {
    let Some(cm) = config_map else {
        return Fate::Absent;
    };
    let owned = cm
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == set_uid);
    match (owned, cm.metadata.uid.clone()) {
        (true, Some(uid)) => Fate::Delete(uid),
        // Without a uid there is no precondition to delete exactly this object.
        _ => Fate::NotOwned,
    }
}

/// Releases or deletes both roles' ConfigMaps according to `policy`.
pub async fn clean_up(
    config_maps: &Api<ConfigMap>,
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    uid: &str,
    policy: DeletionPolicy,
) -> Result<Cleanup> {
    let names: Vec<String> = Role::ROLLOUT_ORDER
        .iter()
        .map(|&role| config_map_name(name, role))
        .collect();
    match policy {
        DeletionPolicy::Retain => {
            for cm in &names {
                config_map::release(config_maps, cm, uid).await?;
            }
            Ok(Cleanup::Retained(names))
        }
        DeletionPolicy::Delete => {
            let all = pods
                .list(&ListParams::default())
                .await
                .map_err(Error::kube(format!("listing pods in {namespace}")))?;
            let blocking: Vec<String> = names
                .iter()
                .flat_map(|cm| {
                    pods_mounting(&all.items, cm)
                        .into_iter()
                        .map(move |pod| format!("{pod} mounts {cm}"))
                })
                .collect();
            if !blocking.is_empty() {
                return Err(Error::Finalizer {
                    object: format!("{namespace}/{name}"),
                    message: format!(
                        "not deleting the observer lists while pods mount them ({}): deleting them would promote every observer; delete those pods first or set deletionPolicy: Retain",
                        blocking.join(", ")
                    ),
                });
            }
            let (mut deleted, mut not_owned) = (Vec::new(), Vec::new());
            for cm in &names {
                let current = config_maps
                    .get_opt(cm)
                    .await
                    .map_err(Error::kube(format!("reading ConfigMap {cm}")))?;
                match fate(current.as_ref(), uid) {
                    Fate::Absent => {}
                    Fate::Delete(cm_uid) => {
                        config_map::delete(config_maps, cm, &cm_uid).await?;
                        deleted.push(cm.clone());
                    }
                    Fate::NotOwned => not_owned.push(cm.clone()),
                }
            }
            Ok(Cleanup::Deleted { deleted, not_owned })
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;

    fn config_map(uid: Option<&str>, owners: &[&str]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("kafka-observers-broker".into()),
                uid: uid.map(Into::into),
                owner_references: Some(
                    owners
                        .iter()
                        .map(|&o| OwnerReference {
                            uid: o.into(),
                            kind: "ObserverSet".into(),
                            ..OwnerReference::default()
                        })
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn only_a_config_map_the_set_owns_is_deleted() {
        assert_eq!(fate(None, "set"), Fate::Absent);
        assert_eq!(
            fate(Some(&config_map(Some("cm"), &["other", "set"])), "set"),
            Fate::Delete("cm".into())
        );
        for foreign in [
            config_map(Some("cm"), &[]),
            config_map(Some("cm"), &["other-set"]),
            config_map(None, &["set"]),
            ConfigMap::default(),
        ] {
            assert_eq!(fate(Some(&foreign), "set"), Fate::NotOwned, "{foreign:?}");
        }
    }
}
