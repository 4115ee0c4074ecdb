//! The reconciler's glue (`reconciler::reconcile`) called in-process against the bed's real
//! apiserver: what one reconcile writes, in which order, and how the next one resumes when a
//! write in the middle is refused.
//!
//! The refusal is the apiserver's own: a ValidatingAdmissionPolicy that denies every write to
//! the brokers' ConfigMap of this test's set, as an admission webhook or policy of a real
//! cluster can. The set is pod-less (a role without pods has nothing to wait for), so one reconcile
//! takes a promotion through both steps (intent, controllers' list, brokers' list, final status)
//! and the refusal lands between the controllers' list and the final status.
//!
//! A reconcile given an outdated copy of the set (as a lagging cache would) must not act on it:
//! it plans on a fresh read of the set.
//!
//! Owns its state: a fresh namespace and the policy (cluster-scoped, named after the process),
//! both deleted at the end. The bed's shared operator watches every namespace and would
//! reconcile this set too, so it is paused for the test ([`support::Bed::pause_operator`]).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kafka_observer_operator::crd::ObserverSet;
use kafka_observer_operator::metrics::Metrics;
use kafka_observer_operator::reconciler::{reconcile, Context};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use support::*;

const SET: &str = "glue";
const T: Duration = Duration::from_secs(30);

/// One reconcile of the set as the API holds it now (the controller passes its cached copy;
/// the reconciler reads the set fresh itself).
async fn reconcile_now(
    api: &Api<ObserverSet>,
    ctx: &Arc<Context>,
) -> kafka_observer_operator::k8s::Result<()> {
    let obj = api.get(SET).await.expect("get the ObserverSet");
    reconcile(Arc::new(obj), ctx.clone()).await.map(|_| ())
}

/// The etcd revision an object was last written at. The apiserver documents resourceVersion as
/// opaque; on its etcd storage it is the key's modification revision, one counter for the
/// whole cluster, which is what makes writes to different objects comparable here.
fn written_at(meta_rv: Option<&String>) -> u64 {
    meta_rv
        .and_then(|rv| rv.parse().ok())
        .expect("a numeric resourceVersion")
}

fn status(obj: &ObserverSet) -> Value {
    serde_json::to_value(obj)
        .unwrap()
        .get("status")
        .cloned()
        .unwrap_or(Value::Null)
}

/// A policy and binding denying CREATE and UPDATE of ConfigMap `name` in namespace `ns`.
async fn deny_writes(bed: &Bed, policy: &str, ns: &str, name: &str) {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(bed.client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(bed.client.clone());
    let body: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": policy},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["configmaps"], "resourceNames": [name]
            }]},
            "validations": [{"expression": "false", "message": "refused by the reconcile glue test"}]
        }
    }))
    .unwrap();
    policies
        .create(&PostParams::default(), &body)
        .await
        .expect("create the ValidatingAdmissionPolicy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": policy},
        "spec": {
            "policyName": policy,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
        }
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create the ValidatingAdmissionPolicyBinding");
    // The policy is enforced once the apiserver's policy informers have it: probe with a
    // dry-run write of the same ConfigMap until it is refused.
    let cms: Api<ConfigMap> = bed.config_maps(ns);
    let probe: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    wait_for(
        T,
        "the admission policy to refuse the brokers' ConfigMap",
        || async {
            let params = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            match cms.create(&params, &probe).await {
                Err(kube::Error::Api(e))
                    if e.message.contains("refused by the reconcile glue test") =>
                {
                    Some(())
                }
                _ => None,
            }
        },
    )
    .await;
}

/// The policy and its binding: [`PolicyGuard::lift`] deletes them; dropped without that (an
/// assertion failed half-way) it deletes them from a thread of its own.
struct PolicyGuard {
    client: kube::Client,
    name: String,
    lifted: bool,
}

async fn delete_policy(client: kube::Client, name: &str) {
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client);
    let _ = bindings.delete(name, &DeleteParams::default()).await;
    let _ = policies.delete(name, &DeleteParams::default()).await;
}

impl PolicyGuard {
    async fn lift(mut self) {
        delete_policy(self.client.clone(), &self.name).await;
        self.lifted = true;
    }
}

impl Drop for PolicyGuard {
    fn drop(&mut self) {
        if self.lifted {
            return;
        }
        // Drop cannot await, and the test's client cannot be used from another runtime while
        // this one blocks here (its connection task runs on it): a client and runtime of its own.
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let Some(bed) = koo_testbed::TestBed::require() else {
                    return;
                };
                if let Ok(client) = bed.client().await {
                    delete_policy(client, &name).await;
                }
            })
        })
        .join();
    }
}

#[tokio::test]
async fn a_refused_list_write_leaves_the_intent_and_the_next_reconcile_resumes_from_it() {
    let Some(bed) = bed().await else {
        return;
    };
    let _paused = bed.pause_operator();
    let ns = bed.namespace("glue").await;
    let api = bed.observer_sets(&ns);
    let cms = bed.config_maps(&ns);
    let controllers_cm = format!("{SET}-observers-controller");
    let brokers_cm = format!("{SET}-observers-broker");
    let ctx = Arc::new(Context::new(
        bed.operator_client().await,
        Metrics::new(),
        Some("reconcile-glue-test".into()),
        Duration::from_secs(30),
    ));
    create_observer_set(&api, bed.podless_observer_set(SET, &[4, 5], &[])).await;

    // The first reconcile adds the finalizer only; the second writes the initial lists and a
    // final status in one go (nothing to wait for).
    reconcile_now(&api, &ctx)
        .await
        .expect("the finalizer reconcile");
    reconcile_now(&api, &ctx)
        .await
        .expect("the initial rollout");
    let ready = api.get(SET).await.unwrap();
    let s = status(&ready);
    assert_eq!(phase(&s), "Ready", "status after the initial rollout: {s}");
    assert_eq!(s["effectiveObservers"], json!([4, 5]), "{s}");
    assert!(s.get("rollout").is_none_or(Value::is_null), "{s}");
    let first_controllers = get_cm(&cms, &controllers_cm)
        .await
        .expect("controllers' list");
    let first_brokers = get_cm(&cms, &brokers_cm).await.expect("brokers' list");
    assert_eq!(listed_ids(&first_controllers), Some(vec![4, 5]));
    assert_eq!(listed_ids(&first_brokers), Some(vec![4, 5]));

    // A reconcile with nothing to change writes nothing: no status, no ConfigMap.
    reconcile_now(&api, &ctx).await.expect("an idle reconcile");
    let idle = api.get(SET).await.unwrap();
    assert_eq!(
        idle.resource_version(),
        ready.resource_version(),
        "an idle reconcile rewrote the status: {}",
        status(&idle)
    );
    let idle_controllers = get_cm(&cms, &controllers_cm).await.unwrap();
    let idle_brokers = get_cm(&cms, &brokers_cm).await.unwrap();
    assert_eq!(
        idle_controllers.resource_version(),
        first_controllers.resource_version()
    );
    assert_eq!(
        idle_brokers.resource_version(),
        first_brokers.resource_version()
    );

    // Promote 5 with the brokers' list refused by the apiserver.
    let policy = format!("koo-it-glue-{}", std::process::id());
    let guard = PolicyGuard {
        client: bed.client.clone(),
        name: policy.clone(),
        lifted: false,
    };
    deny_writes(&bed, &policy, &ns, &brokers_cm).await;
    api.patch(
        SET,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"promotion": {"promoted": [5]}}})),
    )
    .await
    .expect("promote 5 in the spec");
    let refused = reconcile_now(&api, &ctx).await;
    let error = refused.expect_err("the reconcile must fail on the refused brokers' list");
    assert!(
        error.to_string().contains(&brokers_cm),
        "the error names the ConfigMap it could not write: {error}"
    );

    // What the API holds now: the intent (a promotion at its controllers' step, target [4]),
    // written before the controllers' list; the controllers' list; the brokers' list unchanged.
    let halfway = api.get(SET).await.unwrap();
    let s = status(&halfway);
    let rollout = &s["rollout"];
    assert_eq!(rollout["kind"], json!("Promotion"), "status: {s}");
    assert_eq!(rollout["step"], json!("Controllers"), "status: {s}");
    assert_eq!(rollout["target"], json!([4]), "status: {s}");
    assert_eq!(s["desiredObservers"], json!([4]), "status: {s}");
    let controllers = get_cm(&cms, &controllers_cm).await.unwrap();
    let brokers = get_cm(&cms, &brokers_cm).await.unwrap();
    assert_eq!(listed_ids(&controllers), Some(vec![4]), "controllers' list");
    assert_eq!(listed_ids(&brokers), Some(vec![4, 5]), "brokers' list kept");
    assert_eq!(brokers.resource_version(), first_brokers.resource_version());
    assert!(
        written_at(halfway.metadata.resource_version.as_ref())
            < written_at(controllers.metadata.resource_version.as_ref()),
        "the intent (rv {:?}) must be written before the controllers' list (rv {:?})",
        halfway.resource_version(),
        controllers.resource_version()
    );
    assert_eq!(
        rollout["revision"].as_u64(),
        revision_of(&controllers),
        "the controllers' list carries the intent's revision"
    );

    // While the refusal lasts, a retry changes nothing it already wrote.
    let retry = reconcile_now(&api, &ctx).await;
    assert!(retry.is_err(), "the retry still meets the refusal");
    let again = get_cm(&cms, &controllers_cm).await.unwrap();
    assert_eq!(
        again.resource_version(),
        controllers.resource_version(),
        "the controllers' list was written again"
    );

    // The refusal lifted: the next reconcile takes the rollout on from the intent: the brokers'
    // list, the final status; the controllers' list is not written again.
    guard.lift().await;
    wait_for(T, "the admission policy to be gone", || async {
        match reconcile_now(&api, &ctx).await {
            Ok(()) => Some(()),
            Err(_) => None,
        }
    })
    .await;
    let done = api.get(SET).await.unwrap();
    let s = status(&done);
    assert_eq!(phase(&s), "Ready", "status after the resumed rollout: {s}");
    assert!(s.get("rollout").is_none_or(Value::is_null), "{s}");
    assert_eq!(s["effectiveObservers"], json!([4]), "{s}");
    let brokers = get_cm(&cms, &brokers_cm).await.unwrap();
    assert_eq!(listed_ids(&brokers), Some(vec![4]), "brokers' list");
    assert_eq!(revision_of(&brokers), revision_of(&controllers));
    let controllers_after = get_cm(&cms, &controllers_cm).await.unwrap();
    assert_eq!(
        controllers_after.resource_version(),
        controllers.resource_version(),
        "the controllers' list was written again on the resumed rollout"
    );

    // Copies the controller's cache could still hold: one from before the promotion (a plan on
    // it would demote 5 again) and the half-way one (a plan on it would finish a rollout that
    // is done). The reconciler reads the set fresh and plans on that, which has nothing to do:
    // nothing is written either way.
    for (copy, what) in [(&ready, "before the promotion"), (&halfway, "half-way")] {
        reconcile(Arc::new(copy.clone()), ctx.clone())
            .await
            .unwrap_or_else(|e| panic!("a reconcile on the copy from {what}: {e}"));
        let now = api.get(SET).await.unwrap();
        assert_eq!(
            now.resource_version(),
            done.resource_version(),
            "a reconcile on the copy from {what} wrote the status: {}",
            status(&now)
        );
        for (cm, before) in [
            (&controllers_cm, &controllers_after),
            (&brokers_cm, &brokers),
        ] {
            let after = get_cm(&cms, cm).await.unwrap();
            assert_eq!(
                after.resource_version(),
                before.resource_version(),
                "a reconcile on the copy from {what} wrote {cm}: {:?}",
                listed_ids(&after)
            );
        }
    }

    bed.drop_namespace(&ns).await;
}

/// An operator run with `--members` (docs/multi-cluster.md) refuses an ObserverSet that gives
/// `spec.nodes` (the pods of one cluster: writing its lists in one member only would break the
/// controllers-first order across the others): phase Invalid, saying so, and the lists a
/// single-cluster operator wrote stay exactly as they are.
#[tokio::test]
async fn an_operator_over_members_refuses_a_one_cluster_set_and_leaves_its_lists() {
    use kafka_observer_operator::k8s::members::MemberClients;

    let Some(bed) = bed().await else {
        return;
    };
    let _paused = bed.pause_operator();
    let ns = bed.namespace("glue-members").await;
    let api = bed.observer_sets(&ns);
    let cms = bed.config_maps(&ns);
    let single = Arc::new(Context::new(
        bed.operator_client().await,
        Metrics::new(),
        Some("reconcile-glue-test".into()),
        Duration::from_secs(30),
    ));
    create_observer_set(&api, bed.podless_observer_set(SET, &[4, 5], &[])).await;
    reconcile_now(&api, &single).await.expect("the finalizer");
    reconcile_now(&api, &single)
        .await
        .expect("the initial rollout");
    let lists = |cms: Api<ConfigMap>| async move {
        let mut found = Vec::new();
        for role in ["controller", "broker"] {
            let cm = get_cm(&cms, &format!("{SET}-observers-{role}"))
                .await
                .expect("a list");
            found.push((listed_ids(&cm), cm.resource_version()));
        }
        found
    };
    let before = lists(cms.clone()).await;
    assert_eq!(before[0].0, Some(vec![4, 5]));

    // Three members reached through one apiserver: the refusal comes before any member is
    // read or written.
    let client = bed.operator_client().await;
    let members = MemberClients {
        local: "east".into(),
        clients: ["east", "west", "tie"]
            .map(|m| (m.to_string(), client.clone(), None))
            .to_vec(),
    };
    let over_members = Arc::new(
        Context::new(
            client.clone(),
            Metrics::new(),
            Some("reconcile-glue-test".into()),
            Duration::from_secs(30),
        )
        .with_members(Some(members)),
    );
    reconcile_now(&api, &over_members)
        .await
        .expect("a refusal is not a reconcile error");
    let s = status(&api.get(SET).await.unwrap());
    assert_eq!(phase(&s), "Invalid", "{s}");
    let ready = s["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.nodes describes the pods of one Kubernetes cluster, but this operator runs over the member clusters east, west, tie")),
        "{ready}"
    );
    assert_eq!(
        lists(cms).await,
        before,
        "the lists changed under an operator over members"
    );

    api.delete(SET, &DeleteParams::default()).await.ok();
    reconcile_now(&api, &single).await.ok();
    bed.drop_namespace(&ns).await;
}
