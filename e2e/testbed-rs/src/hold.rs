//! The ObserverSet owning the bed's observer lists (`kafka/kafka` once the promotion drill, the
//! demo or tests/integration/operator_rollout.rs applied the example) has an automatic promotion policy. A test
//! that takes a Kafka node down would make it act: broker 4 promoted on the real cluster, and
//! that promotion may outlive the test (the demotion waits for leaderships to leave broker 4,
//! which never happens for partitions whose preferred leader it is). So, as the Kafka drills and
//! the Kafka bench do (e2e/drills/kafka/lib.sh `take_manual_policy`), the policy is set to
//! `Manual` while a node is down and given back once no partition is under min ISR or without a
//! leader any more.
//!
//! Holds nest within a process: the first [`ManualPolicy`] takes the policy, the last one to go
//! gives it back. A bench that measures from the moment it takes a node down holds the policy
//! itself first ([`TestBed::hold_manual_policy`]), so the node commands then cost no API calls.

use std::sync::Mutex;
use std::time::Duration;

use crate::bed::TestBed;
use crate::error::Error;
use crate::kafka::KAFKA_NAMESPACE;
use crate::wait::wait_until;

/// The ConfigMap whose labels name the ObserverSet that owns the bed's observer lists.
const OWNED_CONFIGMAP: &str = "kafka-observers-controller";
/// How long a give-back waits for the cluster to be healthy again.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(120);

/// An automatic policy set to `Manual` by [`TestBed::take_manual_policy`], to be given back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PolicyHold {
    owner: String,
    policy: String,
}

/// The live [`ManualPolicy`] guards of this process and the policy the first one took.
static HOLDERS: Mutex<(usize, Option<PolicyHold>)> = Mutex::new((0, None));

/// Keeps the bed's ObserverSet at a `Manual` promotion policy while alive; when the last guard of
/// the process goes, the policy it had is given back once no partition is under min ISR or
/// without a leader. [`TestBed::stop_node`], [`TestBed::kill_node`] and
/// [`TestBed::restart_node`] hold one for as long as the node is down.
#[must_use = "dropping it gives the policy back at once"]
pub struct ManualPolicy<'a> {
    bed: &'a TestBed,
    active: bool,
}

impl ManualPolicy<'_> {
    /// Releases the hold now; when it was the last, gives the policy back (after the cluster is
    /// healthy again) and says whether that worked.
    pub fn release(mut self) -> Result<(), Error> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), Error> {
        if !std::mem::replace(&mut self.active, false) {
            return Ok(());
        }
        let last = {
            let mut holders = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
            holders.0 -= 1;
            if holders.0 == 0 {
                holders.1.take()
            } else {
                None
            }
        };
        match last {
            Some(hold) => self.bed.give_back_policy(hold),
            None => Ok(()),
        }
    }
}

impl Drop for ManualPolicy<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            eprintln!("koo-testbed: giving the ObserverSet's policy back: {error}");
        }
    }
}

impl TestBed {
    /// Holds the promotion policy of the ObserverSet that owns the bed's observer lists at
    /// `Manual` until the guard goes (nothing to do when there is none or it is `Manual`).
    pub fn hold_manual_policy(&self) -> Result<ManualPolicy<'_>, Error> {
        let mut holders = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        if holders.0 == 0 {
            holders.1 = self.take_manual_policy()?;
        }
        holders.0 += 1;
        Ok(ManualPolicy {
            bed: self,
            active: true,
        })
    }

    /// The ObserverSet in [`KAFKA_NAMESPACE`] that writes the bed's observer lists (none while
    /// they are the seeded ones, or when it is being deleted).
    fn owning_observer_set(&self) -> Result<Option<String>, Error> {
        let cm = self.kubectl_json(&["get", "configmap", OWNED_CONFIGMAP])?;
        let labels = &cm["metadata"]["labels"];
        if labels["app.kubernetes.io/managed-by"] != "kafka-observer-operator" {
            return Ok(None);
        }
        let Some(name) = labels["kafkaobserver.io/observerset"].as_str() else {
            return Ok(None);
        };
        let args = [
            "-n",
            KAFKA_NAMESPACE,
            "get",
            "observerset",
            name,
            "--ignore-not-found",
            "-o",
            "json",
        ];
        let out = self.run_tool("kubectl", &args)?;
        if out.trim().is_empty() {
            return Ok(None);
        }
        let set: serde_json::Value = serde_json::from_str(&out).map_err(|e| Error::Output {
            command: format!("kubectl {}", args.join(" ")),
            detail: e.to_string(),
        })?;
        Ok(set["metadata"]["deletionTimestamp"]
            .is_null()
            .then(|| name.to_string()))
    }

    /// `kubectl -n kafka <args> -o json`, parsed.
    fn kubectl_json(&self, args: &[&str]) -> Result<serde_json::Value, Error> {
        let mut all = vec!["-n", KAFKA_NAMESPACE];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let out = self.run_tool("kubectl", &all)?;
        serde_json::from_str(&out).map_err(|e| Error::Output {
            command: format!("kubectl {}", all.join(" ")),
            detail: e.to_string(),
        })
    }

    fn set_policy(&self, owner: &str, policy: &str) -> Result<(), Error> {
        let patch = serde_json::json!({"spec": {"promotion": {"policy": policy}}}).to_string();
        self.run_tool(
            "kubectl",
            &[
                "-n",
                KAFKA_NAMESPACE,
                "patch",
                "observerset",
                owner,
                "--type",
                "merge",
                "-p",
                &patch,
            ],
        )
        .map(|_| ())
    }

    /// Sets the owning ObserverSet's promotion policy to `Manual` unless it is already (or there
    /// is none); `Some` when a policy must be given back.
    fn take_manual_policy(&self) -> Result<Option<PolicyHold>, Error> {
        let Some(owner) = self.owning_observer_set()? else {
            return Ok(None);
        };
        let set = self.kubectl_json(&["get", "observerset", &owner])?;
        let policy = set["spec"]["promotion"]["policy"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if policy.is_empty() || policy == "Manual" {
            return Ok(None);
        }
        self.set_policy(&owner, "Manual")?;
        eprintln!(
            "koo-testbed: ObserverSet {KAFKA_NAMESPACE}/{owner}: policy {policy} -> Manual while a Kafka node is down"
        );
        Ok(Some(PolicyHold { owner, policy }))
    }

    /// Whether the cluster is healthy again: no partition under min ISR, none without a leader.
    fn partitions_healthy(&self) -> bool {
        let bootstrap = self.kafka_bootstrap();
        ["--under-min-isr-partitions", "--unavailable-partitions"]
            .iter()
            .all(|filter| {
                self.run_tool(
                    "kafka-topics",
                    &["--bootstrap-server", &bootstrap, "--describe", filter],
                )
                .is_ok_and(|out| out.trim().is_empty())
            })
    }

    /// Gives a held policy back once the cluster is healthy (at most [`HEALTHY_TIMEOUT`]: then
    /// it is given back anyway, and the error says so).
    fn give_back_policy(&self, hold: PolicyHold) -> Result<(), Error> {
        let healthy = wait_until(
            "no partition under min ISR or without a leader",
            HEALTHY_TIMEOUT,
            Duration::from_secs(1),
            || self.partitions_healthy().then_some(()),
        );
        self.set_policy(&hold.owner, &hold.policy)?;
        eprintln!(
            "koo-testbed: ObserverSet {KAFKA_NAMESPACE}/{}: policy back to {}",
            hold.owner, hold.policy
        );
        healthy
    }
}
