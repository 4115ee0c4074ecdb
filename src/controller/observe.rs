//! Dereference: what the validated ObserverSet refers to, read from the API and reduced to the
//! planner's inputs (pods per role, the live ConfigMaps, the agents' answers).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use kube::core::Selector;

use crate::crd::{AckMode, Role, ValidatedObserverSet};
use crate::kube::acknowledgement::{AgentClient, Expectation as AgentExpectation};
use crate::kube::config_map::{self, config_map_name, DATA_KEY};
use crate::kube::dereference::{list_role_pods, KafkaPod};
use crate::kube::{Error, Result};
use crate::plan::{Acknowledgements, Expectation, LiveList, PodObservation, RoleObservation};

/// One configured role as found in the cluster.
#[derive(Clone, Debug)]
pub struct ObservedRole {
    pub role: Role,
    pub pods: Vec<KafkaPod>,
    pub config_map: Option<ConfigMap>,
}

impl ObservedRole {
    /// The planner's view (pure).
    pub fn to_plan(&self) -> RoleObservation {
        RoleObservation {
            role: self.role,
            pods: self
                .pods
                .iter()
                .map(|p| PodObservation {
                    name: p.name.clone(),
                    running: p.running,
                    nudged_revision: p.nudged_revision,
                    nudged_at: p.nudged_at,
                })
                .collect(),
            live: self.config_map.as_ref().map(live_list),
        }
    }
}

/// Revision annotation and content of a live ConfigMap (pure).
pub fn live_list(cm: &ConfigMap) -> LiveList {
    LiveList {
        revision: config_map::revision_of(cm),
        content: cm.data.as_ref().and_then(|d| d.get(DATA_KEY)).cloned(),
    }
}

/// Pods and ConfigMap of every configured role, in rollout order.
pub async fn roles(
    obs: &ValidatedObserverSet,
    pods: &Api<Pod>,
    config_maps: &Api<ConfigMap>,
) -> Result<Vec<ObservedRole>> {
    let mut observed = Vec::with_capacity(obs.roles.len());
    for selection in &obs.roles {
        let selector =
            Selector::try_from(selection.selector.clone()).map_err(|e| Error::Selector {
                object: format!("{}/{}", obs.namespace, obs.name),
                role: selection.role,
                message: e.to_string(),
            })?;
        let role_pods = list_role_pods(pods, selection.role, &selector, &selection.node_id).await?;
        let name = config_map_name(&obs.name, selection.role);
        let config_map = config_maps
            .get_opt(&name)
            .await
            .map_err(Error::kube(format!(
                "reading ConfigMap {}/{name}",
                obs.namespace
            )))?;
        observed.push(ObservedRole {
            role: selection.role,
            pods: role_pods,
            config_map,
        });
    }
    Ok(observed)
}

/// Agent mode: asks the running pods of the awaited role whether they read the expected
/// revision and ids. Time mode needs no answers.
pub async fn acknowledgements(
    obs: &ValidatedObserverSet,
    observed: &[ObservedRole],
    awaited: Option<Expectation>,
    agents: &AgentClient,
) -> Option<Acknowledgements> {
    let expectation = awaited?;
    if obs.rollout.acknowledgement != AckMode::Agent {
        return None;
    }
    let role = observed.iter().find(|o| o.role == expectation.role)?;
    let running: Vec<KafkaPod> = role.pods.iter().filter(|p| p.running).cloned().collect();
    let expected = AgentExpectation {
        observer_set: format!("{}/{}", obs.namespace, obs.name),
        revision: expectation.revision,
        ids: expectation.ids.iter().copied().collect(),
    };
    let verdicts = agents
        .verdicts(&running, obs.rollout.agent_port, &expected)
        .await;
    for (pod, verdict) in verdicts.iter().filter(|(_, v)| !v.is_acknowledged()) {
        tracing::debug!(
            pod,
            ?verdict,
            revision = expectation.revision,
            "not acknowledged yet"
        );
    }
    let pods: BTreeSet<String> = verdicts
        .into_iter()
        .filter(|(_, v)| v.is_acknowledged())
        .map(|(pod, _)| pod)
        .collect();
    Some(Acknowledgements { expectation, pods })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    #[test]
    fn live_list_reads_revision_and_content_and_tolerates_hand_made_maps() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                annotations: Some(
                    [(config_map::ANNOTATION_REVISION.to_string(), "7".to_string())].into(),
                ),
                ..Default::default()
            },
            data: Some([(DATA_KEY.to_string(), "4\n".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(
            live_list(&cm),
            LiveList {
                revision: Some(7),
                content: Some("4\n".into())
            }
        );
        // The test bed seeds its lists without annotation: revision unknown, content kept.
        let seeded = ConfigMap {
            data: cm.data.clone(),
            ..Default::default()
        };
        assert_eq!(
            live_list(&seeded),
            LiveList {
                revision: None,
                content: Some("4\n".into())
            }
        );
        assert_eq!(
            live_list(&ConfigMap::default()),
            LiveList {
                revision: None,
                content: None
            }
        );
    }
}
