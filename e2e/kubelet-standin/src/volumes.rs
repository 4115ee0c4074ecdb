//! Setting up one pod's volumes on its sync, like the kubelet's volume manager.
//!
//! ConfigMap volumes are projected with the atomic writer; `emptyDir` is a plain
//! directory. When a ConfigMap disappears after the pod's volume was set up,
//! the kubelet's remount fails before writing anything, so the last content
//! stays and the pod keeps running: same here. A pod whose volume has never
//! been set up is not started. "Set up" is per pod UID (recorded in
//! `<podDir>/pod-uid`), because a recreated pod is a new pod to the kubelet.
//!
//! Unlike the kubelet, nothing is removed when a pod is deleted: the Kafka node
//! is a process the bed manages and keeps reading its observer file.

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;

use crate::atomic_writer::{self, WriteOutcome};
use crate::pods_file::LocalPod;
use crate::projection::configmap_payload;

const UID_MARKER: &str = "pod-uid";

/// Sets up every volume of `pod`. `Err` carries the kubelet-style FailedMount
/// message of the first volume that could not be set up.
pub fn sync_pod_volumes(
    local: &LocalPod,
    pod: &Pod,
    configmap: impl Fn(&str) -> Option<ConfigMap>,
) -> Result<(), String> {
    let uid = pod.uid().unwrap_or_default();
    let marker = local.pod_dir().join(UID_MARKER);
    let set_up_before = std::fs::read_to_string(&marker).is_ok_and(|m| m.trim() == uid);
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());

    for volume in volumes.into_iter().flatten() {
        let dir = local.volumes_dir.join(&volume.name);
        let failed = |why: String| {
            format!(
                "MountVolume.SetUp failed for volume {:?} : {why}",
                volume.name
            )
        };
        if let Some(source) = &volume.config_map {
            let cm = configmap(&source.name);
            match configmap_payload(source, cm.as_ref()) {
                Ok(payload) => match atomic_writer::write(&dir, &payload) {
                    Ok(WriteOutcome::Written { version_dir }) => tracing::info!(
                        pod = %local.key(), volume = %volume.name, configmap = %source.name,
                        resource_version = ?cm.as_ref().and_then(|c| c.resource_version()),
                        %version_dir, "volume content updated"
                    ),
                    Ok(WriteOutcome::Unchanged) => {}
                    Err(e) => return Err(failed(e.to_string())),
                },
                Err(e) if set_up_before && atomic_writer::has_content(&dir) => {
                    tracing::warn!(
                        pod = %local.key(), volume = %volume.name, error = %e,
                        "keeping the last projected content, as the kubelet does"
                    );
                }
                Err(e) => return Err(failed(e.to_string())),
            }
        } else if volume.empty_dir.is_some() {
            std::fs::create_dir_all(&dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
        } else {
            return Err(failed(
                "only configMap and emptyDir volumes are supported by the kubelet stand-in".into(),
            ));
        }
    }
    if !set_up_before {
        write_marker(&marker, &uid).map_err(|e| format!("cannot record pod uid: {e}"))?;
    }
    Ok(())
}

fn write_marker(marker: &Path, uid: &str) -> std::io::Result<()> {
    if let Some(dir) = marker.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(marker, format!("{uid}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, PodSpec, Volume};
    use std::collections::BTreeMap;

    fn local(root: &Path) -> LocalPod {
        LocalPod {
            namespace: "kafka".into(),
            name: "kafka-broker-0".into(),
            pod_ip: "127.0.1.1".parse().unwrap(),
            main_container: "kafka".into(),
            pid_file: root.join("kafka-1.pid"),
            readiness_port: 9092,
            volumes_dir: root.join("pods/kafka/kafka-broker-0/volumes"),
            mounts: BTreeMap::new(),
        }
    }

    fn pod(uid: &str) -> Pod {
        let mut pod = Pod {
            spec: Some(PodSpec {
                volumes: Some(vec![Volume {
                    name: "observer-ids".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: "kafka-observers-broker".into(),
                        optional: Some(false),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        pod.metadata.uid = Some(uid.into());
        pod
    }

    fn cm(ids: &str) -> ConfigMap {
        ConfigMap {
            data: Some(BTreeMap::from([(
                "observer.ids".to_string(),
                ids.to_string(),
            )])),
            ..Default::default()
        }
    }

    #[test]
    fn never_existing_configmap_leaves_no_files_and_fails_like_the_kubelet() {
        let root = tempfile::tempdir().unwrap();
        let local = local(root.path());
        let err = sync_pod_volumes(&local, &pod("u1"), |_| None).unwrap_err();
        assert_eq!(
            err,
            "MountVolume.SetUp failed for volume \"observer-ids\" : configmap \"kafka-observers-broker\" not found"
        );
        assert!(!local.volumes_dir.join("observer-ids/observer.ids").exists());
    }

    #[test]
    fn deleted_configmap_keeps_the_last_content_for_the_same_pod_only() {
        let root = tempfile::tempdir().unwrap();
        let local = local(root.path());
        let file = local.volumes_dir.join("observer-ids/observer.ids");
        sync_pod_volumes(&local, &pod("u1"), |_| Some(cm("4\n"))).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "4\n");

        sync_pod_volumes(&local, &pod("u1"), |_| None).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "4\n",
            "content kept"
        );

        // A recreated pod (new UID) has never had its volume set up.
        assert!(sync_pod_volumes(&local, &pod("u2"), |_| None).is_err());
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "4\n",
            "files never removed"
        );
    }

    #[test]
    fn changed_configmap_reaches_the_file() {
        let root = tempfile::tempdir().unwrap();
        let local = local(root.path());
        sync_pod_volumes(&local, &pod("u1"), |_| Some(cm("4\n"))).unwrap();
        sync_pod_volumes(&local, &pod("u1"), |_| Some(cm("3\n4\n"))).unwrap();
        let file = local.volumes_dir.join("observer-ids/observer.ids");
        assert_eq!(std::fs::read_to_string(file).unwrap(), "3\n4\n");
    }
}
