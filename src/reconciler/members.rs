//! The member clusters one reconcile reads and writes (docs/multi-cluster.md): where each
//! member's copy of the ObserverSet, its pods and its ConfigMaps are, what each copy said, and
//! whether a majority of the copies holds the spec the leader acts on (pure). A single-cluster
//! install has one member, `crate::rollout::LOCAL`, reached with the operator's client.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use kube::Client;

use super::copies::{self, Copy, Read};
use crate::crd::{ObserverSet, ObserverSetSpec};
use crate::k8s::error::brief;
use crate::k8s::members::MemberClients;

/// Where one member's objects of one namespace are read and written.
#[derive(Clone)]
pub struct MemberApis {
    pub member: String,
    pub sets: Api<ObserverSet>,
    pub pods: Api<Pod>,
    pub config_maps: Api<ConfigMap>,
    /// Not asked this pass: it did not answer a moment ago ([`resting`]); its reads fail at
    /// once instead of waiting out the connect timeout again.
    pub resting: bool,
}

impl MemberApis {
    fn new(member: &str, client: &Client, namespace: &str) -> Self {
        MemberApis {
            member: member.to_string(),
            sets: Api::namespaced(client.clone(), namespace),
            pods: Api::namespaced(client.clone(), namespace),
            config_maps: Api::namespaced(client.clone(), namespace),
            resting: false,
        }
    }
}

/// Every member's APIs in `namespace`, in `--members` order; the one local member without
/// members.
pub fn apis(client: &Client, members: Option<&MemberClients>, namespace: &str) -> Vec<MemberApis> {
    match members {
        None => vec![MemberApis::new(crate::rollout::LOCAL, client, namespace)],
        Some(m) => m
            .clients
            .iter()
            .map(|(member, client, _)| MemberApis::new(member, client, namespace))
            .collect(),
    }
}

/// How long a member whose copy did not answer is taken as unreachable without being asked
/// again. A lost member costs every read its client's connect timeout (2 s), and a promotion
/// takes several passes; while a member is lost the set is looked at every 5 s
/// (`super::reconcile`), so a returning member is asked again within about that.
pub const ASK_AGAIN_AFTER: Duration = Duration::from_secs(4);

/// The longest a set over members goes without a pass: nothing in the other members wakes one
/// (no watch there), so this is how soon a member lost or back, or a change to its copy, is
/// seen with nothing else in flight, instead of at the resync (5 min by default).
pub const LOOK_EVERY: Duration = Duration::from_secs(10);
/// While a member is lost: a member that answers again wakes nothing here either, and it should
/// get the current lists soon (a held rollout goes on then).
pub const LOST_LOOK: Duration = Duration::from_secs(5);
/// After a status write that an answering copy refused (it moved in between; our own copy may
/// be the one): nothing else wakes a pass for it.
pub const BEHIND_LOOK: Duration = Duration::from_secs(1);

/// When the next pass of a set is due: `planned` (the rollout's next step, else the resync),
/// and over members (`any_lost` is `Some`) no later than [`LOOK_EVERY`], [`LOST_LOOK`] while a
/// member is lost, [`BEHIND_LOOK`] after a write a copy refused. Pure.
pub fn next_pass(planned: Duration, any_lost: Option<bool>, copies_behind: bool) -> Duration {
    let mut next = planned;
    if let Some(any_lost) = any_lost {
        next = next.min(LOOK_EVERY);
        if any_lost {
            next = next.min(LOST_LOOK);
        }
    }
    if copies_behind {
        next = next.min(BEHIND_LOOK);
    }
    next
}

/// Why a resting member was not asked.
pub const RESTING: &str = "did not answer a moment ago; asked again within 4 s";

/// The members whose copy failed to answer less than [`ASK_AGAIN_AFTER`] before `now`, by when
/// they last failed. Pure.
pub fn resting(failed: &HashMap<String, Instant>, now: Instant) -> BTreeSet<String> {
    failed
        .iter()
        .filter(|(_, &at)| now.saturating_duration_since(at) < ASK_AGAIN_AFTER)
        .map(|(m, _)| m.clone())
        .collect()
}

/// After a pass: a member asked that did not answer failed now; one that answered is forgotten;
/// a resting one keeps the time it was last asked (else it would rest for ever).
pub fn note_answers(failed: &mut HashMap<String, Instant>, reads: &[CopyRead], now: Instant) {
    for (member, read) in reads {
        match read {
            Err(why) if why == RESTING => {}
            Err(_) => {
                failed.insert(member.clone(), now);
            }
            Ok(_) => {
                failed.remove(member);
            }
        }
    }
}

/// One member's copy of the ObserverSet as read: the object (`None`: not there), or why the
/// member did not answer.
pub type CopyRead = (String, Result<Option<ObserverSet>, String>);

/// Every member's copy of `name`, in parallel (each call bounded by its client's timeout).
pub async fn read_copies(apis: &[MemberApis], name: &str) -> Vec<CopyRead> {
    let reads = apis.iter().map(|a| async move {
        if a.resting {
            return (a.member.clone(), Err(RESTING.to_string()));
        }
        let read = a.sets.get_opt(name).await.map_err(|e| brief(&e));
        (a.member.clone(), read)
    });
    futures::future::join_all(reads).await
}

/// The reads as `super::copies` takes them (status and `resourceVersion` only).
pub fn as_copies(reads: &[CopyRead]) -> Vec<Copy> {
    reads
        .iter()
        .map(|(member, read)| Copy {
            member: member.clone(),
            read: match read {
                Ok(Some(o)) => Read::Answered {
                    status: o.status.clone(),
                    version: o.metadata.resource_version.clone(),
                },
                Ok(None) => Read::Answered {
                    status: None,
                    version: None,
                },
                Err(why) => Read::Unanswered(why.clone()),
            },
        })
        .collect()
}

/// The members this pass neither reads nor writes pods and ConfigMaps in: those that did not
/// answer, and those without a copy of the set (no owner for a ConfigMap there; the user has not
/// applied it yet). Their pods count as last seen (`super::observe::mark_unreachable`).
pub fn unreachable(reads: &[CopyRead]) -> BTreeSet<String> {
    reads
        .iter()
        .filter(|(_, read)| !matches!(read, Ok(Some(_))))
        .map(|(member, _)| member.clone())
        .collect()
}

/// Whether a majority of all members' copies hold `spec` (the leader's own member's copy, which
/// it acts on): a user who updated two copies of three has said what they want, and one stale
/// or hand-edited copy must not decide. `Err` says which members differ and which did not
/// answer, worded for the Ready condition. Pure.
pub fn spec_agreed(spec: &ObserverSetSpec, reads: &[CopyRead]) -> Result<(), String> {
    let mut agree = 0;
    let mut differ = Vec::new();
    let mut missing = Vec::new();
    for (member, read) in reads {
        match read {
            Ok(Some(o)) if o.spec == *spec => agree += 1,
            Ok(Some(_)) => differ.push(member.as_str()),
            Ok(None) => missing.push(format!("{member} (no copy)")),
            Err(why) => missing.push(format!("{member} ({why})")),
        }
    }
    let needed = copies::needed(reads.len());
    if agree >= needed {
        return Ok(());
    }
    let mut found = Vec::new();
    if !differ.is_empty() {
        found.push(format!("a different spec in {}", differ.join(", ")));
    }
    if !missing.is_empty() {
        found.push(format!("not read from {}", missing.join(", ")));
    }
    Err(format!(
        "only {agree} of {} member clusters hold this spec ({needed} needed; {}): nothing is written until a majority of the copies agree; apply the same ObserverSet in every member",
        reads.len(),
        found.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_over_members_is_looked_at_again_without_waiting_for_the_resync() {
        let resync = Duration::from_secs(300);
        // One cluster: the plan as it is.
        assert_eq!(next_pass(resync, None, false), resync);
        // Over members, every member answering: within LOOK_EVERY, so that a member lost
        // while nothing else changes is seen (MC3 on the bed waited for the resync before).
        assert_eq!(next_pass(resync, Some(false), false), LOOK_EVERY);
        // A member lost: sooner, so that it gets the lists soon after it answers again.
        assert_eq!(next_pass(resync, Some(true), false), LOST_LOOK);
        // A copy left behind by the last write: at once.
        assert_eq!(next_pass(resync, Some(false), true), BEHIND_LOOK);
        // A rollout's own next step, sooner than all of these, stands.
        let step = Duration::from_millis(20);
        assert_eq!(next_pass(step, Some(true), true), step);
    }

    fn copy(member: &str, observers: &[i32]) -> CopyRead {
        (
            member.into(),
            Ok(Some(ObserverSet::new("kafka", spec(observers)))),
        )
    }

    fn spec(observers: &[i32]) -> ObserverSetSpec {
        ObserverSetSpec {
            kafka: crate::crd::KafkaConnection {
                bootstrap_servers: "kafka:9092".into(),
                tls: None,
                sasl: None,
            },
            nodes: None,
            clusters: None,
            observers: observers.to_vec(),
            promotion: Default::default(),
            rollout: Default::default(),
            deletion_policy: Default::default(),
        }
    }

    #[test]
    fn a_majority_of_copies_holding_the_spec_agrees() {
        let reads = [copy("east", &[4]), copy("west", &[4]), copy("tie", &[3])];
        assert_eq!(spec_agreed(&spec(&[4]), &reads), Ok(()));
        // One lost member: the two others still make the majority.
        let reads = [
            copy("east", &[4]),
            ("west".into(), Err("no answer".into())),
            copy("tie", &[4]),
        ];
        assert_eq!(spec_agreed(&spec(&[4]), &reads), Ok(()));
    }

    #[test]
    fn a_minority_spec_is_refused_naming_who_differs_and_who_was_not_read() {
        let reads = [
            copy("east", &[4]),
            copy("west", &[3]),
            ("tie".into(), Err("503 Service Unavailable".into())),
        ];
        let refused = spec_agreed(&spec(&[4]), &reads).unwrap_err();
        assert_eq!(
            refused,
            "only 1 of 3 member clusters hold this spec (2 needed; a different spec in west; not read from tie (503 Service Unavailable)): nothing is written until a majority of the copies agree; apply the same ObserverSet in every member"
        );
        let reads = [
            copy("east", &[4]),
            ("west".into(), Ok(None)),
            copy("tie", &[3]),
        ];
        assert!(spec_agreed(&spec(&[4]), &reads)
            .unwrap_err()
            .contains("not read from west (no copy)"));
    }

    #[test]
    fn a_member_that_did_not_answer_rests_then_is_asked_again() {
        let t0 = Instant::now();
        let mut failed = HashMap::new();
        let reads = [
            copy("east", &[4]),
            ("west".into(), Err("connect timeout".into())),
        ];
        note_answers(&mut failed, &reads, t0);
        assert_eq!(
            resting(&failed, t0 + Duration::from_secs(1)),
            BTreeSet::from(["west".to_string()])
        );
        // A pass that skipped it keeps the time it was last asked.
        let skipped = [copy("east", &[4]), ("west".into(), Err(RESTING.into()))];
        note_answers(&mut failed, &skipped, t0 + Duration::from_secs(3));
        assert!(resting(&failed, t0 + ASK_AGAIN_AFTER).is_empty());
        // Asked again and answering: forgotten.
        let answered = [copy("east", &[4]), copy("west", &[4])];
        note_answers(&mut failed, &answered, t0 + ASK_AGAIN_AFTER);
        assert!(failed.is_empty());
    }

    #[test]
    fn members_without_an_answer_or_a_copy_are_not_written() {
        let reads = [
            copy("east", &[4]),
            ("west".into(), Ok(None)),
            ("tie".into(), Err("timed out".into())),
        ];
        assert_eq!(
            unreachable(&reads),
            BTreeSet::from(["west".to_string(), "tie".to_string()])
        );
        let copies = as_copies(&reads);
        assert!(matches!(copies[2].read, Read::Unanswered(_)));
        assert!(matches!(
            copies[1].read,
            Read::Answered { version: None, .. }
        ));
    }
}
