//! `kubectl observer status --context A --context B ...`: each member cluster's copy of the
//! ObserverSet side by side (docs/multi-cluster.md, "`kubectl observer status` across
//! members"): whether it answered and how long it took, its phase, revision, step and epochs,
//! each role's acknowledgements; then which copy an operator leader would resume from and which
//! copies are behind, by the operator's own rule (`crate::reconciler::copies`). Pure;
//! `super::commands` reads the copies.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::crd::{ObserverSetStatus, RoleStatus};
use crate::reconciler::copies::{self, Copy, Read};

/// One context's answer.
#[derive(Clone, Debug)]
pub struct MemberRead {
    pub context: String,
    /// How long the read took (to the answer or the failure).
    pub took: Duration,
    /// The copy's status (`None`: never written) and `resourceVersion`, or why it failed.
    pub outcome: Result<(Option<ObserverSetStatus>, Option<String>), String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberLine {
    pub context: String,
    pub answered: bool,
    pub took_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    pub revision: i64,
    /// The rollout's step, `None` when no rollout is in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub writer_epoch: i64,
    pub leader_epoch: i64,
    /// "acknowledged/all" of the role's pods at its revision, `None` before the role's first
    /// list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controllers: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brokers: Option<String>,
    /// The copy's `status.localView`, short: "<replica> <standing> [<leader>]", the view of the
    /// operator replica running in that member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MembersView {
    pub members: Vec<MemberLine>,
    /// The context whose copy a leader resumes from (a majority answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<String>,
    /// Answering contexts whose copy differs from that one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub behind: Vec<String>,
    /// Why no copy can be resumed from (too few answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

fn acknowledged(role: Option<&RoleStatus>) -> Option<String> {
    let r = role?;
    let all = r.acknowledged.len() + r.pending.len() + r.excused.len();
    Some(format!("{}/{all}", r.acknowledged.len()))
}

/// The view of `reads`, one per context, in the order given.
pub fn members_view(reads: &[MemberRead]) -> MembersView {
    let members = reads
        .iter()
        .map(|r| {
            let took_ms = u64::try_from(r.took.as_millis()).unwrap_or(u64::MAX);
            match &r.outcome {
                Err(e) => MemberLine {
                    context: r.context.clone(),
                    answered: false,
                    took_ms,
                    error: Some(e.clone()),
                    phase: None,
                    revision: 0,
                    step: None,
                    writer_epoch: 0,
                    leader_epoch: 0,
                    controllers: None,
                    brokers: None,
                    view: None,
                },
                Ok((status, _)) => {
                    let s = status.clone().unwrap_or_default();
                    MemberLine {
                        context: r.context.clone(),
                        answered: true,
                        took_ms,
                        error: None,
                        phase: s.phase.map(|p| format!("{p:?}")),
                        revision: s.revision,
                        step: s.rollout.as_ref().map(|r| format!("{:?}", r.step)),
                        writer_epoch: s.writer_epoch,
                        leader_epoch: s.leader_epoch,
                        controllers: acknowledged(s.roles.controller.as_ref()),
                        brokers: acknowledged(s.roles.broker.as_ref()),
                        view: s.local_view.as_ref().map(|v| {
                            let mut text = format!("{} {}", v.replica, v.standing);
                            if let Some(leader) = &v.leader {
                                text.push_str(&format!(" {leader}"));
                            }
                            text
                        }),
                    }
                }
            }
        })
        .collect();
    let copies: Vec<Copy> = reads
        .iter()
        .map(|r| Copy {
            member: r.context.clone(),
            read: match &r.outcome {
                Ok((status, version)) => Read::Answered {
                    status: status.clone(),
                    version: version.clone(),
                },
                Err(e) => Read::Unanswered(e.clone()),
            },
        })
        .collect();
    match copies::recover(&copies) {
        Ok(r) => MembersView {
            members,
            resume_from: Some(r.from),
            behind: r.behind,
            problem: None,
        },
        Err(e) => MembersView {
            members,
            resume_from: None,
            behind: Vec::new(),
            problem: Some(e.to_string()),
        },
    }
}

/// The view as a table, then the copies line.
pub fn render_members(view: &MembersView) -> String {
    let mut rows = vec![[
        "CONTEXT".to_string(),
        "ANSWERED".into(),
        "PHASE".into(),
        "REVISION".into(),
        "STEP".into(),
        "EPOCH".into(),
        "CONTROLLERS".into(),
        "BROKERS".into(),
    ]];
    let mut failures = Vec::new();
    for m in &view.members {
        if !m.answered {
            failures.push(format!(
                "{}: unreachable after {} ms: {}",
                m.context,
                m.took_ms,
                m.error.as_deref().unwrap_or_default()
            ));
            rows.push([
                m.context.clone(),
                "no".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
            continue;
        }
        rows.push([
            m.context.clone(),
            format!("yes ({} ms)", m.took_ms),
            m.phase.clone().unwrap_or_else(|| "-".into()),
            m.revision.to_string(),
            m.step.clone().unwrap_or_else(|| "-".into()),
            format!("{} (claimed {})", m.writer_epoch, m.leader_epoch),
            m.controllers.clone().unwrap_or_else(|| "-".into()),
            m.brokers.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    for f in failures {
        let _ = writeln!(out, "{f}");
    }
    // Each member's own operator replica: who it sees holding the Leases.
    let views: Vec<String> = view
        .members
        .iter()
        .filter_map(|m| m.view.as_ref().map(|v| format!("{}: {v}", m.context)))
        .collect();
    if !views.is_empty() {
        let _ = writeln!(out, "operators' views: {}", views.join("; "));
    }
    match (&view.resume_from, &view.problem) {
        (Some(from), _) if view.behind.is_empty() => {
            let _ = writeln!(out, "copies: a leader resumes from {from}; none behind");
        }
        (Some(from), _) => {
            let _ = writeln!(
                out,
                "copies: a leader resumes from {from}; behind (overwritten by the leader's next write): {}",
                view.behind.join(", ")
            );
        }
        (None, Some(problem)) => {
            let _ = writeln!(out, "copies: {problem}");
        }
        (None, None) => {}
    }
    out
}

#[cfg(test)]
#[path = "members_view_tests.rs"]
mod tests;
