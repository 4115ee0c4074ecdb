//! The bed's Kafka node table (`e2e/README.md`, "Kafka nodes and their pods") and node control.

use std::net::Ipv4Addr;

use crate::bed::TestBed;
use crate::error::Error;

/// Namespace of the bed's Kafka pods.
pub const KAFKA_NAMESPACE: &str = "kafka";
/// Dedicated KRaft controllers (pods `kafka-controller-0..2`).
pub const CONTROLLER_IDS: [i32; 3] = [101, 102, 103];
/// Brokers (pods `kafka-broker-0..3`); broker 4 is the bed's default observer.
pub const BROKER_IDS: [i32; 4] = [1, 2, 3, 4];

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

/// One Kafka node of the bed and the pod that stands for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaNode {
    pub id: i32,
    pub role: Role,
    /// `kafka-controller-<n>` or `kafka-broker-<n>` in namespace [`KAFKA_NAMESPACE`].
    pub pod: String,
    /// `127.0.1.<id>`: the node's listener and its pod's IP.
    pub address: Ipv4Addr,
    /// 9093 for controllers, 9092 for brokers.
    pub port: u16,
}

impl KafkaNode {
    /// The node with this id, or [`Error::UnknownNode`].
    pub fn get(id: i32) -> Result<Self, Error> {
        let (role, pod, port) = if CONTROLLER_IDS.contains(&id) {
            (
                Role::Controller,
                format!("kafka-controller-{}", id - 101),
                9093,
            )
        } else if BROKER_IDS.contains(&id) {
            (Role::Broker, format!("kafka-broker-{}", id - 1), 9092)
        } else {
            return Err(Error::UnknownNode(id));
        };
        Ok(Self {
            id,
            role,
            pod,
            address: Ipv4Addr::new(127, 0, 1, id as u8),
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

    /// `address:port`.
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.address, self.port)
    }
}

/// A `kafka.sh` node command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    /// Start if not running and wait for "Kafka Server started".
    Start,
    /// SIGTERM (controlled shutdown) and wait.
    Stop,
    /// `kill -9`.
    Kill,
    /// Stop, then start and wait.
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

/// Starts a node again when dropped, also when the test panics: returned by
/// [`TestBed::kill_node`] and [`TestBed::stop_node`] so a failing drill never leaves the
/// shared bed short of a node. Call [`RestartOnDrop::start`] to restart earlier and check it.
#[must_use = "dropping it at once restarts the node at once"]
pub struct RestartOnDrop<'a> {
    bed: &'a TestBed,
    id: i32,
    armed: bool,
}

impl<'a> RestartOnDrop<'a> {
    pub(crate) fn new(bed: &'a TestBed, id: i32) -> Self {
        Self {
            bed,
            id,
            armed: true,
        }
    }

    /// Starts the node now and waits until it is started.
    pub fn start(mut self) -> Result<(), Error> {
        self.armed = false;
        self.bed.kafka_node_action(NodeAction::Start, self.id)
    }
}

impl Drop for RestartOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(error) = self.bed.kafka_node_action(NodeAction::Start, self.id) {
                eprintln!(
                    "koo-testbed: could not restart Kafka node {}: {error}",
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
    fn node_table_matches_the_layout_contract() {
        let b0 = KafkaNode::get(1).unwrap();
        assert_eq!(
            (b0.pod.as_str(), b0.endpoint().as_str()),
            ("kafka-broker-0", "127.0.1.1:9092")
        );
        let c2 = KafkaNode::get(103).unwrap();
        assert_eq!(
            (c2.pod.as_str(), c2.role),
            ("kafka-controller-2", Role::Controller)
        );
        assert_eq!(c2.endpoint(), "127.0.1.103:9093");
        assert!(matches!(KafkaNode::get(5), Err(Error::UnknownNode(5))));
        assert_eq!(KafkaNode::all().len(), 7);
    }
}
