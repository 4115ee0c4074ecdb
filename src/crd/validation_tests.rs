//! Unit tests of `validate`: every bound and every parser, with the message it gives.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::*;
use crate::crd::{KafkaConnection, NodeIdSource, NodesSpec, ObserverSetSpec};

fn role(component: &str, node_id: NodeIdSource) -> RoleNodes {
    RoleNodes {
        selector: LabelSelector {
            match_labels: Some([("app".to_string(), component.to_string())].into()),
            ..Default::default()
        },
        node_id,
        combined: false,
    }
}

fn offset(n: i32) -> NodeIdSource {
    NodeIdSource {
        label: None,
        ordinal_offset: Some(n),
    }
}

fn good() -> ObserverSet {
    let spec = ObserverSetSpec {
        kafka: KafkaConnection {
            bootstrap_servers: "kafka-bootstrap.kafka.svc:9092".into(),
            tls: None,
            sasl: None,
        },
        nodes: Some(NodesSpec {
            controllers: Some(role(
                "controller",
                NodeIdSource {
                    label: Some("kafkaobserver.io/node-id".into()),
                    ordinal_offset: None,
                },
            )),
            brokers: Some(role("broker", offset(1))),
        }),
        clusters: None,
        observers: vec![4, 5],
        promotion: Default::default(),
        rollout: Default::default(),
        deletion_policy: Default::default(),
    };
    let mut obs = ObserverSet::new("kafka", spec);
    obs.metadata.namespace = Some("kafka".into());
    obs
}

/// The violations of `good()` after `edit`.
fn violations(edit: impl FnOnce(&mut ObserverSet)) -> Vec<SpecViolation> {
    let mut obs = good();
    edit(&mut obs);
    match validate(&obs) {
        Ok(_) => Vec::new(),
        Err(e) => e.violations,
    }
}

/// The single message of `good()` after `edit`.
fn message(edit: impl FnOnce(&mut ObserverSet)) -> String {
    let v = violations(edit);
    assert_eq!(v.len(), 1, "expected one violation, got {v:?}");
    v[0].to_string()
}

#[test]
fn the_good_spec_is_valid_with_its_defaults() {
    let v = validate(&good()).unwrap();
    assert_eq!(
        v.kafka.bootstrap_servers,
        ["kafka-bootstrap.kafka.svc:9092"]
    );
    assert_eq!(v.promotion.scan_interval, Duration::from_secs(1));
    assert_eq!(v.promotion.confirmations, 2);
    assert_eq!(v.rollout.jvm_cache_ttl, Duration::from_secs(1));
}

#[test]
fn node_ids_are_kafka_int32_ids() {
    let m = message(|o| o.spec.observers = vec![4, -1]);
    assert_eq!(
        m,
        "spec.observers contains -1: Kafka node ids are between 0 and 2147483647"
    );
    let m = message(|o| {
        o.spec.observers = vec![4, i32::MIN];
    });
    assert!(m.contains("-2147483648"), "{m}");
    // The largest id is fine.
    assert!(violations(|o| o.spec.observers = vec![i32::MAX]).is_empty());
    let v = violations(|o| {
        o.spec.promotion.promoted = vec![-3];
    });
    assert_eq!(
        v,
        [SpecViolation::NodeIdOutOfRange {
            field: "promotion.promoted",
            id: -3
        }]
    );
}

#[test]
fn id_lists_are_bounded_and_unique() {
    let m = message(|o| o.spec.observers = (0..257).collect());
    assert_eq!(m, "spec.observers lists 257 ids: list at most 256");
    assert!(violations(|o| o.spec.observers = (0..256).collect()).is_empty());
    let m = message(|o| o.spec.observers = vec![4, 4, 4]);
    assert!(m.contains("lists 4 more than once"), "{m}");
    let m = message(|o| o.spec.promotion.promoted = vec![9]);
    assert!(m.contains("promote only declared observers"), "{m}");
}

#[test]
fn ordinal_offset_is_a_node_id() {
    let m = message(|o| o.spec.nodes.as_mut().unwrap().brokers = Some(role("broker", offset(-1))));
    assert_eq!(
        m,
        "spec.nodes.brokers.nodeId.ordinalOffset is -1: use a value between 0 and 2147483647"
    );
    assert!(violations(
        |o| o.spec.nodes.as_mut().unwrap().brokers = Some(role("broker", offset(i32::MAX)))
    )
    .is_empty());
}

#[test]
fn confirmations_between_1_and_100() {
    for bad in [0, -1, 101, i32::MAX] {
        let m = message(|o| o.spec.promotion.confirmations = bad);
        assert_eq!(
            m,
            format!("spec.promotion.confirmations is {bad}: use 1 to 100")
        );
    }
    for ok in [1, 100] {
        assert!(violations(|o| o.spec.promotion.confirmations = ok).is_empty());
    }
}

#[test]
fn max_concurrent_promotions_between_1_and_256() {
    for bad in [0, 257] {
        let m = message(|o| o.spec.promotion.max_concurrent_promotions = bad);
        assert!(m.ends_with("use 1 to 256"), "{m}");
    }
    assert!(violations(|o| o.spec.promotion.max_concurrent_promotions = 256).is_empty());
}

#[test]
fn max_lag_messages_non_negative() {
    let m = message(|o| o.spec.promotion.max_lag_messages = -1);
    assert_eq!(m, "spec.promotion.maxLagMessages is -1: use 0 or more");
    assert!(violations(|o| o.spec.promotion.max_lag_messages = 0).is_empty());
    assert!(violations(|o| o.spec.promotion.max_lag_messages = i64::MAX).is_empty());
}

#[test]
fn every_duration_is_bounded() {
    type Edit = fn(&mut ObserverSet, &str);
    let fields: [(&str, Edit, &str, &str); 6] = [
        (
            "promotion.scanInterval",
            |o, v| o.spec.promotion.scan_interval = v.into(),
            "99ms",
            "601s",
        ),
        (
            "promotion.cooldown",
            |o, v| o.spec.promotion.cooldown = v.into(),
            "4999ms",
            "25h",
        ),
        (
            "promotion.autoDemote.stabilizationWindow",
            |o, v| o.spec.promotion.auto_demote.stabilization_window = v.into(),
            "9s",
            "1441m",
        ),
        (
            "rollout.settleTime",
            |o, v| o.spec.rollout.settle_time = v.into(),
            "",
            "61m",
        ),
        (
            "rollout.timeout",
            |o, v| o.spec.rollout.timeout = v.into(),
            "999ms",
            "86401s",
        ),
        (
            "rollout.jvmCacheTtl",
            |o, v| o.spec.rollout.jvm_cache_ttl = v.into(),
            "99ms",
            "61s",
        ),
    ];
    for (field, edit, below, above) in fields {
        for bad in [below, above].into_iter().filter(|b| !b.is_empty()) {
            let m = message(|o| edit(o, bad));
            assert!(
                m.starts_with(&format!("spec.{field} is {bad}: use a duration between")),
                "{m}"
            );
        }
        let m = message(|o| edit(o, "1.5s"));
        assert!(
            m.starts_with(&format!("spec.{field}: \"1.5s\" is not a duration")),
            "{m}"
        );
        let m = message(|o| edit(o, "999999999h"));
        assert!(m.contains("use a duration between"), "{m}");
    }
}

#[test]
fn bootstrap_servers_parsed_strictly() {
    let m = message(|o| o.spec.kafka.bootstrap_servers = "PLAINTEXT://kafka:9092".into());
    assert!(m.contains("has a scheme"), "{m}");
    let m = message(|o| o.spec.kafka.bootstrap_servers = "kafka:9092/".into());
    assert!(m.contains("between 1 and 65535"), "{m}");
    let m = message(|o| o.spec.kafka.bootstrap_servers = "a:1, b:2".into());
    assert!(m.contains("whitespace"), "{m}");
    let m = message(|o| o.spec.kafka.bootstrap_servers = "a:1,,b:2".into());
    assert!(m.contains("empty entry"), "{m}");
    let m = message(|o| o.spec.kafka.bootstrap_servers = "  ".into());
    assert!(m.starts_with("spec.kafka.bootstrapServers is empty"), "{m}");
    let v = validate(&{
        let mut o = good();
        o.spec.kafka.bootstrap_servers = "10.0.0.1:9092,[fd00::1]:9093".into();
        o
    })
    .unwrap();
    assert_eq!(
        v.kafka.bootstrap_servers,
        ["10.0.0.1:9092", "[fd00::1]:9093"]
    );
}

#[test]
fn topic_regexes_must_compile_and_are_bounded() {
    let m = message(|o| o.spec.promotion.topics.include = vec!["(".into()]);
    assert!(
        m.starts_with("spec.promotion.topics.include[0] \"(\" is not a valid regex"),
        "{m}"
    );
    let m = message(|o| o.spec.promotion.topics.exclude = vec!["a".repeat(257)]);
    assert!(m.contains("257 characters, use at most 256"), "{m}");
    let m = message(|o| o.spec.promotion.topics.exclude = vec!["x".into(); 65]);
    assert_eq!(
        m,
        "spec.promotion.topics.exclude has 65 patterns: use at most 64"
    );
}

#[test]
fn node_id_label_must_be_a_label_key() {
    for bad in ["bad key", "-x", "x/", "/x", "Upper.Case/x", &"a".repeat(64)] {
        let m = message(|o| {
            o.spec.nodes.as_mut().unwrap().controllers = Some(role(
                "controller",
                NodeIdSource {
                    label: Some(bad.to_string()),
                    ordinal_offset: None,
                },
            ))
        });
        assert!(m.contains("is not a label key"), "{bad:?}: {m}");
    }
    for ok in ["id", "kafkaobserver.io/node-id", "a.b/c_d.e", "x-1"] {
        assert!(is_label_key(ok), "{ok}");
    }
}

#[test]
fn selectors_must_parse() {
    let m = message(|o| {
        let mut r = role("broker", offset(1));
        r.selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "Maybe".into(),
                values: None,
            }]),
            ..Default::default()
        };
        o.spec.nodes.as_mut().unwrap().brokers = Some(r);
    });
    assert!(
        m.starts_with("spec.nodes.brokers.selector is not a valid label selector"),
        "{m}"
    );
}

#[test]
fn name_fits_a_label_value() {
    let m = message(|o| o.metadata.name = Some("n".repeat(64)));
    assert!(m.contains("has 64 characters: use at most 63"), "{m}");
    assert!(violations(|o| o.metadata.name = Some("n".repeat(63))).is_empty());
}

#[test]
fn every_problem_is_reported_at_once() {
    let v = violations(|o| {
        o.spec.observers = vec![-1];
        o.spec.promotion.confirmations = 0;
        o.spec.promotion.scan_interval = "1ms".into();
        o.spec.kafka.bootstrap_servers = "x".into();
    });
    assert_eq!(v.len(), 4, "{v:?}");
}

#[test]
fn sasl_is_refused_without_tls_for_every_mechanism() {
    use crate::crd::{SaslMechanism, SaslSecretRef, SaslSpec, SecretKeyRef, TlsSpec};
    for mechanism in [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ] {
        let sasl = SaslSpec {
            mechanism,
            secret_ref: SaslSecretRef {
                name: "kafka-user".into(),
                username_key: "username".into(),
                password_key: "password".into(),
            },
        };
        let without = sasl.clone();
        let msg = message(|o| o.spec.kafka.sasl = Some(without));
        assert!(
            msg.starts_with("spec.kafka.sasl needs spec.kafka.tls"),
            "{msg}"
        );
        assert!(msg.contains("add kafka.tls.caSecretRef"), "{msg}");
        let with_tls = violations(|o| {
            o.spec.kafka.sasl = Some(sasl);
            o.spec.kafka.tls = Some(TlsSpec {
                ca_secret_ref: SecretKeyRef {
                    name: "kafka-ca".into(),
                    key: "ca.crt".into(),
                },
                client_cert_secret_ref: None,
            });
        });
        assert!(with_tls.is_empty(), "{with_tls:?}");
    }
}

#[test]
fn time_mode_needs_a_timeout_longer_than_the_settle_time() {
    let time = |o: &mut ObserverSet| o.spec.rollout.acknowledgement = AckMode::Time;
    let m = message(|o| {
        time(o);
        o.spec.rollout.settle_time = "2m".into();
        o.spec.rollout.timeout = "2m".into();
    });
    assert!(
        m.starts_with("spec.rollout.timeout must be longer than settleTime"),
        "{m}"
    );
    assert!(violations(|o| {
        time(o);
        o.spec.rollout.settle_time = "10s".into();
        o.spec.rollout.timeout = "11s".into();
    })
    .is_empty());
    // Agent mode does not read settleTime.
    assert!(violations(|o| {
        o.spec.rollout.settle_time = "2m".into();
        o.spec.rollout.timeout = "1m".into();
    })
    .is_empty());
}

#[test]
fn time_mode_needs_a_settle_time_of_ten_seconds() {
    for short in ["0s", "9999ms", "9s"] {
        let m = message(|o| {
            o.spec.rollout.acknowledgement = AckMode::Time;
            o.spec.rollout.settle_time = short.into();
        });
        assert!(
            m.starts_with(
                "spec.rollout.settleTime must be at least 10s when rollout.acknowledgement is Time"
            ),
            "{short}: {m}"
        );
    }
    assert!(violations(|o| {
        o.spec.rollout.acknowledgement = AckMode::Time;
        o.spec.rollout.settle_time = "10s".into();
    })
    .is_empty());
    // Agent mode asks the pods and never reads settleTime: 0s stays valid there.
    assert!(violations(|o| o.spec.rollout.settle_time = "0s".into()).is_empty());
}

#[test]
fn agent_port_is_a_tcp_port() {
    for bad in [0, -1, 65536] {
        let m = message(|o| o.spec.rollout.agent_port = bad);
        assert_eq!(
            m,
            format!("spec.rollout.agentPort is {bad}: use a port between 1 and 65535")
        );
    }
    assert!(violations(|o| o.spec.rollout.agent_port = 65535).is_empty());
}
