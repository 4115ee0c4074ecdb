//! The Node object and its heartbeats.
//!
//! The kubelet registers its Node and then proves liveness two ways: a Lease in
//! `kube-node-lease` renewed every 10 s (a quarter of its 40 s duration) and the
//! Node's status conditions. Without them kube-controller-manager's node
//! lifecycle controller marks the node NotReady, taints it, and the taint
//! manager evicts its pods; without the Node at all, pod GC deletes them.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Value};

use crate::error::Error;

const FIELD_MANAGER: &str = "kubelet-standin";
const LEASE_NAMESPACE: &str = "kube-node-lease";
const LEASE_DURATION_SECONDS: i32 = 40;

/// Heartbeat interval (the kubelet's `nodeStatusUpdateFrequency` and lease renewal).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

/// Registers and heartbeats one Node.
pub struct NodeAgent {
    nodes: Api<Node>,
    leases: Api<Lease>,
    name: String,
    address: Ipv4Addr,
    /// When Ready last became true, kept as the conditions' transition time.
    ready_since: Timestamp,
}

impl NodeAgent {
    pub fn new(client: Client, name: &str, address: Ipv4Addr) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            leases: Api::namespaced(client, LEASE_NAMESPACE),
            name: name.to_string(),
            address,
            ready_since: Timestamp::now(),
        }
    }

    /// Creates the Node if absent (server-side apply) and posts its first status.
    pub async fn register(&self) -> Result<(), Error> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let node = self
            .nodes
            .patch(&self.name, &params, &Patch::Apply(node_object(&self.name)))
            .await
            .map_err(Error::api(format!("register node {}", self.name)))?;
        tracing::info!(node = %self.name, uid = ?node.uid(), "node registered");
        self.heartbeat().await
    }

    /// Posts Ready status and renews the Lease.
    pub async fn heartbeat(&self) -> Result<(), Error> {
        let now = Timestamp::now();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let status = node_status(&self.name, self.address, self.ready_since, now);
        let node = self
            .nodes
            .patch_status(&self.name, &params, &Patch::Apply(status))
            .await
            .map_err(Error::api(format!("post status of node {}", self.name)))?;
        let lease = lease_object(&self.name, node.uid().as_deref(), now);
        self.leases
            .patch(&self.name, &params, &Patch::Apply(lease))
            .await
            .map_err(Error::api(format!(
                "renew lease {LEASE_NAMESPACE}/{}",
                self.name
            )))?;
        Ok(())
    }

    /// Heartbeats forever; failures are logged and retried on the next beat.
    pub async fn run(self) {
        let mut ticker = tokio::time::interval(HEARTBEAT_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Err(error) = self.heartbeat().await {
                tracing::warn!(node = %self.name, %error, "node heartbeat failed");
            }
        }
    }
}

fn node_object(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": go_arch(),
            },
            "annotations": {
                "kafkaobserver.io/kubelet": "stand-in (e2e/kubelet-standin), not a real kubelet",
            },
        },
    })
}

fn node_status(name: &str, address: Ipv4Addr, ready_since: Timestamp, now: Timestamp) -> Value {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": second(now), "lastTransitionTime": second(ready_since),
        })
    };
    let resources =
        json!({"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "20Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": address.to_string()},
                {"type": "Hostname", "address": name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet stand-in does not measure memory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet stand-in does not measure disk"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet stand-in does not measure pids"),
                condition("Ready", "True", "KubeletReady", "kubelet stand-in is posting ready status"),
            ],
        },
    })
}

fn lease_object(name: &str, node_uid: Option<&str>, now: Timestamp) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        },
    });
    // Like the kubelet: the Lease goes away with its Node.
    if let Some(uid) = node_uid {
        lease["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]);
    }
    lease
}

fn second(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Kubernetes (Go) names for the architecture label.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_ready_with_the_loopback_address_and_fresh_heartbeat() {
        let since = Timestamp::from_second(1_000).unwrap();
        let now = Timestamp::from_second(2_000).unwrap();
        let status = node_status("testbed-node", Ipv4Addr::LOCALHOST, since, now);
        let conditions = status["status"]["conditions"].as_array().unwrap();
        let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["lastHeartbeatTime"], "1970-01-01T00:33:20Z");
        assert_eq!(ready["lastTransitionTime"], "1970-01-01T00:16:40Z");
        assert_eq!(status["status"]["addresses"][0]["address"], "127.0.0.1");
        // The typed API accepts what we send.
        let node: Node = serde_json::from_value(status).unwrap();
        assert_eq!(node.status.unwrap().conditions.unwrap().len(), 4);
    }

    #[test]
    fn lease_is_owned_by_the_node_and_renewed_with_microseconds() {
        let now = Timestamp::from_second(2_000).unwrap();
        let lease = lease_object("testbed-node", Some("uid-1"), now);
        assert_eq!(lease["spec"]["renewTime"], "1970-01-01T00:33:20.000000Z");
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        let typed: Lease = serde_json::from_value(lease).unwrap();
        assert_eq!(typed.spec.unwrap().lease_duration_seconds, Some(40));
    }
}
