//! The bed's Kafka node table and node control. The cluster is the example of `examples/kafka/`
//! (two StatefulSets in namespace [`KAFKA_NAMESPACE`] on the bed's real node `koo-node`, run by
//! `e2e/testbed/kafka.sh`): node id = pod ordinal + 101 for controllers, + 1 for brokers.
//! Addresses are pod IPs, assigned by the node when a pod starts: they are looked up through the
//! API each time ([`KafkaNode::pod_ip`]), never fixed in the table.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::bed::TestBed;
use crate::error::Error;
use crate::hold::ManualPolicy;

/// Namespace of the bed's Kafka pods.
pub const KAFKA_NAMESPACE: &str = "kafka";
/// Dedicated KRaft controllers (pods `kafka-controller-0..2`).
pub const CONTROLLER_IDS: [i32; 3] = [101, 102, 103];
/// Brokers (pods `kafka-broker-0..3`); broker 4 is the bed's default observer.
pub const BROKER_IDS: [i32; 4] = [1, 2, 3, 4];
/// The port of each pod's `observer-agent` sidecar (`GET /observer-ids` on the pod IP).
pub const AGENT_PORT: u16 = 9180;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Controller,
    Broker,
}

impl Role {
    /// `controller` or `broker`, as in labels and ConfigMap names.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Broker => "broker",
        }
    }
}

/// One Kafka node of the bed and the pod that runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaNode {
    pub id: i32,
    pub role: Role,
    /// `kafka-controller-<n>` or `kafka-broker-<n>` in namespace [`KAFKA_NAMESPACE`].
    pub pod: String,
    /// The StatefulSet ordinal `<n>` of [`KafkaNode::pod`].
    pub ordinal: i32,
    /// The Kafka listener on the pod IP: 9093 for controllers, 9092 for brokers.
    pub port: u16,
}

impl KafkaNode {
    /// The node with this id, or [`Error::UnknownNode`].
    pub fn get(id: i32) -> Result<Self, Error> {
        let (role, ordinal, port) = if CONTROLLER_IDS.contains(&id) {
            (Role::Controller, id - 101, 9093)
        } else if BROKER_IDS.contains(&id) {
            (Role::Broker, id - 1, 9092)
        } else {
            return Err(Error::UnknownNode(id));
        };
        Ok(Self {
            id,
            role,
            pod: format!("kafka-{}-{ordinal}", role.as_str()),
            ordinal,
            port,
        })
    }

    /// All seven nodes, controllers first.
    pub fn all() -> Vec<Self> {
        CONTROLLER_IDS
            .iter()
            .chain(BROKER_IDS.iter())
            .map(|id| Self::get(*id).expect("ids from the table"))
            .collect()
    }

    /// The nodes of one role.
    pub fn of_role(role: Role) -> Vec<Self> {
        Self::all().into_iter().filter(|n| n.role == role).collect()
    }

    /// The current IP of the node's pod, from the API ([`Error::NoPodIp`] while the pod is
    /// absent or has none, e.g. Pending after `kafka.sh stop`). A replaced pod has a new one.
    pub async fn pod_ip(&self, client: &kube::Client) -> Result<IpAddr, Error> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), KAFKA_NAMESPACE);
        let no_ip = |reason: String| Error::NoPodIp {
            pod: self.pod.clone(),
            reason,
        };
        let pod = pods
            .get_opt(&self.pod)
            .await
            .map_err(|e| no_ip(e.to_string()))?
            .ok_or_else(|| no_ip("no such pod".into()))?;
        let ip = pod
            .status
            .and_then(|s| s.pod_ip)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| no_ip("no status.podIP".into()))?;
        ip.parse().map_err(|_| no_ip(format!("podIP {ip:?}")))
    }

    /// `podIP:port`: the node's own Kafka listener (what it advertises), looked up now.
    pub async fn endpoint(&self, client: &kube::Client) -> Result<String, Error> {
        Ok(format!("{}:{}", self.pod_ip(client).await?, self.port))
    }

    /// `podIP:9180`: the pod's observer agent, looked up now.
    pub async fn agent_address(&self, client: &kube::Client) -> Result<String, Error> {
        Ok(format!("{}:{AGENT_PORT}", self.pod_ip(client).await?))
    }
}

/// A `kafka.sh` node command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    /// Release the node's bed node (its hold label removed) and wait until the (stopped) node's
    /// pod is Ready.
    Start,
    /// A lost zone: label its bed node to hold the namespace's pods, SIGKILL the JVM,
    /// force-delete the pod; its replacement stays Pending until `start`.
    Stop,
    /// SIGKILL of the JVM in its container (a crash): the kubelet restarts the container.
    Kill,
    /// Graceful: delete the pod (controlled shutdown), wait for its replacement Ready.
    Restart,
}

impl NodeAction {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeAction::Start => "start",
            NodeAction::Stop => "stop",
            NodeAction::Kill => "kill",
            NodeAction::Restart => "restart",
        }
    }
}

/// How a node guarded by [`RestartOnDrop`] went down, hence how it comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Down {
    /// `kafka.sh stop`: down until `kafka.sh start`.
    Stopped,
    /// `kafka.sh kill`: the kubelet restarts the container by itself; coming back means waiting
    /// for the kafka container's restart count to pass this value and the pod to be Ready.
    Killed { restarts_before: i32 },
}

/// Brings a node back when dropped, also when the test panics: returned by
/// [`TestBed::stop_node`] (runs `kafka.sh start`) and [`TestBed::kill_node`] (waits until the
/// kubelet has restarted the container and the pod is Ready), so a failing test never leaves the
/// shared bed short of a node. Call [`RestartOnDrop::start`] to bring it back earlier and check it.
/// Then gives back the promotion policy of the bed's ObserverSet, held at `Manual` while the node
/// was down (see `hold.rs`), once no partition is under min ISR any more.
#[must_use = "dropping it at once brings the node back at once"]
pub struct RestartOnDrop<'a> {
    bed: &'a TestBed,
    id: i32,
    down: Down,
    hold: Option<ManualPolicy<'a>>,
    armed: bool,
}

impl<'a> RestartOnDrop<'a> {
    pub(crate) fn new(bed: &'a TestBed, id: i32, down: Down, hold: ManualPolicy<'a>) -> Self {
        Self {
            bed,
            id,
            down,
            hold: Some(hold),
            armed: true,
        }
    }

    /// The node id this guard brings back.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// Brings the node back now and waits until its pod is Ready.
    pub fn start(mut self) -> Result<(), Error> {
        self.armed = false;
        self.bring_back()
    }

    fn bring_back(&mut self) -> Result<(), Error> {
        let back = match self.down {
            Down::Stopped => self.bed.kafka_node_action(NodeAction::Start, self.id),
            Down::Killed { restarts_before } => self
                .bed
                .wait_restarted(self.id, restarts_before)
                .map(|_| ()),
        };
        let given_back = self.hold.take().map_or(Ok(()), ManualPolicy::release);
        back.and(given_back)
    }
}

impl Drop for RestartOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(error) = self.bring_back() {
                eprintln!(
                    "koo-testbed: Kafka node {} did not come back: {error}",
                    self.id
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_table_matches_the_statefulsets() {
        let b0 = KafkaNode::get(1).unwrap();
        assert_eq!(
            (b0.pod.as_str(), b0.ordinal, b0.port, b0.role),
            ("kafka-broker-0", 0, 9092, Role::Broker)
        );
        let b3 = KafkaNode::get(4).unwrap();
        assert_eq!((b3.pod.as_str(), b3.ordinal), ("kafka-broker-3", 3));
        let c2 = KafkaNode::get(103).unwrap();
        assert_eq!(
            (c2.pod.as_str(), c2.ordinal, c2.port, c2.role),
            ("kafka-controller-2", 2, 9093, Role::Controller)
        );
        assert!(matches!(KafkaNode::get(5), Err(Error::UnknownNode(5))));
        assert!(matches!(KafkaNode::get(100), Err(Error::UnknownNode(100))));
        assert_eq!(KafkaNode::all().len(), 7);
        let controllers: Vec<i32> = KafkaNode::of_role(Role::Controller)
            .iter()
            .map(|n| n.id)
            .collect();
        assert_eq!(controllers, CONTROLLER_IDS);
        let brokers: Vec<String> = KafkaNode::of_role(Role::Broker)
            .into_iter()
            .map(|n| n.pod)
            .collect();
        assert_eq!(
            brokers,
            [
                "kafka-broker-0",
                "kafka-broker-1",
                "kafka-broker-2",
                "kafka-broker-3"
            ]
        );
    }
}
