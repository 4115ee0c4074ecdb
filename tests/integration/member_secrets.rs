//! Members of a multi-cluster install (docs/multi-cluster.md, build order step 5) on the bed's
//! apiserver: three namespaces stand in for three member clusters. The chart's multi-cluster
//! objects are rendered for each (`helm template`, the Lease, the remote ServiceAccount, its
//! Role and the member-Secrets Role) and applied; each other member's kubeconfig Secret holds a
//! token of that member's `kafka-observer-remote` ServiceAccount. A replica of member `m0`,
//! acting as the chart's operator ServiceAccount (no admin rights), reads the two Secrets with
//! `members::load` and campaigns: it must hold all three Leases, which proves the chart grants
//! what the code uses (the Leases pre-exist, nobody may create one). Then the Secrets it must
//! refuse: an exec plugin, and a missing one.
//! Needs the bed (`KOO_TESTBED`); touches only its own namespaces, deleted at the end.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use kafka_observer_operator::k8s::members::{self, MemberArgs, MemberPlan, MembersError};
use kafka_observer_operator::leader::{campaign_over, LeaseMember, LeaseTiming};
use kafka_observer_operator::metrics::Metrics;
use kafka_observer_operator::shutdown::Shutdown;

use super::support::{self, repo_root};

const LEASE: &str = "koo-it-member-lease";
const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];
const PREFIX: &str = "kafka-observer-member-";

/// `helm template` of the chart's multi-cluster objects for `member`, applied to the bed.
fn install_member(bed: &support::Bed, op_ns: &str, member: &str, kafka_ns: &str) {
    let helm = bed.dir.join("bin/helm");
    let rendered = Command::new(&helm)
        .args(["template", &format!("koo-it-{member}")])
        .arg(repo_root().join("charts/kafka-observer-operator"))
        .args(["--namespace", op_ns])
        .args(["--set", &format!("multiCluster.member={member}")])
        .args([
            "--set",
            &format!("multiCluster.members={{{}}}", MEMBERS.join(",")),
        ])
        .args(["--set", &format!("multiCluster.kafkaNamespace={kafka_ns}")])
        .args(["--set", "multiCluster.remoteTokenSecret=false"])
        .args(["--set", &format!("leaderElection.leaseName={LEASE}")])
        .args(["--show-only", "templates/multi-cluster.yaml"])
        .args(["--show-only", "templates/serviceaccount.yaml"])
        .env("HELM_CACHE_HOME", bed.dir.join("helm/cache"))
        .env("HELM_CONFIG_HOME", bed.dir.join("helm/config"))
        .output()
        .expect("run helm");
    assert!(
        rendered.status.success(),
        "helm template for {member}: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let mut apply = Command::new("kubectl")
        .args(["apply", "-f", "-"])
        .env("KUBECONFIG", bed.testbed.kubeconfig())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run kubectl");
    use std::io::Write;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(&rendered.stdout)
        .unwrap();
    assert!(
        apply.wait().unwrap().success(),
        "kubectl apply for {member}"
    );
}

/// A bound token (10 min) of ServiceAccount `name` in `ns`.
async fn token(bed: &support::Bed, ns: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(bed.client.clone(), ns);
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600}}))
    .unwrap();
    let answer: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token of {ns}/{name}: {e}"));
    answer.status.expect("token status").token
}

/// A kubeconfig for the bed's apiserver as `token`, namespace `ns`: what a platform team puts
/// in a member Secret.
fn kubeconfig(bed: &support::Bed, token: &str, ns: &str) -> String {
    let file = Kubeconfig::read_from(bed.testbed.kubeconfig()).expect("the bed's kubeconfig");
    let cluster = file.clusters[0].cluster.as_ref().expect("a cluster");
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: member\nclusters:\n- name: member\n  cluster:\n    server: {}\n    certificate-authority-data: {}\ncontexts:\n- name: member\n  context:\n    cluster: member\n    user: remote\n    namespace: {ns}\nusers:\n- name: remote\n  user:\n    token: {token}\n",
        cluster.server.as_deref().expect("a server"),
        cluster
            .certificate_authority_data
            .as_deref()
            .expect("inline CA data")
    )
}

async fn put_secret(bed: &support::Bed, ns: &str, member: &str, text: &str) {
    let secrets: Api<Secret> = Api::namespaced(bed.client.clone(), ns);
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(members::secret_name(PREFIX, member)),
            ..Default::default()
        },
        data: Some(
            [(
                members::KUBECONFIG_KEY.to_string(),
                ByteString(text.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let name = members::secret_name(PREFIX, member);
    let _ = secrets.delete(&name, &Default::default()).await;
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the member Secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_reads_its_members_from_secrets_and_leads_over_their_leases() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let op_ns = bed.namespace("members-op").await;
    let mut kafka_ns = Vec::new();
    for member in MEMBERS {
        let ns = bed.namespace(&format!("member-{member}")).await;
        install_member(&bed, &op_ns, member, &ns);
        kafka_ns.push(ns);
    }
    for (i, member) in MEMBERS.iter().enumerate().skip(1) {
        let remote = token(&bed, &kafka_ns[i], "kafka-observer-remote").await;
        put_secret(
            &bed,
            &op_ns,
            member,
            &kubeconfig(&bed, &remote, &kafka_ns[i]),
        )
        .await;
    }
    // The replica of m0 acts as the chart's operator ServiceAccount of m0's release.
    let operator = token(&bed, &op_ns, "koo-it-m0-kafka-observer-operator").await;
    let own = kubeconfig(&bed, &operator, &kafka_ns[0]);
    let (file, _) = members::remote_kubeconfig("m0", &own).expect("our own kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .unwrap();
    let reader = kube::Client::try_from(config.clone()).unwrap();
    let args = MemberArgs {
        member: Some("m0".into()),
        members: MEMBERS.iter().map(|m| m.to_string()).collect(),
        secret_prefix: PREFIX.into(),
    };
    let plan = MemberPlan::new(&args).unwrap().expect("three members");
    let remotes = members::load(&reader, &op_ns, &plan, PREFIX)
        .await
        .expect("the member Secrets, read as the operator's ServiceAccount");
    let namespaces: Vec<&str> = remotes.iter().map(|r| r.namespace.as_str()).collect();
    assert_eq!(namespaces, [kafka_ns[1].as_str(), kafka_ns[2].as_str()]);

    let mut leases = vec![LeaseMember {
        member: "m0".into(),
        config,
        namespace: kafka_ns[0].clone(),
    }];
    leases.extend(remotes.into_iter().map(|r| LeaseMember {
        member: r.name,
        config: r.config,
        namespace: r.namespace,
    }));
    let timing = LeaseTiming::new(Duration::from_secs(4), Duration::from_secs(2)).unwrap();
    let down = Shutdown::new();
    let mut leadership = campaign_over(
        leases,
        LEASE,
        "it-m0".into(),
        timing,
        Metrics::new(),
        down.clone(),
    )
    .expect("campaign");
    let acquired = tokio::time::timeout(Duration::from_secs(20), leadership.acquired()).await;
    assert_eq!(
        acquired,
        Ok(true),
        "the m0 replica leads over the three members' Leases within 20 s"
    );
    // Not only a majority: with nobody else campaigning, every member's Lease names it.
    let holders = support::wait_for(Duration::from_secs(10), "all three Leases held", || async {
        let mut holders = Vec::new();
        for ns in &kafka_ns {
            let api: Api<Lease> = Api::namespaced(bed.client.clone(), ns);
            let lease = api.get(LEASE).await.ok()?;
            holders.push(lease.spec?.holder_identity?);
        }
        holders.iter().all(|h| h == "it-m0").then_some(holders)
    })
    .await;
    assert_eq!(holders.len(), 3);
    down.trigger();

    // Refused: a Secret that would make the operator run a program, and a missing one.
    let exec = kubeconfig(&bed, "unused", &kafka_ns[1]).replace(
        "    token: unused\n",
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n",
    );
    put_secret(&bed, &op_ns, "m1", &exec).await;
    match members::load(&reader, &op_ns, &plan, PREFIX).await {
        Err(MembersError::Kubeconfig { member, reason }) => {
            assert_eq!(member, "m1");
            assert!(reason.contains("exec"), "{reason}");
        }
        Err(other) => panic!("an exec kubeconfig refused for another reason: {other}"),
        Ok(_) => panic!("an exec kubeconfig was accepted"),
    }
    let secrets: Api<Secret> = Api::namespaced(bed.client.clone(), &op_ns);
    secrets
        .delete(&members::secret_name(PREFIX, "m1"), &Default::default())
        .await
        .unwrap();
    match members::load(&reader, &op_ns, &plan, PREFIX).await {
        Err(e @ MembersError::Secret { .. }) => {
            assert!(e.to_string().contains("does not exist"), "{e}")
        }
        Err(other) => panic!("a missing Secret refused for another reason: {other}"),
        Ok(_) => panic!("a missing member Secret was accepted"),
    }

    for ns in kafka_ns.iter().chain([&op_ns]) {
        bed.drop_namespace(ns).await;
    }
}
