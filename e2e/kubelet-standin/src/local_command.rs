//! Turning a sidecar container spec into a local command line. Pure.
//!
//! There are no images here: `--image-bin IMAGE=PATH` says which local binary
//! stands for an image's `command[0]` (or its entrypoint when `command` is
//! empty). Like the kubelet, `$(VAR)` in env values, command and args expands
//! from the container's env (`$$` escapes, unknown names stay literal), and
//! downward-API `fieldRef`s resolve to the pod's facts. Container mount paths
//! in arguments are rewritten to the local directories that stand for them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;

/// Facts about the pod available to the downward API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub node_name: String,
    pub pod_ip: String,
    pub host_ip: String,
    pub service_account: String,
}

/// A resolved local process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The complete environment (the process does not inherit the stand-in's).
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// Reported as the container's waiting reason `ImageNotMapped`.
    #[error("image {image:?} has no local binary; pass --image-bin {image}=<path>")]
    ImageNotMapped { image: String },
    #[error("env {name}: only literal values and fieldRef are supported by the stand-in")]
    UnsupportedEnvSource { name: String },
    #[error("env {name}: fieldRef {path:?} is not supported by the stand-in")]
    UnsupportedField { name: String, path: String },
}

impl CommandError {
    /// The container waiting reason shown in the pod status.
    pub fn reason(&self) -> &'static str {
        match self {
            CommandError::ImageNotMapped { .. } => "ImageNotMapped",
            CommandError::UnsupportedEnvSource { .. } | CommandError::UnsupportedField { .. } => {
                "CreateContainerConfigError"
            }
        }
    }
}

/// Resolves `container` to a local command.
///
/// `base_env` is what an image would provide (e.g. `PATH`); `mounts` maps container
/// mount paths to local directories.
pub fn resolve(
    container: &Container,
    facts: &PodFacts,
    image_bins: &BTreeMap<String, PathBuf>,
    mounts: &BTreeMap<String, PathBuf>,
    base_env: &BTreeMap<String, String>,
) -> Result<LocalCommand, CommandError> {
    let image = container.image.clone().unwrap_or_default();
    let program = image_bins
        .get(&image)
        .cloned()
        .ok_or(CommandError::ImageNotMapped { image })?;

    let mut env = base_env.clone();
    for (name, value) in [
        ("POD_IP", &facts.pod_ip),
        ("POD_NAME", &facts.name),
        ("POD_NAMESPACE", &facts.namespace),
    ] {
        env.insert(name.to_string(), value.clone());
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(source)) => {
                let field = source.field_ref.as_ref().ok_or_else(|| {
                    CommandError::UnsupportedEnvSource {
                        name: var.name.clone(),
                    }
                })?;
                field_value(&field.field_path, facts).ok_or_else(|| {
                    CommandError::UnsupportedField {
                        name: var.name.clone(),
                        path: field.field_path.clone(),
                    }
                })?
            }
            (Some(value), None) => expand(value, &env),
            (None, None) => String::new(),
        };
        env.insert(var.name.clone(), value);
    }

    let command = container.command.clone().unwrap_or_default();
    let args = command
        .iter()
        .skip(1)
        .chain(container.args.iter().flatten())
        .map(|arg| rewrite_mount_paths(&expand(arg, &env), mounts))
        .collect();
    Ok(LocalCommand { program, args, env })
}

/// The local directory for each of the container's mount paths: explicit
/// `overrides` first, else `<volumes_dir>/<volume>[/<subPath>]`.
pub fn mount_map(
    container: &Container,
    volumes_dir: &Path,
    overrides: &BTreeMap<String, PathBuf>,
) -> BTreeMap<String, PathBuf> {
    let mut map = BTreeMap::new();
    for mount in container.volume_mounts.iter().flatten() {
        let mut dir = volumes_dir.join(&mount.name);
        if let Some(sub) = mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
            dir = dir.join(sub);
        }
        map.insert(mount.mount_path.trim_end_matches('/').to_string(), dir);
    }
    for (path, dir) in overrides {
        map.insert(path.trim_end_matches('/').to_string(), dir.clone());
    }
    map
}

fn field_value(path: &str, facts: &PodFacts) -> Option<String> {
    let value = match path {
        "metadata.name" => &facts.name,
        "metadata.namespace" => &facts.namespace,
        "metadata.uid" => &facts.uid,
        "spec.nodeName" => &facts.node_name,
        "spec.serviceAccountName" => &facts.service_account,
        "status.podIP" | "status.podIPs" => &facts.pod_ip,
        "status.hostIP" | "status.hostIPs" => &facts.host_ip,
        _ => return None,
    };
    Some(value.clone())
}

/// Kubernetes `$(VAR)` expansion: `$$` is a literal `$`, undefined names stay as written.
pub fn expand(input: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match env.get(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str(&rest[pos..]);
                    rest = "";
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Replaces a mount path at the start of `arg`, or after the `=` of `--flag=PATH`,
/// by its local directory; the longest matching mount wins.
pub fn rewrite_mount_paths(arg: &str, mounts: &BTreeMap<String, PathBuf>) -> String {
    let (prefix, value) = match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with('-') => (format!("{flag}="), value),
        _ => (String::new(), arg),
    };
    let best = mounts
        .iter()
        .filter(|(mount, _)| {
            value == mount.as_str()
                || value
                    .strip_prefix(mount.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|(mount, _)| mount.len());
    match best {
        Some((mount, dir)) => format!("{prefix}{}{}", dir.display(), &value[mount.len()..]),
        None => arg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, VolumeMount};

    const IMAGE: &str = "ghcr.io/kafka-observer-operator/kafka-observer-operator:dev";

    fn facts() -> PodFacts {
        PodFacts {
            name: "kafka-broker-0".into(),
            namespace: "kafka".into(),
            uid: "u-1".into(),
            node_name: "testbed-node".into(),
            pod_ip: "127.0.1.1".into(),
            host_ip: "127.0.0.1".into(),
            service_account: "default".into(),
        }
    }

    fn agent() -> Container {
        let field = |path: &str| EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                api_version: None,
            }),
            ..Default::default()
        };
        Container {
            name: "observer-agent".into(),
            image: Some(IMAGE.into()),
            command: Some(
                [
                    "kafka-observer-operator",
                    "agent",
                    "--dir",
                    "/etc/kafka/observer",
                    "--listen",
                    "$(POD_IP):9180",
                ]
                .map(String::from)
                .to_vec(),
            ),
            env: Some(vec![
                EnvVar {
                    name: "MY_IP".into(),
                    value_from: Some(field("status.podIP")),
                    ..Default::default()
                },
                EnvVar {
                    name: "ADDR".into(),
                    value: Some("$(MY_IP):1 $$(MY_IP) $(NOPE)".into()),
                    ..Default::default()
                },
            ]),
            volume_mounts: Some(vec![VolumeMount {
                name: "observer-ids".into(),
                mount_path: "/etc/kafka/observer".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn resolves_the_observer_agent_to_the_local_binary_and_directory() {
        let bins = BTreeMap::from([(IMAGE.to_string(), PathBuf::from("/t/release/koo"))]);
        let mounts = mount_map(
            &agent(),
            Path::new("/tb/pods/kafka/b0/volumes"),
            &BTreeMap::new(),
        );
        let base = BTreeMap::from([("PATH".to_string(), "/usr/bin".to_string())]);
        let cmd = resolve(&agent(), &facts(), &bins, &mounts, &base).unwrap();
        assert_eq!(cmd.program, PathBuf::from("/t/release/koo"));
        assert_eq!(
            cmd.args,
            [
                "agent",
                "--dir",
                "/tb/pods/kafka/b0/volumes/observer-ids",
                "--listen",
                "127.0.1.1:9180"
            ]
        );
        assert_eq!(cmd.env["POD_IP"], "127.0.1.1");
        assert_eq!(cmd.env["POD_NAME"], "kafka-broker-0");
        assert_eq!(cmd.env["POD_NAMESPACE"], "kafka");
        assert_eq!(cmd.env["PATH"], "/usr/bin");
        assert_eq!(cmd.env["ADDR"], "127.0.1.1:1 $(MY_IP) $(NOPE)");
    }

    #[test]
    fn unmapped_image_is_reported_as_image_not_mapped() {
        let err = resolve(
            &agent(),
            &facts(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert_eq!(err.reason(), "ImageNotMapped");
        assert!(err.to_string().contains("--image-bin"));
    }

    #[test]
    fn expansion_follows_the_kubernetes_rules() {
        let env = BTreeMap::from([("A".to_string(), "1".to_string())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$A-$(A", &env), "1-$(B)-$(A)-$A-$(A");
        assert_eq!(expand("no vars", &env), "no vars");
        assert_eq!(expand("end$", &env), "end$");
    }

    #[test]
    fn rewrites_mount_paths_only_at_path_boundaries() {
        let mounts = BTreeMap::from([
            ("/etc/kafka".to_string(), PathBuf::from("/l/a")),
            ("/etc/kafka/observer".to_string(), PathBuf::from("/l/b")),
        ]);
        assert_eq!(
            rewrite_mount_paths("/etc/kafka/observer/x", &mounts),
            "/l/b/x"
        );
        assert_eq!(rewrite_mount_paths("/etc/kafka/y", &mounts), "/l/a/y");
        assert_eq!(
            rewrite_mount_paths("--dir=/etc/kafka/observer", &mounts),
            "--dir=/l/b"
        );
        assert_eq!(
            rewrite_mount_paths("/etc/kafkaesque", &mounts),
            "/etc/kafkaesque"
        );
        assert_eq!(rewrite_mount_paths("x=/etc/kafka", &mounts), "x=/etc/kafka");
    }

    #[test]
    fn explicit_mount_overrides_win_over_the_derived_directory() {
        let overrides = BTreeMap::from([("/etc/kafka/observer/".to_string(), PathBuf::from("/o"))]);
        let map = mount_map(&agent(), Path::new("/v"), &overrides);
        assert_eq!(map["/etc/kafka/observer"], PathBuf::from("/o"));
    }

    #[test]
    fn unsupported_env_sources_are_errors_not_silently_empty() {
        let mut c = agent();
        c.env = Some(vec![EnvVar {
            name: "X".into(),
            value_from: Some(EnvVarSource::default()),
            ..Default::default()
        }]);
        let bins = BTreeMap::from([(IMAGE.to_string(), PathBuf::from("/b"))]);
        let err = resolve(&c, &facts(), &bins, &BTreeMap::new(), &BTreeMap::new()).unwrap_err();
        assert_eq!(err.reason(), "CreateContainerConfigError");
    }
}
