//! A role's pods as the rollout sees them: the Kafka node id each one runs, where its
//! observer-agent listens and when it was last nudged. Pure: `crate::k8s::dereference` lists the
//! pods, this turns each into a [`KafkaPod`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::nudge::{NUDGED_AT_ANNOTATION, REVISION_ANNOTATION};
use crate::crd::{NodeId, NodeIdRule, Role};

/// Label StatefulSets (Kubernetes >= 1.28) put on each pod with its ordinal.
const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// One selected pod, reduced to what the rollout needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaPod {
    pub name: String,
    pub node_id: NodeId,
    /// `status.podIP`; absent while the pod is not scheduled or not started.
    pub ip: Option<String>,
    /// Value of the nudge annotation: the revision the pod was last nudged for.
    pub nudged_revision: Option<i64>,
    /// When the pod was last nudged.
    pub nudged_at: Option<k8s_openapi::jiff::Timestamp>,
    /// `status.phase` is Running. Only running pods must acknowledge a rollout step: a pod that
    /// is not running yet mounts the ConfigMap's current content when it starts.
    pub running: bool,
    /// `metadata.deletionTimestamp` is set (a pod on a lost node stays so until it returns).
    pub terminating: bool,
    /// `spec.nodeName`: the Node whose readiness says whether the pod can be reached.
    pub node_name: Option<String>,
    /// `metadata.uid`: keys the reconciler's memory of how long the agent has been silent (a
    /// recreated pod of the same name starts afresh).
    pub uid: Option<String>,
}

#[cfg(test)]
impl KafkaPod {
    /// A pod with only a name and a node id: not running, no IP, never nudged (tests).
    pub fn bare(name: &str, node_id: NodeId) -> Self {
        KafkaPod {
            name: name.into(),
            node_id,
            ip: None,
            nudged_revision: None,
            nudged_at: None,
            running: false,
            terminating: false,
            node_name: None,
            uid: None,
        }
    }
}

/// Why a selected pod cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DereferenceError {
    #[error("pod {pod} (selected as {role}) has no label {label}: add the label with its Kafka node id, or use nodeId.ordinalOffset")]
    MissingLabel {
        pod: String,
        role: Role,
        label: String,
    },
    #[error("pod {pod} (selected as {role}) has label {label}={value:?}, which is not a node id: set it to the pod's Kafka node.id")]
    BadLabel {
        pod: String,
        role: Role,
        label: String,
        value: String,
    },
    #[error("pod {pod} (selected as {role}) has no StatefulSet ordinal (no {POD_INDEX_LABEL} label, no -N name suffix): use nodeId.label instead of ordinalOffset")]
    NoOrdinal { pod: String, role: Role },
    #[error("pod {pod} (selected as {role}) resolves to node id {value}, which is not a Kafka node id (0 to 2147483647): fix its {source_of_id}")]
    NodeIdOutOfRange {
        pod: String,
        role: Role,
        value: i64,
        source_of_id: String,
    },
    #[error("pods {first} and {second} (selected as {role}) both resolve to node id {node_id}: fix the selector or the node id source")]
    DuplicateNodeId {
        first: String,
        second: String,
        role: Role,
        node_id: NodeId,
    },
}

/// Reads one pod's node id according to `rule`.
pub fn node_id_of(pod: &Pod, role: Role, rule: &NodeIdRule) -> Result<NodeId, DereferenceError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let labels = pod.metadata.labels.as_ref();
    match rule {
        NodeIdRule::Label(label) => {
            let value = labels.and_then(|l| l.get(label)).ok_or_else(|| {
                DereferenceError::MissingLabel {
                    pod: name.clone(),
                    role,
                    label: label.clone(),
                }
            })?;
            let id: NodeId = value
                .trim()
                .parse()
                .map_err(|_| DereferenceError::BadLabel {
                    pod: name.clone(),
                    role,
                    label: label.clone(),
                    value: value.clone(),
                })?;
            if id < 0 {
                return Err(DereferenceError::NodeIdOutOfRange {
                    pod: name,
                    role,
                    value: id.into(),
                    source_of_id: format!("label {label}"),
                });
            }
            Ok(id)
        }
        NodeIdRule::OrdinalOffset(offset) => {
            let from_label = labels
                .and_then(|l| l.get(POD_INDEX_LABEL))
                .and_then(|v| v.parse::<NodeId>().ok())
                .filter(|&n| n >= 0);
            let from_name = name
                .rsplit_once('-')
                .and_then(|(_, n)| n.parse::<NodeId>().ok());
            let ordinal = from_label
                .or(from_name)
                .ok_or(DereferenceError::NoOrdinal {
                    pod: name.clone(),
                    role,
                })?;
            ordinal
                .checked_add(*offset)
                .filter(|&id| id >= 0)
                .ok_or_else(|| DereferenceError::NodeIdOutOfRange {
                    pod: name,
                    role,
                    value: i64::from(ordinal) + i64::from(*offset),
                    source_of_id: "nodeId.ordinalOffset (ordinal + offset exceeds 2147483647)"
                        .into(),
                })
        }
    }
}

/// The Ready condition of a pod's Node: `Some(true)` for True, `Some(false)` for False or
/// Unknown (the node controller sets Unknown when the kubelet stops reporting: a lost node),
/// `None` when the Node reports no Ready condition.
pub fn node_ready(node: &Node) -> Option<bool> {
    let ready = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some(ready.status == "True")
}

/// Reduces the selected pods to [`KafkaPod`]s, sorted by node id; rejects duplicate node ids.
pub fn kafka_pods(
    pods: &[Pod],
    role: Role,
    rule: &NodeIdRule,
) -> Result<Vec<KafkaPod>, DereferenceError> {
    let mut by_id: BTreeMap<NodeId, KafkaPod> = BTreeMap::new();
    for pod in pods {
        let node_id = node_id_of(pod, role, rule)?;
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Some(first) = by_id.get(&node_id) {
            return Err(DereferenceError::DuplicateNodeId {
                first: first.name.clone(),
                second: name,
                role,
                node_id,
            });
        }
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .filter(|ip| !ip.is_empty());
        let annotation = |key: &str| pod.metadata.annotations.as_ref().and_then(|a| a.get(key));
        let nudged_revision = annotation(REVISION_ANNOTATION).and_then(|v| v.parse().ok());
        let nudged_at = annotation(NUDGED_AT_ANNOTATION).and_then(|v| v.parse().ok());
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let node_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        by_id.insert(
            node_id,
            KafkaPod {
                name,
                node_id,
                ip,
                nudged_revision,
                nudged_at,
                running,
                terminating,
                node_name,
                uid: pod.metadata.uid.clone(),
            },
        );
    }
    Ok(by_id.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use kube::api::ObjectMeta;

    fn pod(name: &str, labels: &[(&str, &str)], ip: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            status: Some(PodStatus {
                pod_ip: ip.map(Into::into),
                phase: ip.filter(|ip| !ip.is_empty()).map(|_| "Running".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn node_id_from_label() {
        let rule = NodeIdRule::Label("kafkaobserver.io/node-id".into());
        let p = pod(
            "kafka-controller-0",
            &[("kafkaobserver.io/node-id", "101")],
            Some("127.0.1.101"),
        );
        assert_eq!(node_id_of(&p, Role::Controller, &rule), Ok(101));
    }

    #[test]
    fn node_id_from_ordinal_prefers_pod_index_label() {
        let rule = NodeIdRule::OrdinalOffset(1);
        assert_eq!(
            node_id_of(&pod("kafka-broker-3", &[], None), Role::Broker, &rule),
            Ok(4)
        );
        let labelled = pod("renamed", &[(POD_INDEX_LABEL, "2")], None);
        assert_eq!(node_id_of(&labelled, Role::Broker, &rule), Ok(3));
    }

    #[test]
    fn errors_name_the_pod_and_the_fix() {
        let by_label = NodeIdRule::Label("id".into());
        let err = node_id_of(&pod("b-0", &[], None), Role::Broker, &by_label).unwrap_err();
        assert!(
            err.to_string().contains("b-0") && err.to_string().contains("ordinalOffset"),
            "{err}"
        );
        let err =
            node_id_of(&pod("b-0", &[("id", "x")], None), Role::Broker, &by_label).unwrap_err();
        assert!(matches!(err, DereferenceError::BadLabel { .. }));
        let err = node_id_of(
            &pod("standalone", &[], None),
            Role::Broker,
            &NodeIdRule::OrdinalOffset(0),
        )
        .unwrap_err();
        assert!(err.to_string().contains("nodeId.label"), "{err}");
    }

    #[test]
    fn pods_sorted_by_node_id_with_ip_and_nudge() {
        let mut b1 = pod("kafka-broker-1", &[], Some("127.0.1.2"));
        b1.metadata.annotations = Some([(REVISION_ANNOTATION.to_string(), "7".to_string())].into());
        let pods = [b1, pod("kafka-broker-0", &[], Some(""))];
        let got = kafka_pods(&pods, Role::Broker, &NodeIdRule::OrdinalOffset(1)).unwrap();
        assert_eq!(
            got,
            vec![
                KafkaPod {
                    name: "kafka-broker-0".into(),
                    node_id: 1,
                    ip: None,
                    nudged_revision: None,
                    nudged_at: None,
                    running: false,
                    terminating: false,
                    node_name: None,
                    uid: None,
                },
                KafkaPod {
                    name: "kafka-broker-1".into(),
                    node_id: 2,
                    ip: Some("127.0.1.2".into()),
                    nudged_revision: Some(7),
                    nudged_at: None,
                    running: true,
                    terminating: false,
                    node_name: None,
                    uid: None,
                },
            ]
        );
    }

    #[test]
    fn node_readiness_false_and_unknown_are_not_ready() {
        use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
        let node = |conditions: &[(&str, &str)]| Node {
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| NodeCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            node_ready(&node(&[("MemoryPressure", "False"), ("Ready", "True")])),
            Some(true)
        );
        assert_eq!(node_ready(&node(&[("Ready", "False")])), Some(false));
        assert_eq!(node_ready(&node(&[("Ready", "Unknown")])), Some(false));
        assert_eq!(node_ready(&node(&[("MemoryPressure", "False")])), None);
        assert_eq!(node_ready(&Node::default()), None);
    }

    #[test]
    fn a_deleted_pod_is_terminating_and_keeps_its_node_and_uid() {
        use k8s_openapi::api::core::v1::PodSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let mut p = pod("kafka-broker-0", &[], Some("127.0.1.2"));
        p.metadata.deletion_timestamp = Some(Time("2026-12-03T09:00:00Z".parse().unwrap()));
        p.metadata.uid = Some("u-1".into());
        p.spec = Some(PodSpec {
            node_name: Some("zone-b".into()),
            ..Default::default()
        });
        let got = kafka_pods(&[p], Role::Broker, &NodeIdRule::OrdinalOffset(1)).unwrap();
        assert!(got[0].terminating && got[0].running);
        assert_eq!(got[0].node_name.as_deref(), Some("zone-b"));
        assert_eq!(got[0].uid.as_deref(), Some("u-1"));
    }

    #[test]
    fn node_ids_outside_kafkas_range_are_refused() {
        let by_label = NodeIdRule::Label("id".into());
        let err =
            node_id_of(&pod("b-0", &[("id", "-1")], None), Role::Broker, &by_label).unwrap_err();
        assert!(
            matches!(err, DereferenceError::NodeIdOutOfRange { value: -1, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("fix its label id"), "{err}");
        // Too large for an int32: not a node id at all.
        assert!(matches!(
            node_id_of(
                &pod("b-0", &[("id", "2147483648")], None),
                Role::Broker,
                &by_label
            ),
            Err(DereferenceError::BadLabel { .. })
        ));
        let offset = NodeIdRule::OrdinalOffset(i32::MAX);
        assert_eq!(
            node_id_of(&pod("b-0", &[], None), Role::Broker, &offset),
            Ok(i32::MAX)
        );
        let err = node_id_of(&pod("b-1", &[], None), Role::Broker, &offset).unwrap_err();
        assert!(
            matches!(
                err,
                DereferenceError::NodeIdOutOfRange {
                    value: 2147483648,
                    ..
                }
            ),
            "{err:?}"
        );
        // A negative pod-index label is ignored; the name's ordinal is used.
        let labelled = pod("b-2", &[(POD_INDEX_LABEL, "-5")], None);
        assert_eq!(
            node_id_of(&labelled, Role::Broker, &NodeIdRule::OrdinalOffset(0)),
            Ok(2)
        );
    }

    #[test]
    fn duplicate_node_ids_are_rejected() {
        let rule = NodeIdRule::Label("id".into());
        let pods = [
            pod("a", &[("id", "1")], None),
            pod("b", &[("id", "1")], None),
        ];
        let err = kafka_pods(&pods, Role::Broker, &rule).unwrap_err();
        assert_eq!(
            err,
            DereferenceError::DuplicateNodeId {
                first: "a".into(),
                second: "b".into(),
                role: Role::Broker,
                node_id: 1
            }
        );
    }
}
