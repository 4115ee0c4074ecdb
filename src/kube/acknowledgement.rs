//! Acknowledgement: has a pod seen a revision? Agent mode asks the pod's observer-agent sidecar
//! (`GET http://<podIP>:<agentPort>/observer-ids`); Time mode trusts `settleTime` after the write
//! and nudge. The decisions are pure; only [`AgentClient::report`] does I/O.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use super::dereference::KafkaPod;
use crate::crd::NodeId;

/// A pod that does not answer within this time counts as not acknowledged this round; the
/// reconcile loop asks again on its next pass, so a slow agent never stalls the operator.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(800);

/// What the agent reports about the file the pod reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentReport {
    /// Revision from the file's header; absent when the file has no operator header.
    #[serde(default)]
    pub revision: Option<i64>,
    /// Observer ids the pod's Kafka process reads; `null` when the agent sees no file.
    #[serde(default)]
    pub ids: Option<Vec<NodeId>>,
    /// `<namespace>/<name>` of the ObserverSet named in the header.
    #[serde(default)]
    pub observer_set: Option<String>,
    /// Where the ids came from (file, environment fallback, empty).
    #[serde(default)]
    pub source: String,
}

/// What a pod must report to acknowledge a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// `<namespace>/<name>` of the ObserverSet.
    pub observer_set: String,
    pub revision: i64,
    /// Sorted observer ids of the revision.
    pub ids: Vec<NodeId>,
}

/// The verdict for one pod in one round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Acknowledged,
    /// The agent answered with something else (usually the previous revision: the kubelet has
    /// not refreshed the volume yet).
    Behind(String),
    /// No answer (no pod IP yet, connection refused, timeout, bad JSON).
    Unreachable(String),
}

impl Verdict {
    pub fn is_acknowledged(&self) -> bool {
        matches!(self, Verdict::Acknowledged)
    }
}

/// Does `report` show the pod reading exactly the expected revision and ids? (pure)
pub fn judge(report: &AgentReport, expected: &Expectation) -> Verdict {
    let Some(mut ids) = report.ids.clone() else {
        return Verdict::Behind(format!("sees no observer.ids file ({})", report.source));
    };
    ids.sort_unstable();
    ids.dedup();
    let same_set = report.observer_set.as_deref() == Some(expected.observer_set.as_str());
    if report.revision == Some(expected.revision) && ids == expected.ids && same_set {
        Verdict::Acknowledged
    } else {
        Verdict::Behind(format!(
            "reports revision {} ids {:?} from {} ({})",
            report
                .revision
                .map_or("none".to_string(), |r| r.to_string()),
            ids,
            report.observer_set.as_deref().unwrap_or("no ObserverSet"),
            report.source
        ))
    }
}

/// Time mode: a pod counts as acknowledged once `settle` has passed since the step's write+nudge.
pub fn settled(step_started_at: Timestamp, now: Timestamp, settle: Duration) -> bool {
    let elapsed = now.duration_since(step_started_at);
    settle.is_zero() || (elapsed.is_positive() && elapsed.unsigned_abs() >= settle)
}

/// HTTP client for the observer-agent sidecars (plain HTTP on the pod network).
#[derive(Clone)]
pub struct AgentClient {
    http: Client<HttpConnector, Empty<Bytes>>,
}

impl Default for AgentClient {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        AgentClient { http }
    }
}

impl AgentClient {
    /// Fetches one agent's report.
    pub async fn report(&self, ip: &str, port: u16) -> Result<AgentReport, String> {
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| format!("pod IP {ip:?} is not an IP address"))?;
        let uri = format!("http://{}/observer-ids", SocketAddr::new(ip, port));
        let request = async {
            let response = self
                .http
                .get(uri.parse().map_err(|e| format!("{e}"))?)
                .await
                .map_err(|e| format!("{e}"))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{e}"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&body).trim()
                ));
            }
            serde_json::from_slice(&body).map_err(|e| format!("unexpected answer: {e}"))
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
            Ok(result) => result.map_err(|e| format!("{uri}: {e}")),
            Err(_) => Err(format!("{uri}: no answer within {REQUEST_TIMEOUT:?}")),
        }
    }

    /// Asks every pod's agent at once and judges each answer.
    pub async fn verdicts(
        &self,
        pods: &[KafkaPod],
        port: u16,
        expected: &Expectation,
    ) -> Vec<(String, Verdict)> {
        let asks = pods.iter().map(|pod| async move {
            let verdict = match &pod.ip {
                None => Verdict::Unreachable("pod has no IP yet".into()),
                Some(ip) => match self.report(ip, port).await {
                    Ok(report) => judge(&report, expected),
                    Err(e) => Verdict::Unreachable(e),
                },
            };
            (pod.name.clone(), verdict)
        });
        futures::future::join_all(asks).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected() -> Expectation {
        Expectation {
            observer_set: "kafka/kafka".into(),
            revision: 7,
            ids: vec![3, 4],
        }
    }

    fn report(revision: Option<i64>, ids: &[NodeId], set: Option<&str>) -> AgentReport {
        AgentReport {
            revision,
            ids: Some(ids.to_vec()),
            observer_set: set.map(Into::into),
            source: "file".into(),
        }
    }

    #[test]
    fn acknowledges_only_the_exact_revision_and_ids() {
        assert!(
            judge(&report(Some(7), &[4, 3], Some("kafka/kafka")), &expected()).is_acknowledged()
        );
        assert!(
            !judge(&report(Some(6), &[3, 4], Some("kafka/kafka")), &expected()).is_acknowledged()
        );
        assert!(!judge(&report(Some(7), &[4], Some("kafka/kafka")), &expected()).is_acknowledged());
        assert!(!judge(&report(None, &[3, 4], None), &expected()).is_acknowledged());
        assert!(
            !judge(&report(Some(7), &[3, 4], Some("kafka/other")), &expected()).is_acknowledged()
        );
    }

    #[test]
    fn behind_says_what_the_pod_reads() {
        let Verdict::Behind(why) = judge(&report(Some(6), &[4], Some("kafka/kafka")), &expected())
        else {
            panic!("expected Behind");
        };
        assert!(why.contains("revision 6") && why.contains("[4]"), "{why}");
    }

    #[test]
    fn parses_the_agent_json() {
        let json =
            r#"{"revision":7,"ids":[4],"observerSet":"kafka/kafka","source":"file","path":"/x"}"#;
        let parsed: AgentReport = serde_json::from_str(json).unwrap();
        assert_eq!(parsed, report(Some(7), &[4], Some("kafka/kafka")));
        let missing = r#"{"revision":null,"ids":null,"observerSet":null,"source":"missing"}"#;
        let parsed: AgentReport = serde_json::from_str(missing).unwrap();
        assert!(
            matches!(judge(&parsed, &expected()), Verdict::Behind(why) if why.contains("no observer.ids"))
        );
    }

    #[test]
    fn time_mode_waits_for_settle_time() {
        let start: Timestamp = "2026-11-29T09:00:00Z".parse().unwrap();
        let at = |s: &str| -> Timestamp { s.parse().unwrap() };
        let settle = Duration::from_secs(15);
        assert!(!settled(start, at("2026-11-29T09:00:14Z"), settle));
        assert!(settled(start, at("2026-11-29T09:00:15Z"), settle));
        assert!(settled(start, start, Duration::ZERO));
    }

    #[tokio::test]
    async fn unreachable_agent_is_reported_not_fatal() {
        // A port on loopback with no listener: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let pods = [KafkaPod {
            name: "p".into(),
            node_id: 1,
            ip: Some("127.0.0.1".into()),
            nudged_revision: None,
            nudged_at: None,
            running: true,
        }];
        let got = AgentClient::default()
            .verdicts(&pods, port, &expected())
            .await;
        assert!(matches!(&got[0].1, Verdict::Unreachable(_)), "{got:?}");
    }
}
