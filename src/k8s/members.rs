//! The member clusters of an install that spans several Kubernetes clusters
//! (docs/multi-cluster.md, "Members"): which members there are, which one this replica runs
//! in, and a client configuration for each other member, read from a kubeconfig the platform
//! team put in a Secret of the operator's namespace.
//!
//! The rules are pure (`MemberPlan::new`, `remote_kubeconfig`); `load` is the thin read of the
//! Secrets. A kubeconfig from a Secret is held to more than kube's own parser: it must carry its
//! credentials inline and name the member's Kafka namespace, and may not run a command, read a
//! file of the operator's pod or impersonate anyone (a Secret's author must not be able to make
//! the operator execute a program or send its own ServiceAccount token elsewhere).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::crd::{is_dns_label, is_member_count, MAX_CLUSTERS};

/// The Secret key that holds a member's kubeconfig.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// Member options, flattened into the operator's `run` command. Without `--members` the
/// operator manages the one cluster it runs in, as it always did.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct MemberArgs {
    /// The member cluster this replica runs in (with `--members`).
    #[arg(long = "member", env = "KOO_MEMBER")]
    pub member: Option<String>,
    /// Every member cluster, comma-separated, the same list on every replica of every member;
    /// absent: one cluster.
    #[arg(long = "members", env = "KOO_MEMBERS", value_delimiter = ',')]
    pub members: Vec<String>,
    /// Each other member's kubeconfig is read from the Secret `<prefix><member>` (key
    /// `kubeconfig`) in the operator's namespace.
    #[arg(
        long = "member-secret-prefix",
        env = "KOO_MEMBER_SECRET_PREFIX",
        default_value = "kafka-observer-member-"
    )]
    pub secret_prefix: String,
}

/// The members of a multi-cluster install, in the order `--members` gave them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberPlan {
    local: String,
    members: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MembersError {
    #[error("--member {0:?} is set without --members: give every member cluster's name in --members (the same list on every replica)")]
    MemberWithoutMembers(String),
    #[error("--members is set without --member: name the member cluster this replica runs in")]
    NoLocalMember,
    #[error("--member {local:?} is not one of --members ({members}): this replica's own cluster must be a member")]
    LocalNotListed { local: String, members: String },
    #[error("member name {0:?} is not a DNS label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit)")]
    BadName(String),
    #[error("member {0:?} is listed twice in --members")]
    Duplicate(String),
    #[error("{count} members in --members: give an odd number from 3 to {MAX_CLUSTERS} (a majority of the members' Leases decides who acts; an even number tolerates no more lost clusters than one fewer, and one member is a single cluster: leave --members out)")]
    Count { count: usize },
    #[error("member {member:?}: {reason}")]
    Kubeconfig { member: String, reason: String },
    #[error("member {member:?}: the Secret {namespace}/{secret} {problem}")]
    Secret {
        member: String,
        namespace: String,
        secret: String,
        problem: String,
    },
}

impl MemberPlan {
    /// The members the flags name, or `None` for a single-cluster install.
    pub fn new(args: &MemberArgs) -> Result<Option<Self>, MembersError> {
        let members: Vec<String> = args
            .members
            .iter()
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
        let local = args
            .member
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty());
        let local = match (local, members.is_empty()) {
            (None, true) => return Ok(None),
            (Some(local), true) => return Err(MembersError::MemberWithoutMembers(local.into())),
            (None, false) => return Err(MembersError::NoLocalMember),
            (Some(local), false) => local.to_string(),
        };
        let mut seen = BTreeSet::new();
        for member in &members {
            if !is_dns_label(member) {
                return Err(MembersError::BadName(member.clone()));
            }
            if !seen.insert(member.as_str()) {
                return Err(MembersError::Duplicate(member.clone()));
            }
        }
        if !members.contains(&local) {
            return Err(MembersError::LocalNotListed {
                local,
                members: members.join(","),
            });
        }
        if !is_member_count(members.len()) {
            return Err(MembersError::Count {
                count: members.len(),
            });
        }
        Ok(Some(Self { local, members }))
    }

    /// The member this replica runs in.
    pub fn local(&self) -> &str {
        &self.local
    }

    /// Every member, in `--members` order.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The other members, in `--members` order.
    pub fn remotes(&self) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .map(String::as_str)
            .filter(move |m| *m != self.local)
    }
}

/// The Secret that holds `member`'s kubeconfig.
pub fn secret_name(prefix: &str, member: &str) -> String {
    format!("{prefix}{member}")
}

/// Parses and checks a member's kubeconfig: its current context (or its only one) must name a
/// cluster with an `https` server and inline CA data, a user with an inline token or client
/// certificate, and a namespace (the member's Kafka namespace, where its Lease lives). Refused:
/// exec and auth-provider plugins, file paths, impersonation, skipping TLS verification. The
/// reasons never quote the file's values.
pub fn remote_kubeconfig(member: &str, text: &str) -> Result<(Kubeconfig, String), MembersError> {
    let refuse = |reason: &str| MembersError::Kubeconfig {
        member: member.into(),
        reason: reason.into(),
    };
    let mut file = Kubeconfig::from_yaml(text).map_err(|_| {
        refuse("the kubeconfig is not valid YAML of a kubeconfig (apiVersion v1, kind Config)")
    })?;
    let context_name = match (&file.current_context, file.contexts.as_slice()) {
        (Some(name), _) => name.clone(),
        (None, [only]) => only.name.clone(),
        (None, _) => return Err(refuse("the kubeconfig has no current-context")),
    };
    let context = file
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| refuse("the kubeconfig's current context is not defined in it"))?;
    let namespace = context
        .namespace
        .clone()
        .filter(|ns| is_dns_label(ns))
        .ok_or_else(|| {
            refuse("the kubeconfig's context names no namespace: set it to the member's Kafka namespace (where its Lease and ObserverSets are)")
        })?;
    let cluster = file
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| refuse("the kubeconfig's context names a cluster it does not define"))?;
    cluster_rule(cluster).map_err(refuse)?;
    let user_name = context
        .user
        .as_deref()
        .ok_or_else(|| refuse("the kubeconfig's context names no user"))?;
    let user = file
        .auth_infos
        .iter()
        .find(|a| a.name == user_name)
        .and_then(|a| a.auth_info.as_ref())
        .ok_or_else(|| refuse("the kubeconfig's context names a user it does not define"))?;
    user_rule(user).map_err(refuse)?;
    // kube connects through the current context: make the one checked here the one used.
    file.current_context = Some(context_name);
    Ok((file, namespace))
}

/// The cluster entry's rule: an https server, the CA inline, no proxy, TLS verified.
fn cluster_rule(cluster: &kube::config::Cluster) -> Result<(), &'static str> {
    if !cluster
        .server
        .as_deref()
        .is_some_and(|s| s.starts_with("https://"))
    {
        return Err("the cluster's server must be an https:// address");
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(
            "insecure-skip-tls-verify is refused: give the member's CA in certificate-authority-data",
        );
    }
    if cluster.certificate_authority.is_some() || cluster.certificate_authority_data.is_none() {
        return Err(
            "the cluster's CA must be inline (certificate-authority-data), not a file path",
        );
    }
    if cluster.proxy_url.is_some() {
        return Err("proxy-url is refused: the operator reaches the member's apiserver directly");
    }
    Ok(())
}

/// The user entry's rule: inline credentials, no plugin that runs a program, no impersonation.
fn user_rule(user: &kube::config::AuthInfo) -> Result<(), &'static str> {
    if user.exec.is_some() || user.auth_provider.is_some() {
        return Err(
            "exec and auth-provider credential plugins are refused (the operator runs no program a Secret names): use a ServiceAccount token",
        );
    }
    if user.token_file.is_some() || user.client_certificate.is_some() || user.client_key.is_some() {
        return Err(
            "the user's credentials must be inline (token, or client-certificate-data and client-key-data), not file paths",
        );
    }
    if user.impersonate.is_some()
        || user.impersonate_uid.is_some()
        || user.impersonate_groups.is_some()
        || user.impersonate_user_extra.is_some()
    {
        return Err("impersonation (as, as-groups) is refused");
    }
    let certificate = user.client_certificate_data.is_some() && user.client_key_data.is_some();
    if user.token.is_none() && !certificate {
        return Err(
            "the user has no credentials: give a token (the kafka-observer-remote ServiceAccount's) or client-certificate-data and client-key-data",
        );
    }
    Ok(())
}

/// The reconciler's client for every member cluster, in `--members` order, its own member's
/// included (the operator's main client there); each passes the leadership's write fence.
#[derive(Clone)]
pub struct MemberClients {
    /// This replica's member.
    pub local: String,
    /// (member, client, the namespace its identity is granted: the Kafka namespace there;
    /// `None` for the local member, whose identity the chart grants per watched namespace).
    pub clients: Vec<(String, kube::Client, Option<String>)>,
}

impl MemberClients {
    /// The member names, in `--members` order.
    pub fn names(&self) -> Vec<String> {
        self.clients.iter().map(|(m, _, _)| m.clone()).collect()
    }

    /// The remote members whose identity is not granted `namespace` (their kubeconfig names
    /// another one): an ObserverSet there cannot be read or written in those members.
    pub fn not_granted(&self, namespace: &str) -> Vec<String> {
        self.clients
            .iter()
            .filter(|(_, _, granted)| granted.as_deref().is_some_and(|g| g != namespace))
            .map(|(m, _, g)| {
                format!(
                    "{m} (its kubeconfig Secret names namespace {})",
                    g.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }
}

/// One other member: where its apiserver is and how to reach it, and its Kafka namespace.
pub struct RemoteMember {
    pub name: String,
    pub config: kube::Config,
    pub namespace: String,
}

/// Reads the kubeconfig Secret of every other member from `namespace` (the operator's) and
/// builds its client configuration. Any member that cannot be read stops the start: a replica
/// that campaigned with fewer Leases than its peers would count a different majority.
pub async fn load(
    client: &kube::Client,
    namespace: &str,
    plan: &MemberPlan,
    prefix: &str,
) -> Result<Vec<RemoteMember>, MembersError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut remotes = Vec::new();
    for member in plan.remotes() {
        let secret = secret_name(prefix, member);
        let problem = |problem: String| MembersError::Secret {
            member: member.into(),
            namespace: namespace.into(),
            secret: secret.clone(),
            problem,
        };
        let found = secrets
            .get_opt(&secret)
            .await
            .map_err(|e| problem(format!("could not be read: {}", read_failure(&e))))?
            .ok_or_else(|| problem("does not exist".into()))?;
        let text = found
            .data
            .as_ref()
            .and_then(|d| d.get(KUBECONFIG_KEY))
            .and_then(|b| std::str::from_utf8(&b.0).ok())
            .ok_or_else(|| problem(format!("has no UTF-8 key {KUBECONFIG_KEY:?}")))?;
        let (file, namespace) = remote_kubeconfig(member, text)?;
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| MembersError::Kubeconfig {
                member: member.into(),
                reason: format!("not usable: {e}"),
            })?;
        remotes.push(RemoteMember {
            name: member.into(),
            config,
            namespace,
        });
    }
    Ok(remotes)
}

/// The HTTP status of a failed read, or that there was none: enough to act on, and never a
/// body that could quote what the Secret holds.
fn read_failure(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("HTTP {} {}", status.code, status.reason),
        _ => "no answer from the apiserver".into(),
    }
}

#[cfg(test)]
#[path = "members_tests.rs"]
mod tests;
