//! Which ObserverSets a pod event concerns: those whose controller or broker selector picks the
//! pod (pure). A pod that starts, stops or changes its labels can change a rollout step.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;

use crate::crd::{ObserverSet, RoleNodes};

/// The ObserverSets in the pod's namespace with a selector matching the pod's labels.
pub fn observer_sets_selecting(
    sets: &[Arc<ObserverSet>],
    pod: &Pod,
) -> Vec<ObjectRef<ObserverSet>> {
    let labels = pod.labels();
    let namespace = pod.namespace();
    sets.iter()
        .filter(|set| set.namespace() == namespace)
        .filter(|set| set.spec.role_nodes().any(|role| selects(role, labels)))
        .map(|set| ObjectRef::from_obj(set.as_ref()))
        .collect()
}

pub(super) fn selects(
    role: &RoleNodes,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    let sel = &role.selector;
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    // An empty selector would match everything; validation rejects it, so match nothing here.
    !empty && Selector::try_from(sel.clone()).is_ok_and(|s| s.matches(labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{KafkaConnection, NodeIdSource, NodesSpec, ObserverSetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::api::ObjectMeta;

    fn role(component: &str) -> RoleNodes {
        RoleNodes {
            selector: LabelSelector {
                match_labels: Some(
                    [(
                        "app.kubernetes.io/component".to_string(),
                        component.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            node_id: NodeIdSource {
                label: None,
                ordinal_offset: Some(0),
            },
            combined: false,
        }
    }

    fn set(name: &str, namespace: &str) -> Arc<ObserverSet> {
        let spec = ObserverSetSpec {
            kafka: KafkaConnection {
                bootstrap_servers: "127.0.1.1:9092".into(),
                tls: None,
                sasl: None,
            },
            nodes: Some(NodesSpec {
                controllers: Some(role("controller")),
                brokers: Some(role("broker")),
            }),
            clusters: None,
            observers: vec![4],
            promotion: Default::default(),
            rollout: Default::default(),
            deletion_policy: Default::default(),
        };
        let mut obs = ObserverSet::new(name, spec);
        obs.metadata.namespace = Some(namespace.into());
        Arc::new(obs)
    }

    fn pod(namespace: &str, component: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some(namespace.into()),
                labels: Some(
                    [(
                        "app.kubernetes.io/component".to_string(),
                        component.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn maps_pods_to_the_sets_selecting_them_in_their_namespace() {
        let sets = [set("a", "kafka"), set("b", "other")];
        let hit = observer_sets_selecting(&sets, &pod("kafka", "broker"));
        assert_eq!(
            hit.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        assert!(observer_sets_selecting(&sets, &pod("kafka", "zookeeper")).is_empty());
    }
}
